// An in-memory upstream for unit tests of the broker and the kernels' tool calls (the e2e tests
// use the real "everything" MCP server). Counts what reached it.
import type { ToolInfo, UpstreamCaller, UpstreamResult } from '../../../src/codemode/types.js';

const text = (t: string): UpstreamResult => ({ content: [{ type: 'text', text: t }] });

export const DEMO_TOOLS: ToolInfo[] = [
  {
    name: 'echo',
    description: 'Echoes the message back. Useful for tests.',
    inputSchema: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
  },
  {
    name: 'get-sum',
    description: 'Adds two numbers.',
    inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
  },
  { name: 'fail', description: 'Always fails.', inputSchema: { type: 'object', properties: {} } },
  { name: 'rows', description: 'Returns n rows as structured content.', inputSchema: { type: 'object', properties: { n: { type: 'integer' } } } },
  { name: 'slow', description: 'Answers after ms milliseconds.', inputSchema: { type: 'object', properties: { ms: { type: 'integer' } } } },
];

export function fakeUpstream(): UpstreamCaller & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    servers: () => [
      { name: 'demo', toolCount: DEMO_TOOLS.length, description: 'A demo server' },
      { name: 'other', toolCount: 1 },
    ],
    tools: (server) => (server === 'demo' ? DEMO_TOOLS : server === 'other' ? [DEMO_TOOLS[0] as ToolInfo] : undefined),
    async call(server, tool, args, { signal }): Promise<UpstreamResult> {
      calls.push(`${server}.${tool}`);
      if (tool === 'echo') return text(`Echo: ${String(args.message)}`);
      if (tool === 'get-sum') return text(JSON.stringify(Number(args.a) + Number(args.b)));
      if (tool === 'fail') return { content: [{ type: 'text', text: 'it broke' }], isError: true };
      if (tool === 'rows')
        return { content: [], structuredContent: { total: args.n, rows: Array.from({ length: Number(args.n) }, (_, i) => ({ i, name: `row ${i}` })) } };
      await new Promise((resolve, reject) => {
        const t = setTimeout(resolve, Number(args.ms));
        signal.addEventListener('abort', () => (clearTimeout(t), reject(new Error('aborted'))));
      });
      return text('done');
    },
  };
}
