// The page: one room (the address's #name, default "lobby"), its latest messages live.
import { DDPClient } from '/perseid/client.js';

/** The room the address names; the lobby for none, or for a hand-made one that is not valid percent-encoding (#50%). */
function roomInAddress() {
  try {
    return decodeURIComponent(location.hash.slice(1)) || 'lobby';
  } catch {
    return 'lobby';
  }
}

const room = roomInAddress();
document.getElementById('room').textContent = room;
addEventListener('hashchange', () => location.reload());

const client = new DDPClient(location.origin);
const messages = client.collection('messages');
client.subscribe('room', room);

const status = document.getElementById('status');
client.on('status', (value) => {
  status.dataset.status = value;
  status.textContent = value === 'connected' ? 'live' : `${value}…`;
});

const author = document.getElementById('author');
author.value = localStorage.getItem('author') ?? '';

function line(message) {
  const item = document.createElement('li');
  const at = Object.assign(document.createElement('time'), { textContent: message.at.toLocaleTimeString() });
  item.append(Object.assign(document.createElement('b'), { textContent: message.author }), message.text, at);
  return item;
}
messages.onChange(() => {
  const latest = messages.find().sort((a, b) => a.at - b.at);
  document.getElementById('messages').replaceChildren(...latest.map(line));
});

document.getElementById('send').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = document.getElementById('text');
  localStorage.setItem('author', author.value);
  await client.call('send', room, input.value, author.value);
  input.value = '';
});
