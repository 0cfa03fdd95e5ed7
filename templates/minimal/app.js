// The server: one collection, a method that writes to it, a publication that
// sends it live to every page, and the page in public/.
import { fileURLToPath } from 'node:url';
import { Collection, DDPError } from 'perseid';

export const Notes = new Collection('notes');

export default function app(server) {
  server.serveStatic(fileURLToPath(new URL('./public/', import.meta.url)));

  server.methods({
    async addNote(text) {
      if (typeof text !== 'string' || text.trim() === '' || text.length > 500) throw new DDPError(400, 'A note is 1 to 500 characters');
      return Notes.insertAsync({ text: text.trim(), at: new Date() });
    },
  });

  server.publish('notes', () => Notes.find({}, { sort: { at: -1 }, limit: 20 }));
}
