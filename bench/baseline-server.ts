/**
 * The limit baseline of BENCHMARKS.md: a bare `ws` server, no DDP framework and
 * no database, that answers the tasks app's client frames with the same reply
 * frames and does the same fan-out, its data in a plain Map.
 *
 *   --mode fast   each change serialised and framed once, the same buffer written
 *                 to every subscriber, one joined write per connection per flush,
 *                 with the same adaptive flush batching Perseid uses (transport/flush.ts):
 *                 the limit must use the best write strategy we know
 *   --mode naive  one ws.send per message per client
 *
 * Usage: node dist/bench/baseline-server.js --port 4000 --mode fast
 */
import { createServer } from 'node:http';
import type { Duplex } from 'node:stream';
import { parseArgs } from 'node:util';
import { WebSocketServer, type WebSocket } from 'ws';
import { Random, RandomStream, collectionIdSequence } from '../src/ddp/random.js';
import { EncodedMessage } from '../src/ddp/encoded.js';
import { scheduleFlush, type BatchCache, type Flushable } from '../src/transport/flush.js';
import { frameFor } from '../src/transport/frames.js';
import { item } from './apps/pub-cycle.js';

const USAGE = 'Usage: baseline-server --port <port> --mode fast|naive';
const { values } = parseArgs({
  options: { port: { type: 'string', default: '4000' }, mode: { type: 'string', default: 'fast' }, help: { type: 'boolean', short: 'h' } },
});
if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const mode = values.mode;
if (mode !== 'fast' && mode !== 'naive') {
  console.error(USAGE);
  process.exit(2);
}

interface Task {
  _id: string;
  sessionId: string;
  description: string;
  createdAt: number;
}

/** A connection: in fast mode its messages are queued and flushed like Perseid's. */
class Client implements Flushable {
  subscribed = false;
  private pending: EncodedMessage[] = [];

  constructor(
    readonly ws: WebSocket,
    private readonly socket: Duplex,
  ) {}

  send(message: EncodedMessage): void {
    messagesSent++;
    if (mode === 'naive') {
      this.ws.send(message.text);
      return;
    }
    if (this.pending.push(message) === 1) scheduleFlush(this);
  }

  flush(batches: BatchCache): void {
    const messages = this.pending;
    this.pending = [];
    // Nothing may follow the close frame `ws` sent in answer to the client's.
    if (this.ws.readyState !== this.ws.OPEN) return;
    const frame = (m: EncodedMessage) => frameFor(m, 'plain', undefined);
    this.socket.write(messages.length === 1 ? frame(messages[0]!) : batches.join(messages, 'plain', frame));
  }

  failed(): void {
    this.ws.terminate();
  }
}

const tasks = new Map<string, Task>();
/** Each task's `added` message, serialised (and, once sent, framed) once for its broadcast and every later subscriber. */
const addedMessages = new Map<string, EncodedMessage>();
/** S3's publication `items(size)`, its messages prepared once. */
const items: Record<string, EncodedMessage[]> = Object.fromEntries(
  [['20kb', 20] as const, ['200kb', 200] as const].map(([size, count]) => [
    size,
    Array.from({ length: count }, (_, n) => {
      const { _id, ...fields } = item(size, n);
      return new EncodedMessage(JSON.stringify({ msg: 'added', collection: 'items', id: _id, fields }));
    }),
  ]),
);
const clients = new Set<Client>();
let messagesSent = 0;

function send(client: Client, message: unknown): void {
  client.send(new EncodedMessage(JSON.stringify(message)));
}

function broadcast(message: unknown): void {
  broadcastEncoded(new EncodedMessage(JSON.stringify(message)));
}

function broadcastEncoded(encoded: EncodedMessage): void {
  for (const client of clients) if (client.subscribed) client.send(encoded);
}

function added(task: Task): object {
  const { _id, ...fields } = task;
  return { msg: 'added', collection: 'taskCollection', id: _id, fields: { ...fields, createdAt: { $date: fields.createdAt } } };
}

function asTask(task: Task): object {
  return { ...task, createdAt: { $date: task.createdAt } };
}

function handle(client: Client, text: string): void {
  const msg = JSON.parse(text) as { msg: string; id?: string; method?: string; params?: Array<Record<string, string>>; randomSeed?: string };
  switch (msg.msg) {
    case 'connect':
      send(client, { msg: 'connected', session: Random.id() });
      return;
    case 'ping':
      send(client, msg.id ? { msg: 'pong', id: msg.id } : { msg: 'pong' });
      return;
    case 'sub': {
      const { name, params } = msg as unknown as { name: string; params?: string[] };
      if (name === 'items') {
        for (const message of items[params?.[0] ?? ''] ?? []) client.send(message);
      } else {
        client.subscribed = true;
        for (const message of addedMessages.values()) client.send(message);
      }
      send(client, { msg: 'ready', subs: [msg.id] });
      return;
    }
    case 'unsub':
      client.subscribed = false;
      send(client, { msg: 'nosub', id: msg.id });
      return;
    case 'method': {
      const args = msg.params?.[0] ?? {};
      let result: unknown;
      if (msg.method === 'insertTask') {
        const stream = msg.randomSeed ? collectionIdSequence(new RandomStream(msg.randomSeed), 'taskCollection') : Random;
        const task: Task = { _id: stream.id(), sessionId: args.sessionId!, description: args.description!, createdAt: Date.now() };
        tasks.set(task._id, task);
        const message = new EncodedMessage(JSON.stringify(added(task)));
        addedMessages.set(task._id, message);
        broadcastEncoded(message);
        result = task._id;
      } else if (msg.method === 'removeTask') {
        addedMessages.delete(args.taskId!);
        result = tasks.delete(args.taskId!) ? 1 : 0;
        if (result) broadcast({ msg: 'removed', collection: 'taskCollection', id: args.taskId });
      } else if (msg.method === 'removeAllTasks') {
        let removed = 0;
        for (const task of [...tasks.values()]) {
          if (task.sessionId !== args.sessionId) continue;
          tasks.delete(task._id);
          addedMessages.delete(task._id);
          broadcast({ msg: 'removed', collection: 'taskCollection', id: task._id });
          removed++;
        }
        result = removed;
      } else if (msg.method === 'fetchTasks') {
        result = [...tasks.values()].map(asTask);
      }
      send(client, { msg: 'result', id: msg.id, result });
      send(client, { msg: 'updated', methods: [msg.id] });
      return;
    }
  }
}

const http = createServer((req, res) => {
  if (req.url === '/perseid/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ perseid_messages_sent_total: messagesSent, clients: clients.size }));
    return;
  }
  res.writeHead(404);
  res.end();
});
const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, clientTracking: false });
http.on('upgrade', (req, socket, head) => {
  wss.handleUpgrade(req, socket, head, (ws) => {
    const client = new Client(ws, socket);
    clients.add(client);
    ws.on('message', (data) => handle(client, (data as Buffer).toString()));
    ws.on('close', () => clients.delete(client));
    ws.on('error', () => clients.delete(client));
  });
});
http.listen(Number(values.port), '127.0.0.1', () => console.log(`baseline (${mode}) listening on 127.0.0.1:${values.port}`));
process.on('SIGTERM', () => process.exit(0));
