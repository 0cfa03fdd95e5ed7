/**
 * What a server and a workers' primary share as the door new clients come in
 * by: a router that may send them to another server of the cluster, and steps
 * to run first when draining (leaving the registry, say).
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../log.js';
import { markPassedOn } from '../transport/passed-on.js';
import { proxyUpgrade } from '../transport/proxy.js';
import { BALANCED_HEADER, type ConnectionRouter } from './connection-router.js';

export class FrontDoor {
  private router: ConnectionRouter | undefined;
  private readonly drainSteps: Array<() => Promise<void>> = [];

  constructor(private readonly log: Logger) {}

  /** Whether a router decides where new clients go. */
  get routing(): boolean {
    return this.router !== undefined;
  }

  route(router: ConnectionRouter): void {
    this.router = router;
  }

  onDrain(step: () => Promise<void>): void {
    this.drainSteps.push(step);
  }

  /** The origins of the servers the router sends clients between (none without a router). */
  peerOrigins(): readonly string[] {
    return this.router?.peerOrigins() ?? [];
  }

  /** Where a new SockJS client should go, or undefined to keep it here. */
  sockjsBaseUrl(): string | undefined {
    return this.router?.sockjsBaseUrl();
  }

  /** Passes a WebSocket upgrade on to the server the router chose; otherwise, or when that server does not answer, `serveHere`. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, serveHere: () => void): void {
    // The passing balancer added itself to X-Forwarded-For: its clients are counted by their own addresses, not its.
    if (this.router?.passedOnByPeer(req)) markPassedOn(req);
    const target = this.router?.upgradeTarget(req);
    if (!target) return serveHere();
    proxyUpgrade(req, socket, head, target, { [BALANCED_HEADER]: target.passKey ?? '1' }, (error) => {
      this.log.warn('could not pass a connection on; serving it here', { to: `${target.host}:${target.port}`, error: error.message });
      target.unreachable();
      serveHere();
    });
  }

  /** Runs the drain steps in order; one that fails is logged and the drain goes on. */
  async drainFirst(): Promise<void> {
    for (const step of this.drainSteps) await step().catch((error: Error) => this.log.warn('drain step failed', { error: error.message }));
  }
}
