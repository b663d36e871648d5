// Loads the dashboard in headless Chromium in real time (no virtual time, which freezes
// performance.now() during scripts) over the DevTools pipe and reports the render timings the page
// writes on <body>: data-render-ms (navigation start -> first overview rendered), and what the
// render functions themselves took (first and latest poll), plus the overview fetch's timing.
// usage: node bench/dashboard_timing.js URL [runs] [clickNode] (Chromium: /usr/bin/chromium)
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const url = process.argv[2];
if (!url) {
  console.error('usage: node bench/dashboard_timing.js URL [runs] [node]');
  process.exit(2);
}
const runs = Number(process.argv[3] || 3);
const clickNode = process.argv[4] || '';

function launch() {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'psync-dashboard-timing-'));
  const child = spawn('/usr/bin/chromium', [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
    '--user-data-dir=' + profile, '--window-size=1600,1200', '--remote-debugging-pipe',
    'about:blank'], { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'] });
  const out = child.stdio[3];
  const inp = child.stdio[4];
  let id = 0;
  const waiting = new Map();
  let buffer = '';
  inp.on('data', (chunk) => {
    buffer += chunk.toString();
    let at;
    while ((at = buffer.indexOf('\0')) >= 0) {
      const msg = JSON.parse(buffer.slice(0, at));
      buffer = buffer.slice(at + 1);
      if (msg.id !== undefined && waiting.has(msg.id)) {
        const { resolve, reject } = waiting.get(msg.id);
        waiting.delete(msg.id);
        if (msg.error) reject(new Error(JSON.stringify(msg.error))); else resolve(msg.result);
      }
    }
  });
  const send = (method, params, sessionId) => new Promise((resolve, reject) => {
    const m = { id: ++id, method, params: params || {} };
    if (sessionId) m.sessionId = sessionId;
    waiting.set(m.id, { resolve, reject });
    out.write(JSON.stringify(m) + '\0');
  });
  const close = () => { child.kill(); setTimeout(() => fs.rmSync(profile, { recursive: true, force: true }), 500); };
  return { send, close };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function one(cdp) {
  const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  const ev = async (expr) => (await cdp.send('Runtime.evaluate',
      { expression: expr, returnByValue: true, awaitPromise: true }, sessionId)).result.value;
  await cdp.send('Page.enable', {}, sessionId);
  await cdp.send('Page.navigate', { url }, sessionId);
  let first = null;
  for (let i = 0; i < 200; i++) {
    await sleep(25);
    first = await ev('document.body && document.body.dataset.renderMs || null').catch(() => null);
    if (first) break;
  }
  // Let a few more polls render, then read the latest render's cost.
  await sleep(3500);
  const info = await ev(`(() => {
    const d = document.body.dataset;
    const ov = performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/overview'));
    const f = ov[0] || {};
    const nav = performance.getEntriesByType('navigation')[0] || {};
    return { renderMs: d.renderMs, paintMs: d.paintMs, firstRenderJsMs: d.firstRenderJsMs, lastRenderJsMs: d.lastRenderJsMs,
             renders: d.renders, tiles: document.querySelectorAll('#node-map .node').length,
             domContentLoaded: nav.domContentLoadedEventEnd && nav.domContentLoadedEventEnd.toFixed(1),
             firstOverviewStart: f.startTime && f.startTime.toFixed(1),
             firstOverviewEnd: f.responseEnd && f.responseEnd.toFixed(1),
             overviewBytes: f.encodedBodySize, overviews: ov.length };
  })()`);
  if (clickNode) {
    info.click = await ev(`new Promise((resolve) => {
      const t0 = performance.now();
      const tile = document.querySelector('#node-map .node[data-node="${clickNode}"]');
      tile.click();
      const check = () => {
        if (document.querySelectorAll('#node-detail td.cell').length > 0) {
          resolve({ detailMs: (performance.now() - t0).toFixed(1),
                    cells: document.querySelectorAll('#node-detail td.cell').length });
        } else setTimeout(check, 5);
      };
      check();
    })`);
  }
  await cdp.send('Target.closeTarget', { targetId });
  return info;
}

(async () => {
  const cdp = launch();
  try {
    for (let i = 0; i < runs; i++) console.log(JSON.stringify(await one(cdp)));
  } finally {
    cdp.close();
  }
})().catch((e) => { console.error(e); process.exit(1); });
