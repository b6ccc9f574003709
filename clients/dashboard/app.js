/*
 * collsynth dashboard - plain JavaScript, no build step, no dependencies.
 *
 * Everything comes from collsynthd's JSON API (CONTRACT.md section 4):
 *   GET  /v1/health, /v1/topologies, /v1/topologies/{name}
 *   POST /v1/synthesize            (submit; 200 = ready, 202 = {job})
 *   GET  /v1/jobs/{id}             (polled while a job runs)
 *   DELETE /v1/jobs/{id}           (cancel)
 *   GET  /v1/results/{key}         (open a stored result; downloads)
 *   GET  /v1/results, /v1/jobs     (history: everything the server has, paged
 *                                   with ?limit=&after= and filtered)
 *
 * Baselines for the size plot are synthesized once per request: the page
 * remembers (in localStorage) the result key of each baseline that exists
 * and the refusal of each that does not, so opening a result again fetches
 * stored baselines and never re-posts a baseline that failed.
 *
 * The charts are SVG built by hand.  Costs follow the contract's alpha-beta
 * model, S*alpha + (R/C)*L*beta, with alpha the largest link latency and beta
 * the per-byte time of the slowest lane (what the daemon's ?size= choice
 * uses), so the time-vs-size curves and the daemon agree on which frontier
 * algorithm wins where.
 *
 * Test hooks (tests/dashboard/dashboard.test.mjs): #frontier-plot [data-point]
 * (one per frontier algorithm), #link-heatmap [data-link] (one per directed
 * link of the topology), #topology-graph [data-link] (one per linked pair of
 * ranks), #size-plot [data-curve], #step-timeline [data-send]; body[data-result]
 * is set to the shown key once every chart has been drawn.
 */
'use strict';

const SVG_NS = 'http://www.w3.org/2000/svg';
const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777'];
const BASELINE_COLORS = {ring: '#6b7280', 'recursive-doubling': '#a16207', 'double-binary-tree': '#0f766e', direct: '#7c3aed'};
const BASELINES = ['ring', 'recursive-doubling', 'double-binary-tree'];
const MAX_TIMELINE_SENDS = 4000;

const state = {
  token: localStorage.getItem('collsynth.token') || '',
  jobs: loadJobs(),           // id -> {id, label, status, progress, key, submitted, result?}
  topoByKey: {},              // result key -> the topology value that was submitted
  current: null,              // {result, topo (normalized), selected index, baselines}
  autoOpen: null,             // job id to open when it finishes
  baselineDocs: new Map(),    // baseline memo key -> algorithm (null: refused), this page
  history: {results: {rows: [], next: null, seq: 0, loadingFirst: false},
            jobs: {rows: [], next: null, seq: 0, loadingFirst: false}},
};

/* ---- small helpers ------------------------------------------------------------ */

function $(sel) { return document.querySelector(sel); }

function el(tag, attrs = {}, children = []) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v);
  }
  for (const c of [].concat(children)) if (c) e.append(c);
  return e;
}

function svg(tag, attrs = {}, children = []) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'text') e.textContent = v;
    else if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of [].concat(children)) if (c) e.append(c);
  return e;
}

function tip(node, text) { node.append(svg('title', {text})); return node; }

function fmtBytes(b) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return (b >= 10 || i === 0 ? Math.round(b) : b.toFixed(1)) + ' ' + units[i];
}

function fmtUs(us) {
  if (us < 1000) return us.toPrecision(3) + ' µs';
  if (us < 1e6) return (us / 1000).toPrecision(3) + ' ms';
  return (us / 1e6).toPrecision(3) + ' s';
}

function fmtElapsed(s) {
  if (s === undefined || s === null || isNaN(s)) return '';
  s = Math.floor(s);
  return String(Math.floor(s / 60)).padStart(2, '0') + ':' + String(s % 60).padStart(2, '0');
}

class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status; this.code = code; this.field = field;
  }
  describe() {
    let s = (this.code ? this.code + ': ' : '') + this.message;
    if (this.field) s += ' (field ' + this.field + ')';
    return s;
  }
}

async function api(method, path, body) {
  const headers = {Accept: 'application/json'};
  if (state.token) headers.Authorization = 'Bearer ' + state.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let r;
  try {
    r = await fetch(path, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'cannot reach the server (' + e.message + ')', '');
  }
  const text = await r.text();
  let doc = null;
  try { doc = JSON.parse(text); } catch (e) { /* not JSON */ }
  if (!r.ok) {
    const e = (doc && doc.error) || {};
    throw new ApiError(r.status, e.code || 'http_' + r.status, e.message || text.slice(0, 200) || r.statusText, e.field || '');
  }
  return {status: r.status, doc, text};
}

function loadJobs() {
  try { return JSON.parse(localStorage.getItem('collsynth.jobs') || '{}'); } catch (e) { return {}; }
}

function saveJobs() {
  const keep = Object.values(state.jobs).sort((a, b) => b.submitted - a.submitted).slice(0, 30);
  const out = {};
  for (const j of keep) { const c = {...j}; delete c.result; out[j.id] = c; }
  localStorage.setItem('collsynth.jobs', JSON.stringify(out));
}

/* ---- topology model ------------------------------------------------------------- */

/* Directed links (bidirectional expanded, switches lowered hub-and-spoke like the
 * core does), plus the facts the charts need. */
function normalizeTopology(doc, fallbackAlg) {
  if (!doc || typeof doc !== 'object') return topologyFromSends(fallbackAlg);
  const ranks = doc.ranks | 0;
  const map = new Map();
  const add = (s, d, lanes, gbps, alpha, sw) => {
    const k = s + '-' + d;
    if (!map.has(k)) map.set(k, {src: s, dst: d, lanes, gbps, alpha_us: alpha, switch: sw});
  };
  for (const l of doc.links || []) {
    const lanes = l.lanes || 1, gbps = l.gbps || 50, alpha = l.alpha_us ?? 0.5;
    add(l.src, l.dst, lanes, gbps, alpha, null);
    if (l.bidirectional) add(l.dst, l.src, lanes, gbps, alpha, null);
  }
  const switches = (doc.switches || []).map((s, i) => ({name: s.name || 'sw' + i, ranks: s.ranks || [], gbps: s.gbps || 50, alpha_us: s.alpha_us ?? 0.5}));
  for (const s of switches)
    for (const a of s.ranks) for (const b of s.ranks) if (a !== b) add(a, b, 1, s.gbps, s.alpha_us, s.name);
  const links = [...map.values()].sort((x, y) => x.src - y.src || x.dst - y.dst);
  let alpha = 0, minGbps = Infinity;
  for (const l of links) { alpha = Math.max(alpha, l.alpha_us); minGbps = Math.min(minGbps, l.gbps); }
  return {name: doc.name || '', ranks, links, switches, groups: doc.groups || [], alpha, beta: isFinite(minGbps) ? 1 / (minGbps * 1e3) : 0, derived: false};
}

function topologyFromSends(alg) {
  const ranks = alg ? alg.ranks : 0;
  const map = new Map();
  for (const s of (alg && alg.sends) || []) {
    const k = s.src + '-' + s.dst;
    if (!map.has(k)) map.set(k, {src: s.src, dst: s.dst, lanes: 1, gbps: 50, alpha_us: 0.5, switch: null});
  }
  const links = [...map.values()].sort((x, y) => x.src - y.src || x.dst - y.dst);
  return {name: '(from the sends)', ranks, links, switches: [], groups: [], alpha: 0.5, beta: 1 / 50e3, derived: true};
}

function algCost(a, topo, bytes) {
  const c = a.chunks > 0 ? a.chunks : 1;
  return a.steps * topo.alpha + (a.rounds / c) * bytes * topo.beta;
}

/* ---- health, builtins ----------------------------------------------------------- */

async function refreshHealth() {
  const h = $('#health');
  try {
    const {doc} = await api('GET', '/v1/health');
    const s = (doc && (doc.status || doc.state)) || 'ok';
    h.textContent = 'server: ' + s + (doc && doc.store ? ' · store ' + (doc.store.status || doc.store.kind || doc.store.engine || JSON.stringify(doc.store)) : '');
    h.dataset.state = 'ok';
  } catch (e) {
    h.textContent = 'server: ' + (e.status === 0 ? 'unreachable' : e.describe());
    h.dataset.state = 'down';
  }
}

async function loadBuiltins() {
  const sel = $('#topo-family');
  try {
    const {doc} = await api('GET', '/v1/topologies');
    const list = Array.isArray(doc) ? doc : (doc.topologies || doc.builtins || []);
    sel.replaceChildren();
    for (const t of list) {
      const name = typeof t === 'string' ? t : (t.example || t.syntax || t.name);
      const label = typeof t === 'string' ? t : (t.syntax || t.name || name) + (t.description ? ' - ' + t.description : '');
      sel.append(el('option', {value: name, text: label}));
    }
    syncFamily($('#topo-name').value);
  } catch (e) {
    sel.replaceChildren(el('option', {value: '', text: '(builtins unavailable: ' + e.message + ')'}));
  }
}

/* Shows the builtin family of a typed name ("ring:12" -> the ring:N entry). */
function syncFamily(name) {
  const sel = $('#topo-family');
  const family = name.split(':')[0];
  const match = [...sel.options].find(o => o.value === name) || [...sel.options].find(o => o.value.split(':')[0] === family);
  if (match) sel.value = match.value;
}

/* ---- submit and jobs ---------------------------------------------------------------- */

function readRequest() {
  const mode = document.querySelector('input[name="topo-mode"]:checked').value;
  let topology;
  if (mode === 'json') {
    try { topology = JSON.parse($('#topo-json').value); } catch (e) { throw new Error('Topology JSON does not parse: ' + e.message); }
  } else {
    topology = $('#topo-name').value.trim();
    if (!topology) throw new Error('name a builtin topology (e.g. dgx1, ring:8)');
  }
  const kind = $('#collective').value;
  const collective = {kind};
  if (['broadcast', 'reduce', 'gather', 'scatter'].includes(kind)) collective.root = Number($('#root').value) | 0;
  let options = {};
  const optText = $('#options').value.trim();
  if (optText) {
    try { options = JSON.parse(optText); } catch (e) { throw new Error('Options are not JSON: ' + e.message); }
  }
  options = {...options, wait_s: 0};
  return {topology, collective, method: $('#method').value, options};
}

function requestLabel(req) {
  const t = typeof req.topology === 'string' ? req.topology : (req.topology.name || 'custom') + ' (JSON)';
  const root = req.collective.root !== undefined ? ':' + req.collective.root : '';
  return req.collective.kind + root + ' on ' + t + ' · ' + req.method;
}

async function onSubmit(ev) {
  ev.preventDefault();
  const msg = $('#submit-msg');
  msg.className = 'msg';
  let req;
  try { req = readRequest(); } catch (e) { msg.textContent = e.message; msg.classList.add('error'); return; }
  msg.textContent = 'submitting…';
  $('#submit-btn').disabled = true;
  try {
    const {status, doc} = await api('POST', '/v1/synthesize', req);
    const label = requestLabel(req);
    if (doc && doc.frontier) {
      state.topoByKey[doc.key] = req.topology;
      const id = 'cached-' + (doc.key || '').slice(0, 8);
      state.jobs[id] = {id, label, status: 'done', key: doc.key, submitted: Date.now(), progress: null, result: doc, topology: req.topology};
      msg.textContent = 'ready (HTTP ' + status + ', from the cache or within the wait)';
      showResult(doc);
    } else if (doc && doc.job !== undefined) {
      const id = String(doc.job);
      state.jobs[id] = {id, label, status: 'queued', submitted: Date.now(), progress: null, topology: req.topology};
      state.autoOpen = id;
      msg.textContent = 'job ' + id + ' submitted';
    } else {
      msg.textContent = 'unexpected answer (HTTP ' + status + ')';
      msg.classList.add('error');
    }
    saveJobs();
    renderJobs();
    refreshHistory();
  } catch (e) {
    msg.textContent = e instanceof ApiError ? e.describe() : e.message;
    msg.classList.add('error');
  } finally {
    $('#submit-btn').disabled = false;
  }
}

function progressOf(job) {
  const p = job.progress;
  if (p === null || p === undefined) return {};
  if (typeof p === 'number') return {done: p, total: 1};
  return {
    done: p.done ?? p.instances ?? p.tried ?? p.trials,
    total: p.total,
    best: p.best ?? p.best_cost,
    elapsed: p.elapsed ?? p.elapsed_s ?? p.seconds,
    message: p.message,
  };
}

function renderJobs() {
  const body = $('#jobs tbody');
  const jobs = Object.values(state.jobs).sort((a, b) => b.submitted - a.submitted);
  $('#jobs-empty').hidden = jobs.length > 0;
  body.replaceChildren(...jobs.map(j => {
    const p = progressOf(j);
    const frac = p.total ? Math.min(1, (p.done || 0) / p.total) : (j.status === 'done' ? 1 : 0);
    const bar = el('div', {class: 'bar', title: p.message || ''}, [el('div', {class: 'fill', style: 'width:' + (frac * 100).toFixed(0) + '%'})]);
    const count = p.done !== undefined ? String(p.done) + (p.total ? '/' + p.total : '') : '';
    const actions = [];
    if (j.status === 'done' && (j.key || j.result)) actions.push(el('button', {class: 'link', text: 'view', onclick: () => openJob(j)}));
    if (j.status === 'queued' || j.status === 'running') actions.push(el('button', {class: 'link', text: 'cancel', onclick: () => cancelJob(j)}));
    return el('tr', {'data-job': j.id, 'data-status': j.status}, [
      el('td', {text: j.id.length > 12 ? j.id.slice(0, 8) + '…' : j.id, title: j.id, class: 'mono'}),
      el('td', {text: j.label}),
      el('td', {}, [el('span', {class: 'status ' + j.status, text: j.status})]),
      el('td', {}, [bar, el('span', {class: 'count', text: count})]),
      el('td', {text: p.best !== undefined && p.best !== null ? Number(p.best).toPrecision(4) : ''}),
      el('td', {text: fmtElapsed(p.elapsed)}),
      el('td', {}, actions),
    ]);
  }));
}

async function pollJobs() {
  const active = Object.values(state.jobs).filter(j => j.status === 'queued' || j.status === 'running');
  for (const j of active) {
    try {
      const {doc} = await api('GET', '/v1/jobs/' + encodeURIComponent(j.id));
      j.status = doc.status || j.status;
      j.progress = doc.progress ?? j.progress;
      if (doc.error) j.error = doc.error;
      if (doc.result) {
        j.result = doc.result;
        j.key = doc.result.key;
        state.topoByKey[j.key] = j.topology;
      }
      if (j.status === 'done' && state.autoOpen === j.id) {
        state.autoOpen = null;
        if (j.result) showResult(j.result);
      }
      if (j.status === 'failed' && state.autoOpen === j.id) {
        const m = $('#submit-msg');
        m.textContent = 'job ' + j.id + ' failed: ' + (j.error ? (j.error.code || '') + ' ' + (j.error.message || '') : '');
        m.className = 'msg error';
      }
    } catch (e) {
      if (e.status === 404) j.status = 'unknown';
    }
  }
  if (active.length) { saveJobs(); renderJobs(); }
}

async function cancelJob(j) {
  try { await api('DELETE', '/v1/jobs/' + encodeURIComponent(j.id)); } catch (e) { /* shown by the next poll */ }
  pollJobs();
}

async function openJob(j) {
  if (j.result) { state.topoByKey[j.key] = j.topology; return showResult(j.result); }
  return openKey(j.key);
}

async function openKey(key) {
  const msg = $('#submit-msg');
  try {
    const {doc} = await api('GET', '/v1/results/' + encodeURIComponent(key) + '?format=json');
    showResult(doc);
  } catch (e) {
    msg.textContent = e instanceof ApiError ? e.describe() : e.message;
    msg.className = 'msg error';
  }
}

/* ---- result view ------------------------------------------------------------------- */

async function resolveTopology(res) {
  const submitted = state.topoByKey[res.key];
  const first = res.frontier && res.frontier[0];
  if (submitted && typeof submitted === 'object') return {doc: submitted, request: submitted};
  if (res.topology && typeof res.topology === 'object') return {doc: res.topology, request: res.topology};
  const names = [];
  if (typeof submitted === 'string') names.push(submitted);
  if (typeof res.topology === 'string') names.push(res.topology);
  if (first && first.topology) names.push(first.topology);
  for (const n of names) {
    try {
      const {doc} = await api('GET', '/v1/topologies/' + encodeURIComponent(n));
      const t = doc && doc.topology && typeof doc.topology === 'object' ? doc.topology : doc;
      if (t && t.ranks) return {doc: t, request: n};
    } catch (e) { /* try the next */ }
  }
  return {doc: null, request: null};
}

async function showResult(res) {
  document.body.removeAttribute('data-result');
  delete $('#size-plot').dataset.baselinesLoaded;
  $('#result-card').hidden = false;
  $('#result-key').textContent = res.key || '';
  const frontier = res.frontier || [];
  const {doc, request} = await resolveTopology(res);
  const topo = normalizeTopology(doc, frontier[0]);
  // the default selection: the bandwidth-optimal end (most interesting sends)
  state.current = {result: res, topo, topoRequest: request, selected: Math.max(0, frontier.length - 1), baselines: []};
  renderSummary();
  renderFrontierTable();
  renderTopology();
  renderFrontierPlot();
  renderSizePlot();
  renderSelected();
  document.body.dataset.result = res.key || 'shown';
  $('#result-card').scrollIntoView({behavior: 'smooth', block: 'start'});
  loadBaselines(res, request);
}

function renderSummary() {
  const {result: r, topo} = state.current;
  const b = r.bounds || {};
  const coll = r.collective ? (r.collective.kind + (r.collective.root !== undefined && r.collective.root >= 0 ? ' root ' + r.collective.root : '')) : '';
  const items = [
    ['topology', (typeof r.topology === 'string' ? r.topology : topo.name) + ' · ' + topo.ranks + ' ranks · ' + topo.links.length + ' directed links' + (topo.derived ? ' (drawn from the sends)' : '')],
    ['collective', coll],
    ['method', (r.method || '') + (r.reason ? ' - ' + r.reason : '')],
    ['lower bounds', 'steps ≥ ' + (b.steps ?? '?') + ', rounds/chunk ≥ ' + (b.rounds_per_chunk !== undefined ? Number(b.rounds_per_chunk).toPrecision(4) : '?')],
    ['time bound', timeBoundText(b.time, r.frontier || [])],
    ['synthesis time', r.synth_seconds !== undefined ? Number(r.synth_seconds).toFixed(2) + ' s' : ''],
    ['cost model', 'α = ' + topo.alpha + ' µs, β = ' + (topo.beta * 1e3).toPrecision(3) + ' ns/B'],
  ];
  $('#result-summary').replaceChildren(...items.map(([k, v]) => el('div', {}, [el('span', {class: 'k', text: k}), el('span', {class: 'v', text: v})])));
}

/* The cut-aware time bound (bounds.time): T >= max(A + B L, D, every line of
 * "lines"), L the per-rank share; a custom collective's L is one chunk
 * (per_chunk).  Rooted collectives carry "lines": the latency to a cut plus
 * its transfer time. */
function boundAt(tb, bytes, chunks) {
  if (!tb) return null;
  const L = tb.per_chunk ? bytes / (chunks || 1) : bytes;
  let best = Math.max(Number(tb.latency_us) + Number(tb.bandwidth_us_per_byte) * L, Number(tb.path_latency_us) || 0);
  for (const ln of (Array.isArray(tb.lines) ? tb.lines : []))
    best = Math.max(best, Number(ln.latency_us) + Number(ln.bandwidth_us_per_byte) * L);
  return best;
}

function timeBoundText(tb, frontier) {
  if (!tb) return 'not in this result';
  const at = frontier.find(a => a.bound_bytes !== undefined);
  const size = at ? Number(at.bound_bytes) : 64 * 1048576;
  return fmtUs(boundAt(tb, size, at ? at.chunks : 1)) + ' at ' + fmtBytes(size) + ' per rank (' + tb.kind +
    (tb.exact ? ', exact' : '') + '): ' + tb.cut;
}

function ratioText(a) {
  return a.ratio_to_bound !== undefined ? Number(a.ratio_to_bound).toFixed(3) : '–';
}

function renderFrontierTable() {
  const {result: r} = state.current;
  const key = encodeURIComponent(r.key || '');
  const rows = (r.frontier || []).map((a, i) => {
    const probe = sizeWhereBest(i);
    const q = probe !== null ? '&size=' + Math.round(probe) : '';
    const dl = el('span', {class: 'downloads'}, [
      el('a', {href: '/v1/results/' + key + '?format=msccl-xml' + q, target: '_blank', text: 'xml'}),
      el('a', {href: '/v1/results/' + key + '?format=cuda' + q, target: '_blank', text: 'cuda'}),
    ]);
    return el('tr', {'data-alg': i, class: i === state.current.selected ? 'selected' : '', onclick: () => select(i)}, [
      el('td', {text: i}), el('td', {text: a.steps}), el('td', {text: a.rounds}), el('td', {text: a.chunks}),
      el('td', {text: (a.rounds / (a.chunks || 1)).toPrecision(4)}), el('td', {text: (a.sends || []).length}),
      el('td', {text: a.optimality || ''}), el('td', {text: a.method || ''}),
      el('td', {text: a.simulated_us !== undefined ? fmtUs(Number(a.simulated_us)) : '–'}),
      el('td', {class: 'ratio', 'data-ratio': a.ratio_to_bound ?? '', text: ratioText(a)}),
      el('td', {}, [dl]),
    ]);
  });
  $('#frontier-table tbody').replaceChildren(...rows);
}

/* A message size at which frontier[i] is the cheapest, or null. */
function sizeWhereBest(i) {
  const {result: r, topo} = state.current;
  const fr = r.frontier || [];
  for (let e = 4; e <= 40; e += 0.5) {
    const bytes = Math.pow(2, e);
    let best = 0;
    for (let j = 1; j < fr.length; j++) if (algCost(fr[j], topo, bytes) < algCost(fr[best], topo, bytes) - 1e-12) best = j;
    if (best === i) return bytes;
  }
  return null;
}

function select(i) {
  state.current.selected = i;
  for (const tr of document.querySelectorAll('#frontier-table tbody tr')) tr.classList.toggle('selected', Number(tr.dataset.alg) === i);
  for (const p of document.querySelectorAll('#frontier-plot [data-point]')) p.classList.toggle('selected', Number(p.dataset.point) === i);
  renderSelected();
}

function renderSelected() {
  renderHeatmap();
  renderTimeline();
}

/* ---- chart scaffolding --------------------------------------------------------------- */

function linearScale(d0, d1, r0, r1) {
  const f = v => r0 + (v - d0) / (d1 - d0 || 1) * (r1 - r0);
  f.domain = [d0, d1];
  return f;
}

function logScale(d0, d1, r0, r1) {
  const l0 = Math.log10(d0), l1 = Math.log10(d1);
  const f = v => r0 + (Math.log10(Math.max(v, 1e-300)) - l0) / (l1 - l0 || 1) * (r1 - r0);
  f.domain = [d0, d1];
  return f;
}

function niceTicks(lo, hi, count) {
  const span = hi - lo || 1;
  const step0 = Math.pow(10, Math.floor(Math.log10(span / count)));
  const err = span / count / step0;
  const step = step0 * (err >= 7.5 ? 10 : err >= 3.5 ? 5 : err >= 1.5 ? 2 : 1);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.round(v / step) * step);
  return out;
}

function chart(width, height, margin) {
  const root = svg('svg', {viewBox: `0 0 ${width} ${height}`, width: '100%', class: 'chart', role: 'img'});
  const inner = {x0: margin.left, x1: width - margin.right, y0: height - margin.bottom, y1: margin.top};
  return {root, inner, width, height};
}

function axes(c, xs, ys, xticks, yticks, xfmt, yfmt, xlabel, ylabel) {
  const {root, inner} = c;
  const g = svg('g', {class: 'axes'});
  g.append(svg('line', {x1: inner.x0, y1: inner.y0, x2: inner.x1, y2: inner.y0, class: 'axis'}));
  g.append(svg('line', {x1: inner.x0, y1: inner.y0, x2: inner.x0, y2: inner.y1, class: 'axis'}));
  for (const t of xticks) {
    const x = xs(t);
    g.append(svg('line', {x1: x, y1: inner.y1, x2: x, y2: inner.y0, class: 'grid'}));
    g.append(svg('text', {x, y: inner.y0 + 15, 'text-anchor': 'middle', class: 'tick', text: xfmt(t)}));
  }
  for (const t of yticks) {
    const y = ys(t);
    g.append(svg('line', {x1: inner.x0, y1: y, x2: inner.x1, y2: y, class: 'grid'}));
    g.append(svg('text', {x: inner.x0 - 6, y: y + 4, 'text-anchor': 'end', class: 'tick', text: yfmt(t)}));
  }
  g.append(svg('text', {x: (inner.x0 + inner.x1) / 2, y: c.height - 4, 'text-anchor': 'middle', class: 'label', text: xlabel}));
  g.append(svg('text', {x: 12, y: (inner.y0 + inner.y1) / 2, 'text-anchor': 'middle', class: 'label', transform: `rotate(-90 12 ${(inner.y0 + inner.y1) / 2})`, text: ylabel}));
  root.append(g);
}

/* ---- topology graph ------------------------------------------------------------------- */

/* Meshes, tori and hypercubes sit on their grid: the builtins number ranks
 * with dimension 0 fastest (mesh2d:AxB: rank = x + A*y; 3D: x + A*(y + B*z),
 * drawn as B-row layers side by side), a hypercube:D by its bits (the low
 * half across, the high half down).  null for every other topology, which
 * is drawn on a circle. */
function gridLayout(topo, names) {
  for (const n of names) {
    if (typeof n !== 'string') continue;
    const m = /^(mesh2d|torus2d|mesh3d|torus3d|hypercube):([0-9]+(?:x[0-9]+)*)/.exec(n);
    if (!m) continue;
    const dims = m[2].split('x').map(Number);
    let cols, rows, coord;
    if (m[1] === 'hypercube' && dims.length === 1) {
      const D = dims[0], dx = Math.ceil(D / 2);
      cols = 1 << dx; rows = 1 << (D - dx);
      coord = r => [r & (cols - 1), r >> dx];
    } else if (m[1].endsWith('2d') && dims.length === 2) {
      [cols, rows] = dims;
      coord = r => [r % cols, Math.floor(r / cols)];
    } else if (m[1].endsWith('3d') && dims.length === 3) {
      const [A, B, C] = dims;
      cols = C * A + C - 1; rows = B;
      coord = r => [Math.floor(r / (A * B)) * (A + 1) + r % A, Math.floor(r / A) % B];
    } else continue;
    const P = m[1] === 'hypercube' ? cols * rows : dims.reduce((a, b) => a * b, 1);
    if (P !== topo.ranks) continue;
    return {kind: m[1], cols, rows, coord};
  }
  return null;
}

function renderTopology() {
  const {topo, result: res, topoRequest} = state.current;
  const host = $('#topology-graph');
  const W = 420, H = 360, P = topo.ranks;
  if (!P) { host.replaceChildren(el('p', {class: 'hint', text: 'no topology to draw'})); return; }
  const grid = gridLayout(topo, [topo.name, topoRequest, res.topology]);
  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'chart graph', 'data-ranks': P, 'data-layout': grid ? grid.kind : 'circle'});
  const cx = W / 2, cy = H / 2, R = Math.min(W, H) / 2 - 34;
  const pos = new Array(P), cellOf = new Array(P);
  let nodeR = P > 64 ? 3 : P > 24 ? 7 : 12;
  if (grid) {
    const m = 28;
    const step = Math.min((W - 2 * m) / Math.max(1, grid.cols - 1), (H - 2 * m) / Math.max(1, grid.rows - 1));
    const x0 = cx - step * (grid.cols - 1) / 2, y0 = cy - step * (grid.rows - 1) / 2;
    for (let r = 0; r < P; r++) {
      const [gx, gy] = grid.coord(r);
      cellOf[r] = [gx, gy];
      pos[r] = [x0 + gx * step, y0 + gy * step];
    }
    nodeR = Math.max(2, Math.min(12, step * 0.3));
  } else {
    // ranks on a circle, in group order when groups are given
    const order = [];
    const seen = new Set();
    for (const g of topo.groups) for (const r of g) if (!seen.has(r)) { seen.add(r); order.push(r); }
    for (let r = 0; r < P; r++) if (!seen.has(r)) order.push(r);
    order.forEach((r, i) => { const t = 2 * Math.PI * i / P - Math.PI / 2; pos[r] = [cx + R * Math.cos(t), cy + R * Math.sin(t)]; });
  }
  const edges = svg('g', {class: 'edges'});
  const pairs = new Map();
  for (const l of topo.links) {
    if (l.switch) continue;
    const a = Math.min(l.src, l.dst), b = Math.max(l.src, l.dst), k = a + '-' + b;
    const e = pairs.get(k) || {a, b, lanes: 0, dirs: 0, gbps: l.gbps};
    e.lanes = Math.max(e.lanes, l.lanes); e.dirs++;
    pairs.set(k, e);
  }
  for (const e of pairs.values()) {
    const [x1, y1] = pos[e.a], [x2, y2] = pos[e.b];
    const width = grid ? Math.min(3, 0.6 + e.lanes * 0.6) : Math.min(6, 0.8 + e.lanes * 1.1);
    const what = `${e.a} ↔ ${e.b}: ${e.lanes} lane(s) × ${e.gbps} GB/s${e.dirs < 2 ? ' (one direction)' : ''}`;
    const far = grid && Math.abs(cellOf[e.a][0] - cellOf[e.b][0]) + Math.abs(cellOf[e.a][1] - cellOf[e.b][1]) > 1;
    if (far) {
      // a wrap-around or long link (torus, hypercube, across 3D layers): an
      // arc, so it does not run over the ranks between its ends
      const mx = (x1 + x2) / 2, my = (y1 + y2) / 2, dx = x2 - x1, dy = y2 - y1, len = Math.hypot(dx, dy) || 1;
      const bend = Math.min(40, 0.18 * len);
      const qx = mx - dy / len * bend, qy = my + dx / len * bend;
      edges.append(tip(svg('path', {d: `M${x1},${y1} Q${qx},${qy} ${x2},${y2}`, class: 'edge wrap', 'data-link': e.a + '-' + e.b, 'stroke-width': width}), what));
    } else {
      edges.append(tip(svg('line', {x1, y1, x2, y2, class: 'edge', 'data-link': e.a + '-' + e.b, 'stroke-width': width}), what));
    }
  }
  root.append(edges);
  topo.switches.forEach((s, i) => {
    const t = 2 * Math.PI * (i + 0.5) / Math.max(1, topo.switches.length);
    const sx = cx + (topo.switches.length > 1 ? R * 0.35 * Math.cos(t) : 0), sy = cy + (topo.switches.length > 1 ? R * 0.35 * Math.sin(t) : 0);
    const g = svg('g', {class: 'switch', 'data-switch': s.name});
    for (const r of s.ranks) if (pos[r]) g.append(svg('line', {x1: sx, y1: sy, x2: pos[r][0], y2: pos[r][1], class: 'port', 'data-switch-port': s.name + ':' + r}));
    g.append(tip(svg('rect', {x: sx - 12, y: sy - 9, width: 24, height: 18, rx: 3, class: 'switch-box'}), `${s.name}: ${s.ranks.length} ports × ${s.gbps} GB/s`));
    root.append(g);
  });
  const nodes = svg('g', {class: 'nodes'});
  const r = nodeR;
  const groupOf = new Map();
  topo.groups.forEach((g, gi) => g.forEach(x => groupOf.set(x, gi)));
  for (let i = 0; i < P; i++) {
    const g = svg('g', {'data-rank': i, 'data-x': grid ? cellOf[i][0] : null, 'data-y': grid ? cellOf[i][1] : null});
    const color = groupOf.has(i) ? PALETTE[groupOf.get(i) % PALETTE.length] : '#1f2937';
    g.append(tip(svg('circle', {cx: pos[i][0], cy: pos[i][1], r, fill: color, class: 'rank'}), 'rank ' + i + (grid ? ` (${cellOf[i][0]}, ${cellOf[i][1]})` : '')));
    if (P <= 32 && r >= 7) g.append(svg('text', {x: pos[i][0], y: pos[i][1] + 4, 'text-anchor': 'middle', class: 'rank-label', text: i}));
    nodes.append(g);
  }
  root.append(nodes);
  host.replaceChildren(root);
}

/* ---- Pareto frontier -------------------------------------------------------------------- */

function renderFrontierPlot() {
  const {result: r} = state.current;
  const host = $('#frontier-plot');
  const fr = r.frontier || [];
  const b = r.bounds || {};
  const c = chart(420, 320, {left: 48, right: 16, top: 16, bottom: 40});
  const xsVals = fr.map(a => a.rounds / (a.chunks || 1));
  const ysVals = fr.map(a => a.steps);
  if (b.rounds_per_chunk !== undefined) xsVals.push(Number(b.rounds_per_chunk));
  if (b.steps !== undefined) ysVals.push(Number(b.steps));
  const xlo = Math.min(...xsVals, 1e9), xhi = Math.max(...xsVals, 0);
  const ylo = Math.min(...ysVals, 1e9), yhi = Math.max(...ysVals, 0);
  const xpad = (xhi - xlo) * 0.15 || Math.max(0.5, xhi * 0.2);
  const xs = linearScale(Math.max(0, xlo - xpad), xhi + xpad, c.inner.x0, c.inner.x1);
  const ys = linearScale(Math.max(0, ylo - 1), yhi + 1, c.inner.y0, c.inner.y1);
  axes(c, xs, ys, niceTicks(xs.domain[0], xs.domain[1], 5), niceTicks(ys.domain[0], ys.domain[1], 6).filter(v => Number.isInteger(v)),
    v => String(+v.toFixed(3)), v => String(v), 'bandwidth cost: rounds / chunk', 'latency cost: steps');
  const g = svg('g', {class: 'bounds'});
  if (b.steps !== undefined) {
    const y = ys(b.steps);
    g.append(svg('rect', {x: c.inner.x0, y, width: c.inner.x1 - c.inner.x0, height: c.inner.y0 - y, class: 'infeasible'}));
    g.append(tip(svg('line', {x1: c.inner.x0, x2: c.inner.x1, y1: y, y2: y, class: 'bound', 'data-bound': 'steps'}), 'latency lower bound: ' + b.steps + ' steps'));
    g.append(svg('text', {x: c.inner.x1 - 4, y: y + 13, 'text-anchor': 'end', class: 'bound-label', text: 'steps ≥ ' + b.steps}));
  }
  if (b.rounds_per_chunk !== undefined) {
    const x = xs(Number(b.rounds_per_chunk));
    g.append(svg('rect', {x: c.inner.x0, y: c.inner.y1, width: x - c.inner.x0, height: c.inner.y0 - c.inner.y1, class: 'infeasible'}));
    g.append(tip(svg('line', {x1: x, x2: x, y1: c.inner.y0, y2: c.inner.y1, class: 'bound', 'data-bound': 'rounds_per_chunk'}), 'bandwidth lower bound: ' + Number(b.rounds_per_chunk).toPrecision(4) + ' rounds/chunk'));
    g.append(svg('text', {x: x + 4, y: c.inner.y1 + 12, class: 'bound-label', text: 'R/C ≥ ' + Number(b.rounds_per_chunk).toPrecision(3)}));
  }
  c.root.append(g);
  // the frontier as a staircase
  const pts = fr.map((a, i) => ({i, x: xs(a.rounds / (a.chunks || 1)), y: ys(a.steps), a})).sort((p, q) => p.x - q.x);
  if (pts.length > 1) {
    let d = `M${pts[0].x},${pts[0].y}`;
    for (let k = 1; k < pts.length; k++) d += ` H${pts[k].x} V${pts[k].y}`;
    c.root.append(svg('path', {d, class: 'stair'}));
  }
  const pg = svg('g', {class: 'points'});
  for (const p of pts) {
    const a = p.a;
    const circle = svg('circle', {cx: p.x, cy: p.y, r: 6, class: 'point' + (p.i === state.current.selected ? ' selected' : ''), 'data-point': p.i, fill: PALETTE[p.i % PALETTE.length]});
    circle.addEventListener('click', () => select(p.i));
    const ratio = a.ratio_to_bound !== undefined ? `, ${ratioText(a)} of the time bound at ${fmtBytes(Number(a.bound_bytes))}` : '';
    tip(circle, `#${p.i}: ${a.steps} steps, ${a.rounds} rounds, ${a.chunks} chunks${a.optimality ? ' (' + a.optimality + '-optimal)' : ''}${ratio}`);
    pg.append(circle);
    pg.append(svg('text', {x: p.x + 8, y: p.y - 8, class: 'point-label', 'data-point-ratio': a.ratio_to_bound ?? '',
      text: `C=${a.chunks} S=${a.steps} R=${a.rounds}` + (a.ratio_to_bound !== undefined ? ` · ${ratioText(a)}` : '')}));
  }
  c.root.append(pg);
  c.root.setAttribute('data-points', fr.length);
  host.replaceChildren(c.root);
  keepLabelsInside(c.root, c.width);
}

/* A point's label starts right of it; near the right edge (the latency end
 * of the frontier, largest R/C) it would be cut, so it ends left of it. */
function keepLabelsInside(root, width) {
  for (const t of root.querySelectorAll('text.point-label')) {
    let b;
    try { b = t.getBBox(); } catch (e) { continue; }
    if (b.x + b.width > width - 2) {
      t.setAttribute('text-anchor', 'end');
      t.setAttribute('x', Number(t.getAttribute('x')) - 16);
    }
    if (Number(t.getAttribute('y')) < 10) t.setAttribute('y', 10);
  }
}

/* ---- time against message size ------------------------------------------------------------- */

/* Baselines asked before: memo key -> {key} (stored result) or {error, status}
 * (the server refused it: it is not asked again).  Bounded, oldest first out. */
const BASELINE_MEMO = 'collsynth.baselines';
const BASELINE_MEMO_MAX = 300;

function baselineMemo() {
  try { return JSON.parse(localStorage.getItem(BASELINE_MEMO) || '{}'); } catch (e) { return {}; }
}

function rememberBaseline(mk, entry) {
  const memo = baselineMemo();
  delete memo[mk];
  memo[mk] = entry;
  const keys = Object.keys(memo);
  for (let i = 0; i < keys.length - BASELINE_MEMO_MAX; i++) delete memo[keys[i]];
  try { localStorage.setItem(BASELINE_MEMO, JSON.stringify(memo)); } catch (e) { /* full: memory only */ }
}

/* One baseline's algorithm for (request, collective), or null: from this
 * page's memory, else the stored result the memo names, else one POST (whose
 * outcome is remembered).  A refusal (4xx) is never asked again; a time-out or
 * an unreachable server is (it says nothing about the baseline). */
async function fetchBaseline(request, collective, name) {
  const mk = JSON.stringify([request, collective, name]);
  if (state.baselineDocs.has(mk)) return state.baselineDocs.get(mk);
  const m = baselineMemo()[mk];
  if (m && m.error) { state.baselineDocs.set(mk, null); return null; }
  if (m && m.key) {
    try {
      const {doc} = await api('GET', '/v1/results/' + encodeURIComponent(m.key) + '?format=json');
      const a = doc && doc.frontier && doc.frontier[0];
      if (a) { state.baselineDocs.set(mk, a); return a; }
    } catch (e) { /* evicted from the store: synthesize it again */ }
  }
  try {
    const {doc} = await api('POST', '/v1/synthesize', {topology: request, collective, method: name, options: {wait_s: 20}});
    const a = doc && doc.frontier && doc.frontier[0];
    if (a) {
      rememberBaseline(mk, {key: doc.key});
      state.baselineDocs.set(mk, a);
    }
    return a || null;
  } catch (e) {
    if (e.status >= 400 && e.status < 500 && ![401, 403, 408, 429].includes(e.status)) {
      rememberBaseline(mk, {error: e.describe(), status: e.status});
      state.baselineDocs.set(mk, null);
    }
    return null;
  }
}

async function loadBaselines(res, request) {
  if (!request || !res.collective) { $('#size-plot').dataset.baselinesLoaded = 'true'; return; }
  const key = res.key;
  const wanted = BASELINES.filter(n => n !== res.method);
  await Promise.all(wanted.map(async name => {
    const a = await fetchBaseline(request, res.collective, name);
    if (a && state.current && state.current.result.key === key) {
      state.current.baselines.push({name, alg: a});
      state.current.baselines.sort((x, y) => x.name.localeCompare(y.name));
      renderSizePlot();
    }
  }));
  if (state.current && state.current.result.key === key) $('#size-plot').dataset.baselinesLoaded = 'true';
}

function renderSizePlot() {
  const {result: r, topo, baselines} = state.current;
  const host = $('#size-plot');
  const fr = r.frontier || [];
  const c = chart(420, 320, {left: 72, right: 16, top: 16, bottom: 40});
  const sizes = [];
  for (let e = 10; e <= 30; e += 0.5) sizes.push(Math.pow(2, e));
  const curves = fr.map((a, i) => ({id: 'frontier-' + i, label: `#${i} C=${a.chunks} S=${a.steps} R=${a.rounds}`, color: PALETTE[i % PALETTE.length], dash: null, alg: a}));
  for (const b of baselines) curves.push({id: 'baseline-' + b.name, label: b.name, color: BASELINE_COLORS[b.name] || '#6b7280', dash: '5 4', alg: b.alg});
  const tb = (r.bounds || {}).time;
  const boundCurve = tb && !tb.per_chunk ? sizes.map(s => boundAt(tb, s, 1)) : null;
  let lo = Infinity, hi = 0;
  for (const cv of curves) for (const s of sizes) { const t = algCost(cv.alg, topo, s); lo = Math.min(lo, t); hi = Math.max(hi, t); }
  if (boundCurve) for (const t of boundCurve) if (t > 0) { lo = Math.min(lo, t); hi = Math.max(hi, t); }
  if (!isFinite(lo) || lo <= 0) lo = 0.1;
  if (hi <= lo) hi = lo * 10;
  const xs = logScale(sizes[0], sizes[sizes.length - 1], c.inner.x0, c.inner.x1);
  const ys = logScale(lo / 1.5, hi * 1.5, c.inner.y0, c.inner.y1);
  const xt = [1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 26, 1 << 30];
  const yt = [];
  for (let e = Math.ceil(Math.log10(lo / 1.5)); e <= Math.floor(Math.log10(hi * 1.5)); e++) yt.push(Math.pow(10, e));
  axes(c, xs, ys, xt, yt, fmtBytes, fmtUs, 'buffer size per rank (bytes)', 'time');
  const g = svg('g', {class: 'curves'});
  for (const cv of curves) {
    const d = sizes.map((s, k) => (k ? 'L' : 'M') + xs(s).toFixed(1) + ',' + ys(algCost(cv.alg, topo, s)).toFixed(1)).join(' ');
    g.append(tip(svg('path', {d, class: 'curve', stroke: cv.color, 'stroke-dasharray': cv.dash, 'data-curve': cv.id}), cv.label));
  }
  if (boundCurve) {
    // the time bound: no schedule runs below it (the frontier curves are alpha-beta estimates)
    const d = sizes.map((s, k) => (k ? 'L' : 'M') + xs(s).toFixed(1) + ',' + ys(Math.max(boundCurve[k], lo / 1.5)).toFixed(1)).join(' ');
    g.append(tip(svg('path', {d, class: 'curve bound-curve', 'data-bound-curve': tb.kind}),
      'time bound (' + tb.kind + '): ' + tb.cut));
  }
  c.root.append(g);
  // legend
  const lg = svg('g', {class: 'legend'});
  // bottom right: the emptiest corner of rising log-log cost curves
  const entries = curves.map(cv => ({label: cv.label, attrs: {stroke: cv.color, 'stroke-width': 2.5, 'stroke-dasharray': cv.dash}}));
  if (boundCurve) entries.push({label: 'time bound', attrs: {class: 'bound-curve'}});
  const lx = c.inner.x1 - 138;
  const ly0 = c.inner.y0 - 10 - (entries.length - 1) * 14;
  lg.append(svg('rect', {x: lx - 6, y: ly0 - 9, width: 142, height: entries.length * 14 + 4, class: 'legend-bg'}));
  entries.forEach((e, k) => {
    const y = ly0 + k * 14;
    lg.append(svg('line', {x1: lx, x2: lx + 18, y1: y, y2: y, ...e.attrs}));
    lg.append(svg('text', {x: lx + 22, y: y + 4, class: 'legend-label', text: e.label}));
  });
  c.root.append(lg);
  c.root.setAttribute('data-curves', curves.length);
  host.replaceChildren(c.root);
}

/* ---- per-link load heat map ------------------------------------------------------------------ */

function linkLoads(alg) {
  const load = new Map();
  for (const s of (alg && alg.sends) || []) {
    const k = s.src + '-' + s.dst;
    load.set(k, (load.get(k) || 0) + 1);
  }
  return load;
}

function heatColor(t) {
  // white -> amber -> red
  const stops = [[248, 250, 252], [253, 186, 116], [220, 38, 38]];
  const x = Math.max(0, Math.min(1, t)) * 2, i = Math.min(1, Math.floor(x)), f = x - i;
  const c = stops[i].map((v, k) => Math.round(v + (stops[i + 1][k] - v) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function renderHeatmap() {
  const {result: r, topo, selected} = state.current;
  const host = $('#link-heatmap');
  const alg = (r.frontier || [])[selected];
  const P = topo.ranks;
  if (!P || P > 256) { host.replaceChildren(el('p', {class: 'hint', text: P ? 'too many ranks for a matrix (' + P + ')' : 'no topology'})); return; }
  const load = linkLoads(alg);
  // copy-capable switches: the schedule's switch nodes (ranks + j) get rows
  // and columns after the ranks, labelled s0, s1, ...
  const nodes = (alg && alg.switch_nodes) || 0, N = P + nodes;
  const label = i => (i < P ? String(i) : 's' + (i - P));
  // every directed link of the topology, plus any pair the schedule uses that is not one
  const cells = topo.links.map(l => ({src: l.src, dst: l.dst, lanes: l.lanes, sw: l.switch}));
  const have = new Set(cells.map(x => x.src + '-' + x.dst));
  for (const k of load.keys()) if (!have.has(k)) { const [s, d] = k.split('-').map(Number); cells.push({src: s, dst: d, lanes: 1, sw: null, extra: s < P && d < P, node: s >= P || d >= P}); }
  let maxPerLane = 0;
  for (const x of cells) maxPerLane = Math.max(maxPerLane, (load.get(x.src + '-' + x.dst) || 0) / x.lanes);
  const size = 380, cell = Math.max(1, Math.floor(size / N)), off = 34;
  const W = off + cell * N + 70, H = off + cell * N + 10;
  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'chart heatmap'});
  root.append(svg('rect', {x: off, y: off, width: cell * N, height: cell * N, class: 'matrix-bg'}));
  if (N <= 32) {
    for (let i = 0; i < N; i++) {
      root.append(svg('text', {x: off + i * cell + cell / 2, y: off - 6, 'text-anchor': 'middle', class: 'tick', text: label(i)}));
      root.append(svg('text', {x: off - 6, y: off + i * cell + cell / 2 + 4, 'text-anchor': 'end', class: 'tick', text: label(i)}));
    }
  }
  root.append(svg('text', {x: off + cell * N / 2, y: 10, 'text-anchor': 'middle', class: 'label', text: 'to rank'}));
  root.append(svg('text', {x: 10, y: off + cell * N / 2, 'text-anchor': 'middle', class: 'label', transform: `rotate(-90 10 ${off + cell * N / 2})`, text: 'from rank'}));
  const g = svg('g', {class: 'cells'});
  for (const x of cells) {
    const n = load.get(x.src + '-' + x.dst) || 0;
    const t = maxPerLane ? n / x.lanes / maxPerLane : 0;
    const rect = svg('rect', {x: off + x.dst * cell + 0.5, y: off + x.src * cell + 0.5, width: Math.max(0.5, cell - 1), height: Math.max(0.5, cell - 1),
      fill: n ? heatColor(0.15 + 0.85 * t) : '#e2e8f0', class: 'cell' + (x.extra ? ' extra' : ''), 'data-link': x.src + '-' + x.dst, 'data-load': n});
    tip(rect, `${label(x.src)} → ${label(x.dst)}: ${n} chunk send(s) over ${x.lanes} lane(s)${x.sw ? ' via ' + x.sw : ''}${x.node ? ' (through a copy-capable switch node)' : ''}${x.extra ? ' (not a topology link)' : ''}`);
    g.append(rect);
  }
  root.append(g);
  // colour scale
  const sx = off + cell * N + 16, sh = cell * N;
  for (let k = 0; k < 20; k++) root.append(svg('rect', {x: sx, y: off + sh - (k + 1) * sh / 20, width: 12, height: sh / 20 + 0.5, fill: heatColor(0.15 + 0.85 * k / 19)}));
  root.append(svg('text', {x: sx + 16, y: off + 8, class: 'tick', text: maxPerLane.toFixed(maxPerLane < 10 ? 1 : 0)}));
  root.append(svg('text', {x: sx + 16, y: off + sh, class: 'tick', text: '0'}));
  root.append(svg('text', {x: sx + 16, y: off + sh / 2, class: 'tick', text: '/lane'}));
  root.setAttribute('data-links', cells.length);
  host.replaceChildren(root);
}

/* ---- per-step timeline -------------------------------------------------------------------- */

function renderTimeline() {
  const {result: r, selected} = state.current;
  const host = $('#step-timeline');
  const alg = (r.frontier || [])[selected];
  if (!alg) { host.replaceChildren(); return; }
  const all = alg.sends || [];
  const sends = all.slice(0, MAX_TIMELINE_SENDS);
  const timed = sends.length > 0 && sends.every(s => typeof s.start_us === 'number' && typeof s.end_us === 'number');
  // one row per link while that stays readable, else one row per sending rank
  const links = [...new Set(sends.map(s => s.src + '-' + s.dst))];
  const byRank = links.length > 48;
  const rowKeyOf = s => byRank ? String(s.src) : s.src + '-' + s.dst;
  const rowsKey = [...new Set(sends.map(rowKeyOf))].sort((a, b) => {
    const [a1, a2 = 0] = a.split('-').map(Number), [b1, b2 = 0] = b.split('-').map(Number);
    return a1 - b1 || a2 - b2;
  });
  const rowOf = new Map(rowsKey.map((k, i) => [k, i]));
  const rowH = rowsKey.length > 120 ? 3 : rowsKey.length > 60 ? 6 : 13;
  const slotKey = s => s.step + ':' + rowKeyOf(s);
  const left = rowH >= 13 ? 56 : 20, top = 22, W = 900;
  const H = top + rowsKey.length * rowH + 30;
  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, width: '100%', class: 'chart timeline'});
  const x0 = left, x1 = W - 10;
  let xOf, widthOf;
  if (timed) {
    const end = Math.max(...sends.map(s => s.end_us), 1e-9);
    const xs = linearScale(0, end, x0, x1);
    xOf = s => xs(s.start_us);
    widthOf = s => Math.max(1, xs(s.end_us) - xs(s.start_us));
    for (const t of niceTicks(0, end, 8)) {
      root.append(svg('line', {x1: xs(t), x2: xs(t), y1: top, y2: H - 24, class: 'grid'}));
      root.append(svg('text', {x: xs(t), y: H - 10, 'text-anchor': 'middle', class: 'tick', text: fmtUs(t)}));
    }
  } else {
    // columns sized by rounds per step; sends on one link in one step share its column
    const rps = alg.rounds_per_step && alg.rounds_per_step.length === alg.steps ? alg.rounds_per_step : new Array(alg.steps).fill(1);
    const total = rps.reduce((a, b) => a + b, 0) || 1;
    const startOf = [];
    let acc = 0;
    for (let s = 0; s < alg.steps; s++) { startOf.push(acc); acc += rps[s]; }
    const xr = v => x0 + v / total * (x1 - x0);
    const slot = new Map(), count = new Map();
    for (const s of sends) { const k = slotKey(s); count.set(k, (count.get(k) || 0) + 1); }
    xOf = s => {
      const k = slotKey(s);
      const i = slot.get(k) || 0;
      slot.set(k, i + 1);
      const w = rps[s.step] / count.get(k);
      s._w = xr(w) - x0;
      return xr(startOf[s.step] + i * w);
    };
    widthOf = s => Math.max(1, s._w - 1);
    for (let s = 0; s < alg.steps; s++) {
      const xa = xr(startOf[s]), xb = xr(startOf[s] + rps[s]);
      root.append(svg('rect', {x: xa, y: top, width: xb - xa, height: rowsKey.length * rowH, class: s % 2 ? 'step-band odd' : 'step-band'}));
      root.append(svg('text', {x: (xa + xb) / 2, y: top - 8, 'text-anchor': 'middle', class: 'tick', text: 'step ' + s + (rps[s] > 1 ? ' (' + rps[s] + ' rounds)' : '')}));
    }
  }
  if (rowH >= 13)
    rowsKey.forEach((k, i) => root.append(svg('text', {x: left - 6, y: top + i * rowH + rowH - 3, 'text-anchor': 'end', class: 'tick', text: byRank ? 'rank ' + k : k.replace('-', '→')})));
  const g = svg('g', {class: 'sends'});
  for (const s of sends) {
    const y = top + rowOf.get(rowKeyOf(s)) * rowH + 1;
    const hue = (s.chunk * 137.508) % 360;
    const rect = svg('rect', {x: xOf(s), y, width: 0, height: rowH - 2, class: 'send' + (s.op === 'reduce' ? ' reduce' : ''), fill: `hsl(${hue},65%,${s.op === 'reduce' ? 42 : 55}%)`, 'data-send': ''});
    rect.setAttribute('width', widthOf(s));
    tip(rect, `chunk ${s.chunk}: ${s.src} → ${s.dst}, step ${s.step}, ${s.op || 'copy'}${timed ? ', ' + fmtUs(s.start_us) + '–' + fmtUs(s.end_us) : ''}`);
    g.append(rect);
  }
  root.append(g);
  root.setAttribute('data-sends', sends.length);
  root.setAttribute('data-rows', byRank ? 'rank' : 'link');
  const note = all.length > sends.length ? el('p', {class: 'hint', text: `showing the first ${sends.length} of ${all.length} sends`}) : null;
  host.replaceChildren(...[root, note].filter(Boolean));
}

/* ---- history: everything the server has ---------------------------------------------------------- */

function fmtWhen(v) {
  if (v === undefined || v === null || v === '') return '';
  const d = typeof v === 'number' ? new Date(v < 1e12 ? v * 1000 : v) : new Date(v);
  return isNaN(d) ? String(v) : d.toLocaleString();
}

function historyPath(kind, after) {
  const q = new URLSearchParams();
  q.set('limit', $('#hist-limit').value);
  const t = $('#hist-topology').value.trim(), c = $('#hist-collective').value, m = $('#hist-method').value.trim();
  if (t) q.set('topology', t);
  if (c) q.set('collective', c);
  if (m) q.set('method', m);
  if (kind === 'jobs' && $('#hist-status').value) q.set('status', $('#hist-status').value);
  if (after) q.set('after', after);
  return '/v1/' + kind + '?' + q.toString();
}

/* The first page (more = false) or the next one, appended.  Loads overlap (a
   filter, a page size, a finished job's refresh): only the newest one's
   answer is shown, so a slow answer to an older filter never replaces it.
   "more" waits for a first page on its way (it would extend the old list). */
async function loadHistory(kind, more) {
  const h = state.history[kind];
  if (more && (!h.next || h.loadingFirst)) return;
  const seq = ++h.seq;
  if (!more) h.loadingFirst = true;
  try {
    const {doc} = await api('GET', historyPath(kind, more ? h.next : null));
    if (seq !== h.seq) return;
    h.loadingFirst = false;
    const rows = (doc && doc[kind]) || [];
    h.rows = more ? h.rows.concat(rows) : rows;
    h.next = doc && doc.next ? doc.next : null;
    $('#history-msg').textContent = '';
    $('#history-msg').className = 'msg';
  } catch (e) {
    if (seq !== h.seq) return;
    h.loadingFirst = false;
    $('#history-msg').textContent = kind + ': ' + (e instanceof ApiError ? e.describe() : e.message);
    $('#history-msg').className = 'msg error';
  }
  renderHistory(kind);
}

function collLabel(x) {
  if (!x.collective) return '';
  const kind = typeof x.collective === 'string' ? x.collective : x.collective.kind;
  const root = x.root ?? (typeof x.collective === 'object' ? x.collective.root : undefined);
  return kind + (root !== undefined && root !== null && root >= 0 ? ':' + root : '');
}

function renderHistory(kind) {
  const h = state.history[kind];
  const body = $('#history-' + kind + ' tbody');
  if (kind === 'results') {
    body.replaceChildren(...h.rows.map(x => el('tr', {'data-key': x.key, onclick: () => openKey(x.key), title: 'open ' + x.key}, [
      el('td', {class: 'mono', text: (x.key || '').slice(0, 12) + '…'}), el('td', {text: x.topology ?? ''}),
      el('td', {text: collLabel(x)}), el('td', {text: x.method ?? ''}), el('td', {text: x.ranks ?? ''}),
      el('td', {text: x.nalgs ?? ''}), el('td', {text: fmtWhen(x.created)}),
    ])));
  } else {
    body.replaceChildren(...h.rows.map(x => {
      const req = collLabel(x) + (x.topology ? ' on ' + x.topology : '') + (x.method ? ' · ' + x.method : '');
      const actions = x.status === 'done' && x.key ? [el('button', {class: 'link', text: 'view', onclick: ev => { ev.stopPropagation(); openKey(x.key); }})] : [];
      return el('tr', {'data-job': x.id, 'data-status': x.status, 'data-key': x.key || null, onclick: () => { if (x.status === 'done' && x.key) openKey(x.key); }}, [
        el('td', {class: 'mono', text: String(x.id).slice(0, 8) + '…', title: x.id}), el('td', {text: req || '(submitted before lists existed)'}),
        el('td', {}, [el('span', {class: 'status ' + x.status, text: x.status})]), el('td', {text: fmtWhen(x.created)}),
        el('td', {}, actions),
      ]);
    }));
  }
  $('#history-' + kind + '-more').hidden = !h.next;
  $('#history-' + kind).dataset.loaded = h.rows.length;
}

/* Reloads the first pages, unless the reader has paged further. */
function refreshHistory() {
  const limit = Number($('#hist-limit').value);
  for (const kind of ['results', 'jobs'])
    if (state.history[kind].rows.length <= limit) loadHistory(kind, false);
}

/* ---- wiring ---------------------------------------------------------------------------------- */

function init() {
  $('#token').value = state.token;
  $('#token').addEventListener('change', e => { state.token = e.target.value.trim(); localStorage.setItem('collsynth.token', state.token); refreshHealth(); });
  for (const r of document.querySelectorAll('input[name="topo-mode"]')) {
    r.addEventListener('change', () => {
      const json = document.querySelector('input[name="topo-mode"]:checked').value === 'json';
      $('#topo-json').hidden = !json;
      $('#topo-builtin-row').hidden = json;
    });
  }
  $('#topo-family').addEventListener('change', e => { if (e.target.value) $('#topo-name').value = e.target.value; });
  $('#topo-name').addEventListener('input', e => syncFamily(e.target.value));
  $('#submit-form').addEventListener('submit', onSubmit);
  $('#open-form').addEventListener('submit', e => { e.preventDefault(); const k = $('#open-key').value.trim(); if (k) openKey(k); });
  // jobs from an earlier visit that were still running are polled again
  renderJobs();
  refreshHealth();
  loadBuiltins();
  setInterval(pollJobs, 700);
  setInterval(refreshHealth, 15000);
  $('#history-filters').addEventListener('submit', e => { e.preventDefault(); loadHistory('results', false); loadHistory('jobs', false); });
  $('#hist-limit').addEventListener('change', () => { loadHistory('results', false); loadHistory('jobs', false); });
  $('#history-results-more').addEventListener('click', () => loadHistory('results', true));
  $('#history-jobs-more').addEventListener('click', () => loadHistory('jobs', true));
  refreshHistory();
  setInterval(refreshHistory, 5000);
  const params = new URLSearchParams(location.search);
  if (params.get('key')) openKey(params.get('key'));
}

document.addEventListener('DOMContentLoaded', init);
