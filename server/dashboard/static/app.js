// psync dashboard: polls the coordinator's JSON API and renders one job.
//
//   /api/jobs                 every 5 s: the job list (the selector); ?job=J in the page URL picks one
//   /api/overview?id=J&node_limit=4096&missing_limit=32[&node_offset=O][&expand=NODE]
//                             every 1 s: the job aggregated per node (JobOverview): the status
//                             header, counters and stragglers (overview.status, whose chunks carry
//                             only the *_count fields), the per-chunk header, the node map, the
//                             grouped "Missing now", the slowest nodes, and the ranks of the node
//                             drilled into (expand: a tile clicked, or &node=NODE in the page URL)
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
// Elements carry data attributes (data-node, data-rank, data-chunk, data-state, data-step, ...)
// that the dashboard test asserts on. Text from the server is only ever set with textContent.
//
// The node map holds one tile per node (thousands at 16k+ ranks): the tiles are built once per
// node list and then only their changed attributes are written, never re-rendered per poll.
'use strict';

(function () {
  const OVERVIEW_POLL_MS = 1000;
  const NODE_LIMIT = 4096;     // the most GetJobOverview pages at once
  const MISSING_LIMIT = 32;    // missing groups asked for
  const RUNS_SHOWN = 6;        // rank runs written out in a missing group's row
  const NODES_SHOWN = 4;       // node names written out in a missing group's row
  const AUDIT_POLL_MS = 2000;
  const EVENTS_POLL_MS = 1000;
  const MAX_EVENTS_SHOWN = 200;
  const MAX_CHART_STEPS = 120;
  // Events listed under "Violations and stalls".
  const PROBLEM_KINDS = new Set(['violation', 'stall', 'rank_lost', 'abort']);

  const query = new URLSearchParams(window.location.search);
  const state = {
    job: query.get('job') || '',
    expand: query.get('node') || '',  // the node drilled into ('' for none)
    autoExpanded: false,   // expand was picked by the page (a job of one node), not the user
    autoDismissed: false,  // the user closed the automatic drill-down: do not reopen it
    nodeOffset: 0,         // the page of nodes shown (jobs of more than NODE_LIMIT nodes)
    eventsNext: 0,
    problems: [],  // violation and stall events, oldest first
    renders: 0,
    pollSeq: 0,      // overview requests sent
    renderedSeq: 0,  // the newest overview request rendered (older answers are dropped)
    tiles: [],       // the node map's tiles, in node order (#node-map's children)
    hovered: null,   // the tile under the pointer
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
    const first = !state.job;  // the page opened without ?job=: keep its &node=
    state.job = id;
    state.eventsNext = 0;
    state.problems = [];
    state.nodeOffset = 0;
    state.autoExpanded = false;
    state.autoDismissed = false;
    if (!first) state.expand = '';  // node names belong to a job
    document.body.dataset.job = id;
    const url = new URL(window.location.href);
    url.searchParams.set('job', id);
    if (!state.expand) url.searchParams.delete('node');
    window.history.replaceState(null, '', url.toString());
    renderProblems();
    renderNodeDetail(null);
    for (const poll of [pollOverview, pollAudit, pollEvents]) {
      poll().catch((err) => setConnection(false, String(err.message || err)));
    }
  }

  // ---- job overview: chunk header, node map, drill-down, missing groups, slowest nodes ------

  // The letters of NodeOverview.chunk_states / RankOverview.chunk_states, worst first.
  const LETTERS = { M: 'missing', Y: 'syncing', S: 'staged', D: 'synced', I: 'idle' };
  const WORST_FIRST = ['M', 'Y', 'S', 'D', 'I'];
  const SEVERITY = { M: 5, Y: 4, S: 3, D: 2, I: 1 };

  function stateOf(letter) {
    return LETTERS[letter] || 'idle';
  }

  // The worst letter of a chunk_states string ('I' when empty).
  function worstLetter(letters) {
    let worst = 'I';
    let severity = 1;
    for (let i = 0; i < letters.length; i++) {
      const s = SEVERITY[letters[i]] || 0;
      if (s > severity) {
        severity = s;
        worst = letters[i];
        if (s === 5) break;
      }
    }
    return worst;
  }

  // Runs of consecutive ranks ([{first, last}, ...]) as "0-7, 9, 12-15"; at most `limit` runs,
  // then "…" (also when the server truncated the list).
  function formatRuns(runs, limit, truncated) {
    const parts = [];
    const all = list(runs);
    for (const r of all.slice(0, limit || all.length)) {
      const first = num(r.first);
      const last = num(r.last);
      parts.push(first === last ? String(first) : first + '-' + last);
    }
    let text = parts.join(', ');
    if ((limit && all.length > limit) || truncated) text += (text ? ', ' : '') + '\u2026';
    return text;
  }

  function chunkList(chunks) {
    // Chunk indexes as "c0-2, c7".
    const parts = [];
    for (let i = 0; i < chunks.length; i++) {
      let j = i;
      while (j + 1 < chunks.length && chunks[j + 1] === chunks[j] + 1) j++;
      parts.push(j > i ? 'c' + chunks[i] + '-' + chunks[j] : 'c' + chunks[i]);
      i = j;
    }
    return parts.join(', ');
  }

  // The tooltip of a node tile: the node, its ranks, its chunks by state, what it holds back.
  function nodeTitle(n) {
    const letters = n.chunk_states || '';
    const ranksText = 'ranks ' + formatRuns(n.ranks);
    const lines = [(n.node === ranksText ? n.node : n.node + ' \u00b7 ' + ranksText) + ' (' +
                   num(n.num_ranks) + ' rank' + (num(n.num_ranks) === 1 ? '' : 's') + ')'];
    const chunksOf = { M: [], Y: [], S: [], D: [], I: [] };
    for (let c = 0; c < letters.length; c++) (chunksOf[letters[c]] || chunksOf.I).push(c);
    const byState = [];
    for (const letter of WORST_FIRST) {
      if (chunksOf[letter].length) byState.push(stateOf(letter) + ' ' + chunkList(chunksOf[letter]));
    }
    if (byState.length) lines.push(byState.join(' \u00b7 '));
    const held = [];
    if (num(n.missing)) held.push('missing ' + num(n.missing) + ' check-in' +
                                  (num(n.missing) === 1 ? '' : 's'));
    if (num(n.sync_pending)) held.push(num(n.sync_pending) + ' SyncDone pending');
    if (num(n.waiting_micros)) held.push('waiting ' + formatMicros(n.waiting_micros));
    lines.push(held.length ? held.join(' \u00b7 ') : 'holds nothing back');
    if (num(n.lost_ranks)) lines.push(num(n.lost_ranks) + ' lost rank' +
                                      (num(n.lost_ranks) === 1 ? '' : 's'));
    if (num(n.straggler_score_seconds) > 0) {
      lines.push('slowest rank ' + num(n.slowest_rank) + ' (straggler score ' +
                 formatSeconds(n.straggler_score_seconds) + ')');
    }
    return lines.join('\n');
  }

  // Per chunk: step, state, staged / expected, who holds it back, waiting.
  function renderChunks(job) {
    const table = $('chunks');
    const chunks = list(job.chunks);
    const head = table.tHead.rows[0];
    const rows = {};
    for (const tr of table.tBodies[0].rows) rows[tr.dataset.row] = tr;
    if (num(table.dataset.numChunks) !== chunks.length) {
      while (head.cells.length > 1) head.deleteCell(1);
      for (const tr of Object.values(rows)) while (tr.cells.length > 1) tr.deleteCell(1);
      chunks.forEach((c, i) => {
        head.appendChild(el('th', { 'data-chunk': i, class: 'chunk-head' }));
        for (const [name, tr] of Object.entries(rows)) {
          tr.appendChild(el('td', { 'data-chunk': i, 'data-row': name }));
        }
      });
      table.dataset.numChunks = chunks.length;
    }
    chunks.forEach((chunk, i) => {
      const th = head.cells[i + 1];
      const step = num(chunk.step);
      const st = (chunk.state || 'IDLE').toLowerCase();
      const staged = num(chunk.staged_count);
      const expected = staged + num(chunk.missing_count);
      const waiting = num(chunk.waiting_micros);
      const deadline = num(chunk.deadline_micros);
      const late = st !== 'idle' && deadline > 0 && waiting > deadline;
      th.textContent = 'c' + i + ' \u00b7 s' + step;
      th.dataset.step = step;
      th.dataset.state = st;
      th.dataset.staged = staged;
      th.dataset.expected = expected;
      th.dataset.syncPending = num(chunk.sync_pending_count);
      th.dataset.late = late ? 'true' : 'false';
      th.title = 'chunk ' + i + ', step ' + step + ': ' + (chunk.state || 'IDLE') + '; staged ' +
          staged + ' of ' + expected + ' check-ins' +
          (st === 'released' ? '; ' + num(chunk.sync_pending_count) + ' SyncDone pending' : '') +
          (st !== 'idle' ? '; waiting ' + formatMicros(waiting) + ' (deadline ' +
                           formatMicros(deadline) + ')' : '');
      const cell = (name) => rows[name].cells[i + 1];
      cell('state').textContent = st;
      cell('state').dataset.state = st;
      cell('staged').textContent = expected > 0 ? staged + '/' + expected : '-';
      let held = '';
      if (st === 'waiting') held = num(chunk.missing_count) + ' missing';
      else if (st === 'released') held = num(chunk.sync_pending_count) + ' SyncDone';
      cell('held').textContent = held;
      cell('held').dataset.state = st;
      cell('waiting').textContent = st === 'idle' ? '' : formatMicros(waiting);
      cell('waiting').classList.toggle('late', late);
    });
  }

  // The node map: one tile per node, built once per node list, then updated in place.
  function renderNodeMap(overview) {
    const map = $('node-map');
    const nodes = list(overview.nodes);
    const tiles = state.tiles;
    // New tiles get their attributes before they join the document (one insertion, one style
    // pass), then the map grows or shrinks to the node count; tiles keep their place.
    let fragment = null;
    if (tiles.length < nodes.length) {
      fragment = document.createDocumentFragment();
      for (let i = tiles.length; i < nodes.length; i++) {
        const tile = document.createElement('div');
        tile.className = 'node';
        fragment.appendChild(tile);
        tiles.push(tile);
      }
    } else if (tiles.length > nodes.length) {
      for (const tile of tiles.splice(nodes.length)) tile.remove();
    }
    if (fragment !== null || num(map.dataset.shown) !== nodes.length) {
      // Larger tiles when there are few of them.
      map.dataset.density = nodes.length <= 64 ? 'large' : nodes.length <= 512 ? 'medium' : 'small';
    }
    const counts = { missing: 0, syncing: 0, staged: 0, synced: 0, idle: 0, lost: 0 };
    for (let i = 0; i < nodes.length; i++) {
      const n = nodes[i];
      const tile = tiles[i];
      const name = n.node || '';
      const letters = n.chunk_states || '';
      const st = stateOf(worstLetter(letters));
      const lost = num(n.lost_ranks);
      counts[st] += 1;
      if (lost > 0) counts.lost += 1;
      // Everything the tile shows, as one string: attributes and title are written only when it
      // changes (the waiting time of the few nodes that hold a chunk back, mostly).
      const runs = list(n.ranks);
      const key = name + '|' + letters + '|' + num(n.missing) + '|' + num(n.sync_pending) + '|' +
          lost + '|' + n.waiting_micros + '|' + n.straggler_score_seconds + '|' + n.slowest_rank +
          '|' + num(n.num_ranks) + '|' + runs.length + '|' +
          (runs.length ? num(runs[0].first) + '-' + num(runs[runs.length - 1].last) : '');
      tile._node = n;
      if (tile._key === key) continue;
      tile._key = key;
      const d = tile.dataset;
      if (d.node !== name) d.node = name;
      if (d.state !== st) d.state = st;
      if (d.chunks !== letters) d.chunks = letters;
      if (d.missing !== String(num(n.missing))) d.missing = num(n.missing);
      if (d.lost !== String(lost)) d.lost = lost;
      // The tooltip is written when the pointer reaches the tile (thousands of titles would
      // cost the first render tens of ms); the tile under the pointer gets its new one now.
      if (tile === state.hovered) setTileTitle(tile);
    }
    if (fragment !== null) map.appendChild(fragment);
    markSelected();
    for (const span of $('node-legend').querySelectorAll(':scope > [data-state]')) {
      const st = span.dataset.state;
      if (!(st in counts)) continue;
      span.dataset.count = counts[st];
      span.querySelector('.count').textContent = counts[st];
    }
    const total = num(overview.num_nodes);
    const offset = num(overview.node_offset);
    map.dataset.numNodes = total;
    map.dataset.shown = nodes.length;
    map.dataset.offset = offset;
    const paged = offset > 0 || offset + nodes.length < total;
    $('node-page').hidden = !paged;
    if (paged) {
      $('node-page-text').textContent = 'nodes ' + (nodes.length ? offset + 1 : offset) + '\u2013' +
          (offset + nodes.length) + ' of ' + total;
      $('node-prev').disabled = offset === 0;
      $('node-next').disabled = offset + nodes.length >= total;
    }
  }

  function setTileTitle(tile) {
    if (tile._node && tile._titleKey !== tile._key) {
      tile.title = nodeTitle(tile._node);
      tile._titleKey = tile._key;
    }
  }

  function markSelected() {
    const map = $('node-map');
    const previous = map.querySelector('.node[data-selected="true"]');
    if (previous && previous.dataset.node === state.expand) return;
    if (previous) delete previous.dataset.selected;
    if (!state.expand) return;
    for (const tile of state.tiles) {
      if (tile.dataset.node === state.expand) {
        tile.dataset.selected = 'true';
        break;
      }
    }
  }

  // Opens (or, with '', closes) the drill-down into one node, and polls at once.
  function expandNode(name, fromUser) {
    if (fromUser !== false) {
      if (!name && state.autoExpanded) state.autoDismissed = true;
      state.autoExpanded = false;
      const url = new URL(window.location.href);
      if (name) url.searchParams.set('node', name); else url.searchParams.delete('node');
      window.history.replaceState(null, '', url.toString());
    }
    state.expand = name;
    markSelected();
    renderNodeDetail(null);
    pollOverview().catch((err) => setConnection(false, String(err.message || err)));
  }

  // The cell look of the old heatmap, for the ranks of the node drilled into.
  function renderNodeDetail(overview) {
    const box = $('node-detail');
    const name = state.expand;
    box.hidden = !name;
    box.dataset.node = name;
    if (!name) return;
    $('node-detail-title').textContent = name;
    const table = $('node-ranks');
    if (overview === null) {
      // Asked for; the answer is on its way.
      if (table.dataset.node !== name) {
        table.tBodies[0].replaceChildren();
        table.dataset.node = name;
        table.dataset.numRanks = 0;
      }
      return;
    }
    const ranks = list(overview.expanded).filter((r) => r.node === name);
    const chunks = list((overview.status || {}).chunks);
    const node = list(overview.nodes).concat(list(overview.slowest_nodes))
        .find((n) => n.node === name);
    if (node) {
      const ranksText = 'ranks ' + formatRuns(node.ranks);
      $('node-detail-title').textContent = (name === ranksText ? name : name + ' \u00b7 ' + ranksText) +
          ' (' + num(node.num_ranks) + ' rank' + (num(node.num_ranks) === 1 ? '' : 's') + ')';
    }
    const empty = $('node-detail-empty');
    empty.hidden = ranks.length > 0;
    empty.textContent = ranks.length ? '' : 'The job has no node named "' + name + '".';
    const head = table.tHead.rows[0];
    const body = table.tBodies[0];
    const shape = name + '|' + chunks.length + '|' + ranks.map((r) => num(r.rank)).join(',');
    if (table._shape !== shape) {
      table._shape = shape;
      while (head.cells.length > 1) head.deleteCell(1);
      chunks.forEach((c, i) => head.appendChild(el('th', { 'data-chunk': i, class: 'chunk-head' })));
      body.replaceChildren(...ranks.map((r) => {
        const rank = num(r.rank);
        const row = el('tr', { 'data-rank': rank });
        row.appendChild(el('th', { class: 'rank-head', scope: 'row' }, rank));
        chunks.forEach((c, i) => row.appendChild(
            el('td', { class: 'cell', 'data-rank': rank, 'data-chunk': i, 'data-state': 'idle' })));
        return row;
      }));
      table.dataset.node = name;
      table.dataset.numRanks = ranks.length;
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
    ranks.forEach((r, k) => {
      const row = body.rows[k];
      const rank = num(r.rank);
      const lost = r.lost === true;
      if ((row.dataset.lost === 'true') !== lost) row.dataset.lost = lost ? 'true' : 'false';
      const missing = list(r.missing);
      row.cells[0].title = 'rank ' + rank + (lost ? ' (lost)' : '') +
          (missing.length ? ': missing ' + missing.join(', ') : '');
      const letters = r.chunk_states || '';
      chunks.forEach((chunk, i) => {
        const td = row.cells[i + 1];
        const st = stateOf(letters[i]);
        if (td.dataset.state !== st) td.dataset.state = st;
        td.dataset.step = num(chunk.step);
        const mine = missing.filter((m) => m.startsWith('c' + i + ':'));
        let text = 'rank ' + rank + ' \u00b7 chunk ' + i + ' \u00b7 step ' + num(chunk.step) + ': ' + st;
        if (mine.length) text += '; missing ' + mine.join(', ');
        if (st === 'missing' || st === 'syncing') {
          text += '; waiting ' + formatMicros(chunk.waiting_micros);
        }
        td.title = text;
      });
    });
  }

  function describeWhat(what) {
    return what === 'sync_done' ? 'SyncDone' : what;
  }

  // Missing now, one row per MissingGroup (the server's order: longest waiting first).
  function renderMissing(overview) {
    const groups = list(overview.missing);
    const total = Math.max(num(overview.missing_groups), groups.length);
    const body = $('missing').tBodies[0];
    body.replaceChildren(...groups.map((g) => {
      const chunk = num(g.chunk);
      const step = num(g.step);
      const ranks = num(g.num_ranks);
      const nodes = list(g.nodes);
      const numNodes = num(g.num_nodes);
      const late = g.late === true;
      const tr = el('tr', { 'data-chunk': chunk, 'data-step': step, 'data-what': g.what || '',
                            'data-ranks': ranks, 'data-nodes': numNodes,
                            'data-late': late ? 'true' : 'false' });
      if (nodes.length) tr.dataset.node = nodes[0];
      const who = el('td', { class: 'who' });
      who.append(el('div', { class: 'ranks' }, ranks + ' rank' + (ranks === 1 ? '' : 's') + ': ' +
                    formatRuns(g.ranks, RUNS_SHOWN, g.ranks_truncated === true)));
      let where = 'on ' + numNodes + ' node' + (numNodes === 1 ? '' : 's') + ': ' +
          nodes.slice(0, NODES_SHOWN).join(', ');
      if (numNodes > NODES_SHOWN) where += ' \u2026 +' + (numNodes - NODES_SHOWN) + ' more';
      who.append(el('div', { class: 'nodes muted' }, where));
      const waiting = el('td', { class: late ? 'late' : '' }, formatMicros(g.waiting_micros));
      if (late) waiting.append(el('span', { class: 'late-badge' }, 'LATE'));
      tr.append(el('td', {}, chunk), el('td', {}, step),
                el('td', { class: 'what' }, describeWhat(g.what || '')), who, waiting);
      tr.title = 'chunk ' + chunk + ' \u00b7 step ' + step + ' \u00b7 ' +
          (g.what === 'sync_done' ? 'no SyncDone' : 'not staged: ' + (g.what || '')) + '\nranks ' +
          formatRuns(g.ranks, 0, g.ranks_truncated === true) + '\nnodes ' + nodes.join(', ') +
          (numNodes > nodes.length ? ' \u2026 (' + numNodes + ' in all)' : '') + '\nwaiting ' +
          formatMicros(g.waiting_micros) + ', deadline ' + formatMicros(g.deadline_micros);
      return tr;
    }));
    $('missing').dataset.count = groups.length;
    $('missing').dataset.groups = total;
    $('missing-empty').hidden = groups.length > 0;
    const more = $('missing-more');
    more.hidden = total <= groups.length;
    more.textContent = total > groups.length ? '+' + (total - groups.length) + ' more groups' : '';

    // The single oldest waiter: the first group.
    const oldest = $('oldest-waiter');
    const g = groups[0];
    oldest.hidden = g === undefined;
    if (g === undefined) {
      oldest.replaceChildren();
      for (const k of ['rank', 'chunk', 'step', 'what', 'ranks', 'late']) delete oldest.dataset[k];
      return;
    }
    const first = list(g.ranks).length ? num(g.ranks[0].first) : 0;
    const ranks = num(g.num_ranks);
    const late = g.late === true;
    Object.assign(oldest.dataset, { rank: first, chunk: num(g.chunk), step: num(g.step),
                                    what: g.what || '', ranks: ranks,
                                    late: late ? 'true' : 'false' });
    const text = 'rank ' + first + ' ' + describeWhat(g.what || '') +
        (ranks > 1 ? ' +' + (ranks - 1) + ' more' : '') + ', chunk ' + num(g.chunk) + ' step ' +
        num(g.step) + ', waiting ' + formatMicros(g.waiting_micros) + (late ? ' (late)' : '');
    oldest.replaceChildren(el('span', { class: 'label' }, 'Oldest waiter: '),
                           el('span', { class: 'what' }, text));
  }

  // The slowest nodes, highest straggler score first.
  function renderSlowNodes(overview) {
    const nodes = list(overview.slowest_nodes);
    const body = $('slow-nodes').tBodies[0];
    body.replaceChildren(...nodes.map((n, i) => {
      const tr = el('tr', { 'data-node': n.node || '', 'data-position': i + 1,
                            'data-score': num(n.straggler_score_seconds),
                            'data-missing': num(n.missing), 'data-sync-pending': num(n.sync_pending),
                            'data-state': stateOf(worstLetter(n.chunk_states || '')) });
      if (n.node === state.expand) tr.dataset.selected = 'true';
      const parts = [];
      if (num(n.missing) || !num(n.sync_pending)) parts.push(String(num(n.missing)));
      if (num(n.sync_pending)) parts.push(num(n.sync_pending) + ' SyncDone');
      const missing = parts.join(' + ');
      tr.append(el('td', { class: 'node-name' }, n.node || ''), el('td', {}, num(n.slowest_rank)),
                el('td', {}, formatSeconds(n.straggler_score_seconds)),
                el('td', { class: num(n.missing) + num(n.sync_pending) > 0 ? 'late' : '' }, missing),
                el('td', {}, num(n.waiting_micros) ? formatMicros(n.waiting_micros) : ''));
      tr.title = nodeTitle(n);
      return tr;
    }));
    $('slow-nodes').dataset.count = nodes.length;
    $('slow-nodes-empty').hidden = nodes.length > 0;
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

  function renderSummary(job, overview) {
    const badge = $('job-state');
    badge.textContent = job.state || '';
    badge.dataset.state = (job.state || '').toLowerCase();
    $('generation').textContent = num(job.generation);
    $('ranks').textContent = num(job.ranks_joined) + ' / ' + num(job.world_size);
    $('nodes').textContent = num(overview.num_nodes);
    $('nodes').dataset.value = num(overview.num_nodes);
    $('sessions').textContent = num(job.sessions_connected);
    $('min-step').textContent = num(job.min_rank_step);
    $('min-step').dataset.value = num(job.min_rank_step);
    $('num-chunks').textContent = num(job.num_chunks);
    const lost = list(job.lost_ranks).map(num).sort((a, b) => a - b);
    $('lost-ranks').textContent = lost.length === 0 ? 'none' : lost.slice(0, 16).join(', ') +
        (lost.length > 16 ? ' \u2026 (' + lost.length + ')' : '');
    $('lost-ranks').dataset.value = lost.join(',');
    $('lost-ranks').classList.toggle('bad', lost.length > 0);
    const abort = $('abort-reason');
    abort.hidden = !job.abort_reason;
    abort.textContent = job.abort_reason ? 'aborted: ' + job.abort_reason : '';
  }

  function overviewPath() {
    let path = '/api/overview?id=' + encodeURIComponent(state.job) + '&node_limit=' + NODE_LIMIT +
        '&missing_limit=' + MISSING_LIMIT;
    if (state.nodeOffset > 0) path += '&node_offset=' + state.nodeOffset;
    if (state.expand) path += '&expand=' + encodeURIComponent(state.expand);
    return path;
  }

  async function pollOverview() {
    if (!state.job) return;
    const job = state.job;
    const expand = state.expand;
    const seq = ++state.pollSeq;
    const data = await getJson(overviewPath());
    // Drop an answer to an older question (another job, node, or a later request answered).
    if (job !== state.job || expand !== state.expand || seq < state.renderedSeq) return;
    state.renderedSeq = seq;
    const started = performance.now();
    const status = data.status || {};
    renderSummary(status, data);
    renderChunks(status);
    renderNodeMap(data);
    renderNodeDetail(data);
    renderMissing(data);
    renderSlowNodes(data);
    renderStragglers(status);
    renderCounters(status);
    state.renders += 1;
    const body = document.body.dataset;
    body.renders = state.renders;
    // Load to first render, and what the latest render itself took (ms, for the perf check).
    const now = performance.now();
    if (state.renders === 1) {
      body.renderMs = now.toFixed(1);
      body.firstRenderJsMs = (now - started).toFixed(1);
      // After style, layout and paint of that first frame.
      window.requestAnimationFrame(() => window.setTimeout(() => {
        body.paintMs = performance.now().toFixed(1);
      }, 0));
    }
    body.lastRenderJsMs = (now - started).toFixed(1);
    $('updated').textContent = 'updated ' + new Date().toLocaleTimeString();
    // A job of one node: show its ranks without a click (unless the user closed them).
    if (!state.expand && !state.autoDismissed && num(data.num_nodes) === 1 &&
        list(data.nodes).length === 1) {
      state.autoExpanded = true;
      expandNode(data.nodes[0].node || '', false);
    }
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
  $('node-map').addEventListener('click', (e) => {
    const tile = e.target.closest('.node');
    if (tile) expandNode(tile.dataset.node === state.expand ? '' : tile.dataset.node);
  });
  $('node-map').addEventListener('mouseover', (e) => {
    const tile = e.target.closest('.node');
    state.hovered = tile;
    if (tile) setTileTitle(tile);
  });
  $('node-map').addEventListener('mouseleave', () => { state.hovered = null; });
  $('node-detail-close').addEventListener('click', () => expandNode(''));
  for (const id of ['missing', 'slow-nodes']) {
    $(id).tBodies[0].addEventListener('click', (e) => {
      const tr = e.target.closest('tr[data-node]');
      if (tr) expandNode(tr.dataset.node);
    });
  }
  const page = (delta) => {
    state.nodeOffset = Math.max(0, state.nodeOffset + delta * NODE_LIMIT);
    pollOverview().catch((err) => setConnection(false, String(err.message || err)));
  };
  $('node-prev').addEventListener('click', () => page(-1));
  $('node-next').addEventListener('click', () => page(1));
  document.body.dataset.job = state.job;
  renderProblems();
  renderNodeDetail(null);
  loop(refreshJobs, 5000);
  loop(pollOverview, OVERVIEW_POLL_MS);
  loop(pollAudit, AUDIT_POLL_MS);
  loop(pollEvents, EVENTS_POLL_MS);
  loop(pollReplicas, 2000);
})();
