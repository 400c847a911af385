// explanation.js — the "Explanation" panel: the image with the current method's map drawn over
// it, the colour bar, the raw token map, the display controls (opacity, threshold, colour map),
// the timing line, the input size explained at and the progress bar with Cancel for long
// methods. Owns the main explain request, the explanation drawn, the query token and the display
// settings; another model, or another input size (app.inputInfo), drops the explanation and the
// query (they index the previous classes and tokens).
import { emit, on } from '../events.js';
import { drawColorbar, drawGrid, drawOverlay, formatNumber, minMax } from '../render.js';
import { patchToken, tokenLayout, tokenPatch } from '../tokens.js';
import { $, afterPaint, cancelFlag, fitCanvas, stopLong } from './util.js';

export function createExplanationView(app) {
  const display = { cmap: 'jet', opacity: 0.55, threshold: 0 };
  let pending = null; // the pending main explain request
  let progress = null; // the long main explain running: { id, name, flag }
  let firstShown = false;
  let inputSize = ''; // the input size ("h×w") of the explanation and query kept

  on('model-changed', ({ reloaded }) => {
    if (reloaded) return;
    app.explanation = null;
    app.query = 0;
    $('timing').textContent = '';
    $('grid-size').textContent = '';
    $('input-note').textContent = '';
    inputSize = '';
    for (const c of [$('token-map'), $('colorbar')]) c.getContext('2d').clearRect(0, 0, c.width, c.height);
    draw();
  });
  on('predicted', () => {
    const size = `${app.inputInfo.imageH}×${app.inputInfo.imageW}`;
    if (size !== inputSize) {
      inputSize = size;
      app.explanation = null; // an edited image's previous map, on the previous grid
      app.query = 0;
    }
    draw();
  });
  on('method-changed', () => explain());
  on('options-changed', () => explain());

  const slider = (id, key) => {
    $(id).addEventListener('input', () => {
      display[key] = Number($(id).value);
      $(`${id}-out`).textContent = $(id).value;
      draw();
    });
  };
  slider('opacity', 'opacity');
  slider('threshold', 'threshold');
  $('cmap').addEventListener('change', () => {
    display.cmap = $('cmap').value;
    draw();
  });
  $('cancel').addEventListener('click', cancelLong);

  // Explains the image with the chosen method and draws the result. Resolves to false when the
  // request was cancelled (a Stop, the Cancel button) or replaced by a newer one, so that what
  // follows an explanation (the grid) is not started by it; to true otherwise (drawn, or failed
  // with its error shown).
  async function explain() {
    const m = app.methodInfo(app.views.options.method);
    if (!m || !app.predictions.length) return false;
    if (pending) app.client.cancel(pending.id); // its flag raised too
    app.setStatus(`Explaining with ${m.name}…`);
    const flag = m.longRunning ? cancelFlag() : null;
    let p = null;
    const hooks = { priority: true, onProgress: m.longRunning ? (f) => showProgress(p, f) : undefined };
    p = app.call('explain', { image: app.imageId, method: m.name, options: { ...app.views.options.request(m), intermediates: true }, cancelFlag: flag }, [], hooks);
    pending = p;
    markPending();
    if (m.longRunning) startProgress(p, m.name, flag);
    try {
      const ex = await p;
      // A newer request replaced this one while the worker was finishing it: its result is stale
      // (another method, image or class), so it must not be drawn over the newer one.
      if (pending !== p) return false;
      app.explanation = ex;
      draw();
      const total = ex.ms.toFixed(1);
      $('timing').textContent = `${m.name} for “${app.className(ex.target)}”: ${total} ms in the worker (the forward pass of this image: ${app.predictMs.toFixed(1)} ms)` +
        (firstShown ? '.' : '; the first calls also pay for the browser compiling the engine’s code.');
      app.mark('explained'); // the first time: the page's first explanation, drawn (issue 15)
      app.workerMs('explain', ex.ms);
      // The other views (the teaching rows, per-head views, curves: ~30 ms of canvases on the
      // first explanation) follow once the browser has painted this one; the counters below say
      // that every view has it.
      await afterPaint();
      if (app.explanation !== ex) return false; // a newer one was drawn meanwhile and told them
      emit('explained', { explanation: ex });
      const root = document.documentElement;
      root.dataset.explanations = String(Number(root.dataset.explanations ?? 0) + 1);
      if (!firstShown) {
        firstShown = true;
        root.dataset.firstExplanationMs = String(app.timeline.explained);
        root.dataset.timeline = JSON.stringify(app.timeline);
      }
      app.setStatus('Ready');
      return true;
    } catch (e) {
      app.showError(`${m.name} failed`, e);
      if (e.code === 'cancelled' && pending === p) app.setStatus(`${m.name} was cancelled`);
      return e.code !== 'cancelled' && pending === p;
    } finally {
      if (pending === p) pending = null;
      markPending();
      endProgress(p);
    }
  }

  // <html data-main-pending> says whether the main view's explanation is still being computed
  // (the browser tests wait on it; a stale result is never drawn).
  function markPending() {
    document.documentElement.dataset.mainPending = pending ? 'true' : 'false';
  }

  // ---- progress and cancel of long methods -----------------------------------------------

  function startProgress(p, name, flag) {
    progress = { id: p.id, name, flag };
    $('progress-row').hidden = false;
    $('progress').value = 0;
    $('progress-text').textContent = `${name}: starting…`;
    $('cancel').disabled = false;
    document.documentElement.dataset.progress = '0';
  }

  function showProgress(p, fraction) {
    if (!p || progress?.id !== p.id) return;
    $('progress').value = fraction;
    $('progress-text').textContent = `${progress.name}: ${Math.round(100 * fraction)} %`;
    document.documentElement.dataset.progress = String(fraction);
  }

  function endProgress(p) {
    if (progress?.id !== p.id) return;
    progress = null;
    $('progress-row').hidden = true;
  }

  // Cancels the long method running in the main view: in the engine through its cancel flag (the
  // engine stops at its next progress report), or — if it does not stop within 3 s — by
  // restarting the worker (stopLong).
  async function cancelLong() {
    const pr = progress;
    if (!pr) return;
    $('cancel').disabled = true;
    $('progress-text').textContent = `${pr.name}: cancelling…`;
    await stopLong(app, pr.id, pr.flag);
  }

  // ---- drawing ---------------------------------------------------------------------------

  function draw() {
    const c = $('main-canvas');
    const img = app.views.editor.imageSource();
    if (!img) return;
    fitCanvas(c, img.width, img.height, 448);
    const ex = app.explanation;
    drawOverlay(c, img, ex?.pixelMap, ex?.width, ex?.height, display);
    const m = app.methodInfo(ex?.method);
    c.dataset.method = ex ? ex.method : '';
    c.dataset.target = ex ? String(ex.target) : '';
    c.dataset.input = ex ? `${ex.height}x${ex.width}` : '';
    c.dataset.grid = ex ? `${ex.gridH}x${ex.gridW}` : '';
    $('view-title').textContent = ex ? `— ${ex.method}, class “${app.className(ex.target)}”${m && !m.classSpecific ? ' (does not depend on the class)' : ''}` : '';
    // A gallery scene's items are named only when they are classes of the loaded model (the
    // gallery was made for the shipped one).
    const items = app.image.labels?.length && app.image.labels.every((l) => app.info?.classNames.includes(l)) ? app.image.labels : null;
    $('labels').textContent = (items ? `In this scene: ${items.join(', ')}.` : `${app.image.name} (${img.width}×${img.height})`) +
      (app.editor.edited ? ' Edited.' : '');
    app.views.editor.outlineSelection(c);
    if (!ex) return;
    outlinePatch(c);
    const { min, max } = minMax(ex.pixelMap);
    drawColorbar($('colorbar'), display.cmap, min, max);
    if (max <= min) $('view-title').textContent += ` — the map is constant (${formatNumber(min)}) everywhere`;
    const tm = $('token-map');
    fitCanvas(tm, ex.gridW, ex.gridH, 128);
    drawGrid(tm, ex.tokenMap, ex.gridW, ex.gridH, { cmap: display.cmap });
    $('grid-size').textContent = `(${ex.gridH}×${ex.gridW})`;
    $('input-note').textContent = inputNote(ex);
  }

  // The size the map was explained at: the model's own, or the image's aspect with pos_embed
  // resampled from the checkpoint's grid.
  function inputNote(ex) {
    const at = `Explained at ${ex.height}×${ex.width} pixels (height × width), ${ex.gridH}×${ex.gridW} patches`;
    const [ch, cw] = app.inputInfo.checkpointGrid;
    if (ex.height === app.info.imageH && ex.width === app.info.imageW) return `${at}: the model’s own input size.`;
    return `${at}: the image’s aspect; pos_embed resampled from the checkpoint’s ${ch}×${cw} grid.`;
  }

  // Outlines the query's patch (nothing when the query is a prefix token such as CLS).
  function outlinePatch(canvas) {
    const layout = tokenLayout(app.inputInfo);
    const p = tokenPatch(layout, app.query);
    if (p < 0) return;
    const cw = canvas.width / layout.gridW;
    const ch = canvas.height / layout.gridH;
    const ctx = canvas.getContext('2d');
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = 2 * (window.devicePixelRatio || 1);
    ctx.strokeRect((p % layout.gridW) * cw, Math.floor(p / layout.gridW) * ch, cw, ch);
  }

  // ---- the query token -------------------------------------------------------------------

  function setQuery(q) {
    if (q === app.query) return;
    app.query = q;
    draw();
    emit('query-changed', { query: q });
  }

  // The patch under a pointer event on the main canvas becomes the query.
  function queryAt(event) {
    if (!app.explanation) return;
    const layout = tokenLayout(app.inputInfo);
    const r = event.currentTarget.getBoundingClientRect();
    const gx = Math.floor(((event.clientX - r.left) / r.width) * layout.gridW);
    const gy = Math.floor(((event.clientY - r.top) / r.height) * layout.gridH);
    if (gx < 0 || gy < 0 || gx >= layout.gridW || gy >= layout.gridH) return;
    setQuery(patchToken(layout, gy * layout.gridW + gx));
  }

  // Moves the query patch by (dx, dy) patches; from a prefix token (CLS) it starts at patch 0.
  function moveQuery(dx, dy) {
    if (!app.explanation) return;
    const layout = tokenLayout(app.inputInfo);
    const q = Math.max(0, tokenPatch(layout, app.query));
    const gx = Math.min(layout.gridW - 1, Math.max(0, (q % layout.gridW) + dx));
    const gy = Math.min(layout.gridH - 1, Math.max(0, Math.floor(q / layout.gridW) + dy));
    setQuery(patchToken(layout, gy * layout.gridW + gx));
  }

  return { explain, draw, setQuery, queryAt, moveQuery, display };
}
