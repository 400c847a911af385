// matrices.js — "Whole matrices": one n × n matrix of the model at a time (n = the prefix tokens,
// then the patches: ../tokens.js), per block and head — A, ∇A, R_A, (∇A ⊙ A)⁺, (∇A ⊙ R_A)⁺,
// AttAttr's Attr and the norm-based stage maps — with zoom and pan (wheel, pinch, drag; the keys
// + − 0 and Shift+arrows), a cursor cell (hover, tap, or the arrow keys) whose query and key
// patches are outlined on the image, and the cell's value with its formula filled in.
//
// Where each number comes from (the page draws and formats; it computes nothing, every matrix and
// every term of a formula is an array core returned):
//   A_b,h, ∇A_b,h              the worker's `teach` (Input.attention(), attentionGrads(target));
//                              also the factors written in a product's formula
//   R_A_b,h, E_h A, E_h ∇A,    a transformer-attribution explanation with intermediates
//   E_h R_A, (∇A⊙R_A)⁺_h,      (relevanceHeads, attn, grad, relevance, productHeads, step)
//   I + E_h[(∇A⊙R_A)⁺]
//   (∇A ⊙ A)⁺_h,               a grad-rollout explanation with intermediates (productHeads, step)
//   I + E_h[(∇A ⊙ A)⁺]
//   Attr_b,h                    an attattr explanation (attattr)
//   N_stage                     a norm-based explanation (norm[b].maps)
//
// The data are fetched only while the section is open, once per (image, class) and quantity, and
// dropped when another model, image or class comes.
import { on } from '../events.js';
import { matrixCanvas } from '../render.js';
import { tokenLayout, tokenName, tokenPatch } from '../tokens.js';
import { $, fitCanvas } from './util.js';

// How the page writes the numbers of a formula: the terms short, the result with 7 significant
// digits (float32 carries about 7), so that the displayed result is core's value to < 1e-6.
const short = (v) => (v === 0 ? '0' : String(Number(v.toPrecision(4))));
const full = (v) => (v === 0 ? '0' : Math.abs(v) < 1e-4 || Math.abs(v) >= 1e5 ? v.toExponential(6) : v.toPrecision(7));

// The quantities, in menu order. `sources` names the data a quantity reads (see load()) for one
// head, the head mean, or the layer's map (norm-based); perHead
// gives head h's matrix, mean (when the formula has a head mean) core's mean; `identity` marks a
// matrix that is core's I + Ā (its colour range is taken off the diagonal, which carries I).
const QUANTITIES = [
  {
    key: 'attn', label: 'A — attention', sources: { head: ['heads'], mean: ['heads', 'ta'] },
    perHead: (d, b, h) => d.heads.attn[b][h],
    mean: (d, b) => d.ta.intermediates.blocks[b].attn,
    terms: (d, b, i, j, n) => d.heads.attn[b].map((a) => a[i * n + j]),
    headText: (c) => `A_${c.b},${c.h}[${c.i}, ${c.j}] = softmax_j(q_i·k_j/√d_h) = ${full(c.v)}`,
    meanText: (c) => `Ā_${c.b}[${c.i}, ${c.j}] = mean_h A_${c.b},h[${c.i}, ${c.j}] = (${c.terms.map(short).join(' + ')})/${c.terms.length} = ${full(c.v)}`,
  },
  {
    key: 'grad', label: '∇A — gradient of the class score', sources: { head: ['heads'], mean: ['heads', 'ta'] },
    perHead: (d, b, h) => d.heads.grads[b][h],
    mean: (d, b) => d.ta.intermediates.blocks[b].grad,
    terms: (d, b, i, j, n) => d.heads.grads[b].map((g) => g[i * n + j]),
    headText: (c) => `∇A_${c.b},${c.h}[${c.i}, ${c.j}] = ∂y_t/∂A_${c.b},${c.h}[${c.i}, ${c.j}] = ${full(c.v)}`,
    meanText: (c) => `E_h ∇A_${c.b}[${c.i}, ${c.j}] = mean_h ∂y_t/∂A_${c.b},h = (${c.terms.map(short).join(' + ')})/${c.terms.length} = ${full(c.v)}`,
  },
  {
    key: 'relevance', label: 'R_A — LRP relevance of the attention', sources: { head: ['ta'], mean: ['ta'] },
    perHead: (d, b, h) => d.ta.intermediates.blocks[b].relevanceHeads[h],
    mean: (d, b) => d.ta.intermediates.blocks[b].relevance,
    terms: (d, b, i, j, n) => d.ta.intermediates.blocks[b].relevanceHeads.map((r) => r[i * n + j]),
    headText: (c) => `R_A_${c.b},${c.h}[${c.i}, ${c.j}] (Chefer et al. 2021’s rules) = ${full(c.v)}`,
    meanText: (c) => `E_h R_A_${c.b}[${c.i}, ${c.j}] = (${c.terms.map(short).join(' + ')})/${c.terms.length} = ${full(c.v)}`,
  },
  {
    key: 'gradxa', label: '(∇A ⊙ A)⁺ — grad-rollout’s term', sources: { head: ['heads', 'gr'], mean: ['gr'] }, identity: true,
    perHead: (d, b, h) => d.gr.intermediates.blocks[b].productHeads[h],
    mean: (d, b) => d.gr.intermediates.blocks[b].step,
    terms: (d, b, i, j, n) => d.gr.intermediates.blocks[b].productHeads.map((p) => p[i * n + j]),
    headText: (c, d) => `(∇A ⊙ A)⁺_${c.b},${c.h}[${c.i}, ${c.j}] = max(0, ∇A·A) = max(0, ${short(d.heads.grads[c.b][c.h][c.k])} × ${short(d.heads.attn[c.b][c.h][c.k])}) = ${full(c.v)}`,
    meanText: (c) => `(I + Ā_${c.b})[${c.i}, ${c.j}] = δ_ij + mean_h (∇A ⊙ A)⁺ = ${c.i === c.j ? 1 : 0} + (${c.terms.map(short).join(' + ')})/${c.terms.length} = ${full(c.v)}`,
  },
  {
    key: 'gradxr', label: '(∇A ⊙ R_A)⁺ — transformer-attribution’s term', sources: { head: ['heads', 'ta'], mean: ['ta'] }, identity: true,
    perHead: (d, b, h) => d.ta.intermediates.blocks[b].productHeads[h],
    mean: (d, b) => d.ta.intermediates.blocks[b].step,
    terms: (d, b, i, j, n) => d.ta.intermediates.blocks[b].productHeads.map((p) => p[i * n + j]),
    headText: (c, d) => `(∇A ⊙ R_A)⁺_${c.b},${c.h}[${c.i}, ${c.j}] = max(0, ∇A·R_A) = max(0, ${short(d.heads.grads[c.b][c.h][c.k])} × ${short(d.ta.intermediates.blocks[c.b].relevanceHeads[c.h][c.k])}) = ${full(c.v)}`,
    meanText: (c) => `(I + Ā_${c.b})[${c.i}, ${c.j}] = δ_ij + mean_h (∇A ⊙ R_A)⁺ = ${c.i === c.j ? 1 : 0} + (${c.terms.map(short).join(' + ')})/${c.terms.length} = ${full(c.v)}`,
  },
  {
    key: 'attattr', label: 'Attr — AttAttr (Hao et al. 2021)', sources: { head: ['attattr'] },
    perHead: (d, b, h) => d.attattr.attattr[b][h],
    headText: (c) => `Attr_${c.b},${c.h}[${c.i}, ${c.j}] = A ⊙ (1/m) Σ_k ∂F(α_k·A)/∂A = ${full(c.v)}`,
  },
];

// The norm-based stages (Kobayashi et al.), one quantity each, named and worded by the engine's
// method table (the stage option's choices and choiceHelp).
function normQuantities(app) {
  const stage = app.methodInfo('norm-based')?.optionSpecs.find((s) => s.key === 'stage');
  return (stage?.choices ?? []).map((st, k) => ({
    key: `norm:${st}`, label: `N — norm-based, stage ${st}`, sources: { layer: ['norm'] }, stage: st,
    layerMap: (d, b) => d.norm.norm[b].maps[st],
    headText: (c) => `N_${st},${c.b}[${c.i}, ${c.j}] = ‖z_(${c.i}←${c.j})‖₂ = ${full(c.v)}   (${stage.choiceHelp[k] ?? ''})`,
  }));
}

// A short label of token t for the axes: CLS, DIST, R0…, or the patch number.
function shortToken(layout, t) {
  const p = tokenPatch(layout, t);
  if (p >= 0) return String(p);
  const kind = layout.kinds[t];
  if (kind === 'reg') return `R${t - layout.kinds.indexOf('reg')}`;
  return kind === 'dist' ? 'DIST' : kind === 'cls' ? 'CLS' : `T${t}`;
}

const KIND_COLOUR = { cls: '#e36209', dist: '#8250df', reg: '#1b7c83' };
const MARGIN_LEFT = 44; // CSS pixels for the query labels
const MARGIN_TOP = 24; // for the key labels
const MAX_CELL = 80; // the closest zoom, CSS pixels per cell

export function createMatricesView(app) {
  const quantities = () => [...QUANTITIES, ...normQuantities(app)];
  let dataKey = ''; // `${image}:${target}` the data below belong to
  const data = {}; // source → its result, for dataKey
  const loading = {}; // source → its pending promise, for dataKey
  let view = { scale: 0, x0: 0, y0: 0 }; // CSS pixels per cell; the matrix coordinates of the plot's top-left
  let cursor = { i: 0, j: 0 };
  let shown = null; // { q, b, h, mat, n, layout, min, max, layer }: what is drawn
  let frame = 0;
  const pointers = new Map(); // pointer id → { x, y, x0, y0, moved }
  let pinch = null; // { dist, scale }

  const canvas = $('mat-canvas');
  const open = () => $('mat-open').open;

  // ---- events ------------------------------------------------------------------------------
  on('model-changed', ({ reloaded }) => {
    if (!reloaded) {
      cursor = { i: 0, j: 0 };
      view.scale = 0;
      shown = null;
    }
    buildControls();
  });
  on('explained', () => refresh());
  $('mat-open').addEventListener('toggle', () => refresh());
  for (const id of ['mat-quantity', 'mat-block', 'mat-head']) $(id).addEventListener('change', () => {
    if (id === 'mat-quantity') buildHeads();
    refresh();
  });
  $('mat-zoom-in').addEventListener('click', () => zoomAtCursor(1.5));
  $('mat-zoom-out').addEventListener('click', () => zoomAtCursor(1 / 1.5));
  $('mat-zoom-reset').addEventListener('click', () => { view.scale = 0; schedule(); });
  new ResizeObserver(() => { if (open()) schedule(); }).observe($('mat-body'));

  // ---- controls ----------------------------------------------------------------------------
  function buildControls() {
    const info = app.inputInfo ?? app.info;
    const qSel = $('mat-quantity');
    const q = qSel.value;
    qSel.replaceChildren(...quantities().map((x) => new Option(x.label, x.key)));
    if (q && [...qSel.options].some((o) => o.value === q)) qSel.value = q;
    const bSel = $('mat-block');
    const b = Number(bSel.value || 0);
    bSel.replaceChildren(...Array.from({ length: info?.depth ?? 0 }, (_, k) => new Option(`block ${k}`, String(k))));
    bSel.value = String(Math.min(b, (info?.depth ?? 1) - 1));
    buildHeads();
  }

  function buildHeads() {
    const info = app.inputInfo ?? app.info;
    const quantity = currentQuantity();
    const hSel = $('mat-head');
    const h = hSel.value;
    const opts = [];
    if (quantity?.layerMap) opts.push(new Option('all heads (the layer’s map)', 'layer'));
    else {
      for (let k = 0; k < (info?.heads ?? 0); k++) opts.push(new Option(`head ${k}`, String(k)));
      if (quantity?.mean) opts.push(new Option('mean over heads (E_h)', 'mean'));
    }
    hSel.replaceChildren(...opts);
    if ([...hSel.options].some((o) => o.value === h)) hSel.value = h;
  }

  // The sources the quantity needs for the chosen head (one head, the mean, or the layer's map).
  function sourcesOf(quantity) {
    const h = $('mat-head').value;
    return quantity.sources[h === 'mean' || h === 'layer' ? h : 'head'] ?? Object.values(quantity.sources)[0];
  }

  function currentQuantity() {
    return quantities().find((x) => x.key === $('mat-quantity').value) ?? quantities()[0];
  }

  // ---- data ----------------------------------------------------------------------------------
  // Fetches one source for the current image and class (once): heads (A and ∇A per head), ta
  // (transformer-attribution with intermediates), gr (grad-rollout with intermediates), attattr,
  // norm (norm-based). The main view's explanation is used when it is the one needed.
  function load(source, key, target) {
    if (data[source] || loading[source]) return data[source] ?? loading[source];
    const image = app.imageId;
    const main = app.explanation;
    const reuse = { attattr: 'attattr', norm: 'norm-based' }[source];
    if (reuse && main?.method === reuse && (main.target === target || !app.methodInfo(reuse)?.classSpecific)) {
      data[source] = main;
      return main;
    }
    const t0 = performance.now();
    const method = { ta: 'transformer-attribution', gr: 'grad-rollout', attattr: 'attattr', norm: 'norm-based' }[source];
    // The class goes only to the methods that read it (the engine rejects an option a method does not read).
    const options = {
      ...(app.methodInfo(method)?.options.includes('target') ? { target } : {}),
      ...(source === 'ta' || source === 'gr' ? { intermediates: true } : {}),
    };
    const p = source === 'heads'
      ? app.call('teach', { image, target, grads: true }, [], { priority: true })
      : app.call('explain', { image, method, options }, [], { priority: true });
    loading[source] = p.then((out) => {
      if (dataKey !== key) return null;
      out.fetchMs = performance.now() - t0;
      data[source] = out;
      delete loading[source];
      return out;
    }, (e) => {
      if (dataKey === key) delete loading[source];
      throw e;
    });
    return loading[source];
  }

  // Redraws after a change of image, class, model or selection: fetches what the quantity needs
  // first (only while the section is open).
  async function refresh() {
    if (!open() || !app.explanation || app.imageId === null) return;
    const target = app.explanation.target;
    const key = `${app.imageId}:${target}`;
    if (key !== dataKey) {
      dataKey = key;
      for (const k of Object.keys(data)) delete data[k];
      for (const k of Object.keys(loading)) delete loading[k];
    }
    if (!$('mat-quantity').options.length) buildControls();
    const quantity = currentQuantity();
    const missing = sourcesOf(quantity).filter((s) => !data[s]);
    if (missing.length) {
      setNote(`Computing ${quantity.label} for “${app.className(target)}”…`);
      canvas.dataset.ready = 'false';
      try {
        await Promise.all(missing.map((s) => load(s, key, target)));
      } catch (e) {
        // A new image or class cancels every explain in flight; the next explanation refreshes this.
        if (e.code === 'cancelled') {
          setNote('Cancelled by a newer image or class; the matrix follows its explanation.');
          return;
        }
        setNote(`${quantity.label} failed: ${e.message}`);
        app.showError(`The matrix ${quantity.label} failed`, e);
        return;
      }
      // Another selection came while these were computed: its own refresh draws it.
      if (dataKey !== key || currentQuantity().key !== quantity.key || sourcesOf(quantity).some((s) => !data[s])) return;
    }
    select();
  }

  // Builds the chosen matrix's image (one pixel per cell, min-max coloured) and draws it.
  function select() {
    const quantity = currentQuantity();
    const layout = tokenLayout(app.inputInfo);
    const info = app.inputInfo;
    const b = Math.min(Number($('mat-block').value), info.depth - 1);
    const headValue = $('mat-head').value;
    const h = headValue === 'mean' || headValue === 'layer' ? headValue : Math.min(Number(headValue), info.heads - 1);
    const t0 = performance.now();
    const mat = h === 'layer' ? quantity.layerMap(data, b) : h === 'mean' ? quantity.mean(data, b) : quantity.perHead(data, b, h);
    const n = layout.n;
    if (!mat || mat.length !== n * n) {
      setNote(`${quantity.label}: the engine gave no ${n} × ${n} matrix for block ${b}.`);
      return;
    }
    // The colour range: min and max over the cells (off the diagonal for core's I + Ā, whose
    // diagonal carries the identity and would wash the rest out; the diagonal is then clamped).
    let min = Infinity;
    let max = -Infinity;
    const offDiagonal = quantity.identity && h === 'mean';
    for (let k = 0; k < n * n; k++) {
      if (offDiagonal && k % (n + 1) === 0) continue;
      if (mat[k] < min) min = mat[k];
      if (mat[k] > max) max = mat[k];
    }
    const layer = matrixCanvas(mat, n, { cmap: $('cmap').value, min, max });
    if (shown?.n !== n) view.scale = 0;
    cursor = { i: Math.min(cursor.i, n - 1), j: Math.min(cursor.j, n - 1) };
    shown = { q: quantity, b, h, mat, n, layout, min, max, layer, offDiagonal };
    Object.assign(canvas.dataset, {
      quantity: quantity.key, block: String(b), head: String(h), n: String(n), min: String(min), max: String(max),
      cmap: $('cmap').value, offDiagonal: String(offDiagonal),
    });
    drawNow();
    const ms = performance.now() - t0;
    canvas.dataset.drawMs = ms.toFixed(2);
    canvas.dataset.ready = 'true';
    // fetchMs: from the request to its answer (queue included); ms: the engine's call, as the worker timed it.
    const fetched = sourcesOf(quantity).map((s) => data[s]).filter((x) => x?.fetchMs !== undefined);
    setNote(`${n} × ${n} (${layout.prefix} prefix token${layout.prefix === 1 ? '' : 's'} + ${layout.gridH} × ${layout.gridW} patches); ` +
      `colour: min ${short(min)} → max ${short(max)}${offDiagonal ? ' off the diagonal (the diagonal holds I)' : ''}; drawn in ${ms.toFixed(1)} ms` +
      (fetched.length ? `; the data took ${Math.max(...fetched.map((x) => x.fetchMs)).toFixed(0)} ms to arrive` +
        fetched.filter((x) => x.ms !== undefined).map((x) => `, ${x.method} ${x.ms.toFixed(0)} ms in the engine`).join('') : ''));
    legend(layout);
    readout();
  }

  function setNote(text) {
    $('mat-note').textContent = text;
  }

  // The token layout in words: which rows and columns are which tokens.
  function legend(layout) {
    const box = $('mat-legend');
    box.replaceChildren();
    layout.kinds.forEach((kind, t) => {
      const s = document.createElement('span');
      s.className = 'mat-token';
      s.style.borderColor = KIND_COLOUR[kind] ?? '#888';
      s.textContent = `${t}: ${shortToken(layout, t)} (${tokenName(layout, t)})`;
      box.append(s);
    });
    const s = document.createElement('span');
    s.className = 'mat-token';
    s.textContent = `${layout.prefix}–${layout.n - 1}: patches 0–${layout.patches - 1}, row by row (${layout.gridH} × ${layout.gridW})`;
    box.append(s);
  }

  // ---- drawing -------------------------------------------------------------------------------
  function schedule() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      drawNow();
    });
  }

  function plotSize() {
    const cssW = canvas.clientWidth || 320;
    return { cssW, cssH: cssW, w: cssW - MARGIN_LEFT - 2, h: cssW - MARGIN_TOP - 2 };
  }

  function fitScale(n) {
    const { w, h } = plotSize();
    return Math.min(w, h) / n;
  }

  // Keeps the zoom between "the whole matrix" and MAX_CELL, and the view over the matrix.
  function clampView(n) {
    const { w, h } = plotSize();
    const fit = fitScale(n);
    if (!view.scale) view = { scale: fit, x0: 0, y0: 0 };
    view.scale = Math.min(Math.max(fit, MAX_CELL), Math.max(fit, view.scale));
    view.x0 = Math.min(Math.max(0, n - w / view.scale), Math.max(0, view.x0));
    view.y0 = Math.min(Math.max(0, n - h / view.scale), Math.max(0, view.y0));
  }

  function drawNow() {
    if (!shown) return;
    const { n, layout, layer } = shown;
    const dpr = window.devicePixelRatio || 1;
    const { cssW, cssH, w, h } = plotSize();
    if (canvas.width !== Math.round(cssW * dpr) || canvas.height !== Math.round(cssH * dpr)) {
      canvas.width = Math.round(cssW * dpr);
      canvas.height = Math.round(cssH * dpr);
      canvas.style.height = `${cssH}px`;
    }
    clampView(n);
    const s = view.scale;
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, cssW, cssH);
    const X = (j) => MARGIN_LEFT + (j - view.x0) * s; // the CSS x of key column j's left edge
    const Y = (i) => MARGIN_TOP + (i - view.y0) * s;
    ctx.save();
    ctx.beginPath();
    ctx.rect(MARGIN_LEFT, MARGIN_TOP, w, h);
    ctx.clip();
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(layer, X(0), Y(0), n * s, n * s);
    // The prefix tokens' rows and columns end at a line.
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    ctx.moveTo(X(layout.prefix), Y(0));
    ctx.lineTo(X(layout.prefix), Y(n));
    ctx.moveTo(X(0), Y(layout.prefix));
    ctx.lineTo(X(n), Y(layout.prefix));
    ctx.stroke();
    // The cursor: its query row and key column, and the cell.
    ctx.strokeStyle = 'rgba(255, 255, 255, 0.7)';
    ctx.lineWidth = 1;
    ctx.strokeRect(X(0), Y(cursor.i), n * s, s);
    ctx.strokeRect(X(cursor.j), Y(0), s, n * s);
    ctx.lineWidth = 2;
    ctx.strokeStyle = '#000';
    ctx.strokeRect(X(cursor.j) - 1, Y(cursor.i) - 1, s + 2, s + 2);
    ctx.strokeStyle = '#fff';
    ctx.strokeRect(X(cursor.j) - 3, Y(cursor.i) - 3, s + 6, s + 6);
    ctx.restore();
    // The axes: a band coloured by token kind (patch rows alternate grey), and labels when there is room.
    const style = getComputedStyle(canvas);
    ctx.font = '10px system-ui, sans-serif';
    ctx.fillStyle = style.color;
    ctx.textBaseline = 'middle';
    const first = Math.max(0, Math.floor(view.x0));
    const lastX = Math.min(n - 1, Math.ceil(view.x0 + w / s));
    const firstY = Math.max(0, Math.floor(view.y0));
    const lastY = Math.min(n - 1, Math.ceil(view.y0 + h / s));
    const every = Math.max(1, Math.ceil(14 / s));
    const bandColour = (t) => KIND_COLOUR[layout.kinds[t]] ??
      (Math.floor(tokenPatch(layout, t) / layout.gridW) % 2 ? '#9aa4b0' : '#c8ced6');
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, MARGIN_TOP, cssW, h);
    ctx.clip();
    for (let t = firstY; t <= lastY; t++) {
      ctx.fillStyle = bandColour(t);
      ctx.fillRect(MARGIN_LEFT - 5, Y(t), 4, s);
      if ((t < layout.prefix && s >= 9) || t % every === 0 || t === cursor.i) {
        ctx.fillStyle = t === cursor.i ? '#bf3989' : t < layout.prefix ? KIND_COLOUR[layout.kinds[t]] ?? style.color : style.color;
        ctx.textAlign = 'right';
        ctx.fillText(shortToken(layout, t), MARGIN_LEFT - 7, Y(t) + s / 2);
      }
    }
    ctx.restore();
    ctx.save();
    ctx.beginPath();
    ctx.rect(MARGIN_LEFT, 0, w, cssH);
    ctx.clip();
    for (let t = first; t <= lastX; t++) {
      ctx.fillStyle = bandColour(t);
      ctx.fillRect(X(t), MARGIN_TOP - 5, s, 4);
      if ((t < layout.prefix && s >= 18) || (t % every === 0 && s >= 18) || t === cursor.j) {
        ctx.fillStyle = t === cursor.j ? '#bf3989' : t < layout.prefix ? KIND_COLOUR[layout.kinds[t]] ?? style.color : style.color;
        ctx.textAlign = 'center';
        ctx.fillText(shortToken(layout, t), X(t) + s / 2, MARGIN_TOP - 13);
      }
    }
    ctx.restore();
    ctx.fillStyle = style.color;
    ctx.textAlign = 'left';
    ctx.fillText('i↓ j→', 2, 8);
    Object.assign(canvas.dataset, { scale: String(s), x0: String(view.x0), y0: String(view.y0), i: String(cursor.i), j: String(cursor.j) });
  }

  // ---- the cursor cell: its value, its formula, its patches on the image -------------------------
  function readout() {
    if (!shown) return;
    const { q, b, h, mat, n, layout } = shown;
    const { i, j } = cursor;
    const k = i * n + j;
    const v = mat[k];
    const c = { b, h, i, j, k, v, terms: h === 'mean' && q.terms ? q.terms(data, b, i, j, n) : [] };
    const text = h === 'mean' ? q.meanText(c, data) : q.headText(c, data);
    const box = $('mat-readout');
    box.replaceChildren();
    const who = document.createElement('p');
    who.textContent = `query i = ${i}: ${tokenName(layout, i)}; key j = ${j}: ${tokenName(layout, j)}`;
    const formula = document.createElement('p');
    formula.className = 'formula mat-formula';
    formula.textContent = text;
    box.append(who, formula);
    Object.assign(box.dataset, {
      quantity: q.key, block: String(b), head: String(h), i: String(i), j: String(j), value: String(v),
      shown: full(v), terms: JSON.stringify(c.terms),
    });
    drawImage(layout, i, j);
  }

  // The image with the query patch (magenta) and the key patch (cyan) outlined; a prefix token has
  // no patch and is named under the image instead.
  function drawImage(layout, i, j) {
    const c = $('mat-image');
    const img = app.views.editor.imageSource();
    const box = 200;
    const dpr = fitCanvas(c, layout.gridW, layout.gridH, box);
    const ctx = c.getContext('2d');
    ctx.clearRect(0, 0, c.width, c.height);
    if (img) {
      ctx.imageSmoothingEnabled = true;
      ctx.drawImage(img, 0, 0, c.width, c.height);
    }
    const cw = c.width / layout.gridW;
    const ch = c.height / layout.gridH;
    const outline = (t, colour, inset) => {
      const p = tokenPatch(layout, t);
      if (p < 0) return;
      ctx.strokeStyle = colour;
      ctx.lineWidth = 2.5 * dpr;
      ctx.strokeRect((p % layout.gridW) * cw + inset, Math.floor(p / layout.gridW) * ch + inset, cw - 2 * inset, ch - 2 * inset);
    };
    outline(j, '#00e5ff', 1.5 * dpr);
    outline(i, '#ff2bd6', 4 * dpr);
    c.dataset.queryPatch = String(tokenPatch(layout, i));
    c.dataset.keyPatch = String(tokenPatch(layout, j));
    const note = [];
    if (tokenPatch(layout, i) < 0) note.push(`query: ${tokenName(layout, i)} (no patch)`);
    if (tokenPatch(layout, j) < 0) note.push(`key: ${tokenName(layout, j)} (no patch)`);
    $('mat-image-note').textContent = note.join('; ');
  }

  function setCursor(i, j) {
    if (!shown) return;
    const n = shown.n;
    cursor = { i: Math.min(n - 1, Math.max(0, i)), j: Math.min(n - 1, Math.max(0, j)) };
    ensureVisible();
    schedule();
    readout();
  }

  // Pans so that the cursor cell is in view (after the arrow keys).
  function ensureVisible() {
    const { w, h } = plotSize();
    const s = view.scale || fitScale(shown.n);
    if (cursor.j < view.x0) view.x0 = cursor.j;
    if (cursor.j + 1 > view.x0 + w / s) view.x0 = cursor.j + 1 - w / s;
    if (cursor.i < view.y0) view.y0 = cursor.i;
    if (cursor.i + 1 > view.y0 + h / s) view.y0 = cursor.i + 1 - h / s;
  }

  // Zooms by `factor` keeping the matrix point under plot position (px, py) (CSS pixels) in place.
  function zoomAt(factor, px, py) {
    if (!shown) return;
    clampView(shown.n);
    const mx = view.x0 + px / view.scale;
    const my = view.y0 + py / view.scale;
    view.scale *= factor;
    clampView(shown.n);
    view.x0 = mx - px / view.scale;
    view.y0 = my - py / view.scale;
    clampView(shown.n);
    schedule();
  }

  function zoomAtCursor(factor) {
    if (!shown) return;
    clampView(shown.n);
    zoomAt(factor, (cursor.j + 0.5 - view.x0) * view.scale, (cursor.i + 0.5 - view.y0) * view.scale);
  }

  function pan(dx, dy) {
    if (!shown) return;
    view.x0 -= dx / view.scale;
    view.y0 -= dy / view.scale;
    clampView(shown.n);
    schedule();
  }

  // The cell under a pointer event, or null outside the plot.
  function cellAt(e) {
    const r = canvas.getBoundingClientRect();
    const px = e.clientX - r.left - MARGIN_LEFT;
    const py = e.clientY - r.top - MARGIN_TOP;
    const { w, h } = plotSize();
    if (!shown || px < 0 || py < 0 || px > w || py > h) return null;
    return { i: Math.floor(view.y0 + py / view.scale), j: Math.floor(view.x0 + px / view.scale), px, py };
  }

  // ---- input: keyboard, wheel, mouse, touch ------------------------------------------------------
  canvas.addEventListener('keydown', (e) => {
    if (!shown) return;
    const step = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0], PageUp: [-10, 0], PageDown: [10, 0] }[e.key];
    if (step && e.shiftKey) pan(-step[1] * 40, -step[0] * 40);
    else if (step) setCursor(cursor.i + step[0], cursor.j + step[1]);
    else if (e.key === '+' || e.key === '=') zoomAtCursor(1.5);
    else if (e.key === '-' || e.key === '_') zoomAtCursor(1 / 1.5);
    else if (e.key === '0') { view.scale = 0; schedule(); }
    else if (e.key === 'Home') setCursor(0, 0);
    else if (e.key === 'End') setCursor(shown.n - 1, shown.n - 1);
    else return;
    e.preventDefault();
  });
  canvas.addEventListener('wheel', (e) => {
    const cell = cellAt(e);
    if (!cell) return;
    e.preventDefault();
    zoomAt(Math.exp(-e.deltaY * 0.0015), cell.px, cell.py);
  }, { passive: false });
  canvas.addEventListener('pointerdown', (e) => {
    try {
      canvas.setPointerCapture(e.pointerId);
    } catch {
      // a pointer the browser no longer tracks: the drag still works while it stays over the canvas
    }
    pointers.set(e.pointerId, { x: e.clientX, y: e.clientY, sx: e.clientX, sy: e.clientY, moved: false });
    if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      pinch = { dist: Math.hypot(a.x - b.x, a.y - b.y) || 1 };
    }
  });
  canvas.addEventListener('pointermove', (e) => {
    const p = pointers.get(e.pointerId);
    if (!p) {
      // Hovering with a mouse or pen moves the cursor cell.
      const cell = e.pointerType === 'touch' ? null : cellAt(e);
      if (cell && (cell.i !== cursor.i || cell.j !== cursor.j)) setCursorNoPan(cell.i, cell.j);
      return;
    }
    const dx = e.clientX - p.x;
    const dy = e.clientY - p.y;
    p.x = e.clientX;
    p.y = e.clientY;
    if (Math.hypot(p.x - p.sx, p.y - p.sy) > 4) p.moved = true;
    if (pointers.size === 2 && pinch) {
      const [a, b] = [...pointers.values()];
      const dist = Math.hypot(a.x - b.x, a.y - b.y) || 1;
      const r = canvas.getBoundingClientRect();
      zoomAt(dist / pinch.dist, (a.x + b.x) / 2 - r.left - MARGIN_LEFT, (a.y + b.y) / 2 - r.top - MARGIN_TOP);
      pinch.dist = dist;
    } else if (pointers.size === 1 && p.moved) pan(dx, dy);
  });
  const release = (e) => {
    const p = pointers.get(e.pointerId);
    pointers.delete(e.pointerId);
    if (pointers.size < 2) pinch = null;
    // A tap or click without a drag picks the cell.
    if (p && !p.moved && e.type === 'pointerup') {
      const cell = cellAt(e);
      if (cell) setCursorNoPan(cell.i, cell.j);
    }
  };
  canvas.addEventListener('pointerup', release);
  canvas.addEventListener('pointercancel', release);

  function setCursorNoPan(i, j) {
    if (!shown) return;
    cursor = { i: Math.min(shown.n - 1, Math.max(0, i)), j: Math.min(shown.n - 1, Math.max(0, j)) };
    schedule();
    readout();
  }

  $('cmap').addEventListener('change', () => { if (shown && open()) select(); });

  return { refresh };
}
