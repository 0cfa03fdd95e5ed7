/**
 * A group chat, as a real app: accounts, rooms, messages shown at once by a
 * method stub (greyed until the server confirms them), who is online (from
 * the connections of logged-in users), unread counts per room, and the last
 * 50 messages of a room with "load earlier". The page is public/.
 *
 * It is also the app of BENCHMARKS.md S4 (Smart Collections' benchmark):
 * anonymous clients subscribe to `messages` of one group and call
 * `sendMessage({group, message})`, which does exactly one insert for them.
 */
import { fileURLToPath } from 'node:url';
import { Collection, DDPError, Random, collectionIdSequence, type PerseidServer } from 'perseid';
import { accounts } from 'perseid/accounts';

export interface Message {
  _id: string;
  group: string;
  /** The user's id, or an alias of the connection for an anonymous sender. */
  user: string;
  /** Set for logged-in senders. */
  username?: string;
  text: string;
  at: Date;
}

export interface Room {
  _id: string;
  createdAt: Date;
}

/** When a user last read a room. */
interface Read {
  _id: string;
  userId: string;
  room: string;
  at: Date;
}

/** A logged-in connection: who is online. */
interface Presence {
  _id: string;
  userId: string;
  username: string;
  since: Date;
}

export const Messages = new Collection<Message>('messages');
const Rooms = new Collection<Room>('rooms');
const Reads = new Collection<Read>('reads');
const Presences = new Collection<Presence>('presence');

const DEFAULT_ROOMS = ['general', 'random'];
const PAGE = 50;
const MAX_LIMIT = 1000;
/** Unread counts stop at this (the page shows "99+"). */
const UNREAD_CAP = 100;
/** The server's moderation, which the page's stub does not know: such messages are refused. */
const BLOCKED = /\bspam\b/i;

function text(value: unknown, name: string, max: number): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > max) {
    throw new DDPError(400, `Match failed: ${name} must be a string of 1 to ${max} characters`);
  }
  return value;
}

function roomName(value: unknown): string {
  const name = text(value, 'room', 100).trim().toLowerCase();
  if (!/^[a-z0-9][a-z0-9_-]*$/.test(name)) throw new DDPError(400, 'A room name is letters, digits, - and _');
  return name;
}

export interface ChatOptions {
  /** Runs before each message is stored (tests delay the server's answer with it). */
  beforeSend?: (message: { group: string; text: string }) => Promise<void> | void;
}

/** The app, with options; the default export is it with none (what `perseid start` runs). */
export function createChat(options: ChatOptions = {}) {
  return async function chatApp(server: PerseidServer): Promise<void> {
    server.serveStatic(fileURLToPath(new URL('./public/', import.meta.url)));
    await Messages.createIndexAsync({ group: 1, at: -1 });
    await Reads.createIndexAsync({ userId: 1 });
    const users = accounts(server);
    await users.ready;
    // Presence is per process and starts empty: connections of an earlier run are gone.
    await Presences.removeAsync({});
    for (const room of DEFAULT_ROOMS) await Rooms.updateAsync(room, { $setOnInsert: { createdAt: new Date() } }, { upsert: true });

    // What other clients see of a connection: an alias, never its id (which a client can resume the session with).
    const aliases = new Map<string, string>();
    const aliasOf = (connectionId: string): string => {
      let alias = aliases.get(connectionId);
      if (alias === undefined) aliases.set(connectionId, (alias = Random.id()));
      return alias;
    };

    users.onLogin(async ({ user, connection }) => {
      // A connection that closed while its login ran has had its onClose below: it would stay "online" for ever.
      if (!user || connection.closed) return;
      const username = user.username ?? user.emails?.[0]?.address ?? 'someone';
      const alias = aliasOf(connection.id);
      await Presences.updateAsync(alias, { $set: { userId: user._id, username, since: new Date() } }, { upsert: true });
      // Closed during the upsert: onClose's remove may have come first.
      if (connection.closed) await Presences.removeAsync(alias);
    });
    users.onLogout(({ connection }) => Presences.removeAsync(aliasOf(connection.id)));
    server.onConnection((connection) =>
      connection.onClose(() => {
        const alias = aliases.get(connection.id);
        aliases.delete(connection.id);
        if (alias === undefined) return;
        Presences.removeAsync(alias).catch((error: unknown) => server.log.debug('presence not cleared (stopping?)', { error }));
      }),
    );

    server.methods({
      async sendMessage(args: unknown) {
        const { group, message } = (args ?? {}) as Record<string, unknown>;
        // The id the page's stub gave the message (the insert below would draw the same one).
        const _id = this.randomStream ? collectionIdSequence(this.randomStream, 'messages').id() : Random.id();
        const doc: Message = { _id, group: text(group, 'group', 100), text: text(message, 'message', 2000), user: this.userId ?? aliasOf(this.connection.id), at: new Date() };
        await options.beforeSend?.({ group: doc.group, text: doc.text });
        if (BLOCKED.test(doc.text)) throw new DDPError(400, 'Message refused: it looks like spam');
        if (this.userId) {
          const user = await users.users.findOneAsync({ _id: this.userId }, { fields: { username: 1, emails: 1 } });
          doc.username = user?.username ?? user?.emails?.[0]?.address;
        }
        try {
          return await Messages.insertAsync(doc);
        } catch (error) {
          // A client re-sends a call whose answer it lost on its next session: the message is stored already, and that is its answer.
          if ((error as { code?: unknown }).code === 11000) return _id;
          throw error;
        }
      },
      async createRoom(name: unknown) {
        if (!this.userId) throw new DDPError(401, 'Log in to create a room');
        const room = roomName(name);
        await Rooms.updateAsync(room, { $setOnInsert: { createdAt: new Date() } }, { upsert: true });
        return room;
      },
      /** Marks `room` read up to the newest message seen there (`seen`, never later than now); a late call moves nothing back. */
      async markRead(room: unknown, seen?: unknown) {
        if (!this.userId) return;
        const name = text(room, 'room', 100);
        const now = new Date();
        const at = seen instanceof Date && seen < now ? seen : now;
        await Reads.updateAsync(`${this.userId}/${name}`, { $set: { userId: this.userId, room: name }, $max: { at } }, { upsert: true });
      },
    });

    server.publish('messages', (group: unknown, limit: unknown) => {
      const count = limit === undefined ? PAGE : Number(limit);
      if (!Number.isInteger(count) || count < 1 || count > MAX_LIMIT) throw new DDPError(400, `Match failed: limit must be 1 to ${MAX_LIMIT}`);
      return Messages.find({ group: text(group, 'group', 100) }, { sort: { at: -1 }, limit: count });
    });
    server.publish('rooms', () => Rooms.find({}, { sort: { _id: 1 } }));
    server.publish('presence', () => Presences.find({}, { fields: { userId: 1, username: 1 } }));
    server.publish('unreadCounts', async function () {
      const userId = this.userId;
      if (!userId) return this.ready();
      const counters = new Map<string, () => void>();
      const published = new Set<string>();
      // Counts, live, the messages of others in `room` since `since` (at most UNREAD_CAP).
      const count = async (room: string, since: Date | undefined): Promise<void> => {
        counters.get(room)?.();
        let current = true;
        counters.set(room, () => (current = false));
        let unread = 0;
        let initial = true;
        const publish = () => {
          if (!current || initial) return;
          this.changed('unreadCounts', room, { count: unread });
        };
        const selector = { group: room, user: { $ne: userId }, ...(since ? { at: { $gt: since } } : {}) };
        const handle = await Messages.find(selector, { sort: { at: -1 }, limit: UNREAD_CAP, fields: { _id: 1 } }).observeChangesAsync({
          added: () => {
            unread++;
            publish();
          },
          removed: () => {
            unread--;
            publish();
          },
        });
        initial = false;
        if (!current) return handle.stop();
        counters.set(room, () => {
          current = false;
          handle.stop();
        });
        if (published.has(room)) this.changed('unreadCounts', room, { count: unread });
        else this.added('unreadCounts', room, { count: unread });
        published.add(room);
      };
      const reads = new Map<string, Date>();
      let started = false;
      const readAt = (room: string, at: unknown) => {
        if (!(at instanceof Date)) return;
        reads.set(room, at);
        if (started) void count(room, at);
      };
      const watchReads = await Reads.find({ userId }).observeChangesAsync({
        added: (_id, fields) => readAt(String(fields.room), fields.at),
        changed: (id, fields) => readAt(String(id).slice(userId.length + 1), fields.at),
      });
      const initialCounts: Array<Promise<void>> = [];
      const watchRooms = await Rooms.find().observeChangesAsync({
        added: (id) => {
          const counting = count(String(id), reads.get(String(id)));
          if (started) void counting;
          else initialCounts.push(counting);
        },
      });
      await Promise.all(initialCounts);
      started = true;
      this.onStop(() => {
        watchRooms.stop();
        watchReads.stop();
        for (const stop of counters.values()) stop();
      });
      this.ready();
    });
  };
}

export default createChat();
