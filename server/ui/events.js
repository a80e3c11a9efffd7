// toolhost web UI, the Events views: the audit trail from history, filtered
// (the filters kept in the address, #/events?role=…&outcome=…, so that a
// view can be linked), paged back, following new events on top; and a
// call's story (#/events/calls/ID). Loaded after app.js and agents.js,
// whose helpers (h, fill, api, apiPage, follow, agentHref, oneLine, …) it
// uses.
'use strict';

// ---- Events ---------------------------------------------------------------

// EVENTS_PAGE is how many events a page of the list shows.
const EVENTS_PAGE = 50;
// EVENT_FILTERS are the list's filters: GET /api/events' query parameters.
const EVENT_FILTERS = [
  ['role', 'role'], ['agent', 'agent id'], ['credential', 'credential'], ['tool', 'tool'],
  ['call', 'call id'], ['type', 'type (or tool_call.)'],
  ['since', 'since (e.g. 10m)'], ['until', 'until (e.g. 1h)'],
];
// EVENT_OUTCOMES are the outcome filter's choices (store.Outcomes, and a failure
// by code).
const EVENT_OUTCOMES = [
  ['', 'any outcome'], ['ok', 'ok'], ['failed', 'failed'], ['denied', 'denied'], ['approved', 'approved'],
  ['rate_limited', 'rate limited'], ['failed:tool_exec', 'failed: tool_exec'], ['failed:timeout', 'failed: timeout'],
  ['failed:validation', 'failed: validation'], ['failed:cancelled', 'failed: cancelled'],
  ['failed:plugin_exited', 'failed: plugin_exited'], ['failed:internal', 'failed: internal'],
];
// STORY_RECHECK_MS is how soon a running call's story looks again.
const STORY_RECHECK_MS = 2000;
// FILTER_KEYS are the parameters the list's address may carry.
const FILTER_KEYS = EVENT_FILTERS.map(([k]) => k).concat(['outcome']);

function callHref(id) { return '#/events/calls/' + encodeURIComponent(id); }

// eventsQuery reads the filters from the address (#/events?…).
function eventsQuery() {
  const i = location.hash.indexOf('?');
  const all = new URLSearchParams(i < 0 ? '' : location.hash.slice(i + 1));
  const q = new URLSearchParams();
  for (const k of FILTER_KEYS) if (all.get(k)) q.set(k, all.get(k));
  return q;
}

// lastEvents is the address of the list last shown, for a story's way back.
let lastEvents = '#/events';

// outcomeBadge marks a call's terminal event with how it ended.
function outcomeBadge(e) {
  const p = e.payload || {};
  if (e.type === 'tool_call.completed') return h('span', { class: 'badge ok' }, 'ok');
  if (e.type !== 'tool_call.failed') return null;
  return h('span', { class: 'badge bad', title: p.error || '' }, p.code || 'failed');
}

function eventRow(e) {
  const p = e.payload || {};
  const payload = e.payload ? pretty(e.payload) : '';
  return h('tr', { 'data-id': e.id, 'data-call': e.callId || null, class: 'ev ' + String(e.type || '').replace(/[^a-z_]/gi, '-') },
    h('td', { class: 'nowrap' }, when(e.time)),
    h('td', {}, h('span', { class: 'badge' }, e.type || ''), outcomeBadge(e),
      p.replayed === true ? h('span', { class: 'badge warn replay', title: 'a replay of call ' + p.replay_of + ': nothing ran' }, 'replay') : null),
    h('td', {}, e.tool ? h('code', {}, e.tool) : '', e.group ? h('div', { class: 'muted small' }, e.group) : null),
    h('td', {}, e.agentId ? h('a', { href: agentHref(e.agentId) }, e.agentId) : '', e.role ? h('div', { class: 'muted small' }, e.role) : null,
      p.credential ? h('div', { class: 'muted small', title: 'credential' }, p.credential) : null),
    h('td', { class: 'small' }, e.callId ? h('a', { href: callHref(e.callId), class: 'call-link', title: 'the call\'s story' }, e.callId) : ''),
    h('td', {}, payload ? h('details', {}, h('summary', {}, oneLine(payload, 60)), h('pre', {}, payload)) : ''));
}

function eventsTable(body) {
  return h('table', { id: 'events', class: 'table events' },
    h('thead', {}, h('tr', {}, ['Time', 'Type', 'Tool', 'Agent / role', 'Call', 'Payload'].map((c) => h('th', {}, c)))),
    body);
}

async function eventsPage(main, v) {
  const q = eventsQuery();
  lastEvents = '#/events' + (q.toString() ? '?' + q : '');
  const input = ([name, ph]) => h('input', { type: 'text', name, placeholder: ph, value: q.get(name) || '',
    title: name === 'since' || name === 'until' ? name + ': a duration back from now, or an RFC 3339 time such as 2026-01-02T15:04:05Z' : ph });
  const outcome = h('select', { name: 'outcome', title: 'outcome' },
    EVENT_OUTCOMES.map(([val, label]) => h('option', { value: val, selected: (q.get('outcome') || '') === val }, label)));
  // A linked failure code the list does not offer is still shown.
  if (q.get('outcome') && !EVENT_OUTCOMES.some(([val]) => val === q.get('outcome'))) outcome.append(h('option', { value: q.get('outcome'), selected: true }, q.get('outcome')));
  const bounded = q.has('until');
  const followBox = h('input', { type: 'checkbox', id: 'events-follow', checked: !bounded, disabled: bounded });
  const status = h('span', { id: 'stream-status', class: 'status' }, bounded ? 'not following: until is set' : '');
  const form = h('form', { class: 'filters', id: 'event-filters' },
    EVENT_FILTERS.map(input), outcome,
    h('button', { type: 'submit', class: 'primary' }, 'Filter'),
    h('a', { href: '#/events', class: 'button', id: 'events-clear' }, 'Clear'),
    h('label', { class: 'small', title: 'show new matching events at the top as they are recorded' }, followBox, ' follow'), status);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const nq = new URLSearchParams();
    for (const k of FILTER_KEYS) {
      const val = String(form.elements[k].value || '').trim();
      if (val) nq.set(k, val);
    }
    const target = '#/events' + (nq.toString() ? '?' + nq : '');
    if (location.hash === target) render(); else location.hash = target;
  });

  const body = h('tbody', {});
  const count = h('span', { id: 'events-count', class: 'muted' });
  const errorEl = h('div', { id: 'error', class: 'error', role: 'alert', hidden: true });
  const older = h('button', { id: 'events-older', type: 'button', disabled: true }, 'Older');
  const list = { shown: 0, newest: 0, next: null };
  const setCount = () => fill(count, list.shown ? `${fmt(list.shown)} event${list.shown === 1 ? '' : 's'} shown, newest first` : 'No event matches.');
  const showPage = (page, atTop) => {
    const rows = page.items.slice().reverse().map(eventRow); // each page comes oldest first
    if (atTop) body.prepend(...rows); else body.append(...rows);
    list.shown += rows.length;
    for (const e of page.items) list.newest = Math.max(list.newest, e.id);
    setCount();
  };

  fill(main,
    h('h1', {}, 'Events'),
    h('p', { class: 'muted' }, 'The audit trail, newest first: every recorded event, filtered; a call id opens the call\'s story. ',
      'The address keeps the filters, so a view can be linked. ', h('code', {}, 'toolhost events'), ' reads the same trail.'),
    form, errorEl, h('p', {}, count), eventsTable(body), h('div', { class: 'actions' }, older));

  const path = '/api/events?' + new URLSearchParams([...q, ['limit', String(EVENTS_PAGE)]]);
  const first = await apiPage(path, v.signal);
  showPage(first, false);
  list.next = first.next;
  older.disabled = !list.next;
  older.addEventListener('click', async () => {
    older.disabled = true;
    try {
      const page = await apiPage(list.next, v.signal);
      showPage(page, false);
      list.next = page.next;
    } catch (e) {
      if (!v.signal.aborted) showError(errorEl, e);
    }
    older.disabled = !list.next;
  });

  // Following starts after the newest event shown, or the newest recorded
  // when none matched, so that nothing between the page and the stream is
  // missed.
  if (!list.newest) {
    const latest = await api('GET', '/api/events?limit=1', undefined, v.signal);
    if (latest.length) list.newest = latest[0].id;
  }
  let stream = null;
  const startFollowing = () => {
    stream = new AbortController();
    const signal = stream.signal;
    v.signal.addEventListener('abort', () => stream && stream.abort());
    follow(signal, {
      query() {
        const sq = new URLSearchParams(q);
        sq.set('after', String(list.newest));
        return sq;
      },
      onEvent(e) {
        if (e.id <= list.newest) return;
        showPage({ items: [e] }, true);
      },
      status,
    });
  };
  followBox.addEventListener('change', () => {
    if (followBox.checked) { startFollowing(); return; }
    if (stream) stream.abort();
    stream = null;
    status.textContent = 'not following';
    status.className = 'status';
  });
  if (followBox.checked) startFollowing();
}

// ---- a call's story -------------------------------------------------------

// storyRow is one line of a story: a label and what it says, marked with
// data-field for whoever reads the page; nothing when there is nothing.
function storyRow(field, label, ...value) {
  if (value.every((x) => x === null || x === undefined || x === '' || x === false)) return null;
  return [h('dt', {}, label), h('dd', { 'data-field': field }, value)];
}

function jsonBlock(v) { return v === undefined || v === null ? null : h('pre', {}, pretty(v)); }

async function callPage(main, v, id) {
  const s = await api('GET', '/api/events/calls/' + encodeURIComponent(id), undefined, v.signal);
  const ap = s.approval || null;
  const outcome = s.outcome === 'ok' ? h('span', { class: 'badge ok' }, 'ok')
    : s.outcome === 'failed' ? [h('span', { class: 'badge bad' }, s.code || 'failed'), ' ', h('span', { class: 'error-text' }, s.error || '')]
      : h('span', { class: 'badge warn' }, s.outcome);
  const who = [
    s.agentId ? ['agent ', h('a', { href: agentHref(s.agentId) }, s.agentId)] : null,
    s.role ? ['role ', h('a', { href: roleHref(s.role) }, s.role)] : null,
    s.credential ? ['credential ', h('code', { 'data-field': 'credential' }, s.credential)] : null,
    s.principal && s.principal !== s.credential ? ['principal ', h('code', {}, s.principal)] : null,
    s.channel ? ['via ', s.channel] : null,
  ].filter(Boolean).flatMap((part, i) => (i ? [' · ', part] : [part]));
  const argsNote = s.argumentsTruncated ? h('div', { class: 'muted small' }, 'cut at the events\' bound (4 KiB), so shown as text') : null;
  fill(main,
    h('p', {}, h('a', { href: lastEvents, id: 'back-to-events' }, '← Events')),
    h('h1', {}, 'Call ', h('code', {}, s.callId)),
    h('dl', { id: 'call-story', class: 'card story' },
      storyRow('tool', 'Tool', s.tool ? h('code', {}, s.tool) : null, s.group ? h('span', { class: 'badge' }, s.group) : null),
      storyRow('caller', 'Caller', ...who),
      storyRow('outcome', 'Outcome', outcome),
      storyRow('time', 'Time', s.started ? when(s.started) : null, s.latencyMs !== undefined ? ` · took ${s.latencyMs} ms` : null,
        s.replays ? ` · replayed ${s.replays} time${s.replays === 1 ? '' : 's'}` : null),
      storyRow('arguments', 'Arguments', jsonBlock(s.arguments), argsNote),
      storyRow('rule', 'Rule', s.rule ? [h('code', {}, s.rule), ' → ', h('strong', {}, s.ruleAction || '')] : null),
      storyRow('limits', 'Limits', jsonBlock(s.limits)),
      storyRow('approval', 'Approval', ap ? [h('strong', {}, ap.decision || ''), ap.by ? [' by ', h('code', { 'data-field': 'approver' }, ap.by)] : null,
        ap.reason ? [' · ', ap.reason] : null] : null),
      storyRow('result', 'Result', jsonBlock(s.result)),
      storyRow('parent', 'Parent call', s.parentCall ? h('a', { href: callHref(s.parentCall) }, s.parentCall) : null,
        s.parentId && s.parentId !== s.parentCall ? h('span', { class: 'muted small' }, ` (under ${s.parentId})`) : null),
      storyRow('children', 'Children', s.children.length ? h('ul', { class: 'plain' }, s.children.map((c) => h('li', {},
        h('span', { class: 'badge' }, c.type), ' ', c.callId ? h('a', { href: callHref(c.callId) }, c.callId) : '',
        c.agentId ? [' agent ', h('a', { href: agentHref(c.agentId) }, c.agentId)] : null))) : null)),
    h('h2', {}, 'Its events'),
    eventsTable(h('tbody', {}, s.events.slice().reverse().map(eventRow))));
  if (s.outcome === 'running') {
    // Look again until it ends.
    const timer = setTimeout(() => { if (!v.signal.aborted) render(); }, STORY_RECHECK_MS);
    v.signal.addEventListener('abort', () => clearTimeout(timer));
  }
}
