// prediction.js — the "Prediction" panel: classifies the current image in the worker, shows the
// class scores (click one to explain it) and what the model sees. Owns the prediction: the
// scores, the class explained, the image's handle in the worker, the description of the model
// that saw the image (the loaded one, or at the image's aspect its resized copy: its size, grid
// and tokens are the input's), and the image version the other views key their requests on.
// Another model drops all of them (its classes are others, and the worker released the image's
// handle) until the image is classified again.
import { emit, on } from '../events.js';
import { $, fitCanvas } from './util.js';

function argmax(preds) {
  let best = preds[0];
  for (const p of preds) if (p.logit > best.logit) best = p;
  return best.class;
}

export function createPredictionView(app) {
  let targetChosen = false; // the user clicked a class for this image (kept while it is edited)

  on('image-changed', () => { targetChosen = false; });
  on('model-changed', ({ reloaded }) => {
    if (reloaded) return;
    targetChosen = false;
    app.predictions = [];
    app.target = -1;
    app.imageId = null;
    app.inputInfo = null;
    $('scores').replaceChildren();
  });

  // Asks the worker to classify `blob` now: the explanations in flight (the previous image's) are
  // cancelled first, so that it does not wait behind them. For predict's `prepared`: a new image's
  // request is sent as it is opened, while the page decodes its own copy for drawing (files.js).
  function classify(blob) {
    app.cancelExplains();
    const p = app.call('prepare', { source: { blob }, inputSize: app.inputSize });
    p.catch(() => {}); // reported by predict, or dropped with an image that could not be opened
    return p;
  }

  // Classifies the current image (app.image.blob), then explains it; resolves once the main
  // explanation is drawn. `grid: false` skips the all-methods grid (live updates while editing);
  // `prepared`: classify(app.image.blob) when already sent.
  async function predict({ grid = true, prepared = null } = {}) {
    const main = app.views.explanation;
    if (!app.info) {
      main.draw();
      app.setStatus('No model is loaded: load one under “Model”.');
      return;
    }
    const request = prepared ?? classify(app.image.blob);
    app.setStatus(`Classifying ${app.image.name}…`);
    let out;
    try {
      out = await request;
    } catch (e) {
      app.showError(`Could not classify ${app.image.name}`, e);
      return;
    }
    // The new handle replaces the old one, which the worker frees (requests for it were cancelled).
    if (app.imageId !== null) app.call('release', { image: app.imageId }).catch(() => {});
    app.imageId = out.image;
    app.inputInfo = out.info;
    checkSize(out);
    app.mark('predicted');
    app.workerMs('decode', out.decodeMs);
    app.workerMs('prepare', out.ms);
    app.imageVersion++;
    app.predictions = out.predictions;
    app.predictMs = out.ms;
    if (!(app.editor.edited && targetChosen && app.target < out.predictions.length)) app.target = argmax(out.predictions);
    if (!app.editor.edited) app.explanation = null;
    drawModelInput(out.view);
    renderScores();
    emit('predicted', { predictions: out.predictions, view: out.view, aspect: out.aspect });
    const done = main.explain();
    if (grid) gridAfter(done);
    return done;
  }

  // After a worker restart: the new worker classifies the image again (nothing is redrawn); the
  // old worker's handles went with it.
  async function restore() {
    app.imageId = null;
    const out = await app.call('prepare', { source: { blob: app.image.blob }, inputSize: app.inputSize });
    app.imageId = out.image;
    app.inputInfo = out.info;
    app.predictions = out.predictions;
    checkSize(out);
  }

  // The image was asked for at its aspect but the worker could not resize the model: it was
  // classified at the model's size, which the page keeps.
  function checkSize(out) {
    if (out.sizeError) app.views.inputSize.fallBack(out.aspect, out.sizeError);
  }

  function drawModelInput(view) {
    const { imageW: w, imageH: h } = app.inputInfo;
    const small = document.createElement('canvas');
    small.width = w;
    small.height = h;
    small.getContext('2d').putImageData(new ImageData(view, w, h), 0, 0);
    const c = $('model-input');
    fitCanvas(c, w, h, 128);
    const ctx = c.getContext('2d');
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(small, 0, 0, c.width, c.height);
    $('model-size').textContent = `(${w}×${h})`;
  }

  function renderScores() {
    const box = $('scores');
    box.replaceChildren();
    const multi = app.info.multiLabel;
    $('scores-note').textContent = `${multi ? 'Sigmoid per class (multi-label)' : 'Softmax'} probability; click a class to explain it.`;
    for (const p of app.predictions) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'score';
      b.dataset.class = p.class;
      b.dataset.prob = String(p.prob);
      b.setAttribute('aria-pressed', String(p.class === app.target));
      b.title = `logit ${p.logit.toFixed(3)}`;
      const name = document.createElement('span');
      name.className = 'score-name';
      name.textContent = p.name;
      const bar = document.createElement('span');
      bar.className = 'score-bar';
      const fill = document.createElement('span');
      fill.style.width = `${(100 * p.prob).toFixed(1)}%`;
      if (multi ? p.prob >= 0.5 : p.class === argmax(app.predictions)) fill.className = 'present';
      bar.append(fill);
      const value = document.createElement('span');
      value.className = 'score-value';
      value.textContent = (100 * p.prob).toFixed(1) + '%';
      b.append(name, bar, value);
      b.addEventListener('click', () => chooseClass(p.class));
      box.append(b);
    }
  }

  function chooseClass(cls) {
    if (cls === app.target) return;
    app.target = cls;
    targetChosen = true;
    for (const b of $('scores').children) b.setAttribute('aria-pressed', String(Number(b.dataset.class) === cls));
    app.cancelExplains();
    gridAfter(app.views.explanation.explain());
  }

  // The grid (long methods included) queues behind the main view's explanation, per-head views and
  // perturbation curve, which are requested as soon as the explanation arrives. Not after an
  // explanation that was cancelled or replaced, nor once anything was cancelled since it was asked
  // for (a Stop is not undone; another image or class runs the grid after its own explanation).
  function gridAfter(explanation) {
    const cancelAlls = app.client.cancelAlls;
    explanation.then((explained) => {
      if (explained && app.client.cancelAlls === cancelAlls) app.views.grid.run();
    });
  }

  return { classify, predict, restore };
}
