// The server of a chat: rooms of messages; a page subscribes to one room's latest.
import { fileURLToPath } from 'node:url';
import { Collection, DDPError } from 'perseid';

export const Messages = new Collection('messages');

function text(value, what, max) {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max) throw new DDPError(400, `${what} is 1 to ${max} characters`);
  return value.trim();
}

export default async function app(server) {
  server.serveStatic(fileURLToPath(new URL('./public/', import.meta.url)));
  await Messages.createIndexAsync({ room: 1, at: -1 });

  server.methods({
    async send(room, message, author) {
      return Messages.insertAsync({
        room: text(room, 'A room name', 50),
        text: text(message, 'A message', 1000),
        author: text(author ?? 'someone', 'A name', 50),
        at: new Date(),
      });
    },
  });

  server.publish('room', (room) => Messages.find({ room: text(room, 'A room name', 50) }, { sort: { at: -1 }, limit: 50 }));
}
