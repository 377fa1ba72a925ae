// A request refused before anything is created: bad input, or over a limit or a capacity. The
// gateway turns it into an isError result with the hint.
/** A request the service refuses before creating anything (bad input, over a limit). */
export class RunRequestError extends Error {
  constructor(
    message: string,
    /** What to do instead, shown to the agent. */
    readonly hint: string,
    /**
     * The message may quote the sandbox (a session call's kernel errors): shown to the caller,
     * never logged.
     */
    readonly quotesSandbox = false,
  ) {
    super(message);
    this.name = 'RunRequestError';
  }
}
