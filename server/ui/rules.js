// toolhost web UI, a role's rules and limits on its page (roles.js): listed
// in order; read-only for a role that cannot be edited, with the line of the
// config file that declares each; otherwise edited in place (added,
// changed, moved, deleted) and saved with the role by its Save, a refused
// save's error shown at the field it names. Loaded after app.js, whose
// helpers (h, fill, $, $$) it uses.
'use strict';

// RULE_ACTIONS are a rule's actions, with what each does.
const RULE_ACTIONS = [['deny', 'deny: refuse the call'], ['approve', 'approve: ask the approver'], ['allow', 'allow: let it run; no later rule applies']];

// shortDur writes a duration as the API returns it ("1m0s", "1h0m0s") the
// way one types it ("1m", "1h").
function shortDur(s) { return String(s || '').replace(/([hm])0s$/, '$1').replace(/h0m$/, 'h'); }

// splitTools reads a rule's tools as typed: names separated by commas or
// spaces.
function splitTools(s) { return s.split(/[\s,]+/).filter((t) => t !== ''); }

// ruleValue and limitValue are a saved rule and limit as the editor reads
// them back, so that the two compare.
function ruleValue(r) { return { name: r.name || '', tools: r.tools || [], when: r.when || '', action: r.action || 'deny', reason: r.reason || '' }; }
function limitValue(l) { return { target: l.target || '', calls: l.calls, per: shortDur(l.per) }; }

// alwaysDenies returns the first of rules that denies a call of tool (of
// group) whatever its arguments: a deny that applies to it with no
// condition, or the condition true.
function alwaysDenies(rules, tool, group) {
  return rules.find((r) => r.action === 'deny' && ['', 'true'].includes((r.when || '').trim()) &&
    (!(r.tools || []).length || r.tools.includes(tool) || r.tools.includes('group:' + group)));
}

let fieldSeq = 0;

// fieldError gives input an id and returns the box for its error, named by
// the input's aria-describedby.
function fieldError(input) {
  const id = 'rf-' + (++fieldSeq);
  input.id = id;
  input.setAttribute('aria-describedby', id + '-error');
  return h('div', { class: 'field-error', id: id + '-error', role: 'alert', hidden: true });
}

// field is a labelled input with, below it, the box for its error.
function field(label, input, hint) {
  const err = fieldError(input);
  return h('div', { class: 'field ' + input.className.replace(/^(rule|limit)-/, 'field-') },
    h('label', { for: input.id }, label), input, hint ? h('span', { class: 'muted small' }, hint) : null, err);
}

// markField shows msg in the error box of input (fieldError), marks the
// input and focuses it.
function markField(input, ...msg) {
  const err = document.getElementById(input.getAttribute('aria-describedby'));
  fill(err, msg);
  err.hidden = false;
  input.setAttribute('aria-invalid', 'true');
  input.focus();
}

// clearFieldErrors empties and hides the error boxes in roots.
function clearFieldErrors(...roots) {
  for (const root of roots) for (const el of $$('.field-error', root)) { fill(el); el.hidden = true; }
}

// caret shows the line of expr at line, column (1-based) with a caret
// under the column.
function caret(expr, line, column) {
  const text = expr.split('\n')[line - 1];
  if (text === undefined) return null;
  return h('pre', { class: 'caret' }, text + '\n' + ' '.repeat(Math.max(0, column - 1)) + '^');
}

// rulesEditor is the role page's Rules and Limits sections. changed is
// called on every edit. It returns the sections (els), what the form holds
// (value), whether it differs from what is saved (dirty), reset (to a role
// as saved), showError (marks the field an API error names, and says
// whether it found one) and clearErrors.
function rulesEditor(role, ro, changed) {
  const declared = role.declaredIn || null;
  let saved = { rules: (role.rules || []).map(ruleValue), limits: (role.limits || []).map(limitValue) };
  const ruleList = h('ol', { id: 'rule-list', class: 'rule-list' });
  const limitList = h('ul', { id: 'limit-list', class: 'limit-list' });
  const noRules = h('p', { id: 'no-rules', class: 'muted' }, 'No rules: every call of the role\'s tools runs (within its limits).');
  const noLimits = h('p', { id: 'no-limits', class: 'muted' }, 'No limits.');

  const at = (lines, i) => declared && lines && lines[i] ? h('code', { class: 'declared-at' }, `${declared.file}:${lines[i]}`) : null;

  // ---- editable -------------------------------------------------------

  // renumber shows each rule's place, which decides, and keeps the first
  // from moving up and the last from moving down.
  function renumber() {
    const cards = $$('li.rule-card', ruleList);
    cards.forEach((c, i) => {
      $('.rule-order', c).textContent = `${i + 1}.`;
      $('.move-up', c).disabled = i === 0;
      $('.move-down', c).disabled = i === cards.length - 1;
    });
    noRules.hidden = cards.length !== 0;
    noLimits.hidden = $$('li.limit-row', limitList).length !== 0;
  }

  function edited() { renumber(); changed(); }

  function ruleCard(r) {
    const name = h('input', { type: 'text', class: 'rule-name', value: r.name, autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. no_sudo', oninput: edited });
    const tools = h('input', { type: 'text', class: 'rule-tools', value: r.tools.join(', '), autocomplete: 'off', spellcheck: 'false', placeholder: 'every tool of the role', oninput: edited });
    const when = h('textarea', { class: 'rule-when', rows: 2, spellcheck: 'false', placeholder: 'always, e.g. args.command.contains(\'sudo\')', oninput: edited });
    when.value = r.when;
    const action = h('select', { class: 'rule-action', onchange: edited }, RULE_ACTIONS.map(([val, label]) => h('option', { value: val }, label)));
    action.value = r.action;
    const reason = h('input', { type: 'text', class: 'rule-reason', value: r.reason, placeholder: 'told to the caller refused and to the approver', oninput: edited });
    const label = () => name.value.trim() || 'new rule';
    const card = h('li', { class: 'rule-card' });
    const move = (up) => {
      const other = up ? card.previousElementSibling : card.nextElementSibling;
      if (!other) return;
      if (up) other.before(card); else other.after(card);
      edited();
      const b = $(up ? '.move-up' : '.move-down', card);
      (b.disabled ? $(up ? '.move-down' : '.move-up', card) : b).focus();
    };
    const remove = () => {
      const next = card.nextElementSibling || card.previousElementSibling;
      card.remove();
      edited();
      (next ? $('.rule-name', next) : $('#add-rule')).focus();
    };
    append(card, [
      h('div', { class: 'rule-head' },
        h('span', { class: 'rule-order' }),
        h('span', { class: 'rule-actions' },
          h('button', { type: 'button', class: 'move-up', onclick: () => move(true), title: 'Checked earlier' }, 'Move up'),
          h('button', { type: 'button', class: 'move-down', onclick: () => move(false), title: 'Checked later' }, 'Move down'),
          h('button', { type: 'button', class: 'danger delete-rule', onclick: remove, title: 'Deleted when the role is saved' }, 'Delete'))),
      h('div', { class: 'rule-fields' },
        field('Name', name),
        field('Tools', tools, 'Tool names or group:NAME, separated by commas; none: every tool of the role.'),
        field('When (CEL)', when, 'Over args, tool, group, role and agent; empty: every call of its tools.'),
        field('Action', action),
        field('Reason', reason))]);
    for (const b of $$('button', card)) b.setAttribute('aria-label', `${b.textContent}: rule ${label()}`);
    name.addEventListener('input', () => { for (const b of $$('.rule-head button', card)) b.setAttribute('aria-label', `${b.textContent}: rule ${label()}`); });
    return card;
  }

  function limitRow(l) {
    const target = h('input', { type: 'text', class: 'limit-target', value: l.target, autocomplete: 'off', spellcheck: 'false', placeholder: 'run_command, group:NAME or *', oninput: edited });
    const calls = h('input', { type: 'number', class: 'limit-calls', min: 1, step: 1, value: l.calls === undefined ? '' : String(l.calls), oninput: edited });
    const per = h('input', { type: 'text', class: 'limit-per', value: l.per, autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. 1m, 30s, 24h', oninput: edited });
    const row = h('li', { class: 'limit-row' });
    const remove = () => {
      const next = row.nextElementSibling || row.previousElementSibling;
      row.remove();
      edited();
      (next ? $('.limit-target', next) : $('#add-limit')).focus();
    };
    return append(row, [field('Target', target), field('Calls', calls), field('Per', per),
      h('button', { type: 'button', class: 'danger delete-limit', onclick: remove, 'aria-label': 'Delete this limit' }, 'Delete')]);
  }

  function show() {
    fill(ruleList, saved.rules.map(ruleCard));
    fill(limitList, saved.limits.map(limitRow));
    renumber();
  }

  const addRule = h('button', { type: 'button', id: 'add-rule', onclick: () => {
    const card = ruleCard(ruleValue({}));
    ruleList.append(card);
    edited();
    $('.rule-name', card).focus();
  } }, 'Add rule');
  const addLimit = h('button', { type: 'button', id: 'add-limit', onclick: () => {
    const row = limitRow({ target: '', calls: undefined, per: '' });
    limitList.append(row);
    edited();
    $('.limit-target', row).focus();
  } }, 'Add limit');

  // value reads the form: the rules in their order, and the limits.
  function value() {
    return {
      rules: $$('li.rule-card', ruleList).map((c) => ({
        name: $('.rule-name', c).value.trim(), tools: splitTools($('.rule-tools', c).value), when: $('.rule-when', c).value.trim(),
        action: $('.rule-action', c).value, reason: $('.rule-reason', c).value.trim(),
      })),
      limits: $$('li.limit-row', limitList).map((r) => {
        const calls = $('.limit-calls', r).value.trim();
        return { target: $('.limit-target', r).value.trim(), calls: calls === '' ? 0 : Number(calls), per: $('.limit-per', r).value.trim() };
      }),
    };
  }

  // showError marks the field an API error names: `rules[1] "x": when: …`
  // or `limits[0]: per: …` (the when's line and column shown under it), or
  // the limits whose per is not a duration (an error that names no index).
  function showError(message) {
    const m = /^(rules|limits)\[(\d+)\](?: "(?:[^"\\]|\\.)*")?: (\w+): ([\s\S]*)$/.exec(message);
    if (m) {
      const rows = m[1] === 'rules' ? $$('li.rule-card', ruleList) : $$('li.limit-row', limitList);
      const input = rows[+m[2]] && $(`.${m[1] === 'rules' ? 'rule' : 'limit'}-${m[3]}`, rows[+m[2]]);
      if (!input) return false;
      const pos = m[3] === 'when' && /^line (\d+), column (\d+) of the expression: /.exec(m[4]);
      markField(input, m[4], pos ? caret(input.value.trim(), +pos[1], +pos[2]) : null); // the when as sent
      return true;
    }
    const d = /^(?:limits|request body): per: ("(?:[^"\\]|\\.)*") is not a duration/.exec(message);
    if (!d) return false;
    const bad = $$('input.limit-per', limitList).filter((p) => p.value.trim() === JSON.parse(d[1]));
    bad.reverse().forEach((p) => markField(p, message.replace(/^(limits|request body): per: /, '')));
    return bad.length !== 0;
  }

  // ---- read-only --------------------------------------------------------

  const muted = (s) => h('span', { class: 'muted' }, s);
  const heads = (cols) => h('thead', {}, h('tr', {}, cols.concat(declared ? ['Declared at'] : []).map((c) => h('th', {}, c))));
  // ruleTable and limitTable show a read-only role's rules and limits,
  // with the line of each block when the config file declares them.
  function ruleTable() {
    if (saved.rules.length === 0) return noRules;
    return h('table', { id: 'rules', class: 'table rules' }, heads(['', 'Name', 'Tools', 'When', 'Action', 'Reason']),
      h('tbody', {}, saved.rules.map((r, i) => h('tr', { 'data-rule': r.name },
        h('td', { class: 'rule-order' }, `${i + 1}.`),
        h('td', {}, h('code', {}, r.name)),
        h('td', {}, r.tools.length ? r.tools.map((t) => h('span', { class: 'chip' }, t)) : muted('every tool')),
        h('td', {}, r.when ? h('code', { class: 'rule-when' }, r.when) : muted('always')),
        h('td', {}, h('span', { class: 'badge action-' + r.action }, r.action)),
        h('td', {}, r.reason || muted('—')),
        declared ? h('td', {}, at(declared.rules, i)) : null))));
  }
  function limitTable() {
    if (saved.limits.length === 0) return noLimits;
    return h('table', { id: 'limits', class: 'table limits' }, heads(['Target', 'Calls', 'Per']),
      h('tbody', {}, saved.limits.map((l, i) => h('tr', { 'data-limit': l.target },
        h('td', {}, h('code', {}, l.target)), h('td', {}, String(l.calls)), h('td', {}, l.per),
        declared ? h('td', {}, at(declared.limits, i)) : null))));
  }

  const intro = h('p', { class: 'muted' },
    'Rules decide a call by its arguments. They are checked in order, top to bottom, and the first that matches decides: ',
    h('strong', {}, 'deny'), ' refuses the call, ', h('strong', {}, 'approve'), ' asks the approver, ', h('strong', {}, 'allow'),
    ' lets it run without checking the rules below. A call no rule matches runs. A tool a rule denies whatever its arguments is not offered.');
  const limitsIntro = h('p', { class: 'muted' },
    'A limit allows at most so many calls of its target (a tool, group:NAME, or * for every tool) per period, per agent of the role; ' +
    'past it, a call is refused (rate_limited) and told when to retry.');
  const where = declared ? h('p', { class: 'muted small' }, 'Declared in the role block at ', h('code', {}, declaredAt(declared)), '; change them there.') : null;
  if (!ro) show();
  const els = [
    h('section', { id: 'role-rules', class: 'role-rules' }, h('h2', {}, 'Rules'), intro, where,
      ro ? ruleTable() : [noRules, ruleList, h('div', { class: 'actions' }, addRule, h('span', { class: 'muted small' }, 'Saved with the role.'))]),
    h('section', { id: 'role-limits', class: 'role-limits' }, h('h2', {}, 'Limits'), limitsIntro,
      ro ? limitTable() : [noLimits, limitList, h('div', { class: 'actions' }, addLimit, h('span', { class: 'muted small' }, 'Saved with the role.'))]),
  ];

  return {
    els,
    value,
    dirty: () => !ro && JSON.stringify(value()) !== JSON.stringify(saved),
    saved: () => saved,
    reset(r) {
      saved = { rules: (r.rules || []).map(ruleValue), limits: (r.limits || []).map(limitValue) };
      show();
    },
    showError,
    clearErrors: () => clearFieldErrors(ruleList, limitList),
  };
}

// markDenied marks, in the role page's group cards, the tools of the role's
// groups that its tool list (GET /api/roles/NAME/tools, as saved) does not
// offer because one of its rules denies them whatever the arguments,
// naming the rule.
function markDenied(main, listed, rules) {
  const offered = new Set((listed.tools || []).map((d) => d.function && d.function.name));
  const mine = new Set(listed.groups || []);
  for (const li of $$('li.group-card li[data-tool]', main)) {
    const group = li.closest('li.group-card').dataset.group;
    const r = mine.has(group) && !offered.has(li.dataset.tool) ? alwaysDenies(rules, li.dataset.tool, group) : null;
    li.classList.toggle('denied', !!r);
    const note = $('.denied-by', li);
    if (note) note.remove();
    if (r) li.append(h('span', { class: 'denied-by muted' }, ` (not offered: rule ${r.name} denies it)`));
  }
}
