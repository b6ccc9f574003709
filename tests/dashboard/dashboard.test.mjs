// Drives the collsynth dashboard in Debian's headless Chromium against a
// running collsynthd, and prints one JSON object with what it counted on the
// page next to what the API says should be there.  tests/test_dashboard.c
// runs it and asserts on that object; this script asserts nothing itself, so
// the expectations live in the C test.
//
//   node tests/dashboard/dashboard.test.mjs BASE_URL SCREENSHOT.png [TOPO] [COLLECTIVE] [TOKEN] [METHOD] [OPTIONS_JSON]
//
// With TOKEN (the daemon's --auth-token), it first submits without one and
// records the refusal the page shows, then types the token into the page.
//
// Expectations come from the API, independently of app.js: the frontier from
// GET /v1/results/{key}, the links from GET /v1/topologies/{name} (expanded
// here: bidirectional links count both ways).
import {chromium} from 'playwright-core';

const [base, shot, topo = 'ring:4', collective = 'allgather', token = '', method = 'auto', options = ''] =
  process.argv.slice(2);
if (!base || !shot) {
  console.error('usage: dashboard.test.mjs BASE_URL SCREENSHOT.png [TOPO] [COLLECTIVE]');
  process.exit(2);
}
const out = {topology: topo, collective, console_errors: []};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({viewport: {width: 1400, height: 1000}});
  page.on('pageerror', e => out.console_errors.push(String(e)));
  page.on('console', m => { if (m.type() === 'error') out.console_errors.push(m.text()); });
  await page.goto(base + '/', {waitUntil: 'load'});
  out.title = await page.title();
  await page.waitForSelector('#health[data-state="ok"]', {timeout: 10000});

  // 0. without the token the daemon refuses, and the page says why
  if (token) {
    await page.fill('#topo-name', topo);
    await page.click('#submit-btn');
    await page.waitForSelector('#submit-msg.error', {timeout: 10000});
    out.unauthorized_text = await page.textContent('#submit-msg');
    await page.fill('#token', token);
    await page.dispatchEvent('#token', 'change');
  }

  // 1. a bad Topology JSON: the server's message (with its field) is shown
  await page.check('input[name="topo-mode"][value="json"]');
  await page.fill('#topo-json', '{"name": "bad", "ranks": 2, "links": [{"src": 0, "dst": 5}]}');
  await page.selectOption('#collective', collective);
  await page.click('#submit-btn');
  await page.waitForFunction(() => document.querySelector('#submit-msg.error') &&
    document.querySelector('#submit-msg').textContent.includes('field topology'), null, {timeout: 10000}).catch(() => {});
  out.error_text = await page.textContent('#submit-msg');

  // 2. a real synthesis on a builtin
  await page.check('input[name="topo-mode"][value="builtin"]');
  await page.fill('#topo-name', topo);
  await page.selectOption('#collective', collective);
  await page.selectOption('#method', method);
  await page.fill('#options', options);
  await page.click('#submit-btn');
  await page.waitForSelector('body[data-result]', {timeout: 120000});
  out.job_rows = await page.locator('#jobs tbody tr').count();
  const key = await page.getAttribute('body', 'data-result');
  out.key = key;
  await page.waitForSelector('#size-plot[data-baselines-loaded]', {timeout: 60000}).catch(() => {});

  // what the API says
  const api = await page.evaluate(async ({key, topo}) => {
    const res = await (await fetch('/v1/results/' + encodeURIComponent(key) + '?format=json')).json();
    const t = await (await fetch('/v1/topologies/' + encodeURIComponent(topo))).json();
    return {res, t};
  }, {key, topo});
  const frontier = api.res.frontier || [];
  const t = api.t.topology && typeof api.t.topology === 'object' ? api.t.topology : api.t;
  const directed = new Set(), pairs = new Set();
  for (const l of t.links || []) {
    directed.add(l.src + '-' + l.dst);
    if (l.bidirectional) directed.add(l.dst + '-' + l.src);
    pairs.add(Math.min(l.src, l.dst) + '-' + Math.max(l.src, l.dst));
  }
  out.expected_points = frontier.length;
  out.expected_directed_links = directed.size;
  out.expected_pairs = pairs.size;
  out.expected_ranks = t.ranks;
  const last = frontier[frontier.length - 1] || {sends: []};
  out.expected_sends = Math.min(4000, (last.sends || []).length);
  // the selected (last) algorithm's per-link send counts, counted here
  const perLink = {};
  for (const s of last.sends || []) perLink[s.src + '-' + s.dst] = (perLink[s.src + '-' + s.dst] || 0) + 1;
  out.expected_link_loads = perLink;
  out.expected_bound_steps = api.res.bounds ? api.res.bounds.steps : null;

  // what the page drew
  out.points = await page.locator('#frontier-plot [data-point]').count();
  out.bound_lines = await page.locator('#frontier-plot [data-bound]').count();
  out.heat_links = await page.locator('#link-heatmap [data-link]').count();
  out.heat_loads = await page.evaluate(() => Object.fromEntries(
    [...document.querySelectorAll('#link-heatmap [data-link]')].map(e => [e.dataset.link, Number(e.dataset.load)])));
  out.graph_links = await page.locator('#topology-graph [data-link]').count();
  out.graph_ranks = await page.locator('#topology-graph [data-rank]').count();
  out.curves = await page.locator('#size-plot [data-curve]').count();
  out.baseline_curves = await page.locator('#size-plot [data-curve^="baseline-"]').count();
  out.sends = await page.locator('#step-timeline [data-send]').count();
  out.frontier_rows = await page.locator('#frontier-table tbody tr').count();
  // the time bound: each frontier row shows the API's ratio_to_bound, the
  // summary the bound, the size plot its curve
  out.expected_ratios = frontier.map(a => a.ratio_to_bound === undefined ? null : Number(a.ratio_to_bound).toFixed(3));
  out.ratios = await page.evaluate(() => [...document.querySelectorAll('#frontier-table tbody td.ratio')].map(e => e.textContent));
  out.has_time_bound = !!(api.res.bounds && api.res.bounds.time);
  out.summary_text = await page.locator('#result-summary').innerText();
  out.bound_curves = await page.locator('#size-plot [data-bound-curve]').count();

  // clicking another frontier point re-draws the heat map for it
  if (frontier.length > 1) {
    await page.click('#frontier-plot [data-point="0"]');
    out.sends_after_click = await page.locator('#step-timeline [data-send]').count();
    out.expected_sends_after_click = Math.min(4000, (frontier[0].sends || []).length);
  }
  if (frontier.length > 1) await page.click(`#frontier-plot [data-point="${frontier.length - 1}"]`);
  await page.waitForTimeout(300);
  await page.screenshot({path: shot, fullPage: true});
  out.screenshot = shot;

  // 3. pasted Topology JSON: 3 ranks, 0<->1, 1<->2 and 2->0 one way: 5 directed
  //    links over 3 linked pairs (the page has no builtin to fetch for it)
  const custom = {name: 'tri-custom', ranks: 3, links: [
    {src: 0, dst: 1, bidirectional: true}, {src: 1, dst: 2, bidirectional: true}, {src: 2, dst: 0}]};
  await page.check('input[name="topo-mode"][value="json"]');
  await page.fill('#topo-json', JSON.stringify(custom));
  await page.selectOption('#collective', 'allgather');
  await page.selectOption('#method', 'auto');
  await page.fill('#options', '');
  await page.click('#submit-btn');
  await page.waitForFunction(k => document.body.dataset.result && document.body.dataset.result !== k,
                             key, {timeout: 60000});
  out.custom_heat_links = await page.locator('#link-heatmap [data-link]').count();
  out.custom_graph_links = await page.locator('#topology-graph [data-link]').count();
  out.custom_graph_ranks = await page.locator('#topology-graph [data-rank]').count();
} catch (e) {
  out.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
