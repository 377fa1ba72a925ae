// The text of a CRD file in crds/ (scripts/gen-crds.ts writes them; unit tests compare them). Kept
// out of the API index: the gateway never renders YAML, and the yaml package would load with it.
import { stringify } from 'yaml';
import { CRD_FILE_HEADER, type CustomResourceDefinition } from './crd.js';

/** The exact text of a CRD's file (deterministic: CI diffs it). */
export function renderCrdYaml(crd: CustomResourceDefinition): string {
  // lineWidth 0: never fold long descriptions or patterns, so the output is stable and greppable.
  return `${CRD_FILE_HEADER}\n${stringify(crd, { lineWidth: 0 })}`;
}
