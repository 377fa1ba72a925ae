// Which user's requests each kept-alive connection carries, and how many each user holds.
//
// Every connection counts against CODEMODE_MAX_CONNECTIONS (gateway/http-server.ts), and an idle
// kept-alive one stays open for the keep-alive timeout (65 s) after its last response. A user who
// opened a few thousand connections and sent one quick request on each (a tools/list) held them
// all between requests, and every other user's new connection was refused. A connection belongs
// to the user of its latest request (behind an ingress one connection carries many users' requests
// in turn); past a user's share, the response closes its connection instead of keeping it: the
// request is served, nothing is refused, and the user keeps their share of idle connections.
import type { Socket } from 'node:net';

/**
 * A user's share of kept-alive connections: a sixteenth of CODEMODE_MAX_CONNECTIONS (256 of the
 * default 4096): it takes sixteen users at their share to fill a replica, and an agent's few
 * connections are nowhere near it.
 */
export function connectionsPerUser(maxConnections: number): number {
  return Math.max(1, Math.floor(maxConnections / 16));
}

export class ConnectionOwners {
  private readonly owners = new WeakMap<Socket, string>();
  private readonly held = new Map<string, number>();

  constructor(readonly perUser: number) {}

  /**
   * Records `user` as the owner of `socket` (the connection their request came on). True when the
   * user now holds more than their share: the response should close this connection.
   * A connection already destroyed (its client went away before the answer, e.g. halfway through
   * its body) counts nothing: its 'close' may have fired already, and a listener added now would
   * never be called (the user's share would shrink by one for good). One claimed while it was open
   * is given back by the listener added then.
   */
  claim(socket: Socket, user: string): boolean {
    if (socket.destroyed) return false;
    const was = this.owners.get(socket);
    if (was !== user) {
      if (was === undefined) socket.once('close', () => this.release(socket));
      else this.add(was, -1);
      this.owners.set(socket, user);
      this.add(user, 1);
    }
    return (this.held.get(user) ?? 0) > this.perUser;
  }

  /** Connections `user` holds now (tests). */
  holding(user: string): number {
    return this.held.get(user) ?? 0;
  }

  private release(socket: Socket): void {
    const user = this.owners.get(socket);
    if (user === undefined) return;
    this.owners.delete(socket);
    this.add(user, -1);
  }

  private add(user: string, n: number): void {
    const left = (this.held.get(user) ?? 0) + n;
    if (left > 0) this.held.set(user, left);
    else this.held.delete(user);
  }
}
