// toolhost web UI, a role's script bounds on its page (roles.js): what
// bounds one script of code mode's run_script, each bound the role's own or
// the default (the config's code block, else the built-in one), as saved;
// read-only for a role that cannot be edited, otherwise an input per bound,
// saved with the role by its Save (empty: the default), a refused save's
// error shown at the bound it names. Loaded after rules.js, whose field
// helpers (fieldError, markField, clearFieldErrors, shortDur) it uses, as
// it uses app.js's (h, fill, fmt) and overview.js's fmtBytes.
'use strict';

// CODE_BOUNDS are the bounds of a script, as the API's role names them in
// its code: key, label, kind (count, duration or bytes) and what it bounds.
const CODE_BOUNDS = [
  ['steps', 'Steps', 'count', 'Starlark execution steps a script may run.'],
  ['timeout', 'Timeout', 'duration', 'Wall time, its calls and their approvals included; at most 1h.'],
  ['memory', 'Memory (bytes)', 'bytes', 'Memory of the script\'s runner process, held by the kernel.'],
  ['calls', 'Calls', 'count', 'Tool calls a script may make.'],
  ['output', 'Output (bytes)', 'bytes', 'What the script returns and prints, as the JSON the model gets.'],
  ['parallel', 'Parallel', 'count', 'Calls of one parallel() that run at once; at most 64.'],
];

// codeValue is a role's code (the bounds it says) as the editor reads it
// back, its keys in CODE_BOUNDS' order, so that the two compare.
function codeValue(code) {
  const out = {};
  for (const [key] of CODE_BOUNDS) {
    if (code && code[key]) out[key] = key === 'timeout' ? shortDur(code[key]) : code[key];
  }
  return out;
}

// codeEditor is the role page's Scripts section, for role as saved (its
// code and codeDefaults); changed is called on every edit. It returns the
// section (el), what the form holds (value), whether it differs from what
// is saved (dirty), reset (to a role as saved), showError (marks the bound
// an API error names, and says whether it found one), clearErrors, and
// groupsChanged (says whether the tool groups ticked name the code group).
function codeEditor(role, ro, changed) {
  let saved = codeValue(role.code);
  let defaults = role.codeDefaults || { config: {}, builtIn: {} };
  const inputs = {};
  const cells = {};

  // show writes a bound's value (a number, or a duration as the API
  // returns it) the way its kind reads.
  const show = (kind, v) => kind === 'duration' ? shortDur(v) : kind === 'bytes' ? fmtBytes(v) : fmt(v);
  // fallback is the default of a bound: the config's, else the built-in.
  const fallback = (key) => defaults.config[key]
    ? { value: defaults.config[key], from: 'default: config' }
    : { value: defaults.builtIn[key], from: 'default: built in' };
  const raw = (key, v) => key === 'timeout' ? shortDur(v) : String(v);

  // render shows, for each bound, what a script of the role gets as saved,
  // and in the inputs the role's own values, the default as placeholder.
  function render() {
    for (const [key, , kind] of CODE_BOUNDS) {
      const e = saved[key] ? { value: saved[key], from: 'this role' } : fallback(key);
      fill(cells[key], h('span', { class: 'code-value', title: kind === 'bytes' ? `${fmt(e.value)} bytes` : null }, show(kind, e.value)),
        ' ', h('span', { class: 'code-from' + (saved[key] ? ' own' : ' muted') }, e.from));
      if (ro) continue;
      inputs[key].value = saved[key] ? raw(key, saved[key]) : '';
      inputs[key].placeholder = `${raw(key, fallback(key).value)} (default)`;
    }
  }

  const rows = CODE_BOUNDS.map(([key, label, kind, what]) => {
    cells[key] = h('td', { class: 'code-effective' });
    let own;
    if (ro) {
      own = saved[key] ? h('code', {}, raw(key, saved[key])) : h('span', { class: 'muted' }, '—');
      return h('tr', { 'data-bound': key }, h('td', {}, label, h('div', { class: 'muted small' }, what)), h('td', { class: 'code-own' }, own), cells[key]);
    }
    const input = h('input', { type: 'text', class: 'code-input', 'data-bound': key, inputmode: kind === 'duration' ? 'text' : 'numeric', autocomplete: 'off', spellcheck: 'false', oninput: changed });
    inputs[key] = input;
    const err = fieldError(input);
    return h('tr', { 'data-bound': key },
      h('td', {}, h('label', { for: input.id }, label), h('div', { class: 'muted small' }, what)),
      h('td', { class: 'code-own' }, input, err),
      cells[key]);
  });
  render();

  // value reads the form: the bounds given, numbers as numbers (anything
  // else is sent as typed, for the API to refuse), empty ones left out.
  function value() {
    const out = {};
    for (const [key] of CODE_BOUNDS) {
      const s = inputs[key].value.trim();
      if (s === '') continue;
      const n = Number(s);
      out[key] = key === 'timeout' || !Number.isFinite(n) ? s : n;
    }
    return out;
  }

  // showError marks the bound an API error names: `code: timeout: …`
  // (`request body: timeout: …` when the body could not be read).
  function showError(message) {
    const m = /^(?:code|request body): (\w+): ([\s\S]*)$/.exec(message);
    const input = m && !ro && Object.hasOwn(inputs, m[1]) ? inputs[m[1]] : null;
    if (!input) return false;
    markField(input, m[2]);
    return true;
  }

  const table = h('table', { id: 'code-bounds', class: 'table code-bounds' },
    h('thead', {}, h('tr', {}, ['Bound', 'This role', 'In effect (as saved)'].map((c) => h('th', {}, c)))),
    h('tbody', {}, rows));
  const off = h('p', { id: 'code-off', class: 'notice', hidden: true },
    'This role does not name the ', h('code', {}, 'code'), ' group: its agents have no run_script. ',
    'These bounds apply once it does (tick code among its tool groups).');
  const groupsChanged = (groups) => { off.hidden = (groups || []).includes('code'); };
  groupsChanged(role.toolGroups);
  const declared = role.declaredIn;
  const el = h('section', { id: 'role-code', class: 'role-code' }, h('h2', {}, 'Scripts'),
    h('p', { class: 'muted' }, 'A role that names the ', h('code', {}, 'code'), ' group gets run_script: its agents run a Starlark script ' +
      'that calls the role\'s other tools, each call under its rules, limits and approvals. These bound one script. ' +
      'A bound the role does not set is the default: the config file\'s top-level code block, else the built-in one.'),
    off,
    ro && declared ? h('p', { class: 'muted small' }, 'Declared in the role block at ', h('code', {}, declaredAt(declared)), '; change them there.') : null,
    table,
    ro ? null : h('p', { class: 'muted small' }, 'Empty: the default. Memory and output in bytes, timeout as 30s, 5m or 1h. Saved with the role.'));

  return {
    el,
    value,
    dirty: () => !ro && JSON.stringify(value()) !== JSON.stringify(saved),
    reset(r) {
      saved = codeValue(r.code);
      defaults = r.codeDefaults || defaults;
      render();
    },
    showError,
    clearErrors: () => clearFieldErrors(table),
    groupsChanged,
  };
}
