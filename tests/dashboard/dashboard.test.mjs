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
  const ctx = await browser.newContext({viewport: {width: 1400, height: 1000}});
  const page = await ctx.newPage();
  page.on('pageerror', e => out.console_errors.push(String(e)));
  page.on('console', m => { if (m.type() === 'error') out.console_errors.push(m.text()); });
  // every baseline POST the page makes, and the ones the server refused
  const BASELINE_NAMES = ['ring', 'recursive-doubling', 'double-binary-tree'];
  const baselinePosts = [], baselineRefusals = [];
  const watchBaselines = p => {
    p.on('request', r => {
      if (r.method() !== 'POST' || !r.url().endsWith('/v1/synthesize')) return;
      let b = {};
      try { b = JSON.parse(r.postData() || '{}'); } catch (e) { /* not JSON */ }
      if (BASELINE_NAMES.includes(b.method)) baselinePosts.push(b.method);
    });
    p.on('response', async r => {
      if (r.request().method() !== 'POST' || !r.url().endsWith('/v1/synthesize') || r.status() < 400) return;
      let b = {};
      try { b = JSON.parse(r.request().postData() || '{}'); } catch (e) { /* not JSON */ }
      if (BASELINE_NAMES.includes(b.method)) baselineRefusals.push(b.method);
    });
  };
  watchBaselines(page);
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

  // frontier labels stay inside the plot (the latency end sits near the right edge)
  out.label_overflows = await page.evaluate(() => {
    const root = document.querySelector('#frontier-plot svg');
    const w = root.viewBox.baseVal.width;
    return [...root.querySelectorAll('text.point-label')].filter(t => {
      const b = t.getBBox();
      return b.x < 0 || b.x + b.width > w + 0.5;
    }).map(t => t.textContent);
  });
  out.labels = await page.locator('#frontier-plot text.point-label').count();
  out.first_view_baseline_posts = baselinePosts.length;
  out.first_view_baseline_refusals = baselineRefusals.length;

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

  // opening the same result again asks for no baseline: stored ones come from
  // this page's memory, refused ones are remembered
  {
    const before = baselinePosts.length;
    await page.fill('#open-key', key);
    await page.click('#open-form button');
    await page.waitForSelector('#size-plot[data-baselines-loaded]', {timeout: 60000});
    out.second_view_baseline_posts = baselinePosts.length - before;
    out.second_view_baseline_curves = await page.locator('#size-plot [data-curve^="baseline-"]').count();
  }

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
  out.custom_layout = await page.getAttribute('#topology-graph svg', 'data-layout');

  // 4. meshes, tori and hypercubes on their grid: every link of the API's
  //    topology joins two drawn ranks in one row or one column; on a mesh,
  //    neighbouring cells
  out.grids = {};
  try {
  for (const name of ['mesh2d:4x4', 'torus2d:4x4', 'hypercube:4', 'mesh3d:2x2x2']) {
    const prev = await page.getAttribute('body', 'data-result');
    await page.check('input[name="topo-mode"][value="builtin"]');
    await page.fill('#topo-name', name);
    await page.selectOption('#collective', 'allgather');
    await page.selectOption('#method', 'tacos');
    await page.fill('#options', '');
    await page.click('#submit-btn');
    await page.waitForFunction(k => document.body.dataset.result && document.body.dataset.result !== k,
                               prev, {timeout: 60000});
    const drawn = await page.evaluate(() => {
      const root = document.querySelector('#topology-graph svg');
      const cells = {};
      for (const g of root.querySelectorAll('[data-rank]'))
        cells[g.dataset.rank] = [Number(g.dataset.x), Number(g.dataset.y)];
      return {layout: root.dataset.layout, cells};
    });
    const t = await page.evaluate(async n => (await fetch('/v1/topologies/' + encodeURIComponent(n))).json(), name);
    const links = (t.topology && typeof t.topology === 'object' ? t.topology : t).links || [];
    const distinct = new Set(Object.values(drawn.cells).map(c => c.join(','))).size;
    let offAxis = 0, notAdjacent = 0;
    for (const l of links) {
      const a = drawn.cells[l.src], b = drawn.cells[l.dst];
      if (!a || !b || (a[0] !== b[0] && a[1] !== b[1])) offAxis++;
      if (!a || !b || Math.abs(a[0] - b[0]) + Math.abs(a[1] - b[1]) !== 1) notAdjacent++;
    }
    out.grids[name] = {layout: drawn.layout, ranks: Object.keys(drawn.cells).length, distinct,
                       links: links.length, off_axis: offAxis, not_adjacent: notAdjacent};
  }
  } catch (e) { out.grid_failure = String(e && e.stack || e); }

  // 5. history in a fresh browser profile (nothing submitted from it): the
  //    stored results and every job, as the API lists them
  try {
    const ctx2 = await browser.newContext({viewport: {width: 1400, height: 1000}});
    const p2 = await ctx2.newPage();
    await p2.goto(base + '/', {waitUntil: 'load'});
    await p2.waitForFunction(() => Number(document.querySelector('#history-results').dataset.loaded) > 0 &&
                             Number(document.querySelector('#history-jobs').dataset.loaded) > 0, null, {timeout: 30000});
    const apiLists = await p2.evaluate(async () => {
      const r = await (await fetch('/v1/results?limit=20')).json();
      const j = await (await fetch('/v1/jobs?limit=20')).json();
      const ag = await (await fetch('/v1/results?limit=20&collective=allgather')).json();
      return {results: r.results.map(x => x.key), jobs: j.jobs.map(x => x.id), allgather: ag.results.map(x => x.key)};
    });
    out.history_api_results = apiLists.results;
    out.history_api_jobs = apiLists.jobs;
    out.history_results = await p2.evaluate(() => [...document.querySelectorAll('#history-results tbody tr')].map(t => t.dataset.key));
    out.history_jobs = await p2.evaluate(() => [...document.querySelectorAll('#history-jobs tbody tr')].map(t => t.dataset.job));
    out.history_page_jobs_empty = await p2.locator('#jobs tbody tr').count();
    // a filter
    await p2.selectOption('#hist-collective', 'allgather');
    await p2.click('#history-filters button[type="submit"]');
    await p2.waitForFunction(n => [...document.querySelectorAll('#history-results tbody tr')].length === n,
                             apiLists.allgather.length, {timeout: 30000}).catch(() => {});
    out.history_api_allgather = apiLists.allgather;
    out.history_allgather = await p2.evaluate(() => [...document.querySelectorAll('#history-results tbody tr')].map(t => t.dataset.key));
    // paging: one per page, then "more"
    await p2.selectOption('#hist-collective', '');
    await p2.selectOption('#hist-limit', '1');
    await p2.waitForFunction(() => document.querySelectorAll('#history-results tbody tr').length === 1, null, {timeout: 30000}).catch(() => {});
    out.history_page1 = await p2.locator('#history-results tbody tr').count();
    await p2.click('#history-results-more');
    await p2.waitForFunction(() => document.querySelectorAll('#history-results tbody tr').length === 2, null, {timeout: 30000}).catch(() => {});
    out.history_page2 = await p2.evaluate(() => [...document.querySelectorAll('#history-results tbody tr')].map(t => t.dataset.key));
    // a row opens its result
    const second = out.history_page2[1];
    if (second) {
      await p2.click(`#history-results tbody tr[data-key="${second}"]`);
      await p2.waitForFunction(k => document.body.dataset.result === k, second, {timeout: 30000}).catch(() => {});
      out.history_opened = await p2.getAttribute('body', 'data-result');
      out.history_clicked = second;
    }
    // an older filter's slow answer arriving after a newer one's must not
    // replace it: hold the allgather answer until the page-size-1 one is shown
    try {
      await p2.selectOption('#hist-limit', '20');
      await p2.waitForFunction(n => document.querySelectorAll('#history-results tbody tr').length === n,
                               apiLists.results.length, {timeout: 30000}).catch(() => {});
      let release;
      const held = new Promise(r => { release = r; });
      await p2.route(u => u.pathname === '/v1/results' && u.searchParams.get('collective') === 'allgather',
                     async route => { await held; await route.continue(); });
      const late = p2.waitForResponse(r => r.url().includes('collective=allgather'), {timeout: 60000});
      await p2.selectOption('#hist-collective', 'allgather');
      await p2.click('#history-filters button[type="submit"]');
      await p2.selectOption('#hist-collective', '');
      await p2.selectOption('#hist-limit', '1');
      await p2.waitForFunction(() => document.querySelectorAll('#history-results tbody tr').length === 1 &&
                               !document.querySelector('#history-results-more').hidden, null, {timeout: 30000});
      release();
      await late;
      await p2.waitForTimeout(300); // the page's handler runs after the response event
      out.history_newest_rows = await p2.evaluate(() => [...document.querySelectorAll('#history-results tbody tr')].map(t => t.dataset.key));
      out.history_newest_more = await p2.evaluate(() => !document.querySelector('#history-results-more').hidden);
      await p2.unroute(() => true).catch(() => {});
    } catch (e) { out.history_newest_failure = String(e && e.stack || e); }
    await ctx2.close();
  } catch (e) { out.history_failure = String(e && e.stack || e); }

  // 6. the same browser profile, a new page: the first result again, with no
  //    baseline posted (stored ones fetched by key, refused ones remembered)
  try {
    const p3 = await ctx.newPage();
    const before = baselinePosts.length;
    watchBaselines(p3);
    await p3.goto(base + '/?key=' + encodeURIComponent(key), {waitUntil: 'load'});
    await p3.waitForSelector('#size-plot[data-baselines-loaded]', {timeout: 60000});
    out.reload_baseline_posts = baselinePosts.length - before;
    out.reload_baseline_curves = await p3.locator('#size-plot [data-curve^="baseline-"]').count();
    await p3.close();
  } catch (e) { out.reload_failure = String(e && e.stack || e); }
} catch (e) {
  out.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
