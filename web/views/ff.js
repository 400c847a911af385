// ff.js — "The feed-forward's effect" (Kobayashi et al., ICLR 2024): block by block, the query
// token's norm-based map just before the feed-forward (FF) network (stage atb-res-ln) and just
// after it (atb-res-ln-ff), their difference on a diverging colour scale, the Spearman ρ between
// the two maps, and a chart of every stage's mixing ratio over the blocks. One block at a time
// (the stepper, or the arrow keys) or all blocks at once as small multiples.
//
// Where each number comes from (the page draws; the only arithmetic here is after − before of two
// drawn values, for display):
//   N_atb-res-ln[q, :], N_atb-res-ln-ff[q, :]   the norm-based explanation's maps (norm[b].maps)
//   s[q, :] before and after (context shares)  core's normImageSummary (shareBefore, shareAfter)
//   ρ of row q, of the whole map, row mean     normImageSummary (rhoQuery, rhoFlat, rhoRows)
//   r̄ per stage (mean over tokens)             normImageSummary (mixingMean)
//   r_q per stage (the query token)            the explanation's mixing ratios (norm[b].mixing)
// all through the worker's `normFf`, which computes the norm-based maps only when the main view
// has none (norm-based is long-running: progress and Cancel here), and only while the section is
// open. Another model or image drops the data; the query follows the page's (app.query).
// The request is background work of rank 3 (background.js): another view's request withdraws it
// for a moment (on a DeiT-tiny-sized model the heads section's curve had waited 4.7 s behind it),
// and the engine goes on from the block it was in (ExplainState::norm).
import { RANK } from '../background.js';
import { on } from '../events.js';
import { COLORMAPS } from '../render.js';
import { tokenLayout, tokenName, tokenPatch } from '../tokens.js';
import { $, sizeCanvas } from './util.js';

const BEFORE = 'atb-res-ln';
const AFTER = 'atb-res-ln-ff';
const STAGES = ['atb', 'atb-res', 'atb-res-ln', 'atb-res-ln-ff', 'layer'];
const STAGE_COLOURS = ['#8250df', '#1f6feb', '#1a7f37', '#e36209', '#cf222e'];
const SVG = 'http://www.w3.org/2000/svg';

// A diverging colour map for after − before: blue (negative) through white (0) to red (positive),
// linear between the eleven colours of ColorBrewer's RdBu scheme (Brewer, colorbrewer2.org), reversed.
const RDBU = ['053061', '2166ac', '4393c3', '92c5de', 'd1e5f0', 'f7f7f7', 'fddbc7', 'f4a582', 'd6604d', 'b2182b', '67001f'];
const DIVERGING = (() => {
  const rgb = RDBU.map((h) => [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)));
  const lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = (i / 255) * (rgb.length - 1);
    const k = Math.min(rgb.length - 2, Math.floor(t));
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(rgb[k][c] * (1 - (t - k)) + rgb[k + 1][c] * (t - k));
  }
  return lut;
})();
const OWN_COLOUR = '#9aa4b0'; // the query's own entry: not on the colour scale

// 7 significant digits (float32 carries about 7): the value written is core's to < 1e-6.
const full = (v) => (v === 0 ? '0' : Math.abs(v) < 1e-4 || Math.abs(v) >= 1e5 ? v.toExponential(6) : v.toPrecision(7));
const short = (v) => (v === 0 ? '0' : String(Number(v.toPrecision(3))));

// The LUT index (0…255) of v on a sequential scale [0, max] or a diverging one [−m, m].
const seqIndex = (v, max) => Math.round(Math.min(1, Math.max(0, max > 0 ? v / max : 0)) * 255);
const divIndex = (v, m) => Math.round(Math.min(1, Math.max(0, m > 0 ? 0.5 + v / (2 * m) : 0.5)) * 255);

export function createFfView(app) {
  let dataKey = null; // app.imageId the data belong to
  let data = null; // { norm, summary, fetchMs, ms }
  let pending = null; // { key, p }: p, background.js's promise
  let halted = false; // Cancel pressed: nothing starts again until asked
  let block = 0;
  let cursor = -1; // the key token under the readout (−1: none yet)
  let chartStage = 3; // the series the chart's keyboard cursor is on (atb-res-ln-ff)
  let shown = null; // what is drawn: { layout, q, blocks: [{ b, before, after, diff, seqMax, divMax }] }

  const open = () => $('ff-open').open;
  const units = () => $('ff-units').value; // 'share' | 'raw'

  // ---- events ------------------------------------------------------------------------------
  on('model-changed', ({ reloaded }) => {
    if (reloaded) return;
    drop();
    block = 0;
    cursor = -1;
    buildStepper();
    clear();
  });
  // Another image: its decomposition for the last one (norm-based: ~4 s on a DeiT-tiny-sized
  // model) is stopped at once, not when the next explanation arrives, which it would delay.
  on('image-changed', () => {
    halted = false;
    drop();
  });
  // An edit replaces the image without 'image-changed': its request for the old one stops here,
  // before the worker frees that image.
  on('predicted', () => {
    if (pending && pending.key !== app.imageId) drop();
  });
  on('explained', () => refresh());
  on('query-changed', () => { if (open() && data) draw(); });
  $('ff-open').addEventListener('toggle', () => {
    if (open()) halted = false;
    refresh();
  });
  $('ff-prev').addEventListener('click', () => setBlock(block - 1));
  $('ff-next').addEventListener('click', () => setBlock(block + 1));
  $('ff-block').addEventListener('input', () => setBlock(Number($('ff-block').value)));
  for (const id of ['ff-all', 'ff-units', 'ff-mix-mode']) $(id).addEventListener('change', () => { if (data) draw(); });
  $('ff-cancel').addEventListener('click', cancel);
  $('ff-retry').addEventListener('click', () => {
    halted = false;
    refresh();
  });
  new ResizeObserver(() => { if (open() && data) draw(); }).observe($('ff-body'));

  function drop() {
    pending?.p.cancel(); // its flag raised too
    pending = null;
    data = null;
    dataKey = null;
    shown = null;
    endProgress();
  }

  function clear() {
    $('ff-maps').replaceChildren();
    $('ff-chart').replaceChildren();
    $('ff-chart-legend').replaceChildren();
    for (const id of ['ff-readout', 'ff-chart-readout', 'ff-note']) $(id).textContent = '';
    $('ff-maps').dataset.ready = 'false';
  }

  // ---- the block stepper ---------------------------------------------------------------------
  function buildStepper() {
    const depth = (app.inputInfo ?? app.info)?.depth ?? 1;
    block = Math.min(depth - 1, Math.max(0, block));
    $('ff-block').max = String(depth - 1);
    $('ff-block').value = String(block);
    $('ff-block-out').textContent = String(block);
  }

  function setBlock(b) {
    const depth = (app.inputInfo ?? app.info)?.depth ?? 1;
    block = Math.min(depth - 1, Math.max(0, b));
    $('ff-block').max = String(depth - 1);
    $('ff-block').value = String(block);
    $('ff-block-out').textContent = String(block);
    if (data) draw();
  }

  // ---- data ----------------------------------------------------------------------------------
  // Fetches the maps and core's summary for the current image (once), then draws.
  async function refresh() {
    if (!open() || app.imageId === null || !app.inputInfo) return;
    const key = app.imageId;
    if (key !== dataKey) {
      drop();
      dataKey = key;
      clear();
      buildStepper();
    }
    if (data) {
      draw();
      return;
    }
    if (pending) return;
    if (halted) {
      setNote('Cancelled. “Compute” goes on from the blocks done.');
      $('ff-retry').hidden = false;
      return;
    }
    // The main view's norm-based maps of this image, when it has them: sent back, not recomputed.
    const main = app.explanation?.method === 'norm-based' && app.explanation.norm ? app.explanation.norm : null;
    const t0 = performance.now();
    // priority: ahead of the all-methods grid's explains queued in the worker (see worker.js), and
    // withdrawing the background requests below rank 3. For the tests, on #ff-progress-row:
    // data-first, the request's first progress (above 0 when the engine had blocks of this image:
    // a Cancel's, or the grid's norm-based), data-restarts, its withdrawals, and data-resumed-at,
    // the first progress after the last one.
    const row = $('ff-progress-row');
    for (const k of ['first', 'restarts', 'resumedAt']) delete row.dataset[k];
    let resumed = false;
    const p = app.background.ask('normFf', { image: key, norm: main ?? undefined }, {
      rank: RANK.ff,
      priority: true,
      onProgress: (f) => {
        row.dataset.first ??= String(f);
        if (resumed) row.dataset.resumedAt = String(f);
        resumed = false;
        showProgress(key, f);
      },
      onWithdrawn: () => {
        if (pending?.p !== p) return;
        row.dataset.restarts = String(Number(row.dataset.restarts ?? 0) + 1);
        resumed = true;
      },
    });
    pending = { key, p };
    $('ff-maps').dataset.ready = 'false';
    setNote(main ? 'Summarising the main view’s norm-based maps…' : 'Computing the norm-based maps of this image (every block, every stage)…');
    startProgress(!main);
    try {
      const out = await p;
      if (pending?.p !== p) return; // another image or model came while the worker answered
      data = { norm: main ?? out.norm, summary: out.summary, ms: out.ms, fetchMs: performance.now() - t0 };
      pending = null;
      endProgress();
      draw();
    } catch (e) {
      if (pending?.p !== p) return;
      pending = null;
      endProgress();
      if (e.code === 'cancelled') {
        halted = true;
        setNote('Cancelled. “Compute” goes on from the blocks done.');
        $('ff-retry').hidden = false;
        return;
      }
      setNote(`The feed-forward view failed: ${e.message}`);
      app.showError('The feed-forward view failed', e);
    }
  }

  // ---- progress and cancel (norm-based is long-running on larger models) ----------------------
  function startProgress(long) {
    $('ff-retry').hidden = true;
    $('ff-progress-row').hidden = !long;
    $('ff-progress').value = 0;
    $('ff-progress-row').dataset.fraction = '0';
    $('ff-progress-text').textContent = 'norm-based: starting…';
    $('ff-cancel').disabled = false;
  }

  function showProgress(key, fraction) {
    if (pending?.key !== key) return;
    $('ff-progress').value = fraction;
    $('ff-progress-text').textContent = `norm-based: ${Math.round(100 * fraction)} %`;
    $('ff-progress-row').dataset.fraction = String(fraction);
  }

  function endProgress() {
    $('ff-progress-row').hidden = true;
  }

  // Stops the computation: in the engine through the shared flag when the page is cross-origin
  // isolated, otherwise (or if the engine does not stop within 3 s) by restarting the worker.
  async function cancel() {
    const pr = pending;
    if (!pr) return;
    halted = true;
    $('ff-cancel').disabled = true;
    $('ff-progress-text').textContent = 'norm-based: cancelling…';
    await pr.p.stop();
  }

  function setNote(text) {
    $('ff-note').textContent = text;
  }

  // ---- drawing -------------------------------------------------------------------------------
  // The query's row before and after the FF, and after − before, for block b: n values each, in
  // token order (../tokens.js); the colour ranges leave out the query's own entry.
  function rows(b, q, n) {
    const s = data.summary[b];
    const m = data.norm[b].maps;
    const [bm, am] = units() === 'share' ? [s.shareBefore, s.shareAfter] : [m[BEFORE], m[AFTER]];
    const before = Array.from(bm.subarray(q * n, (q + 1) * n));
    const after = Array.from(am.subarray(q * n, (q + 1) * n));
    const diff = after.map((v, j) => v - before[j]);
    let seqMax = 0;
    let divMax = 0;
    for (let j = 0; j < n; j++) {
      if (j === q) continue;
      seqMax = Math.max(seqMax, before[j], after[j]);
      divMax = Math.max(divMax, Math.abs(diff[j]));
    }
    return { b, before, after, diff, seqMax, divMax };
  }

  function draw() {
    if (!data || !app.inputInfo) return;
    const t0 = performance.now();
    const layout = tokenLayout(app.inputInfo);
    const n = layout.n;
    const depth = data.summary.length;
    if (data.summary[0].shareBefore.length !== n * n) {
      setNote(`The engine’s maps are for ${Math.round(Math.sqrt(data.summary[0].shareBefore.length))} tokens, the model has ${n}.`);
      return;
    }
    const q = Math.min(app.query, n - 1);
    block = Math.min(block, depth - 1);
    const all = $('ff-all').checked;
    const list = all ? Array.from({ length: depth }, (_, b) => b) : [block];
    shown = { layout, q, blocks: list.map((b) => rows(b, q, n)) };
    if (cursor < 0 || cursor >= n) cursor = q === 0 && n > 1 ? 1 : 0;
    $('ff-query').textContent = `query: ${tokenName(layout, q)}`;
    formulas();
    drawMaps(all);
    drawChart();
    readout();
    const ms = performance.now() - t0;
    const box = $('ff-maps');
    Object.assign(box.dataset, {
      ready: 'true', drawMs: ms.toFixed(2), query: String(q), block: String(block), all: String(all), units: units(), n: String(n),
      explainMs: data.ms.explain.toFixed(1), summaryMs: data.ms.summary.toFixed(2), fetchMs: data.fetchMs.toFixed(0),
    });
    setNote(`${n} tokens (${layout.prefix} prefix + ${layout.gridH} × ${layout.gridW} patches), ${depth} blocks; ` +
      (data.ms.explain ? `norm-based took ${data.ms.explain.toFixed(0)} ms in the engine, ` : 'the main view’s norm-based maps, ') +
      `the summary ${data.ms.summary.toFixed(1)} ms; drawn in ${ms.toFixed(1)} ms.`);
  }

  // The formulas beside the maps; the two stages' decompositions in core's words (the method
  // table's stage choices).
  function formulas() {
    const stage = app.methodInfo('norm-based')?.optionSpecs.find((o) => o.key === 'stage');
    const help = (st) => stage?.choiceHelp[stage.choices.indexOf(st)] ?? '';
    $('ff-f-before').textContent = help(BEFORE);
    $('ff-f-after').textContent = help(AFTER);
  }

  // The panels: per block shown, before | after | after − before, each the prefix tokens' cells in
  // a strip left of the patch grid.
  function drawMaps(all) {
    const box = $('ff-maps');
    box.replaceChildren();
    box.classList.toggle('ff-all', all);
    const { layout, q } = shown;
    const avail = Math.max(240, $('ff-body').clientWidth || 600);
    const head = all ? 64 : 0; // the row label of the small multiples
    const panelW = Math.floor(Math.min(all ? 150 : 220, (avail - head - 3 * 10) / 3));
    const word = units() === 'share' ? 's' : 'N';
    for (const r of shown.blocks) {
      const row = document.createElement('div');
      row.className = 'ff-row';
      row.dataset.block = String(r.b);
      if (r.b === block) row.classList.add('current');
      if (all) {
        const label = document.createElement('div');
        label.className = 'ff-row-label';
        label.textContent = `block ${r.b}`;
        row.append(label);
      }
      const panels = [
        ['before', r.before, 'before the FF', `${word}_${BEFORE}[q, j]`, { seq: r.seqMax }],
        ['after', r.after, 'after the FF', `${word}_${AFTER}[q, j]`, { seq: r.seqMax }],
        ['diff', r.diff, 'after − before', `Δ${word}[q, j]`, { div: r.divMax }],
      ];
      for (const [kind, values, title, formula, scale] of panels) {
        const fig = document.createElement('figure');
        fig.className = 'ff-panel';
        const c = document.createElement('canvas');
        drawPanel(c, values, layout, q, scale, panelW);
        Object.assign(c.dataset, { kind, block: String(r.b), values: JSON.stringify(values), scaleMax: String(scale.seq ?? scale.div) });
        c.setAttribute('aria-hidden', 'true');
        fig.style.width = c.style.width;
        const cap = document.createElement('figcaption');
        cap.innerHTML = '<strong></strong> <span class="formula"></span>';
        cap.querySelector('strong').textContent = title;
        cap.querySelector('.formula').textContent = all ? '' : formula; // the small multiples: the title only
        fig.append(c, cap);
        row.append(fig);
      }
      box.append(row);
      const rho = data.summary[r.b];
      const facts = document.createElement('p');
      facts.className = 'ff-facts';
      facts.dataset.block = String(r.b);
      facts.textContent = `ρ(before, after) of the query’s row ${short(rho.rhoQuery[q])}; of the whole map ${short(rho.rhoFlat)} ` +
        `(mean over rows ${short(rho.rhoRows)}). Colours: 0 → ${short(r.seqMax)}; after − before ±${short(r.divMax)}.`;
      Object.assign(facts.dataset, { rhoQuery: String(rho.rhoQuery[q]), rhoFlat: String(rho.rhoFlat), rhoRows: String(rho.rhoRows) });
      if (all) row.append(facts);
      else box.append(facts);
    }
    if (!all) box.append(colourBars(shown.blocks[0]));
    if (layout.prefix) {
      const names = layout.kinds.map((k, t) => ({ cls: 'CLS', dist: 'DIST', reg: `R${t - layout.kinds.indexOf('reg')}` })[k] ?? `T${t}`);
      const p = document.createElement('p');
      p.className = 'muted ff-prefix';
      p.textContent = `Framed, left of each grid: the prefix token${layout.prefix > 1 ? 's' : ''} ${names.join(', ')}` +
        `${layout.prefix > 1 ? ' (top to bottom, column by column)' : ''}; then the ${layout.gridH} × ${layout.gridW} patches.`;
      box.append(p);
    }
  }

  // The geometry of a panel: the prefix strip (ceil(prefix / gridH) columns, filled column by
  // column), a gap, then the grid; cell = CSS pixels per cell.
  function geometry(layout, width) {
    const stripCols = layout.prefix ? Math.ceil(layout.prefix / layout.gridH) : 0;
    const gap = stripCols ? 0.5 : 0;
    const cell = Math.max(3, Math.floor(Math.min(width / (layout.gridW + stripCols + gap), (1.4 * width) / layout.gridH)));
    const x0 = Math.round((stripCols + gap) * cell);
    return { cell, stripCols, x0, w: x0 + layout.gridW * cell, h: layout.gridH * cell };
  }

  // Where token t sits in a panel (CSS pixels, top-left of its cell).
  function cellAt(layout, g, t) {
    const p = tokenPatch(layout, t);
    if (p >= 0) return { x: g.x0 + (p % layout.gridW) * g.cell, y: Math.floor(p / layout.gridW) * g.cell };
    return { x: Math.floor(t / layout.gridH) * g.cell, y: (t % layout.gridH) * g.cell };
  }

  function drawPanel(canvas, values, layout, q, scale, width) {
    const g = geometry(layout, width);
    const dpr = sizeCanvas(canvas, g.w, g.h);
    Object.assign(canvas.dataset, { cell: String(g.cell), x0: String(g.x0), stripCols: String(g.stripCols) });
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const lut = scale.div !== undefined ? DIVERGING : COLORMAPS.viridis;
    for (let t = 0; t < layout.n; t++) {
      const { x, y } = cellAt(layout, g, t);
      if (t === q) ctx.fillStyle = OWN_COLOUR;
      else {
        const k = (scale.div !== undefined ? divIndex(values[t], scale.div) : seqIndex(values[t], scale.seq)) * 3;
        ctx.fillStyle = `rgb(${lut[k]},${lut[k + 1]},${lut[k + 2]})`;
      }
      ctx.fillRect(x, y, g.cell, g.cell);
    }
    // The prefix tokens' cells are framed; the query's own cell is outlined (it is left out of the colours).
    ctx.strokeStyle = '#888';
    ctx.lineWidth = 1;
    for (let t = 0; t < layout.prefix; t++) {
      const { x, y } = cellAt(layout, g, t);
      ctx.strokeRect(x + 0.5, y + 0.5, g.cell - 1, g.cell - 1);
    }
    const own = cellAt(layout, g, q);
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = 2;
    ctx.strokeRect(own.x + 1, own.y + 1, g.cell - 2, g.cell - 2);
    if (cursor >= 0 && cursor < layout.n && cursor !== q) {
      const c = cellAt(layout, g, cursor);
      ctx.strokeStyle = '#bf3989';
      ctx.lineWidth = 2;
      ctx.strokeRect(c.x + 1, c.y + 1, g.cell - 2, g.cell - 2);
    }
  }

  // Two colour bars under the single block: viridis 0 → max (before and after share it) and the
  // diverging −m → 0 → +m of after − before.
  function colourBars(r) {
    const wrap = document.createElement('div');
    wrap.className = 'ff-bars';
    const bar = (lut, left, mid, right, label, kind) => {
      const fig = document.createElement('figure');
      const c = document.createElement('canvas');
      const w = 200;
      const h = 12;
      sizeCanvas(c, w, h);
      c.dataset.kind = kind;
      const ctx = c.getContext('2d');
      for (let x = 0; x < c.width; x++) {
        const k = Math.round((x / Math.max(1, c.width - 1)) * 255) * 3;
        ctx.fillStyle = `rgb(${lut[k]},${lut[k + 1]},${lut[k + 2]})`;
        ctx.fillRect(x, 0, 1, c.height);
      }
      const ticks = document.createElement('div');
      ticks.className = 'ff-ticks';
      for (const t of [left, mid, right]) {
        const s = document.createElement('span');
        s.textContent = t;
        ticks.append(s);
      }
      const cap = document.createElement('figcaption');
      cap.textContent = label;
      fig.append(c, ticks, cap);
      return fig;
    };
    wrap.append(
      bar(COLORMAPS.viridis, '0', '', short(r.seqMax), `before and after (${units() === 'share' ? 'share of the context' : 'norm'})`, 'seq'),
      bar(DIVERGING, `−${short(r.divMax)}`, '0', `+${short(r.divMax)}`, 'after − before', 'div'),
    );
    const own = document.createElement('p');
    own.className = 'muted ff-own';
    own.innerHTML = '<span class="ff-swatch"></span> the query itself (left out of the colours)';
    wrap.append(own);
    return wrap;
  }

  // The key under the cursor: its values before, after and their difference, at the current block.
  function readout() {
    if (!shown) return;
    const { layout, q } = shown;
    const r = shown.blocks.find((x) => x.b === block) ?? shown.blocks[0];
    const j = cursor;
    const word = units() === 'share' ? 's' : 'N';
    const own = j === q ? (units() === 'share' ? ' — the query itself, left out of the shares' : ' — the query itself (its own entry: the residual)') : '';
    const box = $('ff-readout');
    box.textContent = `block ${r.b}, key j = ${j}: ${tokenName(layout, j)}${own}. ` +
      `before ${word} = ${full(r.before[j])}, after ${word} = ${full(r.after[j])}, after − before = ${full(r.diff[j])}`;
    Object.assign(box.dataset, { block: String(r.b), key: String(j), before: String(r.before[j]), after: String(r.after[j]), diff: String(r.diff[j]) });
  }

  function moveCursor(t) {
    if (!shown) return;
    cursor = Math.min(shown.layout.n - 1, Math.max(0, t));
    drawMaps($('ff-all').checked);
    readout();
  }

  // ---- the mixing-ratio chart ----------------------------------------------------------------
  // One line per stage over the blocks, y from 0 to 1: r̄ (core's mean over the n tokens) or r_q
  // (the query token's, from the explanation), as the menu says.
  function chartValues() {
    const q = shown.q;
    const mean = $('ff-mix-mode').value === 'mean';
    return STAGES.map((st) => data.summary.map((s, b) => (mean ? s.mixingMean[st] : data.norm[b].mixing[st][q])));
  }

  function drawChart() {
    const svg = $('ff-chart');
    svg.replaceChildren();
    const values = chartValues();
    const depth = data.summary.length;
    const width = Math.max(260, Math.min(640, $('ff-body').clientWidth || 640));
    const height = 230;
    const pad = { l: 40, r: 14, t: 14, b: 34 };
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    const px = (b) => (depth > 1 ? pad.l + (b / (depth - 1)) * (width - pad.l - pad.r) : (pad.l + width - pad.r) / 2);
    const py = (v) => height - pad.b - v * (height - pad.t - pad.b);
    const el = (name, attrs, text) => {
      const e = document.createElementNS(SVG, name);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
      if (text !== undefined) e.textContent = text;
      return e;
    };
    const axis = el('g', { class: 'axis' });
    axis.append(el('line', { x1: pad.l, y1: py(0), x2: width - pad.r, y2: py(0) }), el('line', { x1: pad.l, y1: py(0), x2: pad.l, y2: py(1) }));
    for (const v of [0, 0.25, 0.5, 0.75, 1]) {
      axis.append(el('line', { x1: pad.l - 4, y1: py(v), x2: pad.l, y2: py(v) }));
      axis.append(el('text', { x: pad.l - 6, y: py(v) + 4, 'text-anchor': 'end' }, String(v)));
    }
    const every = Math.max(1, Math.ceil(depth / Math.floor((width - pad.l - pad.r) / 24)));
    for (let b = 0; b < depth; b++) {
      if (b % every && b !== depth - 1) continue;
      axis.append(el('text', { x: px(b), y: height - pad.b + 14, 'text-anchor': 'middle' }, String(b)));
    }
    axis.append(el('text', { x: (pad.l + width - pad.r) / 2, y: height - 4, 'text-anchor': 'middle' }, 'block'));
    svg.append(axis);
    svg.append(el('line', { class: 'ff-current', x1: px(block), y1: py(0), x2: px(block), y2: py(1) }));
    values.forEach((ys, s) => {
      const g = el('g', { class: 'series', 'data-series': STAGES[s] });
      g.append(el('polyline', { points: ys.map((y, b) => `${px(b)},${py(y)}`).join(' '), fill: 'none', stroke: STAGE_COLOURS[s], 'stroke-width': 2 }));
      ys.forEach((y, b) => {
        const c = el('circle', { cx: px(b), cy: py(y), r: b === block && s === chartStage ? 5 : 3, fill: STAGE_COLOURS[s], 'data-series': STAGES[s], 'data-block': b, 'data-value': y });
        c.append(el('title', {}, `block ${b}, ${STAGES[s]}: ${full(y)}`));
        g.append(c);
      });
      svg.append(g);
    });
    const mean = $('ff-mix-mode').value === 'mean';
    svg.setAttribute('aria-label', `mixing ratio per stage over the ${depth} blocks, ${mean ? 'mean over all tokens' : 'of the query token'}; ` +
      'arrow keys: left and right choose the block, up and down the stage');
    const legend = $('ff-chart-legend');
    legend.replaceChildren(...STAGES.map((st, s) => {
      const li = document.createElement('li');
      li.innerHTML = `<span class="ff-line" style="background:${STAGE_COLOURS[s]}"></span>`;
      li.append(st);
      return li;
    }));
    $('ff-chart-caption').textContent = mean
      ? `Each point is r̄ = (1/n) Σ_i r_i, the mixing ratio averaged over all ${shown.layout.n} tokens (prefix tokens and patches), at each stage of each block.`
      : `Each point is r_q, the mixing ratio of the query token (${tokenName(shown.layout, shown.q)}), at each stage of each block.`;
    chartReadout(block, chartStage);
    svg.dataset.mode = mean ? 'mean' : 'query';
  }

  function chartReadout(b, s) {
    const values = chartValues();
    const v = values[s][b];
    const mean = $('ff-mix-mode').value === 'mean';
    const box = $('ff-chart-readout');
    box.textContent = `block ${b}, ${STAGES[s]}: ${mean ? 'r̄' : 'r_q'} = ${full(v)}`;
    Object.assign(box.dataset, { block: String(b), stage: STAGES[s], value: String(v) });
  }

  // ---- input: keyboard, pointer ----------------------------------------------------------------
  $('ff-maps').addEventListener('keydown', (e) => {
    if (!shown) return;
    const { layout } = shown;
    const patch = tokenPatch(layout, cursor);
    const step = {
      ArrowLeft: -1, ArrowRight: 1,
      ArrowUp: patch >= layout.gridW ? -layout.gridW : 0, ArrowDown: patch >= 0 && patch + layout.gridW < layout.patches ? layout.gridW : 0,
    }[e.key];
    if (step !== undefined) moveCursor(cursor + step);
    else if (e.key === 'Home') moveCursor(0);
    else if (e.key === 'End') moveCursor(layout.n - 1);
    else if (e.key === 'PageUp') setBlock(block - 1);
    else if (e.key === 'PageDown') setBlock(block + 1);
    else return;
    e.preventDefault();
  });
  // Hover (mouse, pen) or tap (touch) on a cell of any panel: that key, at that panel's block.
  const pick = (e) => {
    const c = e.target;
    if (!(c instanceof HTMLCanvasElement) || !c.dataset.cell || !shown) return;
    const r = c.getBoundingClientRect();
    const x = e.clientX - r.left;
    const y = e.clientY - r.top;
    const cell = Number(c.dataset.cell);
    const x0 = Number(c.dataset.x0);
    const { layout } = shown;
    let t = -1;
    if (x >= x0) {
      const gx = Math.floor((x - x0) / cell);
      const gy = Math.floor(y / cell);
      if (gx < layout.gridW && gy < layout.gridH) t = layout.prefix + gy * layout.gridW + gx;
    } else {
      const k = Math.floor(x / cell) * layout.gridH + Math.floor(y / cell);
      if (k < layout.prefix) t = k;
    }
    if (t < 0) return;
    const b = Number(c.dataset.block);
    if (b !== block || t !== cursor) {
      cursor = t;
      if (b !== block) setBlock(b);
      else {
        drawMaps($('ff-all').checked);
        readout();
      }
    }
  };
  $('ff-maps').addEventListener('pointermove', (e) => { if (e.pointerType !== 'touch') pick(e); });
  $('ff-maps').addEventListener('pointerdown', pick);

  $('ff-chart').addEventListener('keydown', (e) => {
    if (!data) return;
    if (e.key === 'ArrowLeft') setBlock(block - 1);
    else if (e.key === 'ArrowRight') setBlock(block + 1);
    else if (e.key === 'ArrowUp') chartStage = Math.min(STAGES.length - 1, chartStage + 1);
    else if (e.key === 'ArrowDown') chartStage = Math.max(0, chartStage - 1);
    else return;
    e.preventDefault();
    drawChart();
  });
  // Hover or tap: the point nearest the pointer.
  const chartPick = (e) => {
    if (!data) return;
    const svg = $('ff-chart');
    let best = null;
    for (const c of svg.querySelectorAll('circle')) {
      const r = c.getBoundingClientRect();
      const d = Math.hypot(r.x + r.width / 2 - e.clientX, r.y + r.height / 2 - e.clientY);
      if (!best || d < best.d) best = { d, c };
    }
    if (best && best.d < 24) chartReadout(Number(best.c.dataset.block), STAGES.indexOf(best.c.dataset.series));
  };
  $('ff-chart').addEventListener('pointermove', chartPick);
  $('ff-chart').addEventListener('pointerdown', chartPick);

  return { refresh };
}
