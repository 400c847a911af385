// walk.js — "A guided walk": one method (transformer-attribution, attnlrp or rollout) step by step,
// from the input patches through each block's quantities to the final map. Per step: the step
// counter, the method's formula with the piece computed at this step marked, the equation, the
// tensors read and written with their shapes, the step's values over the image (one value per
// patch; the prefix tokens' values beside it) or the map, the n × n matrix where the matrix is the
// point, and for the LRP methods Σ relevance after the step (its parts, where it is conserved and
// where not) with a chart of Σ R over the steps, the current one marked.
//
// Everything drawn comes from the engine's walk (the worker's `walk`: core's method_walk); the page
// lays it out and colours it (min-max over what is drawn), nothing more. Keys while the walk has
// the focus: ← / → one step, Home / End the first / last, PageUp / PageDown the previous / next
// block. The walk is computed when the section is opened and again for another image, class,
// query token (app.query: the patch chosen on the image; the default, 0, walks with the method's
// own query q) or model; a pending request is cancelled when a newer one replaces it.
import { on } from '../events.js';
import { drawOverlay, formatNumber, matrixCanvas, minMax } from '../render.js';
import { lineChart } from '../teach.js';
import { tokenLayout, tokenName } from '../tokens.js';
import { $, fitCanvas, sizeCanvas } from './util.js';

const KIND_LABEL = { cls: 'CLS', dist: 'DIST', reg: 'REG' };

export function createWalkView(app) {
  let walk = null; // the engine's walk drawn
  let shownKey = ''; // the request (image, method, options, query) `walk` answers
  let index = 0;
  let pending = null; // the request in flight
  let pendingKey = '';
  let chosen = ''; // the method the reader chose in the menu ('' until then: the main view's)

  const open = () => $('walk-open').open;
  const section = $('walk');

  on('model-changed', ({ reloaded }) => {
    if (!reloaded) reset();
    buildMethods();
  });
  on('explained', () => refresh());
  on('query-changed', () => refresh());
  on('method-changed', () => {
    if (!chosen) buildMethods();
    refresh();
  });
  on('explains-cancelled', () => cancelPending());
  $('walk-open').addEventListener('toggle', () => refresh());
  $('walk-method').addEventListener('change', () => {
    chosen = $('walk-method').value;
    refresh();
  });
  $('walk-first').addEventListener('click', () => go(0));
  $('walk-prev').addEventListener('click', () => go(index - 1));
  $('walk-next').addEventListener('click', () => go(index + 1));
  $('walk-last').addEventListener('click', () => go(Infinity));
  // The keys work anywhere in the open section but on the method menu (whose arrows choose) and the summary.
  $('walk-open').addEventListener('keydown', (e) => {
    if (!walk || e.target.closest('select, summary') || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === 'ArrowRight') go(index + 1);
    else if (e.key === 'ArrowLeft') go(index - 1);
    else if (e.key === 'Home') go(0);
    else if (e.key === 'End') go(Infinity);
    else if (e.key === 'PageDown') go(blockStart(+1));
    else if (e.key === 'PageUp') go(blockStart(-1));
    else return;
    e.preventDefault();
  });
  $('cmap').addEventListener('change', () => { if (walk && open()) render(); });

  function reset() {
    cancelPending();
    walk = null;
    shownKey = '';
    index = 0;
    chosen = '';
    setReady(false);
  }

  function cancelPending() {
    if (pending) app.client.cancel(pending.id);
    pending = null;
    pendingKey = '';
  }

  // The methods with a walk (methods()[i].walk), the main view's chosen when it is one of them.
  function buildMethods() {
    const sel = $('walk-method');
    const names = app.methods.filter((m) => m.walk).map((m) => m.name);
    const main = app.views.options?.method ?? app.explanation?.method;
    const current = chosen || (names.includes(main) ? main : sel.value || names[0]);
    sel.replaceChildren(...names.map((n) => new Option(n, n)));
    if (names.includes(current)) sel.value = current;
  }

  // The walk's request: the method, the explained class and the page's values of the method's
  // options (as the main view sends them), and the query token.
  function request() {
    const info = app.methodInfo($('walk-method').value);
    const ex = app.explanation;
    const options = { ...app.views.options.request(info), target: ex.target, query: app.query === 0 ? -1 : app.query };
    return { method: info.name, options };
  }

  async function refresh() {
    if (!open() || !app.explanation || app.imageId === null) return;
    if (!$('walk-method').options.length) buildMethods();
    const req = request();
    const k = `${app.imageId}:${JSON.stringify(req)}`;
    if (k === shownKey || k === pendingKey) return;
    cancelPending();
    pendingKey = k;
    setReady(false);
    setNote(`Computing the walk through ${req.method} for “${app.className(req.options.target)}”…`);
    const t0 = performance.now();
    const p = app.call('walk', { image: app.imageId, ...req }, [], { priority: true });
    pending = p;
    try {
      const w = await p;
      if (pending !== p) return;
      w.fetchMs = performance.now() - t0;
      const previous = walk;
      walk = w;
      shownKey = k;
      // The same method on another image or class keeps the step; another method starts again.
      if (!previous || previous.method !== w.method || previous.steps.length !== w.steps.length) index = 0;
      render();
    } catch (e) {
      if (pending !== p) return;
      if (e.code === 'cancelled') {
        setNote('Cancelled by a newer image or class; the walk follows its explanation.');
        return;
      }
      setNote(`The walk failed: ${e.message}`);
      app.showError('The guided walk failed', e);
    } finally {
      if (pending === p) {
        pending = null;
        pendingKey = '';
      }
    }
  }

  function go(i) {
    if (!walk) return;
    const next = Math.max(0, Math.min(walk.steps.length - 1, i));
    if (next === index) return;
    index = next;
    render();
  }

  // PageDown: the first step after the current run of steps of one block (a block's steps, or the
  // steps outside the blocks); PageUp: the start of the current run, or of the one before.
  function blockStart(dir) {
    const steps = walk.steps;
    const runStart = (i) => {
      while (i > 0 && steps[i - 1].block === steps[i].block) i--;
      return i;
    };
    if (dir > 0) {
      let i = index;
      while (i < steps.length - 1 && steps[i].block === steps[index].block) i++;
      return i;
    }
    const here = runStart(index);
    return here < index ? here : index > 0 ? runStart(index - 1) : 0;
  }

  function setReady(ready) {
    section.dataset.ready = String(ready);
  }

  function setNote(text) {
    $('walk-note').textContent = text;
  }

  // ---- drawing one step ----------------------------------------------------------------------
  function render() {
    const t0 = performance.now();
    const s = walk.steps[index];
    const info = app.inputInfo;
    const layout = tokenLayout(info);
    const n = walk.steps.length;
    $('walk-counter').textContent = `step ${index + 1} of ${n}`;
    $('walk-prev').disabled = index === 0;
    $('walk-first').disabled = index === 0;
    $('walk-next').disabled = index === n - 1;
    $('walk-last').disabled = index === n - 1;
    $('walk-title').textContent = s.title;
    const f = $('walk-formula');
    const mark = document.createElement('mark');
    mark.textContent = s.formula.mark;
    f.replaceChildren(document.createTextNode(s.formula.before), mark, document.createTextNode(s.formula.after));
    $('walk-equation').textContent = s.equation;
    renderTensors(s);
    const drawn = renderImage(s, layout, info);
    renderPrefix(s, layout);
    renderMatrix(s, layout);
    renderRelevance(s);
    renderChart();
    const ms = performance.now() - t0;
    Object.assign(section.dataset, {
      method: walk.method, target: String(walk.target), query: String(walk.query), step: String(index), steps: String(n),
      id: s.id, block: String(s.block), relevance: s.relevance === null ? '' : String(s.relevance), drawMs: ms.toFixed(2),
      fetchMs: walk.fetchMs.toFixed(1), engineMs: walk.ms.toFixed(1),
    });
    // What is drawn, for the tests: the values over the tokens, the map, the matrix (JSON).
    section.dataset.row = s.row ? JSON.stringify(Array.from(s.row)) : '';
    section.dataset.map = s.map ? JSON.stringify(Array.from(s.map)) : '';
    section.dataset.matrix = s.matrix ? JSON.stringify(Array.from(s.matrix)) : '';
    section.dataset.drawn = drawn;
    setNote(`${walk.method} for “${app.className(walk.target)}”, ${walk.queryText}: ${n} steps; computed in ${walk.ms.toFixed(0)} ms in the engine ` +
      `(${walk.fetchMs.toFixed(0)} ms to arrive); this step drawn in ${ms.toFixed(1)} ms.`);
    setReady(true);
  }

  function renderTensors(s) {
    const box = $('walk-tensors');
    box.replaceChildren();
    for (const [label, list] of [['reads', s.reads], ['writes', s.writes]]) {
      if (!list.length) continue;
      const dt = document.createElement('dt');
      dt.textContent = label;
      box.append(dt);
      for (const t of list) {
        const dd = document.createElement('dd');
        dd.className = 'walk-tensor';
        const name = document.createElement('strong');
        name.textContent = t.name;
        dd.append(name, document.createTextNode(` ${t.dims} = ${t.shape.join(' × ')}`));
        box.append(dd);
      }
    }
  }

  // The image with the step's values over it: one colour per patch for a row over the tokens, the
  // token map on the patch grid, or the pixel map; the patch grid alone at the input. Returns what
  // was drawn ('row', 'map', 'grid').
  function renderImage(s, layout, info) {
    const c = $('walk-canvas');
    const img = app.views.editor.imageSource();
    const box = Math.min(320, Math.max(160, (c.parentElement?.clientWidth ?? 320) - 8));
    fitCanvas(c, info.imageW, info.imageH, box);
    const cmap = $('cmap').value;
    let values = null;
    let w = layout.gridW;
    let h = layout.gridH;
    let what = 'grid';
    if (s.map) {
      values = s.map;
      [h, w] = s.mapShape;
      what = 'map';
    } else if (s.row) {
      values = s.row.subarray(layout.prefix);
      what = 'row';
    }
    drawOverlay(c, img, values, w, h, { cmap, opacity: values ? 0.7 : 0, smooth: what === 'map' && h === info.imageH });
    // The patch grid: faint lines between the patches.
    const ctx = c.getContext('2d');
    ctx.strokeStyle = 'rgba(255, 255, 255, 0.35)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let gx = 1; gx < layout.gridW; gx++) {
      const x = Math.round((gx * c.width) / layout.gridW) + 0.5;
      ctx.moveTo(x, 0);
      ctx.lineTo(x, c.height);
    }
    for (let gy = 1; gy < layout.gridH; gy++) {
      const y = Math.round((gy * c.height) / layout.gridH) + 0.5;
      ctx.moveTo(0, y);
      ctx.lineTo(c.width, y);
    }
    ctx.stroke();
    const range = values ? minMax(values) : null;
    $('walk-values').textContent = (s.values || 'nothing over the tokens') +
      (range ? ` — colour: min ${formatNumber(range.min)} → max ${formatNumber(range.max)}` : '');
    c.dataset.min = range ? String(range.min) : '';
    c.dataset.max = range ? String(range.max) : '';
    c.dataset.gridW = String(w);
    c.dataset.gridH = String(h);
    return what;
  }

  // The prefix tokens' values of a row over the tokens (they have no patch on the image).
  function renderPrefix(s, layout) {
    const box = $('walk-prefix');
    box.replaceChildren();
    if (!s.row || !layout.prefix) return;
    layout.kinds.forEach((kind, t) => {
      const chip = document.createElement('span');
      chip.className = `walk-chip walk-${kind}`;
      chip.title = tokenName(layout, t);
      chip.textContent = `${KIND_LABEL[kind] ?? 'T'}${kind === 'reg' ? t - layout.kinds.indexOf('reg') : ''} ${formatNumber(s.row[t])}`;
      chip.dataset.token = String(t);
      chip.dataset.value = String(s.row[t]);
      box.append(chip);
    });
  }

  // The n × n matrix of the step (min-max coloured, the drawn row outlined).
  function renderMatrix(s, layout) {
    const fig = $('walk-matrix-fig');
    fig.hidden = !s.matrix;
    if (!s.matrix) return;
    const n = layout.n;
    const c = $('walk-matrix');
    const { min, max } = minMax(s.matrix);
    const layer = matrixCanvas(s.matrix, n, { cmap: $('cmap').value, min, max });
    const css = Math.min(240, Math.max(120, (fig.parentElement?.clientWidth ?? 240) - 8));
    const dpr = sizeCanvas(c, css, css);
    const ctx = c.getContext('2d');
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(layer, 0, 0, c.width, c.height);
    // The prefix rows and columns end at a line; the drawn row (the query token's) is outlined.
    const cell = c.width / n;
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(layout.prefix * cell, 0);
    ctx.lineTo(layout.prefix * cell, c.height);
    ctx.moveTo(0, layout.prefix * cell);
    ctx.lineTo(c.width, layout.prefix * cell);
    ctx.stroke();
    if (walk.query >= 0) {
      ctx.strokeStyle = '#ff2bd6';
      ctx.lineWidth = Math.max(1, dpr);
      ctx.strokeRect(0, walk.query * cell, c.width, Math.max(cell, 1));
    }
    $('walk-matrix-cap').textContent = `${n} × ${n}: row i = query token, column j = key, the ${layout.prefix} prefix token${layout.prefix === 1 ? '' : 's'} first; ` +
      `min ${formatNumber(min)} → max ${formatNumber(max)}`;
    c.dataset.min = String(min);
    c.dataset.max = String(max);
  }

  function renderRelevance(s) {
    const box = $('walk-relevance');
    box.replaceChildren();
    if (s.relevance === null && !s.sums.length) {
      if (walk.seed !== null) {
        const p = document.createElement('p');
        p.className = 'muted';
        p.textContent = 'No relevance at this step: it computes a quantity of the forward or backward pass, or of the product.';
        box.append(p);
      }
      return;
    }
    const head = document.createElement('p');
    head.className = 'walk-sum';
    head.textContent = s.relevance === null ? '' : `Σ R after this step = ${formatNumber(s.relevance)}` +
      (walk.seed !== null ? ` (the seed: ${formatNumber(walk.seed)})` : '');
    box.append(head);
    if (s.sums.length) {
      const table = document.createElement('table');
      table.className = 'walk-sums';
      for (const part of s.sums) {
        const tr = document.createElement('tr');
        const a = document.createElement('td');
        a.textContent = part.label;
        const b = document.createElement('td');
        b.textContent = formatNumber(part.value);
        b.dataset.value = String(part.value);
        tr.append(a, b);
        table.append(tr);
      }
      box.append(table);
    }
    if (s.conservation) {
      const p = document.createElement('p');
      p.className = 'walk-conservation';
      p.textContent = s.conservation;
      box.append(p);
    }
    if (s.layers.length) {
      const p = document.createElement('p');
      p.className = 'muted walk-layers';
      p.textContent = `layers of the conservation report: ${s.layers.join(', ')}`;
      box.append(p);
    }
  }

  // Σ relevance over the steps that carry it, the current step marked (LRP methods only).
  function renderChart() {
    const svg = $('walk-chart');
    const fig = $('walk-chart-fig');
    const xs = [];
    const ys = [];
    walk.steps.forEach((s, i) => {
      if (s.relevance !== null) {
        xs.push(i + 1);
        ys.push(s.relevance);
      }
    });
    fig.hidden = !xs.length;
    if (!xs.length) return;
    const width = Math.min(760, Math.max(280, (fig.parentElement?.clientWidth ?? 440) - 8));
    lineChart(svg, [{ name: 'Σ R after the step', x: xs, y: ys, colour: '#1f6feb' }], {
      width, height: 200, xLabel: 'step', yLabel: 'Σ relevance', refLine: walk.seed ?? undefined, markX: index + 1,
      xMin: 1, xMax: walk.steps.length, xTicks: [1, walk.steps.length],
    });
    svg.querySelectorAll('circle').forEach((c) => {
      const i = Number(c.dataset.x) - 1;
      const title = document.createElementNS('http://www.w3.org/2000/svg', 'title');
      title.textContent = `step ${i + 1}: ${walk.steps[i].title}: Σ R ${formatNumber(walk.steps[i].relevance)}`;
      c.append(title);
      if (i === index) c.classList.add('current');
    });
  }

  return { refresh, go };
}
