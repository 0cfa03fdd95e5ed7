/** Opening a MongoClient: the store's (and its replacements', see client-holder.ts) and the cluster registry's. */
import { MongoClient } from 'mongodb';
import { redactedUrl } from '../../log.js';
import { apm } from '../../metrics/apm.js';
import { DatabaseUnavailableError } from '../driver.js';

/**
 * A connected client, or a DatabaseUnavailableError that says where it could not connect (a start fails with
 * that, not a driver stack). `monitorCommands` feeds the APM's per-command figures (a few events per command).
 */
export async function connectMongo(url: string, serverSelectionTimeoutMS: number, monitorCommands = false): Promise<MongoClient> {
  // A timeout written in the URL wins (an options object would override it).
  const timeoutInUrl = /[?&]serverSelectionTimeoutMS=(\d+)/i.exec(url);
  if (timeoutInUrl) serverSelectionTimeoutMS = Number(timeoutInUrl[1]);
  // The driver's connect timeout (30 s by default) also bounds how long its monitor waits on a server
  // that accepts a connection but does not answer yet (one restarting); 5 s is plenty on a LAN.
  const connectTimeoutMS = /[?&]connectTimeoutMS=/i.test(url) ? undefined : 5000;
  const client = new MongoClient(url, { serverSelectionTimeoutMS, ...(connectTimeoutMS ? { connectTimeoutMS } : {}), monitorCommands });
  if (monitorCommands) {
    client.on('commandSucceeded', (event) => apm.database.command(event.commandName, event.duration, false));
    client.on('commandFailed', (event) => apm.database.command(event.commandName, event.duration, true));
  }
  try {
    return await client.connect();
  } catch (error) {
    await client.close().catch(() => undefined);
    throw new DatabaseUnavailableError(`cannot reach MongoDB at ${redactedUrl(url)} within ${serverSelectionTimeoutMS} ms: ${(error as Error).message}`, error);
  }
}
