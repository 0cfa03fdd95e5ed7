// The page: the task list, live; check a task to mark it done, × to remove it.
import { DDPClient } from '/perseid/client.js';

const client = new DDPClient(location.origin);
const tasks = client.collection('tasks');
client.subscribe('tasks');

const status = document.getElementById('status');
client.on('status', (value) => {
  status.dataset.status = value;
  status.textContent = value === 'connected' ? 'live' : `${value}…`;
});

function row(task) {
  const item = document.createElement('li');
  item.classList.toggle('done', task.done);
  const box = Object.assign(document.createElement('input'), { type: 'checkbox', checked: task.done });
  box.addEventListener('change', () => client.call('setDone', task._id, box.checked));
  const remove = Object.assign(document.createElement('button'), { textContent: '×', title: 'Remove' });
  remove.addEventListener('click', () => client.call('removeTask', task._id));
  item.append(box, Object.assign(document.createElement('span'), { textContent: ` ${task.text}` }), remove);
  return item;
}

function render() {
  const all = tasks.find().sort((a, b) => b.createdAt - a.createdAt);
  const left = all.filter((task) => !task.done).length;
  document.getElementById('left').textContent = all.length === 0 ? 'Nothing to do yet.' : `${left} of ${all.length} ${all.length === 1 ? 'task' : 'tasks'} left`;
  document.getElementById('tasks').replaceChildren(...all.map(row));
}
tasks.onChange(render);
render();

document.getElementById('add').addEventListener('submit', async (event) => {
  event.preventDefault();
  const input = document.getElementById('text');
  await client.call('addTask', input.value);
  input.value = '';
});
