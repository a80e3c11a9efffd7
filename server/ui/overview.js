// toolhost web UI, the Overview: the operator's first screen. The calls of
// the last hour (by minute) or day (by ten minutes), stacked by outcome and
// by role; the tools' latency percentiles, the slowest and the most failing
// tools; approvals waiting, modules not running and storage against its
// quotas. One request, GET /api/overview, every OVERVIEW_REFRESH_MS; the charts are
// inline SVG drawn here. Loaded after app.js, whose helpers (h, fill, api,
// …) it uses.
'use strict';

// OVERVIEW_REFRESH_MS is how often the overview asks again, by window: a
// day's costs the database more, and changes more slowly.
const OVERVIEW_REFRESH_MS = { '1h': 15000, '24h': 60000 };
const SVG_NS = 'http://www.w3.org/2000/svg';

// CALL_OUTCOMES are the outcomes in the order their bars stack (bottom first):
// the API's field, the label, the colour.
const CALL_OUTCOMES = [
  ['ok', 'ok', '#3a9a5b'],
  ['failed', 'failed', '#c8423a'],
  ['denied', 'denied', '#e08a2c'],
  ['rateLimited', 'rate-limited', '#c9a825'],
  ['approval', 'approval', '#6a5acd'],
];

// ROLE_COLORS colour the roles with the most calls; the others share the
// last, as "other roles".
const ROLE_COLORS = ['#2457c5', '#1b998b', '#c05299', '#e07a2c', '#7a8f1f', '#8a5cd6', '#b23a48', '#8c96a3'];

const overviewState = { window: '1h' };

// svg builds an SVG element: svg('rect', {x: 1}, child, ...).
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, String(v));
  return append(el, children);
}

// swatch is a small square of colour (set through the DOM: the page's
// policy refuses inline style attributes).
function swatch(color) {
  const el = h('span', { class: 'swatch' });
  el.style.background = color;
  return el;
}

function fmtBytes(n) {
  if (n < 0) return 'no bound';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + ' ' + units[i];
}

function fmtMs(ms) {
  if (ms >= 1000) return (ms / 1000).toFixed(ms >= 10000 ? 0 : 1) + ' s';
  if (ms >= 10) return ms.toFixed(0) + ' ms';
  return ms.toFixed(ms >= 1 ? 1 : 2) + ' ms';
}

function hhmm(t) {
  const d = new Date(t);
  return String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0');
}

function roleName(r) { return r === '' ? '(operator)' : r; }
function toolName(t) { return t.tool === '' ? '(no tool reached)' : t.tool; }

async function overviewPage(main, v) {
  const body = h('div', { id: 'overview-body' });
  const status = h('span', { id: 'overview-status', class: 'status' });
  const windows = h('div', { class: 'switch', role: 'group', 'aria-label': 'window' },
    [['1h', 'Last hour'], ['24h', 'Last day']].map(([w, label]) => h('button', {
      type: 'button', id: 'window-' + w, class: overviewState.window === w ? 'on' : '', onclick: () => {
        overviewState.window = w;
        for (const b of $$('.switch button', main)) b.classList.toggle('on', b.id === 'window-' + w);
        load().catch(showLoadError);
      },
    }, label)));
  fill(main, h('div', { class: 'page-head' }, h('h1', {}, 'Overview'), windows, status), body);

  let seq = 0;
  async function load() {
    const mine = ++seq;
    const w = overviewState.window;
    const o = await api('GET', '/api/overview?window=' + encodeURIComponent(w), undefined, v.signal);
    if (mine !== seq || v.signal.aborted) return;
    drawOverview(body, o);
    body.dataset.window = o.window;
    body.dataset.loaded = String(mine);
    status.textContent = 'as of ' + new Date().toLocaleTimeString();
    status.className = 'status';
  }
  function showLoadError(e) {
    if (v.signal.aborted) return;
    status.textContent = 'not refreshed: ' + errorText(e);
    status.className = 'status dirty';
  }

  await load();
  (async () => {
    while (!v.signal.aborted) {
      await new Promise((r) => setTimeout(r, OVERVIEW_REFRESH_MS[overviewState.window] || 15000));
      if (v.signal.aborted) return;
      await load().catch(showLoadError);
    }
  })();
}

// drawOverview fills el with the overview o (GET /api/overview's answer).
function drawOverview(el, o) {
  const c = o.calls;
  const per = o.bucketSeconds >= 3600 ? 'hour' : o.bucketSeconds / 60 === 1 ? 'minute' : `${o.bucketSeconds / 60} minutes`;
  fill(el,
    counters(o),
    c.partial ? h('p', { id: 'overview-partial', class: 'notice ro' },
      `More events than one overview reads: only the calls that ended from ${when(c.from)} on are counted.`) : null,
    h('section', { class: 'card chart-card' },
      h('h3', {}, `Calls per ${per}, by outcome`),
      stackedBars('chart-outcomes', c.buckets, CALL_OUTCOMES.map(([k, label, color]) => ({ key: k, label, color, n: (b) => b.outcomes[k] || 0 })))),
    h('section', { class: 'card chart-card' },
      h('h3', {}, `Calls per ${per}, by role`),
      stackedBars('chart-roles', c.buckets, roleSeries(c))),
    h('div', { class: 'overview-pair' },
      rankCard('slowest', 'Slowest tools (p95)', o.slowest, (t) => fmtMs(t.p95), 'No tool ran in this window.'),
      rankCard('failing', 'Most failing tools', o.failing, (t) => `${fmt(t.outcomes.failed)} of ${fmt(t.calls)}`, 'No tool failed in this window.')),
    h('h2', {}, 'Tools'),
    toolsTable(c.tools),
    h('div', { class: 'overview-pair' }, modulesCard(o.modules), storageCard(o.storage)));
}

// counters are the window's totals and the host's state, each a figure
// with its data-count for a reader (and the tests) to compare.
function counters(o) {
  const c = o.calls;
  const counter = (id, label, n, shown, cls, href) => {
    const inner = [h('div', { class: 'counter-n' }, shown === undefined ? fmt(n) : shown), h('div', { class: 'counter-label' }, label)];
    return href ? h('a', { id, class: 'counter ' + (cls || ''), href, 'data-count': n }, inner)
      : h('div', { id, class: 'counter ' + (cls || ''), 'data-count': n }, inner);
  };
  const st = o.storage;
  const used = st.outputs + st.artifacts;
  return h('div', { id: 'counters', class: 'counters' },
    counter('count-calls', 'calls ended', c.calls),
    CALL_OUTCOMES.map(([k, label, color]) => {
      const el = counter('count-' + k, label, c.outcomes[k] || 0);
      el.prepend(swatch(color));
      return el;
    }),
    counter('count-approvals', 'approvals waiting', o.approvals.waiting, undefined, o.approvals.waiting ? 'warn' : '', '#/approvals'),
    counter('count-modules', `modules not running (of ${o.modules.total})`, o.modules.down.length, undefined, o.modules.down.length ? 'bad' : '', '#/groups'),
    counter('count-storage', st.quota < 0 ? 'stored (no quota)' : 'of the ' + fmtBytes(st.quota) + ' quota', used, fmtBytes(used),
      st.quota > 0 && used > 0.9 * st.quota ? 'warn' : ''));
}

// roleSeries are the role chart's series: the roles with the most calls,
// each its colour, the rest together.
function roleSeries(c) {
  const top = c.roles.slice(0, ROLE_COLORS.length - 1).map((r) => r.role);
  const series = top.map((r, i) => ({ key: r, label: roleName(r), color: ROLE_COLORS[i], n: (b) => b.roles[r] || 0 }));
  if (c.roles.length > top.length) {
    const rest = (b) => Object.entries(b.roles).reduce((sum, [r, n]) => sum + (top.includes(r) ? 0 : n), 0);
    series.push({ key: '', label: 'other roles', color: ROLE_COLORS[ROLE_COLORS.length - 1], n: rest, other: true });
  }
  return series;
}

// niceMax rounds a chart's largest value up to 1, 2 or 5 times a power of
// ten.
function niceMax(n) {
  if (n <= 0) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(n)));
  for (const m of [1, 2, 5, 10]) if (m * p >= n) return m * p;
  return 10 * p;
}

// stackedBars draws buckets as stacked bars, one stack per bucket, one
// colour per series ({key, label, color, n(bucket)}); each rect carries its
// count (data-n) and says it in a tooltip.
function stackedBars(id, buckets, series) {
  const W = 1100, H = 170, left = 44, bottom = 20, top = 8;
  const plotW = W - left - 4, plotH = H - bottom - top;
  const totals = buckets.map((b) => series.reduce((s, se) => s + se.n(b), 0));
  const max = niceMax(Math.max(0, ...totals));
  const bw = plotW / Math.max(1, buckets.length);
  const y = (n) => top + plotH - (plotH * n) / max;
  const grid = [0, max / 2, max].map((t) => svg('g', {},
    svg('line', { x1: left, x2: W - 4, y1: y(t), y2: y(t), class: 'grid' }),
    svg('text', { x: left - 6, y: y(t) + 4, 'text-anchor': 'end', class: 'axis' }, fmt(t))));
  const every = Math.max(1, Math.ceil(buckets.length / 12));
  const labels = buckets.map((b, i) => (i % every === 0
    ? svg('text', { x: left + i * bw + bw / 2, y: H - 5, 'text-anchor': 'middle', class: 'axis' }, hhmm(b.start)) : null));
  const bars = buckets.map((b, i) => {
    let base = 0;
    const rects = series.map((se) => {
      const n = se.n(b);
      if (!n) return null;
      const r = svg('rect', {
        x: (left + i * bw + 0.5).toFixed(1), width: Math.max(1, bw - 1).toFixed(1),
        y: y(base + n).toFixed(1), height: Math.max(0.5, y(base) - y(base + n)).toFixed(1),
        fill: se.color, 'data-series': se.label, 'data-n': n,
      }, svg('title', {}, `${hhmm(b.start)} ${se.label}: ${fmt(n)}`));
      base += n;
      return r;
    });
    return svg('g', { class: 'bucket', 'data-start': b.start, 'data-total': totals[i] }, rects);
  });
  const total = totals.reduce((a, b) => a + b, 0);
  return h('div', { class: 'chart' },
    svg('svg', { id, viewBox: `0 0 ${W} ${H}`, class: 'bars', role: 'img', 'aria-label': `${fmt(total)} calls`, 'data-total': total }, grid, labels, bars),
    h('div', { class: 'legend' }, series.length === 0 ? h('span', { class: 'muted' }, 'No call ended in this window.')
      : series.map((se) => h('span', { class: 'legend-item' }, swatch(se.color), se.label))));
}

// rankCard lists tools ranked by a figure (slowest, most failing).
function rankCard(id, title, tools, figure, none) {
  return h('section', { class: 'card' }, h('h3', {}, title),
    tools.length === 0 ? h('p', { id, class: 'muted' }, none)
      : h('ol', { id, class: 'rank' }, tools.map((t) => h('li', { 'data-tool': t.tool },
        h('code', {}, toolName(t)), t.group ? h('span', { class: 'muted small' }, ' ' + t.group) : null,
        h('span', { class: 'rank-figure' }, figure(t))))));
}

// toolsTable shows each tool's calls and its latency percentiles as bars on
// one scale: p99 (lightest) over p95 over p50 (darkest).
function toolsTable(tools) {
  if (tools.length === 0) return h('p', { id: 'tools', class: 'muted' }, 'No call ended in this window.');
  const scale = Math.max(...tools.map((t) => t.p99), 0.001);
  const bar = (t) => {
    const track = h('div', { class: 'pbar', title: `p50 ${fmtMs(t.p50)} · p95 ${fmtMs(t.p95)} · p99 ${fmtMs(t.p99)} · max ${fmtMs(t.max)}` });
    for (const [k, cls] of [['p99', 'p99'], ['p95', 'p95'], ['p50', 'p50']]) {
      const fill = h('div', { class: 'pbar-fill ' + cls });
      fill.style.width = Math.max(0.5, (100 * t[k]) / scale).toFixed(1) + '%';
      track.append(fill);
    }
    return track;
  };
  return h('table', { id: 'tools', class: 'table tools-table' },
    h('thead', {}, h('tr', {}, ['Tool', 'Calls', 'Outcomes', 'p50', 'p95', 'p99', 'Latency'].map((c) => h('th', {}, c)))),
    h('tbody', {}, tools.map((t) => h('tr', { 'data-tool': t.tool, 'data-group': t.group, 'data-calls': t.calls },
      h('td', {}, h('code', {}, toolName(t)), t.group ? h('div', { class: 'muted small' }, t.group) : null),
      h('td', { class: 'num' }, fmt(t.calls)),
      h('td', {}, CALL_OUTCOMES.filter(([k]) => t.outcomes[k]).map(([k, label, color]) =>
        h('span', { class: 'outcome', title: label }, swatch(color), fmt(t.outcomes[k])))),
      t.timed ? [h('td', { class: 'num' }, fmtMs(t.p50)), h('td', { class: 'num' }, fmtMs(t.p95)), h('td', { class: 'num' }, fmtMs(t.p99)), h('td', {}, bar(t))]
        : h('td', { colspan: 4, class: 'muted' }, 'none ran')))));
}

function modulesCard(m) {
  return h('section', { class: 'card' }, h('h3', {}, 'Modules not running'),
    m.down.length === 0 ? h('p', { id: 'modules-down', class: 'muted' }, m.total ? `All ${m.total} configured modules are running.` : 'No module is configured.')
      : h('ul', { id: 'modules-down', class: 'plain' }, m.down.map((p) => h('li', { 'data-module': p.name },
        h('strong', {}, p.name), ' ', h('span', { class: 'state ' + p.state }, p.state),
        p.restarts ? h('span', { class: 'muted small' }, ` ${p.restarts} restart${p.restarts === 1 ? '' : 's'}`) : null,
        p.lastError ? h('div', { class: 'error-text small' }, p.lastError) : null))));
}

// storageCard shows the bytes the host quota counts against it, and the
// roles that take the most against the role quota.
function storageCard(st) {
  const meter = (id, label, used, quota) => {
    const fillEl = h('div', { class: 'bar-fill' + (quota > 0 && used > 0.9 * quota ? ' hot' : '') });
    fillEl.style.width = (quota > 0 ? Math.min(100, (100 * used) / quota) : 0) + '%';
    return h('div', { class: 'meter', id, 'data-used': used },
      h('div', { class: 'meter-head' }, h('span', {}, label), h('span', { class: 'muted small' }, fmtBytes(used), quota >= 0 ? ' of ' + fmtBytes(quota) : ' (no quota)')),
      h('div', { class: 'bar' }, fillEl));
  };
  return h('section', { class: 'card', id: 'storage' }, h('h3', {}, 'Storage'),
    meter('storage-host', 'Saved outputs and artifacts (host quota)', st.outputs + st.artifacts, st.quota),
    st.roles.map((r) => meter(null, 'Role ' + roleName(r.role) + ' (role quota)', r.bytes, st.roleQuota)),
    h('p', { class: 'muted small' }, `Saved outputs ${fmtBytes(st.outputs)}, artifacts ${fmtBytes(st.artifacts)}`,
      st.events ? `; audit events ${fmtBytes(st.events)} (at the last retention pass)` : '', '.'));
}
