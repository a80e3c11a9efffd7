// toolhost web UI, the Agents views: the list of agents with a form to
// start one, and an agent's page with its event tree, conversation and
// mailbox, to message or terminate it. Loaded after app.js, whose helpers
// (h, fill, api, follow, …) it uses; app.js starts the page once both are in.
'use strict';

// ---- Agents ---------------------------------------------------------------

// AGENT_EVENTS are the event types after which the agents' views reload.
const AGENT_EVENTS = /^(agent|turn|tool_call|console)\./;
// RECHECK_MS is how soon a view showing a running agent looks again, in
// case its last change came without an event (the status after an answer).
const RECHECK_MS = 2000;
// AGENTS_PAGE is how many agents a page of the list shows.
const AGENTS_PAGE = 50;

function agentHref(id) { return '#/agents/' + encodeURIComponent(id); }
function agentPath(id) { return '/api/agents/' + encodeURIComponent(id); }
function isFinal(a) { return a.status === 'failed' || a.status === 'terminated'; }
function stateBadge(status) { return h('span', { class: 'state ' + (status || '') }, status || ''); }
function oneLine(s, n) {
  const t = String(s || '').replace(/\s+/g, ' ').trim();
  return t.length > n ? t.slice(0, n - 1) + '…' : t;
}

// liveAgents keeps a view of agents current. It returns reload, which runs
// load (one at a time; calls during a run make one more run) and which it
// calls after each agent, turn, tool call or console event on the stream,
// at each (re)connection of the stream, and RECHECK_MS after a load that
// reports an agent running (load returns whether one is).
function liveAgents(v, load, status) {
  let running = false;
  let again = false;
  let timer = 0;
  async function reload() {
    if (running) { again = true; return; }
    running = true;
    try {
      do {
        again = false;
        clearTimeout(timer);
        if (await load()) timer = setTimeout(reload, RECHECK_MS);
      } while (again && !v.signal.aborted);
    } finally {
      running = false;
    }
  }
  v.signal.addEventListener('abort', () => clearTimeout(timer));
  let lastId = 0;
  follow(v.signal, {
    query() {
      const q = new URLSearchParams();
      if (lastId) q.set('after', lastId);
      return q;
    },
    onEvent(e) {
      if (e.id) lastId = Math.max(lastId, e.id);
      if (AGENT_EVENTS.test(e.type || '')) reload();
    },
    onOpen: reload, // what happened while the stream was down
    status,
  });
  return reload;
}

async function agentsPage(main, v) {
  const roles = await api('GET', '/api/roles', undefined, v.signal);
  const body = h('tbody', {});
  const errorEl = h('div', { id: 'error', class: 'error', role: 'alert', hidden: true });
  const stream = h('span', { id: 'stream-status', class: 'status' }, 'connecting…');

  const roleSel = h('select', { id: 'spawn-role', name: 'role', required: true },
    roles.map((r) => h('option', { value: r.name }, r.name)));
  const task = h('textarea', { id: 'spawn-task', name: 'task', rows: 3, placeholder: 'task (empty: the agent waits for messages)' });
  const start = h('button', { id: 'spawn-start', type: 'submit', class: 'primary' }, 'Start');
  const spawnStatus = h('span', { id: 'spawn-status', class: 'status' });
  const form = h('form', { id: 'spawn', class: 'card spawn' },
    h('h3', {}, 'Start an agent'),
    h('label', {}, 'Role ', roleSel),
    task,
    h('div', { class: 'actions' }, start, spawnStatus));

  const row = (a) => h('tr', { 'data-agent': a.id, class: a.parentId ? 'child' : null },
    h('td', {}, h('a', { href: agentHref(a.id), class: 'agent-link' }, a.id),
      a.parentId ? h('div', { class: 'muted small' }, 'child of ', h('a', { href: agentHref(a.parentId) }, a.parentId)) : null),
    h('td', {}, a.role || ''),
    h('td', { class: 'status-cell' }, stateBadge(a.status), a.kind === 'external' ? h('span', { class: 'badge' }, 'external') : null),
    h('td', { class: 'num' }, fmt(a.turns)),
    h('td', { class: 'num' }, fmt(a.tokens)),
    h('td', { class: 'task', title: a.task || '' }, a.task ? oneLine(a.task, 120) : h('span', { class: 'muted' }, '—')),
    h('td', { class: 'answer', title: a.error || a.answer || '' },
      a.error ? h('span', { class: 'error-text' }, a.errorCode ? h('span', { class: 'badge bad' }, a.errorCode) : null, ' ', oneLine(a.error, 160))
        : oneLine(a.answer, 160)));

  // The list is paged: pages holds the path of each page shown so far,
  // the current one last; Next follows the Link the server gave, Previous
  // goes back one. A reload stays on the current page.
  const pages = ['/api/agents?limit=' + AGENTS_PAGE];
  let nextPage = null;
  const prev = h('button', { id: 'agents-prev', type: 'button', disabled: true, onclick: () => { pages.pop(); reload(); } }, '← Previous');
  const next = h('button', { id: 'agents-next', type: 'button', disabled: true, onclick: () => { pages.push(nextPage); reload(); } }, 'Next →');
  const pageNo = h('span', { id: 'agents-page', class: 'muted' });
  const load = async () => {
    try {
      const page = await apiPage(pages[pages.length - 1], v.signal);
      nextPage = page.next;
      fill(body, page.items.length ? page.items.map(row) : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No agent on this page.')));
      fill(pageNo, 'page ' + pages.length);
      prev.disabled = pages.length === 1;
      next.disabled = !nextPage;
      return page.items.some((a) => a.status === 'running');
    } catch (e) {
      if (!v.signal.aborted) showError(errorEl, e);
      return false;
    }
  };

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(errorEl, null);
    start.disabled = true;
    spawnStatus.textContent = 'Starting…';
    spawnStatus.className = 'status';
    try {
      const a = await api('POST', '/api/agents', { role: roleSel.value, task: task.value }, v.signal);
      task.value = '';
      spawnStatus.textContent = 'Started ' + a.id;
      spawnStatus.className = 'status ok';
      pages.length = 1; // the first page, where the new agent is
      reload();
    } catch (e) {
      if (v.signal.aborted) return;
      showError(errorEl, e);
      spawnStatus.textContent = 'Not started';
      spawnStatus.className = 'status dirty';
    } finally {
      start.disabled = false;
    }
  });

  fill(main,
    h('h1', {}, 'Agents', stream),
    h('p', { class: 'muted' }, 'The agents not ended come first, newest first; then those ended (an MCP session or agent key that ended, an agent terminated or failed), the most recently ended first, until store { agent_retention } removes them. Click one to see its event tree and conversation.'),
    form,
    errorEl,
    h('table', { id: 'agents', class: 'table agents' },
      h('thead', {}, h('tr', {}, ['Agent', 'Role', 'Status', 'Turns', 'Tokens', 'Task', 'Answer / error'].map((c) => h('th', {}, c)))),
      body),
    h('div', { class: 'actions' }, prev, pageNo, next));
  const reload = liveAgents(v, load, stream);
  await reload();
}

// treeNode renders a node of an agent's event tree and its children.
function treeNode(n) {
  const bad = n.status === 'failed' || n.status === 'terminated';
  const kids = n.children || [];
  return h('li', { class: 'node ' + n.kind + (bad ? ' bad' : ''), 'data-kind': n.kind, 'data-status': n.status || '' },
    h('span', { class: 'node-title' },
      bad ? h('span', { class: 'badge bad' }, n.status) : null,
      n.kind === 'call' ? h('a', { href: callHref(n.id), class: 'call-link', title: 'the call\'s story' }, h('code', {}, n.title)) : n.title,
      n.status === 'running' ? h('span', { class: 'badge' }, 'running') : null),
    kids.length ? h('ul', { class: 'tree' }, kids.map(treeNode)) : null);
}

// messageView renders one message of a conversation; tool calls compactly.
function messageView(m) {
  const calls = Array.isArray(m.toolCalls) ? m.toolCalls : [];
  return h('div', { class: 'msg ' + m.role, 'data-seq': m.seq },
    h('div', { class: 'msg-head' }, h('strong', {}, m.role),
      m.name ? h('code', {}, m.name) : null,
      m.toolCallId ? h('span', { class: 'muted small' }, 'call ' + m.toolCallId) : null,
      h('span', { class: 'muted small' }, when(m.time))),
    m.content ? h('pre', { class: 'content' }, m.content) : null,
    calls.length ? h('ul', { class: 'calls' }, calls.map((c) => h('li', { title: c.arguments || '' },
      h('code', {}, c.name, '(', oneLine(c.arguments, 100), ')')))) : null);
}

async function agentPage(main, v, id) {
  const errorEl = h('div', { id: 'error', class: 'error', role: 'alert', hidden: true });
  const stream = h('span', { id: 'stream-status', class: 'status' }, 'connecting…');
  const title = h('h1', {});
  const info = h('section', { id: 'agent-info', class: 'agent-info' });
  const tree = h('ul', { id: 'tree', class: 'tree root' });
  const convo = h('div', { id: 'conversation', class: 'conversation' });
  const mailbox = h('div', { id: 'mailbox' });
  const actionStatus = h('span', { id: 'agent-status', class: 'status' });
  const message = h('textarea', { id: 'message', rows: 2, placeholder: 'a message for the agent' });
  const send = h('button', { id: 'send', type: 'button', class: 'primary', onclick: doSend }, 'Send message');
  const terminate = h('button', { id: 'terminate', type: 'button', class: 'danger', onclick: doTerminate }, 'Terminate');

  function render(d, t) {
    fill(title, d.id, ' ', h('span', { class: 'badge' }, d.role || ''), ' ', stateBadge(d.status));
    const field = (name, ...value) => [h('dt', {}, name), h('dd', {}, value)];
    fill(info, h('dl', { class: 'facts' },
      field('Kind', d.kind || ''),
      field('Turns', fmt(d.turns)),
      field('Tokens', fmt(d.tokens)),
      d.parentId ? field('Parent', h('a', { href: agentHref(d.parentId) }, d.parentId)) : null,
      d.children.length ? field('Children', d.children.map((c) => [h('a', { href: agentHref(c) }, c), ' '])) : null,
      field('Task', d.task ? h('pre', { id: 'task' }, d.task) : h('span', { class: 'muted' }, 'none')),
      d.answer ? field('Answer', h('pre', { id: 'answer' }, d.answer)) : null,
      d.error ? field('Error', h('div', { id: 'agent-error', class: 'error-text' }, d.errorCode ? h('span', { class: 'badge bad' }, d.errorCode) : null, ' ', d.error)) : null));
    fill(tree, treeNode(t));
    fill(convo, d.messages.length ? d.messages.map(messageView) : h('p', { class: 'muted' }, 'No message yet.'));
    fill(mailbox, d.mailbox.length === 0 ? h('p', { class: 'muted' }, 'No mail.') :
      h('ul', { class: 'plain' }, d.mailbox.map((m) => h('li', { class: m.read ? 'read' : 'unread' },
        h('strong', {}, m.from || 'operator'), ': ', oneLine(m.body, 200), m.read ? null : h('span', { class: 'badge warn' }, 'unread')))));
    const final = isFinal(d);
    terminate.disabled = final;
    send.disabled = final;
    message.disabled = final;
  }

  const get = () => Promise.all([api('GET', agentPath(id), undefined, v.signal), api('GET', agentPath(id) + '/tree', undefined, v.signal)]);
  const load = async () => {
    try {
      const [d, t] = await get();
      render(d, t);
      return d.status === 'running';
    } catch (e) {
      if (!v.signal.aborted) showError(errorEl, e);
      return false;
    }
  };

  async function act(what, fn) {
    showError(errorEl, null);
    send.disabled = terminate.disabled = true;
    actionStatus.textContent = what + '…';
    actionStatus.className = 'status';
    try {
      actionStatus.textContent = await fn();
      actionStatus.className = 'status ok';
    } catch (e) {
      if (v.signal.aborted) return;
      showError(errorEl, e);
      actionStatus.textContent = '';
    }
    await reload();
  }

  function doSend() {
    const text = message.value.trim();
    if (!text) return;
    act('Sending', async () => {
      await api('POST', agentPath(id) + '/messages', { message: text }, v.signal);
      message.value = '';
      return 'Sent';
    });
  }

  function doTerminate() {
    act('Terminating', async () => {
      const r = await api('POST', agentPath(id) + '/terminate', undefined, v.signal);
      return r.terminated.length ? 'Terminated ' + r.terminated.join(', ') : 'Already ended';
    });
  }

  const [d, t] = await get();
  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/agents' }, 'Agents'), ' / ', id, stream),
    title,
    errorEl,
    info,
    h('div', { class: 'actions' }, message, send, terminate, actionStatus),
    h('div', { class: 'agent-layout' },
      h('section', {}, h('h2', {}, 'Event tree'), tree),
      h('section', {}, h('h2', {}, 'Conversation'), convo, h('h2', {}, 'Mailbox'), mailbox)));
  render(d, t);
  const reload = liveAgents(v, load, stream);
}
