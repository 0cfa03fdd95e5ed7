// app.ts — a whole app: a collection, a method that writes to it, a publication that sends it live.
import { Collection, DDPError, type PerseidServer } from 'perseid';

interface Note {
  _id: string;
  text: string;
  at: Date;
}

export const Notes = new Collection<Note>('notes');

export default function setup(server: PerseidServer): void {
  server.methods({
    async addNote(text: unknown) {
      if (typeof text !== 'string' || text.trim() === '') throw new DDPError(400, 'A note needs some text');
      return Notes.insertAsync({ text: text.trim(), at: new Date() });
    },
  });
  server.publish('latestNotes', () => Notes.find({}, { sort: { at: -1 }, limit: 20 }));
}
