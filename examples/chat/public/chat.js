// The chat page. Everything on it comes live from the server through the
// Perseid client; messages are sent through a method whose stub shows them at
// once (greyed: the stub marks them `pending`, the server's copy has no such
// field and replaces the stub's when the call completes, or the stub's copy
// disappears if the server refuses it).
import { AccountsClient, DDPClient } from '/perseid/client.js';

const PAGE = 50;
const client = new DDPClient(location.origin);
const accounts = new AccountsClient(client, localStorage, 'chat');
const messages = client.collection('messages');
const rooms = client.collection('rooms');
const presence = client.collection('presence');
const unread = client.collection('unreadCounts');
const users = client.collection('users');
const $ = (id) => document.getElementById(id);

client.methods({
  sendMessage({ group, message }) {
    const user = accounts.user();
    // After the newest message even where this device's clock is behind the server's: shown at once, at the bottom.
    const [newest] = messages.find({ group }, { sort: { at: -1 }, limit: 1 });
    const at = new Date(Math.max(Date.now(), (newest?.at.getTime() ?? 0) + 1));
    messages.insert({ group, text: message, user: client.userId() ?? 'me', username: user?.username, at, pending: true });
  },
});

/** The room the address names; general for none, or for a hand-made one that is not valid percent-encoding. */
function roomInAddress() {
  try {
    return decodeURIComponent(location.hash.slice(1)) || 'general';
  } catch {
    return 'general';
  }
}

let room = roomInAddress();
let limit = PAGE;
let messagesSub;
/** Subscriptions the newest one replaces, kept until it is ready (or the room changes). */
const replacedSubs = new Set();
let errorTimer;

client.subscribe('rooms');
client.subscribe('presence');
client.subscribe('unreadCounts');

function stopReplacedSubs() {
  for (const sub of replacedSubs) sub.stop();
  replacedSubs.clear();
}

function subscribeMessages(keepShown) {
  if (messagesSub) replacedSubs.add(messagesSub);
  // Loading earlier messages keeps the shown ones until the longer list is in: no flicker.
  if (!keepShown) stopReplacedSubs();
  const sub = (messagesSub = client.subscribe('messages', room, limit));
  sub.ready.then(
    () => {
      if (sub !== messagesSub) return;
      stopReplacedSubs();
      render();
    },
    // A subscription the page replaced ends unready when stopped (a quick room switch): not an error to show.
    (error) => sub === messagesSub && showError(error),
  );
}

function openRoom(name) {
  if (name === room && messagesSub) return;
  room = name;
  limit = PAGE;
  if (location.hash.slice(1) !== encodeURIComponent(name)) location.hash = encodeURIComponent(name);
  subscribeMessages(false);
  document.body.classList.remove('menu-open');
  render();
  markRead();
}

// ---- rendering ----

let frame;
function render() {
  if (frame) return;
  frame = requestAnimationFrame(() => {
    frame = undefined;
    renderRooms();
    renderMessages();
    renderOnline();
    renderAccount();
  });
}

function renderRooms() {
  $('rooms').replaceChildren(
    ...rooms.find({}, { sort: { _id: 1 } }).map(({ _id: name }) => {
      const item = document.createElement('li');
      item.dataset.room = name;
      const link = document.createElement('a');
      link.href = `#${encodeURIComponent(name)}`;
      link.textContent = `# ${name}`;
      if (name === room) link.setAttribute('aria-current', 'page');
      item.append(link);
      const count = name === room ? 0 : (unread.findOne(name)?.count ?? 0);
      if (count > 0) {
        const badge = document.createElement('span');
        badge.className = 'unread';
        badge.textContent = count >= 100 ? '99+' : String(count);
        item.append(badge);
      }
      return item;
    }),
  );
}

function timeOf(date) {
  const sameDay = date.toDateString() === new Date().toDateString();
  return sameDay ? date.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : date.toLocaleString();
}

function renderMessages() {
  const list = $('messages');
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  const fromBottom = list.scrollHeight - list.scrollTop;
  const shown = messages.find({ group: room }, { sort: { at: -1 }, limit }).reverse();
  const me = client.userId();
  list.replaceChildren(
    ...shown.map((message) => {
      const item = document.createElement('li');
      item.dataset.id = message._id;
      item.className = [message.pending ? 'pending' : '', message.user === me ? 'mine' : ''].filter(Boolean).join(' ');
      const who = document.createElement('span');
      who.className = 'who';
      who.textContent = message.username ?? 'anonymous';
      const time = document.createElement('time');
      time.dateTime = message.at.toISOString();
      time.textContent = message.pending ? 'sending…' : timeOf(message.at);
      const body = document.createElement('p');
      body.className = 'text';
      body.textContent = message.text;
      item.append(who, time, body);
      return item;
    }),
  );
  $('room-title').textContent = `# ${room}`;
  $('empty').hidden = shown.length > 0 || !messagesSub?.isReady;
  $('load-earlier').hidden = messages.find({ group: room }).length < limit;
  // Stay at the bottom for new messages; keep the place when earlier ones are added above.
  if (atBottom) list.scrollTop = list.scrollHeight;
  else list.scrollTop = list.scrollHeight - fromBottom;
}

function renderOnline() {
  const names = new Map(presence.find().map((p) => [p.userId, p.username]));
  $('online').replaceChildren(
    ...[...names.values()].sort().map((name) => {
      const item = document.createElement('li');
      item.textContent = name;
      return item;
    }),
  );
}

function renderAccount() {
  const userId = client.userId();
  const user = accounts.user();
  $('login').hidden = Boolean(userId);
  $('signed-in').hidden = !userId;
  $('new-room').hidden = !userId;
  $('who').textContent = user?.username ?? user?.emails?.[0]?.address ?? '';
  $('message').disabled = !userId;
  $('send').disabled = !userId;
  $('message').placeholder = userId ? `Message #${room}` : 'Log in to write';
}

function showError(error) {
  clearTimeout(errorTimer);
  $('error').hidden = false;
  $('error').textContent = error?.reason ?? error?.message ?? String(error);
  errorTimer = setTimeout(() => ($('error').hidden = true), 8000);
}

// ---- reading ----

/**
 * One pending "read" per room: leaving a room does not cancel the one for it. It
 * says up to which message was seen, so a read sent late marks nothing newer.
 */
const readTimers = new Map();
function markRead(name = room) {
  clearTimeout(readTimers.get(name));
  if (!client.userId() || document.visibilityState === 'hidden') return;
  const [newest] = messages.find({ group: name }, { sort: { at: -1 }, limit: 1 });
  readTimers.set(
    name,
    setTimeout(() => {
      readTimers.delete(name);
      client.call('markRead', name, newest?.at ?? new Date()).catch(() => undefined);
    }, 300),
  );
}

messages.onChange((change) => {
  render();
  if (change.type === 'added' && change.doc.group === room && change.doc.user !== client.userId()) markRead();
});
for (const collection of [rooms, presence, unread, users]) collection.onChange(render);
accounts.on('login', () => {
  render();
  markRead();
});
accounts.on('logout', render);
client.on('status', (status) => {
  $('status').dataset.status = status;
  $('status').textContent = status === 'waiting' ? 'reconnecting…' : status;
});
document.addEventListener('visibilitychange', () => markRead());
window.addEventListener('hashchange', () => openRoom(roomInAddress()));

// ---- actions ----

$('composer').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = $('message');
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  $('error').hidden = true;
  client.call('sendMessage', { group: room, message: text }).catch(showError);
});

$('load-earlier').addEventListener('click', () => {
  limit += PAGE;
  subscribeMessages(true);
});

$('new-room').addEventListener('submit', (event) => {
  event.preventDefault();
  const name = $('room-name').value.trim();
  if (!name) return;
  client.call('createRoom', name).then((created) => {
    $('room-name').value = '';
    openRoom(created);
  }, showError);
});

$('menu').addEventListener('click', () => {
  const open = document.body.classList.toggle('menu-open');
  $('menu').setAttribute('aria-expanded', String(open));
});

async function signIn(create) {
  const username = $('username').value.trim();
  const password = $('password').value;
  if (!username || !password) return;
  try {
    $('account-error').hidden = true;
    if (create) await accounts.createUser({ username, password });
    else await accounts.loginWithPassword(username, password);
    $('password').value = '';
  } catch (error) {
    $('account-error').hidden = false;
    $('account-error').textContent = error.reason ?? error.message;
  }
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  void signIn(false);
});
$('sign-up').addEventListener('click', () => {
  if ($('login').reportValidity()) void signIn(true);
});
$('log-out').addEventListener('click', () => accounts.logout().catch(showError));

openRoom(room);
