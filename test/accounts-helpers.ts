/** Fixtures for the accounts suites: a server with accounts on a given database, and DDP calls with Meteor's login shapes. */
import { createHash } from 'node:crypto';
import { accounts, type Accounts, type AccountsOptions } from '../src/accounts/index.js';
import type { Database } from '../src/collections/database.js';
import { createServer, type PerseidServer } from '../src/server/app.js';
import type { RawPeer, Message } from './helpers.js';

export interface AccountsServer {
  server: PerseidServer;
  accounts: Accounts;
  url: string;
  wsUrl: string;
  close(): Promise<void>;
}

export async function accountsServer(database: Database, options: AccountsOptions = {}, setup?: (server: PerseidServer, accounts: Accounts) => void): Promise<AccountsServer> {
  const server = createServer();
  const acc = accounts(server, { database, mailer: () => undefined, ...options });
  server.methods({
    whoami(this: { userId: string | null }) {
      return this.userId;
    },
  });
  setup?.(server, acc);
  await acc.ready;
  const { url, port } = await server.listen(0, '127.0.0.1');
  return { server, accounts: acc, url, wsUrl: `ws://127.0.0.1:${port}/websocket`, close: () => server.close() };
}

export const digest = (password: string) => ({ digest: createHash('sha256').update(password).digest('hex'), algorithm: 'sha-256' as const });

let next = 0;
/** Calls a method; resolves with its `result` message (result or error). */
export async function call(peer: RawPeer, method: string, ...params: unknown[]): Promise<Message> {
  const { result } = await peer.call(`c${next++}`, method, params);
  return result;
}

export function errorOf(result: Message): { error: unknown; reason: unknown } | undefined {
  const error = result.error as Message | undefined;
  return error && { error: error.error, reason: error.reason };
}

export const AMBIGUOUS = { error: 403, reason: 'Something went wrong. Please check your credentials.' };
