// The page: subscribes to the notes, shows them as they change, adds one on submit.
import { DDPClient } from '/perseid/client.js';

const client = new DDPClient(location.origin);
const notes = client.collection('notes');
client.subscribe('notes');

const status = document.getElementById('status');
client.on('status', (value) => {
  status.dataset.status = value;
  status.textContent = value === 'connected' ? 'live' : `${value}…`;
});

function render() {
  const list = document.getElementById('notes');
  list.replaceChildren(
    ...notes
      .find()
      .sort((a, b) => b.at - a.at)
      .map((note) => Object.assign(document.createElement('li'), { textContent: note.text })),
  );
}
notes.onChange(render);

document.getElementById('add').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = document.getElementById('text');
  await client.call('addNote', input.value);
  input.value = '';
});
