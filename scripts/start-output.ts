// What `npm start` adds to the gateway's JSON log: the sandbox self-check's one-line summary,
// readable, so whoever started the gateway sees at once whether code will run and why not.
/** `[start] <summary>` for a log line of the sandbox check; undefined for every other line. */
export function startLineFor(line: string): string | undefined {
  if (!line.includes('"sandbox-check"')) return undefined;
  try {
    const rec = JSON.parse(line) as { event?: unknown; summary?: unknown };
    return rec.event === 'sandbox-check' && typeof rec.summary === 'string' ? `[start] ${rec.summary}` : undefined;
  } catch {
    return undefined;
  }
}
