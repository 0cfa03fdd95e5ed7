// The page of the tasks app: everything on it comes live from the `fetchTasks`
// publication through the Perseid client; the buttons call the app's methods.
// Sign-up and login go through the client's accounts helper: the token is kept
// in localStorage and resumed on every reconnect and on the next visit.
import { AccountsClient, DDPClient, Random } from '/perseid/client.js';

const sessionId = sessionStorage.getItem('tasks-session') ?? Random.id();
sessionStorage.setItem('tasks-session', sessionId);

const client = new DDPClient(location.origin);
const accounts = new AccountsClient(client, localStorage, 'tasks');
const tasks = client.collection('taskCollection');
const users = client.collection('users');
const $ = (id) => document.getElementById(id);
/** Tasks added on this page whose call has not completed (e.g. while offline), by a local id. */
const pending = new Map();

client.on('status', (status) => {
  $('status').dataset.status = status;
  $('status').textContent = status === 'waiting' ? 'reconnecting…' : status;
});

function startOfToday() {
  const now = new Date();
  return new Date(now.getFullYear(), now.getMonth(), now.getDate());
}

function taskItem(task, { mine, isPending }) {
  const item = document.createElement('li');
  if (task._id) item.dataset.id = task._id;
  item.className = [mine ? 'mine' : '', isPending ? 'pending' : ''].filter(Boolean).join(' ');
  const text = document.createElement('span');
  text.className = 'text';
  text.textContent = task.description;
  const by = document.createElement('span');
  by.className = 'by';
  by.textContent = isPending ? 'pending…' : task.username ? `by ${task.username}` : 'anonymous';
  const time = document.createElement('time');
  time.dateTime = task.createdAt.toISOString();
  time.textContent = task.createdAt < startOfToday() ? task.createdAt.toLocaleString() : task.createdAt.toLocaleTimeString();
  item.append(text, by, time);
  if (!isPending) {
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.textContent = 'Remove';
    remove.addEventListener('click', () => client.call('removeTask', { taskId: task._id }).catch(report));
    item.append(remove);
  }
  return item;
}

function render() {
  const all = tasks.find().sort((a, b) => b.createdAt - a.createdAt);
  const waiting = [...pending.values()];
  $('tasks').replaceChildren(
    ...waiting.map((task) => taskItem(task, { mine: true, isPending: true })),
    ...all.map((task) => taskItem(task, { mine: task.sessionId === sessionId, isPending: false })),
  );
  const count = all.length;
  const mine = all.filter((t) => t.sessionId === sessionId).length;
  $('summary').textContent = `${count} ${count === 1 ? 'task' : 'tasks'}, ${mine} yours`;
  $('clear-area').hidden = mine === 0;
  $('empty').hidden = count + waiting.length > 0;
}

function renderAccount() {
  const userId = accounts.userId();
  const user = userId && users.findOne(userId);
  $('login').hidden = Boolean(userId);
  $('signed-in').hidden = !userId;
  $('who').textContent = user?.username ?? user?.emails?.[0]?.address ?? '';
}

function report(error) {
  console.error(error);
  alert(error.reason ?? error.message);
}

function accountError(error) {
  $('account-error').hidden = !error;
  $('account-error').textContent = error ? (error.reason ?? error.message) : '';
}

tasks.onChange(render);
users.onChange(renderAccount);
accounts.on('login', renderAccount);
accounts.on('logout', renderAccount);
client.subscribe('fetchTasks').ready.then(render, report);
render();
renderAccount();

$('add').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = $('description');
  const description = input.value.trim();
  if (!description) return;
  input.value = '';
  const localId = Random.id();
  pending.set(localId, { description, createdAt: new Date() });
  render();
  client
    .call('insertTask', { description, sessionId })
    .catch(report)
    .finally(() => {
      pending.delete(localId);
      render();
    });
});

$('clear').addEventListener('click', () => client.call('removeAllTasks', { sessionId }).catch(report));

async function signIn(create) {
  const username = $('username').value.trim();
  const password = $('password').value;
  if (!username || !password) return;
  try {
    accountError(undefined);
    if (create) await accounts.createUser({ username, password });
    else await accounts.loginWithPassword(username, password);
    $('password').value = '';
  } catch (error) {
    accountError(error);
  }
}

$('login').addEventListener('submit', (event) => {
  event.preventDefault();
  void signIn(false);
});
$('sign-up').addEventListener('click', () => {
  if ($('login').reportValidity()) void signIn(true);
});
$('log-out').addEventListener('click', () => accounts.logout().catch(report));
