/**
 * The socket of a session whose client went away without saying goodbye, for
 * the grace period during which the client may come back and resume it
 * (Meteor 3.5). Nothing is written anywhere: the session records what it sends
 * (resume-log.ts). Its bytes count in the server's output budget like any
 * connection's, and the budget dropping it, or the session closing it, ends
 * the session.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { EncodedMessage } from '../ddp/encoded.js';
import type { BudgetMember } from '../transport/output-budget.js';
import type { DdpSocket } from '../transport/socket.js';

export class ParkedSocket implements DdpSocket, BudgetMember {
  readonly transport = 'parked';
  readonly writable = false;
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  readonly headers: IncomingHttpHeaders;
  readonly ownProxies: number;

  constructor(
    gone: DdpSocket,
    /** Bytes the session holds for its client. */
    private readonly held: () => number,
    /** Ends the session. */
    private readonly end: () => void,
  ) {
    this.remoteAddress = gone.remoteAddress;
    this.remotePort = gone.remotePort;
    this.headers = gone.headers;
    this.ownProxies = gone.ownProxies;
  }

  get bufferedBytes(): number {
    return this.held();
  }

  whenWritable(): Promise<'closed'> {
    return Promise.resolve('closed');
  }

  setHandlers(): void {}
  send(_message: EncodedMessage): void {}
  pause(): void {}
  resume(): void {}
  hold(): void {}

  close(): void {
    this.end();
  }

  terminate(): void {
    this.end();
  }

  dropOverBudget(): void {
    this.end();
  }
}
