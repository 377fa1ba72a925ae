// The SandboxProfile CustomResourceDefinition, built from the zod schemas like the others (crd.ts).
import { buildCrd, type CustomResourceDefinition, type PrinterColumn } from './crd.js';
import { SANDBOXPROFILE_KIND, SANDBOXPROFILE_PLURAL, SandboxProfileSpecSchema, SandboxProfileStatusSchema } from './sandboxprofile.js';

export const SANDBOXPROFILE_PRINTER_COLUMNS: PrinterColumn[] = [
  { name: 'Image', type: 'string', jsonPath: '.spec.image', description: "The profile's image." },
  { name: 'Ready', type: 'integer', jsonPath: '.status.readyPods', description: 'Ready, unclaimed warm pods.' },
  { name: 'Target', type: 'integer', jsonPath: '.status.targetPods', description: 'The pool size the leader aims for.' },
  { name: 'Valid', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status', description: 'Whether the spec is valid.', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation.' },
];

export function buildSandboxProfileCrd(): CustomResourceDefinition {
  return buildCrd({
    kind: SANDBOXPROFILE_KIND,
    plural: SANDBOXPROFILE_PLURAL,
    shortNames: ['sbp'],
    description:
      'SandboxProfile is a kind of sandbox runs and sessions may ask for by name (profile): image, resource defaults and maxima, RuntimeClass, warm pool and pre-imported modules.',
    specSchema: SandboxProfileSpecSchema,
    specDescription: 'What sandboxes of this profile are made of.',
    statusSchema: SandboxProfileStatusSchema,
    statusDescription: "The profile's warm pool as the gateway's leader replica sees it.",
    printerColumns: SANDBOXPROFILE_PRINTER_COLUMNS,
  });
}
