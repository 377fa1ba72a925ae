// The UpstreamServer CustomResourceDefinition, built from the zod schemas like the others (crd.ts).
import { buildCrd, type CustomResourceDefinition, type PrinterColumn } from './crd.js';
import { UPSTREAMSERVER_KIND, UPSTREAMSERVER_PLURAL, UpstreamServerSpecSchema, UpstreamServerStatusSchema } from './upstreamserver.js';

export const UPSTREAMSERVER_PRINTER_COLUMNS: PrinterColumn[] = [
  {
    name: 'Ready',
    type: 'string',
    jsonPath: '.status.conditions[?(@.type=="Ready")].status',
    description: 'Whether the gateway is connected and has the catalog.',
  },
  { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', description: 'Why (not) Ready.' },
  { name: 'Tools', type: 'integer', jsonPath: '.status.toolCount', description: 'Tools offered after the allow and deny lists.' },
  { name: 'URL', type: 'string', jsonPath: '.spec.url', description: "The upstream's endpoint (Streamable HTTP servers).", priority: 1 },
  { name: 'Image', type: 'string', jsonPath: '.spec.stdio.image', description: "The stdio server's image (run by the operator).", priority: 1 },
  { name: 'Last-Refresh', type: 'date', jsonPath: '.status.lastRefreshTime', description: 'When the catalog was last listed.', priority: 1 },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation.' },
];

/** The UpstreamServer CustomResourceDefinition. */
export function buildUpstreamServerCrd(): CustomResourceDefinition {
  return buildCrd({
    kind: UPSTREAMSERVER_KIND,
    plural: UPSTREAMSERVER_PLURAL,
    shortNames: ['ups'],
    description:
      'UpstreamServer declares an MCP server (Streamable HTTP, or stdio run by the operator behind its bridge) whose tools sandboxed code may call through the gateway (code mode). Credentials are named by Secret reference and never leave the gateway.',
    specSchema: UpstreamServerSpecSchema,
    specDescription: 'Where the upstream is, how the gateway authenticates to it, which tools are offered and to whom.',
    statusSchema: UpstreamServerStatusSchema,
    statusDescription: "What the gateway sees of the upstream, written by the gateway's leader replica.",
    printerColumns: UPSTREAMSERVER_PRINTER_COLUMNS,
  });
}
