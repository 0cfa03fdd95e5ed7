// The page of the tasks app: everything on it comes live from the `fetchTasks`
// publication through the Perseid client; the buttons call the app's methods.
import { DDPClient, Random } from '/perseid/client.js';

const sessionId = sessionStorage.getItem('tasks-session') ?? Random.id();
sessionStorage.setItem('tasks-session', sessionId);

const client = new DDPClient(location.origin);
const tasks = client.collection('taskCollection');
const $ = (id) => document.getElementById(id);

client.on('status', (status) => {
  $('status').dataset.status = status;
  $('status').textContent = status === 'waiting' ? 'reconnecting…' : status;
});

function render() {
  const all = tasks.find().sort((a, b) => b.createdAt - a.createdAt);
  const list = $('tasks');
  list.replaceChildren(
    ...all.map((task) => {
      const item = document.createElement('li');
      item.dataset.id = task._id;
      if (task.sessionId === sessionId) item.className = 'mine';
      const text = document.createElement('span');
      text.className = 'text';
      text.textContent = task.description;
      const time = document.createElement('time');
      time.dateTime = task.createdAt.toISOString();
      time.textContent = task.createdAt.toLocaleTimeString();
      const remove = document.createElement('button');
      remove.type = 'button';
      remove.textContent = 'Remove';
      remove.addEventListener('click', () => client.call('removeTask', { taskId: task._id }).catch(report));
      item.append(text, time, remove);
      return item;
    }),
  );
  $('count').textContent = String(all.length);
  $('mine').textContent = String(all.filter((t) => t.sessionId === sessionId).length);
}

function report(error) {
  console.error(error);
  alert(error.reason ?? error.message);
}

tasks.onChange(render);
client.subscribe('fetchTasks').ready.then(render, report);

$('add').addEventListener('submit', (event) => {
  event.preventDefault();
  const input = $('description');
  const description = input.value.trim();
  if (!description) return;
  input.value = '';
  client.call('insertTask', { description, sessionId }).catch(report);
});

$('clear').addEventListener('click', () => client.call('removeAllTasks', { sessionId }).catch(report));
