// public/page.js — a page's script (<script type="module" src="/page.js">); add server.serveStatic('public') to app.js
import { DDPClient } from '/perseid/client.js';

const client = new DDPClient(location.origin);
const messages = client.collection('messages');
client.subscribe('room', 'lobby');
messages.onChange(() => {
  document.body.replaceChildren(...messages.find().map((m) => Object.assign(document.createElement('p'), { textContent: m.text })));
});
await client.call('send', 'lobby', 'hello');
