// Another version of the session kernels, for the rolling-upgrade fault: runtime/ with one comment
// line added to the Python kernel, so its content hash — and with it the runtime ConfigMap's name
// and the pool pods' version — differs while it behaves the same.
import { findRuntimeDir, readRuntimeFiles } from '../../../../src/sessions/runtime-files.js';

/** Set on a replica (gateway-replica.ts) to ship the variant named by its value. */
export const RUNTIME_VARIANT_ENV = 'FAULT_RUNTIME_VARIANT';

export function runtimeFiles(variant?: string): Record<string, string> {
  const dir = findRuntimeDir();
  if (!dir) throw new Error('runtime/ not found');
  const files = readRuntimeFiles(dir);
  return variant === undefined ? files : { ...files, 'python/kernel.py': `${files['python/kernel.py'] ?? ''}\n# runtime variant ${variant}\n` };
}
