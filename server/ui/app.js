// toolhost web UI: the helpers, the router, groups, the event stream and
// pending approvals (the overview is in overview.js, the roles views in
// roles.js, the agents views in agents.js, the events views in events.js).
// Plain JavaScript over the server's JSON API; no external resource. The
// bearer token, from the address's #token= fragment or asked for once, is
// kept in sessionStorage for the tab and sent on every request.
'use strict';

const TOKEN_KEY = 'toolhost.token';
const TOOL_SEARCH = 'tool_search'; // the group that finds and loads deferred tools

// ---- small DOM helpers ----------------------------------------------------

// h builds an element: h('a', {href: '#'}, 'text', child, ...). Attributes
// starting with "on" are listeners; class, hidden, disabled, checked and
// value are set as properties; null and false children are skipped.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (['hidden', 'disabled', 'checked', 'value', 'open'].includes(k)) el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// fill replaces el's children (skipping null and false, flattening arrays).
function fill(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

function $(sel, root) { return (root || document).querySelector(sel); }
function $$(sel, root) { return Array.from((root || document).querySelectorAll(sel)); }
function fmt(n) { return typeof n === 'number' ? n.toLocaleString('en-US') : '–'; }

// skippedItems lists a group's tools that it does not offer (another group
// serves the name, or the group is blocked), each with why.
function skippedItems(skipped) {
  return skipped.map((s) => h('li', { class: 'skipped' }, h('code', {}, s.name), h('span', { class: 'muted' }, ` (skipped: ${s.reason})`)));
}

function when(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}
function pretty(raw) {
  if (raw === undefined || raw === null) return '';
  try { return JSON.stringify(typeof raw === 'string' ? JSON.parse(raw) : raw, null, 2); } catch (_) { return String(raw); }
}
function roleHref(name) { return '#/roles/' + encodeURIComponent(name); }

// ---- API ------------------------------------------------------------------

class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

function authHeaders(extra) {
  const hd = Object.assign({}, extra);
  const t = token();
  if (t) hd.Authorization = 'Bearer ' + t;
  return hd;
}

// request fetches path with the token; on 401 it asks for a token and tries
// again. It returns the Response of any other status.
async function request(path, opts) {
  for (;;) {
    const o = Object.assign({}, opts);
    o.headers = authHeaders(o.headers);
    const resp = await fetch(path, o);
    if (resp.status !== 401) return resp;
    let msg = 'This server requires a bearer token.';
    try { msg = (await resp.json()).error.message || msg; } catch (_) { /* keep msg */ }
    await askToken(token() ? 'The token was refused: ' + msg : '');
  }
}

// api sends a JSON request and answers the decoded body (null for 204), or
// throws an APIError carrying the server's {"error": {code, message}}.
async function api(method, path, body, signal) {
  return (await apiResponse(method, path, body, signal)).data;
}

// apiPage GETs a page of a paged list (GET /api/agents): its items, and the
// path of the next page that its Link header names (null after the last).
async function apiPage(path, signal) {
  const { data, resp } = await apiResponse('GET', path, undefined, signal);
  const next = /<([^>]+)>;\s*rel="next"/.exec(resp.headers.get('Link') || '');
  return { items: data || [], next: next ? next[1] : null };
}

// apiResponse is api's request: the decoded body (null for 204) and the
// response, whose headers a caller may read.
async function apiResponse(method, path, body, signal) {
  const opts = { method, signal, headers: {} };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const resp = await request(path, opts);
  if (resp.status === 204) return { data: null, resp };
  let data = null;
  try { data = await resp.json(); } catch (_) { /* not JSON */ }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    throw new APIError(resp.status, e.code || 'http_' + resp.status, e.message || resp.status + ' ' + resp.statusText);
  }
  return { data, resp };
}

// ---- the token form -------------------------------------------------------

let pendingToken = null; // one prompt answers every request waiting on it

function askToken(message) {
  if (pendingToken) return pendingToken.promise;
  let resolve;
  const promise = new Promise((r) => { resolve = r; });
  pendingToken = { promise, resolve };
  const err = $('#auth-error');
  err.textContent = message || '';
  err.hidden = !message;
  $('#auth').hidden = false;
  const input = $('#auth-token');
  input.value = '';
  input.focus();
  return promise;
}

function setupAuth() {
  $('#auth-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('#auth-token').value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    $('#auth').hidden = true;
    $('#forget-token').hidden = false;
    const p = pendingToken;
    pendingToken = null;
    if (p) p.resolve();
  });
  const forget = $('#forget-token');
  forget.hidden = !token();
  forget.addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    forget.hidden = true;
    render();
  });
}

// ---- router ---------------------------------------------------------------

let view = null; // {abort: AbortController} of the page shown

function route() {
  const hash = location.hash.replace(/^#\/?/, '').split('?')[0]; // a view's own parameters follow "?"
  const parts = hash.split('/').map((p) => { try { return decodeURIComponent(p); } catch (_) { return p; } });
  switch (parts[0]) {
    case 'overview': return ['overview', overviewPage];
    case 'roles': return parts[1] ? ['role', (main, v) => rolePage(main, v, parts[1])] : ['roles', rolesPage];
    case 'new-role': return ['new-role', newRolePage];
    case 'agents': return parts[1] ? ['agent', (main, v) => agentPage(main, v, parts[1])] : ['agents', agentsPage];
    case 'groups': return ['groups', groupsPage];
    case 'events': return parts[1] === 'calls' && parts[2] ? ['call', (main, v) => callPage(main, v, parts[2])] : ['events', eventsPage];
    case 'approvals': return ['approvals', approvalsPage];
    default: return ['overview', overviewPage];
  }
}

function render() {
  if (view) view.abort.abort();
  const [name, page] = route();
  const nav = { role: 'roles', 'new-role': 'roles', agent: 'agents', call: 'events' }[name] || name;
  for (const a of $$('nav a')) a.classList.toggle('active', a.dataset.nav === nav);
  const main = $('#main');
  fill(main, h('p', { class: 'muted' }, 'Loading…'));
  main.dataset.view = name;
  delete main.dataset.ready;
  const v = { abort: new AbortController() };
  view = v;
  v.signal = v.abort.signal;
  page(main, v).then(() => {
    if (view === v) main.dataset.ready = name;
  }).catch((e) => {
    if (v.signal.aborted || e.name === 'AbortError') return;
    fill(main, h('h1', {}, 'Error'), errorBox(e));
    main.dataset.ready = name;
  });
}

function errorText(e) { return e instanceof APIError ? `${e.message} (${e.code})` : String(e.message || e); }

function errorBox(e, id) {
  return h('div', { class: 'error', id: id || null, role: 'alert' }, errorText(e));
}

// showError shows e in el (an .error box), or hides el when e is null.
function showError(el, e) {
  el.textContent = e ? errorText(e) : '';
  el.hidden = !e;
}

// ---- Groups ---------------------------------------------------------------

async function groupsPage(main, v) {
  const [groups, plugins, diags] = await Promise.all([
    api('GET', '/api/groups', undefined, v.signal),
    api('GET', '/api/plugins', undefined, v.signal),
    api('GET', '/api/diagnostics', undefined, v.signal),
  ]);
  const registered = new Set(groups.map((g) => g.source && g.source.name));
  const down = plugins.filter((p) => p.state !== 'running' || p.lastError || !registered.has(p.name));
  const sorted = groups.slice().sort((a, b) => a.id.localeCompare(b.id));
  fill(main,
    h('h1', {}, 'Groups'),
    h('table', { id: 'groups', class: 'table' },
      h('thead', {}, h('tr', {}, ['Group', 'Source', 'State', 'PID', 'Restarts', 'Tools'].map((c) => h('th', {}, c)))),
      h('tbody', {}, sorted.map((g) => {
        const s = g.source || {};
        return h('tr', { 'data-group': g.id },
          h('td', {}, h('strong', {}, g.id), g.reserved ? h('span', { class: 'badge' }, 'reserved') : null,
            g.blocked ? h('span', { class: 'badge warn' }, 'blocked') : null,
            h('div', { class: 'muted small' }, g.description || '')),
          h('td', {}, `${s.kind || ''} ${s.name || ''}`),
          h('td', {}, h('span', { class: 'state ' + (s.state || '') }, s.state || '')),
          h('td', {}, s.pid || '–'),
          h('td', {}, s.restarts || 0),
          h('td', {}, h('details', {}, h('summary', {}, String(g.toolCount) + ((g.skipped || []).length ? ` (${g.skipped.length} skipped)` : '')),
            h('ul', { class: 'plain' }, (g.tools || []).map((t) => h('li', {}, h('code', {}, t))), skippedItems(g.skipped || [])))));
      }))),
    h('h2', {}, 'Plugins not running'),
    down.length === 0 ? h('p', { class: 'muted', id: 'plugins-down' }, 'Every configured plugin is running.') :
      h('table', { id: 'plugins-down', class: 'table' },
        h('thead', {}, h('tr', {}, ['Plugin', 'Kind', 'State', 'Restarts', 'Last error'].map((c) => h('th', {}, c)))),
        h('tbody', {}, down.map((p) => h('tr', {},
          h('td', {}, h('strong', {}, p.name), h('div', { class: 'muted small' }, p.path || '')),
          h('td', {}, p.kind || ''),
          h('td', {}, h('span', { class: 'state ' + (p.state || '') }, p.state || '')),
          h('td', {}, p.restarts || 0),
          // A module that exited while starting: its stderr's last lines
          // and a hint follow the error's first line, as text.
          h('td', { class: 'error-text' }, (p.lastError || '').split('\n')[0], p.errorCode ? h('span', { class: 'badge warn' }, p.errorCode) : null,
            (p.lastError || '').includes('\n') ? h('pre', { class: 'last-error' }, p.lastError.slice(p.lastError.indexOf('\n') + 1)) : null))))),
    h('h2', {}, 'Diagnostics'),
    diags.length === 0 ? h('p', { class: 'muted', id: 'diagnostics' }, 'No conflicts or warnings.') :
      h('table', { id: 'diagnostics', class: 'table' },
        h('thead', {}, h('tr', {}, ['Level', 'Source', 'Group', 'Message'].map((c) => h('th', {}, c)))),
        h('tbody', {}, diags.map((d) => h('tr', {},
          h('td', {}, h('span', { class: 'badge ' + (d.level === 'error' ? 'bad' : 'warn') }, d.level)),
          h('td', {}, d.plugin || ''), h('td', {}, d.group || ''), h('td', {}, d.message || ''))))));
}

// follow reads the event stream with fetch (so that the token can be
// sent), reconnecting after an error until signal aborts. o.query() gives
// the stream's query parameters at each connection; o.onEvent receives each
// event, o.onOpen (optional) runs at each connection, and o.status (a
// span) says whether the stream is live.
async function follow(signal, o) {
  while (!signal.aborted) {
    try {
      const resp = await request('/api/events/stream?' + o.query().toString(), { signal, headers: { Accept: 'text/event-stream' } });
      if (!resp.ok) {
        let msg = resp.status + ' ' + resp.statusText;
        try { msg = (await resp.json()).error.message; } catch (_) { /* keep msg */ }
        throw new Error(msg);
      }
      o.status.textContent = 'live';
      o.status.className = 'status ok';
      if (o.onOpen) o.onOpen();
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true }).replace(/\r\n/g, '\n');
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
          if (!data) continue;
          let e;
          try { e = JSON.parse(data); } catch (_) { continue; /* skip a malformed event */ }
          o.onEvent(e);
        }
      }
      throw new Error('stream ended');
    } catch (e) {
      if (signal.aborted) return;
      o.status.textContent = 'reconnecting… (' + (e.message || e) + ')';
      o.status.className = 'status dirty';
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

// ---- Approvals ------------------------------------------------------------

async function approvalsPage(main, v) {
  const list = h('div', { id: 'approvals', class: 'approvals' });
  const empty = h('p', { class: 'muted', id: 'no-approvals' }, 'No call is waiting for approval.');
  const errorEl = h('div', { id: 'error', class: 'error', role: 'alert', hidden: true });
  fill(main, h('h1', {}, 'Approvals'),
    h('p', { class: 'muted' }, 'Calls to tools that need approval wait here until approved, denied or run with other arguments.'),
    errorEl, empty, list);
  const cards = new Map();

  async function decide(id, body, card) {
    errorEl.hidden = true;
    for (const b of $$('button', card)) b.disabled = true;
    try {
      await api('POST', '/api/approvals/' + encodeURIComponent(id), body, v.signal);
      card.remove();
      cards.delete(id);
      empty.hidden = cards.size !== 0;
    } catch (e) {
      if (v.signal.aborted) return;
      errorEl.textContent = e.message;
      errorEl.hidden = false;
      for (const b of $$('button', card)) b.disabled = false;
    }
  }

  function card(a) {
    const reason = h('input', { type: 'text', class: 'reason', 'data-id': a.id, placeholder: 'reason (for deny)' });
    const args = h('textarea', { class: 'arguments', 'data-id': a.id, rows: 6, spellcheck: 'false' }, pretty(a.arguments));
    const el = h('div', { class: 'card approval', 'data-id': a.id },
      h('div', { class: 'approval-head' },
        h('code', { class: 'tool' }, a.tool), a.group ? h('span', { class: 'badge' }, a.group) : null,
        h('span', { class: 'muted small' }, a.agentId ? 'agent ' + a.agentId : '', a.role ? ' role ' + a.role : '', a.callId ? ' · call ' + a.callId : '')),
      h('div', { class: 'muted small' }, 'requested ', when(a.requested), a.expires ? ' · expires ' + when(a.expires) : ''),
      h('pre', { class: 'args' }, pretty(a.arguments)),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'approve primary', 'data-id': a.id, onclick: () => decide(a.id, { decision: 'approve' }, el) }, 'Approve'),
        reason,
        h('button', { type: 'button', class: 'deny danger', 'data-id': a.id, onclick: () => decide(a.id, { decision: 'deny', reason: reason.value.trim() || undefined }, el) }, 'Deny')),
      h('details', { class: 'modify-box' }, h('summary', {}, 'Modify arguments'),
        args,
        h('button', {
          type: 'button', class: 'modify', 'data-id': a.id, onclick: () => {
            let parsed;
            try { parsed = JSON.parse(args.value); } catch (e) {
              errorEl.textContent = 'Arguments are not valid JSON: ' + e.message;
              errorEl.hidden = false;
              return;
            }
            decide(a.id, { decision: 'modify', arguments: parsed }, el);
          },
        }, 'Run with these arguments')));
    return el;
  }

  async function poll() {
    const pending = await api('GET', '/api/approvals', undefined, v.signal);
    const ids = new Set(pending.map((a) => a.id));
    for (const [id, el] of cards) if (!ids.has(id)) { el.remove(); cards.delete(id); }
    for (const a of pending) {
      if (cards.has(a.id)) continue;
      const el = card(a);
      cards.set(a.id, el);
      list.append(el);
    }
    empty.hidden = cards.size !== 0;
  }

  await poll();
  (async () => {
    while (!v.signal.aborted) {
      await new Promise((r) => setTimeout(r, 1000));
      if (v.signal.aborted) return;
      try { await poll(); } catch (e) {
        if (v.signal.aborted) return;
        errorEl.textContent = 'Cannot list approvals: ' + e.message;
        errorEl.hidden = false;
      }
    }
  })();
}

// ---- start ----------------------------------------------------------------

// takeFragmentToken keeps a token passed in the address's fragment
// (#token=…, as `toolhost token -url` prints it) for the tab, and strips it
// from the address bar and the history entry.
function takeFragmentToken() {
  const m = /^#token=([^&]+)/.exec(location.hash);
  if (!m) return;
  let t = m[1];
  try { t = decodeURIComponent(t); } catch (_) { /* keep it as it is */ }
  sessionStorage.setItem(TOKEN_KEY, t);
  $('#forget-token').hidden = false;
  history.replaceState(null, '', location.pathname + location.search + '#/overview');
}

function start() {
  takeFragmentToken();
  setupAuth();
  window.addEventListener('hashchange', () => { takeFragmentToken(); render(); });
  if (!location.hash) history.replaceState(null, '', '#/overview');
  render();
}

document.addEventListener('DOMContentLoaded', start);
