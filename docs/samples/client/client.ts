// The client: subscribe, read the local copy as it changes, call methods.
import { DDPClient } from 'perseid/client';

export async function run(url: string): Promise<string[]> {
  const client = new DDPClient(url); // in a page: new DDPClient(location.origin), imported from '/perseid/client.js'
  try {
    const notes = client.collection<{ _id: string; text: string }>('notes');
    const seen: string[] = [];
    notes.onChange((change) => {
      if (change.type === 'added') seen.push(change.doc.text);
    });
    await client.subscribe('latestNotes').ready; // resolves once the first batch is in the local copy
    await client.call('addNote', 'from the client'); // resolves after the server's writes reached this client
    return seen;
  } finally {
    client.disconnect();
  }
}
