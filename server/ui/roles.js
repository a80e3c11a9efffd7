// toolhost web UI, the Roles views: the list of roles, a role's page (its
// tool groups with their token cost, its access tokens, deleting it) and
// the page that makes a new role. Loaded after app.js, whose helpers (h,
// fill, api, …) it uses; app.js starts the page once every script is in.
'use strict';

// TOKEN_LIFETIMES are the lifetimes offered for a new access token, as the
// API's expires ("": until revoked).
const TOKEN_LIFETIMES = [['', 'never expires'], ['24h', 'expires in 1 day'], ['720h', 'expires in 30 days'], ['2160h', 'expires in 90 days']];

// createdRole names the role the page just made, so that its page, opened
// next, confirms it.
let createdRole = null;

// ROLE_FIELDS are the fields of the role form, by the name an API error
// starts with ("name: …", "toolGroups: …").
const ROLE_FIELDS = { name: '#role-name', description: '#role-description', prompt: '#role-prompt', toolGroups: '#group-list', deferredGroups: '#group-list', rules: '#rule-list', limits: '#limit-list', code: '#code-bounds' };

// groupChips shows a role's tool groups (null: all groups), marking those
// in deferred, whose tools its agents load on demand.
function groupChips(groups, deferred) {
  const lazy = deferred || [];
  const chip = (g) => lazy.includes(g)
    ? h('span', { class: 'chip deferred', title: 'loaded on demand (find_tools, load_tools)' }, g, ' (on demand)')
    : h('span', { class: 'chip' }, g);
  if (groups === null || groups === undefined) return [h('span', { class: 'chip all' }, 'all groups'), lazy.map(chip)];
  if (groups.length === 0) return h('span', { class: 'muted' }, 'none');
  return groups.map(chip);
}

// readsOnlyChip marks a role whose tool policy keeps only its read-only
// tools: a policy on what its agents may call, not whether the role can be
// edited (lockBadge).
function readsOnlyChip() {
  return h('span', { class: 'chip reads-only', title: 'tool policy: only the tools marked read-only (readOnlyHint)' }, 'policy: reads only');
}

// sourceBadge says where a role comes from: built in (root), the config
// file (with its file and line) or the store (made at run time).
function sourceBadge(r) {
  if (r.builtIn) return h('span', { class: 'badge', title: r.readOnlyReason || '' }, 'built in');
  const at = r.declaredIn ? declaredAt(r.declaredIn) : '';
  return h('span', { class: 'badge', title: at ? 'declared in ' + at : null }, r.source || '');
}

// lockBadge says that a role cannot be edited in this page, and where it
// is changed instead: a config role's file ("from config.hcl, edit the
// file"). Root, built in, says so with its source badge alone. It is worded
// apart from the tool policy "reads only" (readsOnlyChip), which is about
// the role's tools.
function lockBadge(r) {
  if (!r.readOnly || r.builtIn) return null;
  const title = r.readOnlyReason || '';
  if (!r.declaredIn) return h('span', { class: 'badge locked', title }, 'not editable here');
  const file = r.declaredIn.file.split('/').pop();
  return h('span', { class: 'badge locked', title: 'declared in ' + declaredAt(r.declaredIn) + ': ' + title }, `from ${file}, edit the file`);
}

function declaredAt(d) { return d.line ? `${d.file}:${d.line}` : d.file; }

// savedSummary says what a role saved holds: its groups, those loaded on
// demand, its tool policy, its rules and limits, the script bounds it sets.
function savedSummary(r) {
  const n = (k, word) => `${k} ${word}${k === 1 ? '' : 's'}`;
  const parts = [r.toolGroups === null || r.toolGroups === undefined ? 'all tool groups'
    : r.toolGroups.length ? n(r.toolGroups.length, 'tool group') + ' (' + r.toolGroups.join(', ') + ')' : 'no tool group'];
  if ((r.deferredGroups || []).length) parts.push(r.deferredGroups.length + ' loaded on demand');
  if (r.readOnlyTools) parts.push('policy: reads only');
  parts.push(n((r.rules || []).length, 'rule'), n((r.limits || []).length, 'limit'));
  const own = Object.keys(r.code || {}).length;
  if (own) parts.push(n(own, 'script bound') + ' of its own');
  return parts.join(', ');
}

// askFirst makes button ask before it acts: a click puts, in its place, the
// question with a button that runs action and one that cancels.
function askFirst(button, question, yes, action) {
  button.addEventListener('click', () => {
    const box = h('span', { class: 'confirm', role: 'alertdialog' }, question,
      h('button', { type: 'button', class: 'danger confirm-yes', onclick: () => { box.remove(); button.hidden = false; action(); } }, yes),
      h('button', { type: 'button', class: 'confirm-no', onclick: () => { box.remove(); button.hidden = false; button.focus(); } }, 'Cancel'));
    button.hidden = true;
    button.after(box);
    box.querySelector('.confirm-no').focus();
  });
  return button;
}

async function rolesPage(main, v) {
  const roles = await api('GET', '/api/roles', undefined, v.signal);
  const rows = roles.map((r) => h('tr', { 'data-role': r.name },
    h('td', {}, h('a', { href: roleHref(r.name), class: 'role-link' }, r.name)),
    h('td', {}, sourceBadge(r), lockBadge(r)),
    h('td', { class: 'groups' }, groupChips(r.toolGroups, r.deferredGroups), r.readOnlyTools ? readsOnlyChip() : null),
    h('td', {}, r.description || h('span', { class: 'muted' }, '—'))));
  fill(main,
    h('div', { class: 'page-head' }, h('h1', {}, 'Roles'), h('a', { href: '#/new-role', id: 'new-role', class: 'button primary' }, 'New role')),
    h('p', { class: 'muted' }, 'A role without tool groups sees every group. Click a role to choose its groups or make its tokens.'),
    h('table', { id: 'roles', class: 'table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Name'), h('th', {}, 'Source'), h('th', {}, 'Tool groups'), h('th', {}, 'Description'))),
      h('tbody', {}, rows)));
}

// ---- Role page ------------------------------------------------------------

async function rolePage(main, v, name) {
  const [role, groups] = await Promise.all([
    api('GET', '/api/roles/' + encodeURIComponent(name), undefined, v.signal),
    api('GET', '/api/groups', undefined, v.signal),
  ]);
  await roleEditor(main, v, role, groups);
}

// newRolePage is the role editor for a role not made yet: its name,
// description and prompt above the same groups and cost; Create role makes
// it and opens its page.
async function newRolePage(main, v) {
  const groups = await api('GET', '/api/groups', undefined, v.signal);
  await roleEditor(main, v, null, groups);
}

// readOnlyNotice says why a role cannot be edited here and how to change
// it: a config role's file and line, and that the file is read at start.
function readOnlyNotice(role) {
  if (!role.declaredIn) {
    const why = role.readOnlyReason || 'this role cannot be edited';
    return h('div', { id: 'readonly-reason', class: 'notice ro' }, why.charAt(0).toUpperCase() + why.slice(1) + '.');
  }
  return h('div', { id: 'readonly-reason', class: 'notice ro' },
    'This role comes from the config file: ', h('code', { id: 'declared-in' }, declaredAt(role.declaredIn)), '. ',
    'To change it, edit its role block there and restart ', h('code', {}, 'toolhost serve'),
    ': the host reads the file at start only, and then makes the stored role match it. ',
    'Its tokens are made below all the same. A role made here (Roles, New role) can be edited here.');
}

// roleEditor shows the role's tool groups as boxes with the token cost of
// the selection, Save and, below, its access tokens and Delete; role null
// is a new role, made by Create role.
async function roleEditor(main, v, role, groups) {
  const draft = role === null;
  if (draft) role = { name: '', description: '', prompt: '', toolGroups: [], deferredGroups: [], readOnlyTools: false };
  const known = new Set(groups.map((g) => g.id));
  // Groups the role names that are not registered now stay visible, so
  // that they can be unticked.
  const missing = (role.toolGroups || []).filter((id) => !known.has(id));
  let saved = role.toolGroups;
  let savedDeferred = role.deferredGroups || [];
  let savedReadsOnly = !!role.readOnlyTools;

  const selected = () => $$('input.group', main).filter((c) => c.checked).map((c) => c.dataset.group);
  // A group is the role's when it is ticked, or when none is (every group).
  const ofRole = (id, sel) => sel.length === 0 || sel.includes(id);
  const selectedDeferred = () => {
    const sel = selected();
    return $$('input.defer', main).filter((c) => c.checked && ofRole(c.dataset.group, sel)).map((c) => c.dataset.group);
  };
  const ro = !!role.readOnly;

  const groupCard = (g, isMissing) => {
    const checked = (saved || []).includes(g.id);
    const tools = g.tools || [];
    const skipped = g.skipped || [];
    return h('li', { class: 'group-card' + (isMissing ? ' missing' : '') + (g.blocked ? ' blocked' : ''), 'data-group': g.id },
      h('label', { class: 'group-head' },
        h('input', { type: 'checkbox', class: 'group', 'data-group': g.id, checked, disabled: ro, onchange: changed }),
        h('span', { class: 'group-id' }, g.id),
        isMissing ? h('span', { class: 'badge warn' }, 'not registered') : h('span', { class: 'badge' }, (g.source && g.source.kind) || ''),
        g.blocked ? h('span', { class: 'badge warn' }, 'blocked') : null,
        h('span', { class: 'tool-count' }, isMissing ? '' : `${tools.length} tool${tools.length === 1 ? '' : 's'}` + (skipped.length ? `, ${skipped.length} skipped` : ''))),
      // tool_search is how deferred tools are found: it cannot be deferred.
      g.id === TOOL_SEARCH ? null : h('label', { class: 'group-defer', 'data-group': g.id, title: 'Its tools are the role\'s, but an agent carries their definitions only once it loads them (find_tools, load_tools).' },
        h('input', { type: 'checkbox', class: 'defer', 'data-group': g.id, checked: savedDeferred.includes(g.id), disabled: ro, onchange: changed }),
        'load on demand'),
      h('div', { class: 'group-desc' }, isMissing ? 'This group is not registered now (a plugin not running?). The API refuses unknown groups.' : (g.description || '')),
      tools.length || skipped.length ? h('details', { class: 'tools' },
        h('summary', {}, 'Tools'),
        h('ul', {}, tools.map((t) => h('li', { 'data-tool': t }, h('code', {}, t))), skippedItems(skipped))) : null);
  };

  const current = h('div', { id: 'current-groups', class: 'groups' });
  const showCurrent = () => fill(current, 'Saved tool groups: ', groupChips(saved, savedDeferred), savedReadsOnly ? readsOnlyChip() : null);
  // A role that reads only keeps, of its groups' tools, those marked
  // read-only (readOnlyTools).
  const readsOnly = h('input', { type: 'checkbox', id: 'reads-only', checked: savedReadsOnly, disabled: ro, onchange: changed });
  const readsOnlyBox = h('label', { class: 'reads-only-toggle', title: 'Of its groups\' tools the role keeps those that say they change nothing (MCP\'s readOnlyHint); the others are neither listed nor callable.' },
    readsOnly, h('span', {}, h('strong', {}, 'Tool policy: reads only'), ' — its agents get only the tools marked read-only'));
  // showDefer offers "load on demand" for the role's groups only.
  const showDefer = () => {
    const sel = selected();
    for (const el of $$('label.group-defer', main)) el.hidden = !ofRole(el.dataset.group, sel);
  };

  const tokensEl = h('span', { id: 'tokens', class: 'big' }, '…');
  const toolsEl = h('span', { id: 'tools-count' }, '');
  const allEl = h('span', { id: 'all-tokens' }, '');
  const eagerEl = h('span', { id: 'eager-tokens' }, '');
  const eagerBox = h('div', { id: 'eager', class: 'eager', hidden: true }, 'An agent starts with ', eagerEl);
  const bar = h('div', { class: 'bar-fill' });
  const tokenErr = h('div', { id: 'tokens-error', class: 'error', hidden: true });
  const notice = h('div', { id: 'all-groups-notice', class: 'notice', hidden: true },
    draft ? 'No group is ticked: the role will see ALL groups.' : 'No group is ticked: the role will see ALL groups (the tool groups are cleared).');
  const errorEl = h('div', { id: 'error', class: 'error', role: 'alert', hidden: true });
  const status = h('span', { id: 'status', class: 'status' });
  // savedNotice confirms a save (or the role's creation) with what the
  // role now holds, until the next change.
  const savedNotice = h('div', { id: 'saved-notice', class: 'notice ok', role: 'status', hidden: true });
  const confirmSaved = (what, r) => {
    savedNotice.textContent = `${what} at ${new Date().toLocaleTimeString()}: ${savedSummary(r)}.`;
    savedNotice.hidden = false;
  };
  const save = h('button', { id: 'save', type: 'button', class: 'primary', disabled: ro, onclick: doSave }, draft ? 'Create role' : 'Save');

  let seq = 0;
  async function updateTokens() {
    const sel = selected().filter((id) => known.has(id));
    const mine = ++seq;
    tokensEl.dataset.state = 'loading';
    try {
      const t = await api('GET', '/api/tokens?groups=' + encodeURIComponent(sel.join(',')), undefined, v.signal);
      if (mine !== seq) return;
      tokensEl.textContent = fmt(t.tokens) + ' tokens';
      tokensEl.dataset.tokens = t.tokens;
      toolsEl.textContent = `${fmt(t.tools)} tool${t.tools === 1 ? '' : 's'}`;
      allEl.textContent = `${fmt(t.allTokens)} tokens (${fmt(t.allTools)} tools)`;
      bar.style.width = (t.allTokens ? Math.min(100, (100 * t.tokens) / t.allTokens) : 0) + '%';
      tokenErr.hidden = true;
      tokensEl.dataset.state = 'ready';
    } catch (e) {
      if (mine !== seq || v.signal.aborted) return;
      tokenErr.textContent = 'Token cost unavailable: ' + e.message;
      tokenErr.hidden = false;
      tokensEl.dataset.state = 'error';
    }
  }

  // updateEager shows what an agent of the saved role starts with when it
  // defers groups (the definitions of the others, and tool_search's) or
  // reads only (its read-only tools).
  async function updateEager() {
    if (draft) return;
    try {
      const t = await api('GET', '/api/roles/' + encodeURIComponent(role.name) + '/tools', undefined, v.signal);
      const lazy = (t.deferred || []).length;
      const all = (t.tools || []).length;
      const count = (k, word) => `${fmt(k)} ${word}${k === 1 ? '' : 's'}`;
      eagerEl.textContent = lazy === 0
        ? `${count(all, 'tool')}, ${count(t.eagerTokens, 'token')} (as saved: reads only)`
        : `${count(t.eagerTokens, 'token')}: ${fmt(all - lazy)} of ${count(all, 'tool')}, ${fmt(lazy)} on demand (as saved)`;
      eagerEl.dataset.tokens = t.eagerTokens;
      eagerBox.hidden = lazy === 0 && !savedReadsOnly;
      markDenied(main, t, rulesEd.saved().rules);
    } catch (e) {
      if (v.signal.aborted) return;
      eagerBox.hidden = true;
    }
  }

  const sameSet = (a, b) => a.slice().sort().join(',') === b.slice().sort().join(',');
  function dirty() {
    return !sameSet(selected(), saved || []) || !sameSet(selectedDeferred(), savedDeferred) || readsOnly.checked !== savedReadsOnly ||
      rulesEd.dirty() || (codeEd !== null && codeEd.dirty());
  }

  function changed() {
    showDefer();
    if (codeEd) codeEd.groupsChanged(selected());
    notice.hidden = selected().length !== 0;
    showDirty();
    updateTokens();
  }

  function showDirty() {
    if (dirty()) savedNotice.hidden = true;
    status.textContent = !draft && dirty() ? 'Unsaved changes' : '';
    status.className = 'status' + (!draft && dirty() ? ' dirty' : '');
  }

  // The role's rules and limits, saved with the rest.
  const rulesEd = rulesEditor(role, ro, showDirty);
  // Its script bounds, saved with the rest; set once the role is made.
  const codeEd = draft ? null : codeEditor(role, ro, showDirty);

  // The new role's name, description and prompt.
  const nameIn = h('input', { type: 'text', id: 'role-name', name: 'name', required: true, autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. reviewer' });
  const descIn = h('input', { type: 'text', id: 'role-description', name: 'description', placeholder: 'what its agents are for' });
  const promptIn = h('textarea', { id: 'role-prompt', name: 'prompt', rows: 3, placeholder: 'its agents\' system prompt (optional)' });

  // showSaveError shows e, and marks the field it names ("name: …"), or
  // the rule's or limit's (`rules[1] "x": when: …`), the error under it.
  function showSaveError(e) {
    errorEl.textContent = e instanceof APIError ? e.message : String(e.message || e);
    errorEl.hidden = false;
    if (rulesEd.showError(e.message || '') || (codeEd && codeEd.showError(e.message || ''))) return;
    const m = /^(\w+): /.exec(e.message || '');
    const field = m && ROLE_FIELDS[m[1]] && $(ROLE_FIELDS[m[1]], main);
    if (field) {
      field.setAttribute('aria-invalid', 'true');
      if (field.tagName === 'INPUT') field.focus();
    }
  }

  async function doSave() {
    const sel = selected();
    // deferredGroups goes along always: a group unticked leaves it too.
    const body = Object.assign({ toolGroups: sel.length ? sel : null, deferredGroups: selectedDeferred(), readOnlyTools: readsOnly.checked }, rulesEd.value());
    errorEl.hidden = true;
    for (const el of $$('[aria-invalid]', main)) el.removeAttribute('aria-invalid');
    rulesEd.clearErrors();
    if (codeEd) codeEd.clearErrors();
    save.disabled = true;
    status.textContent = draft ? 'Creating…' : 'Saving…';
    status.className = 'status';
    try {
      if (draft) {
        Object.assign(body, { name: nameIn.value.trim(), description: descIn.value.trim(), prompt: promptIn.value.trim() });
        const r = await api('POST', '/api/roles', body, v.signal);
        createdRole = r.name;
        location.hash = roleHref(r.name);
        return;
      }
      body.code = codeEd.value();
      const r = await api('PUT', '/api/roles/' + encodeURIComponent(role.name), body, v.signal);
      saved = r.toolGroups;
      savedDeferred = r.deferredGroups || [];
      savedReadsOnly = !!r.readOnlyTools;
      rulesEd.reset(r);
      codeEd.reset(r);
      showCurrent();
      updateEager();
      status.textContent = 'Saved';
      status.className = 'status ok';
      confirmSaved('Role ' + r.name + ' saved', r);
    } catch (e) {
      if (v.signal.aborted) return;
      showSaveError(e);
      status.textContent = draft ? 'Not created' : 'Not saved';
      status.className = 'status dirty';
    } finally {
      save.disabled = ro;
    }
  }

  showCurrent();
  const ordered = groups.slice().sort((a, b) => a.id.localeCompare(b.id));
  const tokens = draft ? { el: null, loaded: null } : accessTokens(v, role);
  const info = draft
    ? h('section', { class: 'role-info role-form' },
      h('label', { class: 'field' }, h('h3', {}, 'Name'), nameIn,
        h('span', { class: 'muted small' }, 'A letter or digit, then up to 63 letters, digits, _ . or -. Its MCP endpoint is /mcp/NAME.')),
      h('label', { class: 'field' }, h('h3', {}, 'Description'), descIn),
      h('label', { class: 'field' }, h('h3', {}, 'Prompt'), promptIn),
      readsOnlyBox)
    : h('section', { class: 'role-info' },
      h('div', {}, h('h3', {}, 'Description'), h('p', { id: 'description' }, role.description || h('span', { class: 'muted' }, 'No description.'))),
      role.prompt ? h('details', { class: 'prompt' }, h('summary', {}, 'Prompt'), h('pre', { id: 'prompt' }, role.prompt)) : null,
      current,
      (role.allow && role.allow.length) || (role.deny && role.deny.length)
        ? h('div', { class: 'muted' }, role.allow && role.allow.length ? ['Allow: ', role.allow.join(', '), '. '] : null,
          role.deny && role.deny.length ? ['Deny: ', role.deny.join(', '), '.'] : null) : null,
      readsOnlyBox);
  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/roles' }, 'Roles'), ' / ', draft ? 'New role' : role.name),
    draft ? h('h1', {}, 'New role')
      : h('h1', {}, role.name, ' ', sourceBadge(role), lockBadge(role)),
    ro ? readOnlyNotice(role) : null,
    info,
    h('div', { class: 'role-layout' },
      h('section', {},
        h('h2', {}, 'Tool groups'),
        h('ul', { id: 'group-list', class: 'group-list' },
          ordered.map((g) => groupCard(g, false)),
          missing.map((id) => groupCard({ id, tools: [] }, true))),
        rulesEd.els,
        codeEd ? codeEd.el : null),
      h('aside', { class: 'card cost' },
        h('h3', {}, 'Token cost of the selection'),
        h('div', {}, tokensEl),
        h('div', { class: 'muted' }, toolsEl),
        h('div', { class: 'bar' }, bar),
        h('div', { class: 'muted' }, 'All tools: ', allEl),
        eagerBox,
        h('p', { class: 'muted small' }, 'The cost of the tool definitions an agent of this role is sent, under the global policy. ' +
          'A group loaded on demand costs nothing until an agent loads its tools.'),
        h('div', { class: 'actions' }, save, status),
        savedNotice,
        notice,
        errorEl,
        tokenErr)),
    tokens.el,
    draft ? null : mcpClientSection(role),
    draft || ro ? null : deleteSection(v, role));
  notice.hidden = selected().length !== 0;
  showDefer();
  if (draft) nameIn.focus();
  if (!draft && createdRole === role.name) confirmSaved('Role ' + role.name + ' created', role);
  createdRole = null;
  await Promise.all([updateTokens(), updateEager(), tokens.loaded]);
}

// ---- A role's access tokens -----------------------------------------------

// accessTokens is the role page's section on the bearer tokens that open
// the role: a list with Revoke, and a form that makes one, whose secret is
// shown once (the server keeps only its hash; the page keeps it nowhere but
// in this view, until Done or leaving the page). It returns the section and
// a promise of its first listing.
function accessTokens(v, role) {
  const body = h('tbody', {});
  const none = h('p', { id: 'no-access-tokens', class: 'muted', hidden: true }, 'No token opens this role.');
  const table = h('table', { id: 'access-tokens', class: 'table', hidden: true },
    h('thead', {}, h('tr', {}, ['Token', 'Made', 'Last used', 'Expires', ''].map((c) => h('th', {}, c)))), body);
  const errorEl = h('div', { id: 'access-tokens-error', class: 'error', role: 'alert', hidden: true });
  const nameIn = h('input', { type: 'text', id: 'token-name', name: 'token-name', autocomplete: 'off', spellcheck: 'false', placeholder: 'name (optional), e.g. cursor' });
  const expires = h('select', { id: 'token-expires', name: 'expires' }, TOKEN_LIFETIMES.map(([val, label]) => h('option', { value: val }, label)));
  const make = h('button', { type: 'submit', id: 'make-token', class: 'primary' }, 'Make token');
  const shown = h('div', { id: 'new-token', class: 'card new-token', hidden: true });

  async function load() {
    const all = await api('GET', '/api/auth/tokens', undefined, v.signal);
    const mine = all.filter((t) => t.scope === 'role' && t.roleId === role.id);
    fill(body, mine.map((t) => h('tr', { 'data-token': t.name },
      h('td', {}, h('code', {}, t.name)),
      h('td', { class: 'nowrap' }, when(t.createdAt)),
      h('td', { class: 'nowrap' }, t.lastUsedAt ? when(t.lastUsedAt) : h('span', { class: 'muted' }, 'never')),
      h('td', { class: 'nowrap' }, t.expiresAt ? when(t.expiresAt) : h('span', { class: 'muted' }, 'never')),
      h('td', {}, askFirst(h('button', { type: 'button', class: 'revoke danger', 'data-token': t.name }, 'Revoke'),
        `Revoke ${t.name}? Whatever uses it is refused from its next request. `, 'Revoke', () => revoke(t.name))))));
    table.hidden = mine.length === 0;
    none.hidden = mine.length !== 0;
  }

  // run does what (if any), then lists the tokens again; it shows an error
  // rather than throwing one.
  async function run(what) {
    showError(errorEl, null);
    try {
      if (what) await what();
      await load();
    } catch (e) {
      if (v.signal.aborted) return;
      showError(errorEl, e);
    }
  }

  const revoke = (name) => run(() => api('DELETE', '/api/auth/tokens/' + encodeURIComponent(name), undefined, v.signal));

  // showSecret shows a new token's secret with a Copy button, once.
  function showSecret(t) {
    const secret = h('input', { type: 'text', id: 'new-token-secret', readonly: true, autocomplete: 'off', spellcheck: 'false', value: t.token });
    const copied = h('span', { id: 'copy-status', class: 'status' });
    const copy = h('button', {
      type: 'button', id: 'copy-token', onclick: async () => {
        const ok = await copyText(secret);
        copied.textContent = ok ? 'Copied' : 'Select it and copy it by hand';
        copied.className = 'status' + (ok ? ' ok' : ' dirty');
      },
    }, 'Copy');
    const done = h('button', { type: 'button', id: 'new-token-done', onclick: () => { secret.value = ''; fill(shown); shown.hidden = true; } }, 'Done');
    const mcpURL = roleMCPURL(role);
    fill(shown,
      h('h3', {}, 'Token ', h('code', {}, t.name), ' for role ', role.name),
      h('p', { class: 'notice ro' }, 'Shown once: toolhost keeps only its hash. Copy it now; if it is lost, revoke it and make another.'),
      h('div', { class: 'actions secret' }, secret, copy, copied),
      h('p', { class: 'muted small' }, 'It opens ', h('code', {}, mcpURL), ' (send ', h('code', {}, 'Authorization: Bearer TOKEN'),
        '), and GET /api/roles/', role.name, ', its tools and POST /api/call as ', role.name, '; nothing else.',
        t.expiresAt ? ' It expires ' + when(t.expiresAt) + '.' : ''),
      h('div', { class: 'actions' }, done));
    shown.hidden = false;
    secret.select();
  }

  const form = h('form', { id: 'token-form', class: 'actions' }, nameIn, expires, make);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    make.disabled = true;
    const body = { role: role.name, name: nameIn.value.trim() || undefined, expires: expires.value || undefined };
    run(async () => {
      const t = await api('POST', '/api/auth/tokens', body, v.signal);
      nameIn.value = '';
      showSecret(t);
    }).finally(() => { make.disabled = false; });
  });

  const el = h('section', { id: 'role-tokens', class: 'role-tokens' },
    h('h2', {}, 'Access tokens'),
    h('p', { class: 'muted' }, 'A token opens this role\'s MCP endpoint and API routes, and nothing else. ',
      role.builtIn ? h('strong', {}, 'A root token can create roles and spawn agents of any role (org_management): give it only to what may do that.') : null),
    none, table, errorEl, form, shown);
  return { el, loaded: run() };
}

// roleMCPURL is the address of the role's MCP endpoint on this server.
function roleMCPURL(role) { return location.origin + '/mcp/' + encodeURIComponent(role.name); }

// mcpClientConfig is the JSON an MCP client's configuration takes to reach
// the role (the mcpServers object most clients read), its token written as
// secret: a placeholder, since the page does not know a token once made.
function mcpClientConfig(role, secret) {
  return JSON.stringify({
    mcpServers: { ['toolhost-' + role.name]: { type: 'http', url: roleMCPURL(role), headers: { Authorization: 'Bearer ' + secret } } },
  }, null, 2);
}

// mcpClientSection shows, on every role's page, how an MCP client reaches
// the role: its endpoint, and a configuration to paste with a token of the
// role in place of the placeholder.
function mcpClientSection(role) {
  const config = h('textarea', { id: 'mcp-config', class: 'mcp-config', readonly: true, rows: 10, spellcheck: 'false' });
  config.value = mcpClientConfig(role, '<TOKEN>');
  const copied = h('span', { id: 'mcp-config-status', class: 'status' });
  const copy = h('button', {
    type: 'button', id: 'copy-mcp-config', onclick: async () => {
      const ok = await copyText(config);
      copied.textContent = ok ? 'Copied' : 'Select it and copy it by hand';
      copied.className = 'status' + (ok ? ' ok' : ' dirty');
    },
  }, 'Copy');
  return h('section', { id: 'mcp-client', class: 'role-mcp' },
    h('h2', {}, 'Connect an MCP client'),
    h('p', {}, 'MCP endpoint (streamable HTTP): ', h('code', { id: 'mcp-url' }, roleMCPURL(role))),
    h('p', { class: 'muted' }, 'Put this in the client\'s MCP configuration, with a token of this role (Access tokens, above) in place of ',
      h('code', {}, '<TOKEN>'), ': a token is shown once, when it is made, and this page does not know it after.'),
    config,
    h('div', { class: 'actions' }, copy, copied));
}

// copyText copies the input's text to the clipboard, through the selection
// when the Clipboard API is refused; it reports whether it did.
async function copyText(input) {
  try {
    await navigator.clipboard.writeText(input.value);
    return true;
  } catch (_) {
    input.select();
    return document.execCommand('copy');
  }
}

// ---- Deleting a role ------------------------------------------------------

// deleteSection offers to delete an editable role, asking first; its agents
// and tokens go with it.
function deleteSection(v, role) {
  const errorEl = h('div', { id: 'delete-error', class: 'error', role: 'alert', hidden: true });
  const button = askFirst(h('button', { type: 'button', id: 'delete-role', class: 'danger' }, 'Delete role…'),
    `Delete role ${role.name}? Its agents and its tokens are deleted with it, and the tokens stop working at once. `,
    'Delete ' + role.name, async () => {
      showError(errorEl, null);
      try {
        await api('DELETE', '/api/roles/' + encodeURIComponent(role.name), undefined, v.signal);
        location.hash = '#/roles';
      } catch (e) {
        if (!v.signal.aborted) showError(errorEl, e);
      }
    });
  return h('section', { id: 'role-delete', class: 'role-delete' },
    h('h2', {}, 'Delete'),
    h('div', { class: 'actions' }, button),
    errorEl);
}
