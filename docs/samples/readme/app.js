// app.js — run with: npx perseid start app.js
import { Collection, DDPError } from 'perseid';

const Messages = new Collection('messages');

export default function app(server) {
  server.methods({
    async send(room, text) {
      if (typeof text !== 'string' || !text) throw new DDPError(400, 'Empty message');
      return Messages.insertAsync({ room, text, at: new Date(), user: this.userId });
    },
  });
  server.publish('room', function (room) {
    return Messages.find({ room }, { sort: { at: -1 }, limit: 50 });
  });
}
