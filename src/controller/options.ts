// What the controller needs from the configuration (main.ts maps Config onto this), so the
// controller does not depend on how settings are read.
import type { Runtime } from '../api/v1alpha1/index.js';

export interface ControllerOptions {
  namespace: string;
  /** Unique per process: recorded on the runs this process executes. */
  identity: string;
  images: Record<Runtime, string>;
  imagePullPolicy: 'Always' | 'IfNotPresent' | 'Never';
  defaultTimeoutSeconds: number;
  maxTimeoutSeconds: number;
  maxCodeBytes: number;
  outputCapChars: number;
  defaultCpu: string;
  defaultMemory: string;
  maxCpu: string;
  maxMemory: string;
  cpuRequest: string;
  memoryRequest: string;
  ephemeralStorageLimit: string;
  workspaceSizeLimit: string;
  tmpSizeLimit: string;
  ttlSecondsAfterFinished: number;
  podStartupTimeoutSeconds: number;
  resyncSeconds: number;
  runtimeClassName?: string;
  sessionMaxIdleTimeoutSeconds: number;
  sessionMaxLifetimeSeconds: number;
  maxFileBytes: number;
  /** Per stream, UTF-8 bytes kept in SandboxRun status. */
  outputCapBytes: number;
  maxTtlSecondsAfterFinished: number;
  warmPoolMin: number;
  warmPoolMax: number;
}
