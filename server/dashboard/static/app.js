// psync dashboard: polls the coordinator's JSON API and renders one job.
//
//   /api/jobs                 the job list (the selector); ?job=J in the page URL picks one
//   /api/job?id=J             every 500 ms: heatmap, missing list, stragglers, counters
//   /api/audit?id=J           every 2 s: release wait and sync time per step (chart)
//   /api/events?job=J&since=N every 1 s: violations, stalls, lost ranks, aborts (kept client-side)
//   /api/replicas             every 2 s: the coordinator replicas and which one owns the job (the
//                             panel stays hidden for a single coordinator)
//
// When the coordinator requires a token for /api/ (--http_token_file), open the page as
// /?job=J#token=T: the fragment never leaves the browser, and every API call sends
// "Authorization: Bearer T".
//
// Numbers of type (u)int64 arrive as JSON strings (proto3 JSON); num() reads both forms.
// Elements carry data attributes (data-rank, data-chunk, data-state, data-step, ...) that the
// dashboard test asserts on. Text from the server is only ever set with textContent.
'use strict';

(function () {
  const JOB_POLL_MS = 500;
  const AUDIT_POLL_MS = 2000;
  const EVENTS_POLL_MS = 1000;
  const MAX_EVENTS_SHOWN = 200;
  const MAX_CHART_STEPS = 120;
  // Events listed under "Violations and stalls".
  const PROBLEM_KINDS = new Set(['violation', 'stall', 'rank_lost', 'abort']);

  const state = {
    job: new URLSearchParams(window.location.search).get('job') || '',
    eventsNext: 0,
    problems: [],  // violation and stall events, oldest first
    renders: 0,
  };

  const $ = (id) => document.getElementById(id);

  function num(v) {
    if (v === undefined || v === null || v === '') return 0;
    const n = Number(v);
    return Number.isFinite(n) ? n : 0;
  }

  function list(v) {
    return Array.isArray(v) ? v : [];
  }

  function formatMicros(us) {
    us = num(us);
    if (us >= 60e6) return (us / 60e6).toFixed(1) + ' min';
    if (us >= 1e6) return (us / 1e6).toFixed(2) + ' s';
    if (us >= 1e3) return (us / 1e3).toFixed(1) + ' ms';
    return Math.round(us) + ' \u00b5s';
  }

  function formatSeconds(s) {
    return formatMicros(num(s) * 1e6);
  }

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }

  const TOKEN = new URLSearchParams(window.location.hash.slice(1)).get('token') || '';

  async function getJson(path) {
    const headers = TOKEN ? { Authorization: 'Bearer ' + TOKEN } : {};
    const response = await fetch(path, { cache: 'no-store', headers });
    if (!response.ok) {
      const body = await response.text();
      throw new Error(path + ': HTTP ' + response.status + ' ' + body.trim());
    }
    return response.json();
  }

  function setConnection(ok, message) {
    const c = $('connection');
    const value = ok ? 'live' : 'error';
    c.dataset.connection = value;
    c.textContent = ok ? 'live' : message;
    document.body.dataset.connection = value;
  }

  // ---- job selector ------------------------------------------------------------------------

  async function refreshJobs() {
    const data = await getJson('/api/jobs');
    const jobs = list(data.jobs).map((j) => j.job_id).sort();
    if (!state.job && jobs.length > 0) selectJob(jobs[0]);
    const select = $('job-select');
    const wanted = jobs.includes(state.job) || !state.job ? jobs : jobs.concat([state.job]);
    const current = Array.from(select.options).map((o) => o.value);
    if (current.join('\n') !== wanted.join('\n')) {
      select.replaceChildren(...wanted.map((id) => el('option', { value: id }, id)));
    }
    select.value = state.job;
  }

  function selectJob(id) {
    if (id === state.job) return;
    state.job = id;
    state.eventsNext = 0;
    state.problems = [];
    document.body.dataset.job = id;
    const url = new URL(window.location.href);
    url.searchParams.set('job', id);
    window.history.replaceState(null, '', url.toString());
    renderProblems();
    for (const poll of [pollJob, pollAudit, pollEvents]) {
      poll().catch((err) => setConnection(false, String(err.message || err)));
    }
  }

  // ---- job status: heatmap, missing, stragglers, counters ---------------------------------

  // The state of (rank, chunk) in the chunk's current step.
  function cellState(chunk, rank) {
    const pending = list(chunk.sync_pending_ranks).map(num);
    switch (chunk.state) {
      case 'WAITING': {
        if (list(chunk.missing).some((c) => num(c.rank) === rank)) return 'missing';
        if (list(chunk.staged).some((c) => num(c.rank) === rank)) return 'staged';
        return 'idle';
      }
      case 'RELEASED':
        return pending.includes(rank) ? 'syncing' : 'synced';
      default:
        return 'idle';
    }
  }

  function cellTitle(chunk, rank, cell) {
    const mine = (who) => list(who).filter((c) => num(c.rank) === rank).map((c) => c.optimizer);
    let text = 'rank ' + rank + ' \u00b7 chunk ' + num(chunk.chunk) + ' \u00b7 step ' +
        num(chunk.step) + ': ' + cell;
    const missing = mine(chunk.missing);
    const staged = mine(chunk.staged);
    if (missing.length) text += '; missing ' + missing.join(', ');
    if (staged.length) text += '; staged ' + staged.join(', ');
    if (chunk.state === 'WAITING') text += '; waiting ' + formatMicros(chunk.waiting_micros);
    return text;
  }

  function renderHeatmap(job) {
    const table = $('heatmap');
    const world = num(job.world_size);
    const chunks = list(job.chunks);
    const head = table.tHead.rows[0];
    const body = table.tBodies[0];
    if (num(table.dataset.worldSize) !== world || num(table.dataset.numChunks) !== chunks.length) {
      while (head.cells.length > 1) head.deleteCell(1);
      chunks.forEach((c, i) => head.appendChild(el('th', { 'data-chunk': i, class: 'chunk-head' })));
      body.replaceChildren();
      for (let r = 0; r < world; r++) {
        const row = el('tr', { 'data-rank': r });
        row.appendChild(el('th', { class: 'rank-head', scope: 'row' }, r));
        chunks.forEach((c, i) => row.appendChild(
            el('td', { class: 'cell', 'data-rank': r, 'data-chunk': i, 'data-state': 'idle' })));
        body.appendChild(row);
      }
      table.dataset.worldSize = world;
      table.dataset.numChunks = chunks.length;
    }
    chunks.forEach((chunk, i) => {
      const th = head.cells[i + 1];
      const step = num(chunk.step);
      th.textContent = 'c' + i + ' \u00b7 s' + step;
      th.dataset.step = step;
      th.dataset.state = (chunk.state || 'IDLE').toLowerCase();
      th.title = 'chunk ' + i + ', step ' + step + ': ' + (chunk.state || 'IDLE');
    });
    const lost = new Set(list(job.lost_ranks).map(num));
    for (let r = 0; r < world; r++) {
      const row = body.rows[r];
      const isLost = lost.has(r);
      if ((row.dataset.lost === 'true') !== isLost) row.dataset.lost = isLost ? 'true' : 'false';
      const cells = row.cells;
      chunks.forEach((chunk, i) => {
        const td = cells[i + 1];
        const s = cellState(chunk, r);
        if (td.dataset.state !== s) td.dataset.state = s;
        td.dataset.step = num(chunk.step);
        td.title = cellTitle(chunk, r, s);
      });
    }
  }

  // Who the oldest unfinished step of each chunk waits for: contributors that have not staged
  // (WAITING chunks) and members that have not reported SyncDone (RELEASED chunks).
  function renderMissing(job) {
    const rows = [];
    for (const chunk of list(job.chunks)) {
      const base = { chunk: num(chunk.chunk), step: num(chunk.step),
                     waiting: num(chunk.waiting_micros), deadline: num(chunk.deadline_micros) };
      if (chunk.state === 'WAITING') {
        for (const who of list(chunk.missing)) {
          rows.push(Object.assign({ rank: num(who.rank), optimizer: who.optimizer || '',
                                    missing: 'stage ' + (who.optimizer || '') }, base));
        }
      } else if (chunk.state === 'RELEASED') {
        for (const rank of list(chunk.sync_pending_ranks)) {
          rows.push(Object.assign({ rank: num(rank), optimizer: '', missing: 'sync_done' }, base));
        }
      }
    }
    rows.sort((a, b) => a.chunk - b.chunk || a.rank - b.rank || a.missing.localeCompare(b.missing));
    const body = $('missing').tBodies[0];
    body.replaceChildren(...rows.map((m) => {
      const late = m.deadline > 0 && m.waiting > m.deadline;
      const attrs = { 'data-rank': m.rank, 'data-chunk': m.chunk, 'data-step': m.step,
                      'data-missing': m.missing, 'data-late': late ? 'true' : 'false' };
      if (m.optimizer) attrs['data-optimizer'] = m.optimizer;
      const tr = el('tr', attrs);
      tr.append(el('td', {}, m.chunk), el('td', {}, m.step), el('td', {}, m.rank),
                el('td', {}, m.missing),
                el('td', { class: late ? 'late' : '' }, formatMicros(m.waiting)),
                el('td', {}, formatMicros(m.deadline)));
      return tr;
    }));
    $('missing').dataset.count = rows.length;
    $('missing-empty').hidden = rows.length > 0;
  }

  function renderStragglers(job) {
    const scores = list(job.stragglers).slice();
    scores.sort((a, b) => num(b.score_seconds) - num(a.score_seconds) || num(a.rank) - num(b.rank));
    const body = $('stragglers').tBodies[0];
    body.replaceChildren(...scores.map((s, i) => {
      const tr = el('tr', { 'data-rank': num(s.rank), 'data-position': i + 1 });
      tr.append(el('td', {}, num(s.rank)), el('td', {}, formatSeconds(s.score_seconds)),
                el('td', {}, formatSeconds(s.last_seconds)), el('td', {}, num(s.samples)),
                el('td', {}, num(s.times_last)));
      return tr;
    }));
    $('stragglers').dataset.count = scores.length;
    $('stragglers-empty').hidden = scores.length > 0;
  }

  const COUNTERS = [
    ['counters', 'checkins', 'check-ins'],
    ['counters', 'duplicate_checkins', 'duplicates'],
    ['counters', 'releases', 'releases'],
    ['counters', 'syncs_done', 'syncs done'],
    ['counters', 'skipped_steps', 'skipped steps'],
    ['counters', 'violations', 'violations'],
    ['counters', 'stalls', 'stalls'],
    ['counters', 'rejected', 'rejected'],
    ['audit', 'released', 'audited releases'],
    ['audit', 'complete', 'complete syncs'],
    ['audit', 'double_releases', 'double releases'],
    ['audit', 'checksum_mismatches', 'checksum mismatches'],
    ['audit', 'early_syncs', 'early syncs'],
    ['audit', 'repeated_syncs', 'repeated syncs'],
  ];
  // Counters that must stay 0: highlighted when they are not.
  const BAD = new Set(['violations', 'stalls', 'double_releases', 'checksum_mismatches',
                       'early_syncs', 'repeated_syncs']);

  function renderCounters(job) {
    const dl = $('counters');
    if (dl.children.length === 0) {
      for (const [, key, label] of COUNTERS) {
        dl.append(el('dt', {}, label), el('dd', { 'data-counter': key, id: 'counter-' + key }, '0'));
      }
    }
    for (const [group, key] of COUNTERS) {
      const value = num((job[group] || {})[key]);
      const dd = $('counter-' + key);
      dd.textContent = value;
      dd.dataset.value = value;
      dd.classList.toggle('bad', BAD.has(key) && value > 0);
    }
  }

  function renderSummary(job) {
    const badge = $('job-state');
    badge.textContent = job.state || '';
    badge.dataset.state = (job.state || '').toLowerCase();
    $('generation').textContent = num(job.generation);
    $('ranks').textContent = num(job.ranks_joined) + ' / ' + num(job.world_size);
    $('sessions').textContent = num(job.sessions_connected);
    $('min-step').textContent = num(job.min_rank_step);
    $('min-step').dataset.value = num(job.min_rank_step);
    $('num-chunks').textContent = num(job.num_chunks);
    const lost = list(job.lost_ranks).map(num).sort((a, b) => a - b);
    $('lost-ranks').textContent = lost.length ? lost.join(', ') : 'none';
    $('lost-ranks').dataset.value = lost.join(',');
    $('lost-ranks').classList.toggle('bad', lost.length > 0);
    const abort = $('abort-reason');
    abort.hidden = !job.abort_reason;
    abort.textContent = job.abort_reason ? 'aborted: ' + job.abort_reason : '';
  }

  async function pollJob() {
    if (!state.job) return;
    const job = state.job;
    const data = await getJson('/api/job?id=' + encodeURIComponent(job));
    if (job !== state.job) return;
    renderSummary(data);
    renderHeatmap(data);
    renderMissing(data);
    renderStragglers(data);
    renderCounters(data);
    state.renders += 1;
    document.body.dataset.renders = state.renders;
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
  }

  // ---- audit: release wait per step ---------------------------------------------------------

  function renderChart(records) {
    // Per step: the largest release wait and sync time over its chunks.
    const bySteps = new Map();
    for (const r of records) {
      const step = num(r.step);
      const entry = bySteps.get(step) || { step: step, wait: 0, sync: 0 };
      entry.wait = Math.max(entry.wait, num(r.wait_micros));
      if (r.complete) entry.sync = Math.max(entry.sync, num(r.sync_micros));
      bySteps.set(step, entry);
    }
    const points = Array.from(bySteps.values()).sort((a, b) => a.step - b.step)
        .slice(-MAX_CHART_STEPS);
    const svg = $('wait-chart');
    svg.dataset.points = points.length;
    // Drawn in CSS pixels of the element, so text keeps its size whatever the panel's width.
    const W = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 480);
    const H = 170, left = 64, right = 12, top = 28, bottom = 26;
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    const parts = [];
    if (points.length === 0) {
      parts.push('<text x="' + W / 2 + '" y="' + H / 2 + '" class="axis-label" ' +
                 'text-anchor="middle">no releases yet</text>');
      svg.innerHTML = parts.join('');
      return;
    }
    const maxY = Math.max(1, ...points.map((p) => Math.max(p.wait, p.sync)));
    const x0 = points[0].step;
    const x1 = points[points.length - 1].step;
    const x = (s) => left + (x1 === x0 ? (W - left - right) / 2 :
                                         (s - x0) / (x1 - x0) * (W - left - right));
    const y = (v) => top + (1 - v / maxY) * (H - top - bottom);
    parts.push('<line class="axis" x1="' + left + '" y1="' + (H - bottom) + '" x2="' + (W - right) +
               '" y2="' + (H - bottom) + '"/>');
    parts.push('<line class="axis" x1="' + left + '" y1="' + top + '" x2="' + left + '" y2="' +
               (H - bottom) + '"/>');
    for (const frac of [0, 0.5, 1]) {
      const v = maxY * frac;
      parts.push('<line class="gridline" x1="' + left + '" x2="' + (W - right) + '" y1="' +
                 y(v).toFixed(1) + '" y2="' + y(v).toFixed(1) + '"/>');
      parts.push('<text class="axis-label" x="' + (left - 6) + '" y="' + (y(v) + 4).toFixed(1) +
                 '" text-anchor="end">' + formatMicros(v) + '</text>');
    }
    parts.push('<text class="axis-label" x="' + left + '" y="' + (H - 6) + '">step ' + x0 +
               '</text>');
    parts.push('<text class="axis-label" x="' + (W - right) + '" y="' + (H - 6) +
               '" text-anchor="end">step ' + x1 + '</text>');
    for (const [key, cls] of [['sync', 'series-sync'], ['wait', 'series-wait']]) {
      const coords = points.map((p) => x(p.step).toFixed(1) + ',' + y(p[key]).toFixed(1));
      parts.push('<polyline class="' + cls + '" points="' + coords.join(' ') + '"/>');
      for (const p of points) {
        parts.push('<circle class="' + cls + '" data-step="' + p.step + '" data-' + key +
                   '-micros="' + p[key] + '" cx="' + x(p.step).toFixed(1) + '" cy="' +
                   y(p[key]).toFixed(1) + '" r="2.5"><title>step ' + p.step + ': ' + key + ' ' +
                   formatMicros(p[key]) + '</title></circle>');
      }
    }
    parts.push('<text class="legend-wait" x="' + (W - right - 170) + '" y="12">\u25cf release wait</text>');
    parts.push('<text class="legend-sync" x="' + (W - right - 70) + '" y="12">\u25cf sync</text>');
    svg.innerHTML = parts.join('');
  }

  async function pollAudit() {
    if (!state.job) return;
    const job = state.job;
    const data = await getJson('/api/audit?id=' + encodeURIComponent(job));
    if (job !== state.job) return;
    renderChart(list(data.records));
  }

  // ---- events: violations and stalls ------------------------------------------------------

  function describeProblem(e) {
    const where = [];
    if (e.step !== undefined) where.push('step ' + num(e.step));
    if (e.chunk !== undefined) where.push('chunk ' + num(e.chunk));
    if (e.rank !== undefined) where.push('rank ' + num(e.rank));
    let text = where.join(' \u00b7 ');
    if (e.kind === 'stall') {
      const missing = list(e.contributors).map((c) => 'rank ' + num(c.rank) + ' ' + c.optimizer);
      if (missing.length) text += ' \u2014 missing ' + missing.join(', ');
      const pending = list(e.ranks).map(num);
      if (pending.length) {
        text += ' \u2014 no SyncDone from rank' + (pending.length > 1 ? 's ' : ' ') + pending.join(', ');
      }
      text += ' (waited ' + formatMicros(e.duration_micros) + ')';
      return text;
    }
    if (e.detail) text += (text ? ': ' : '') + e.detail;
    return text;
  }

  function renderProblems() {
    const ul = $('violations');
    const shown = state.problems.slice(-MAX_EVENTS_SHOWN).reverse();
    ul.replaceChildren(...shown.map((e) => {
      const li = el('li', { 'data-kind': e.kind, 'data-index': num(e.index) });
      if (e.step !== undefined) li.dataset.step = num(e.step);
      if (e.chunk !== undefined) li.dataset.chunk = num(e.chunk);
      if (e.rank !== undefined) li.dataset.rank = num(e.rank);
      const time = new Date(num(e.time_unix_micros) / 1000);
      if (e.detail) li.title = e.detail;
      li.append(el('span', { class: 'kind' }, e.kind),
                el('time', { datetime: time.toISOString() }, time.toLocaleTimeString()),
                el('span', { class: 'what' }, describeProblem(e)));
      return li;
    }));
    ul.dataset.count = state.problems.length;
    $('violations-empty').hidden = state.problems.length > 0;
  }

  async function pollEvents() {
    if (!state.job) return;
    const job = state.job;
    const since = state.eventsNext;
    const data = await getJson('/api/events?job=' + encodeURIComponent(job) + '&since=' + since +
                               '&kinds=' + Array.from(PROBLEM_KINDS).join(','));
    if (job !== state.job || since !== state.eventsNext) return;
    const fresh = list(data.events).filter(
        (e) => PROBLEM_KINDS.has(e.kind) && (!e.job_id || e.job_id === job));
    state.eventsNext = Math.max(since, num(data.next));
    if (fresh.length > 0) {
      state.problems = state.problems.concat(fresh).slice(-10 * MAX_EVENTS_SHOWN);
      renderProblems();
    }
  }

  async function pollReplicas() {
    const data = await getJson('/api/replicas');
    const self = data.self || '';
    $('replicas-panel').hidden = self === '';
    if (self === '') return;
    const owner = list(data.owners).find((o) => o.job_id === state.job);
    const body = $('replicas').tBodies[0];
    const replicas = list(data.replicas);
    body.replaceChildren(...replicas.map((r) => {
      const owns = owner !== undefined && owner.owner === r.address;
      const tr = el('tr', { 'data-replica': r.address, 'data-owner': owns ? 'true' : 'false' });
      tr.append(el('td', {}, r.address + (r.address === self ? ' (answering)' : '')),
                el('td', {}, num(r.jobs_owned)),
                el('td', {}, owns ? 'epoch ' + num(owner.epoch) : ''));
      return tr;
    }));
    $('replicas').dataset.count = replicas.length;
    $('replicas-summary').textContent = self + ': took over ' + num(data.takeovers) +
        ' jobs, lost ' + num(data.jobs_lost);
  }

  // ---- loops ------------------------------------------------------------------------------

  function loop(fn, period) {
    const run = async () => {
      try {
        await fn();
        setConnection(true);
      } catch (err) {
        setConnection(false, String(err.message || err));
      }
      window.setTimeout(run, period);
    };
    run();
  }

  $('job-select').addEventListener('change', (e) => selectJob(e.target.value));
  document.body.dataset.job = state.job;
  renderProblems();
  loop(refreshJobs, 5000);
  loop(pollJob, JOB_POLL_MS);
  loop(pollAudit, AUDIT_POLL_MS);
  loop(pollEvents, EVENTS_POLL_MS);
  loop(pollReplicas, 2000);
})();
