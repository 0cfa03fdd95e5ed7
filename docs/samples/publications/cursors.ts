// Publications return cursors: each distinct query is kept live once, however many subscribe.
import { Collection, DDPError, type PerseidServer } from 'perseid';

const Rooms = new Collection<{ _id: string; name: string; open: boolean }>('rooms');
const Messages = new Collection<{ _id: string; room: string; text: string; at: Date }>('messages');

export function setup(server: PerseidServer): void {
  server.methods({
    openRoom: (name: unknown) => Rooms.insertAsync({ name: String(name), open: true }),
    post: (room: unknown, text: unknown) => Messages.insertAsync({ room: String(room), text: String(text), at: new Date() }),
  });

  // One cursor.
  server.publish('openRooms', () => Rooms.find({ open: true }, { fields: { name: 1 } }));

  // Several cursors, of different collections, in one subscription.
  server.publish('room', async function (roomId: unknown) {
    if (typeof roomId !== 'string') throw new DDPError(400, 'Match failed');
    return [Rooms.find({ _id: roomId }), Messages.find({ room: roomId }, { sort: { at: -1 }, limit: 50 })];
  });
}
