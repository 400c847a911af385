// app.js — the page's shell: starts the worker, holds what every view reads (the method table,
// the model, the image, the prediction, the explanation drawn), shows status and errors, and
// stops or restarts the engine. The views under views/ own the rest, each its own slice of state
// and its own part of the page, and hear about changes through the event bus (events.js).
// The main thread only draws: every engine call goes to the worker (worker.js through
// client.js); images are decoded off the main thread (createImageBitmap), and the worker
// receives the file itself, not its pixels.
import { createBackground, RANK } from './background.js';
import * as boot from './boot.js';
import { replyValue, VitlensError, WorkerClient } from './client.js';
import { emit } from './events.js';
import { $ } from './views/util.js';
import { createCompareView } from './views/compare.js';
import { createEditorView } from './views/editor.js';
import { createExplanationView } from './views/explanation.js';
import { createFfView } from './views/ff.js';
import { createFilesView } from './views/files.js';
import { createGalleryView } from './views/gallery.js';
import { createGridView } from './views/grid.js';
import { createHeadsView } from './views/heads.js';
import { createInputSizeView } from './views/input_size.js';
import { createMatricesView } from './views/matrices.js';
import { createOptionsView } from './views/options.js';
import { createPerturbationView } from './views/perturbation.js';
import { createPredictionView } from './views/prediction.js';
import { createTeachingView } from './views/teaching.js';
import { createWalkView } from './views/walk.js';


// What the views share. Each field has one writer (named); the others only read it.
const app = {
  client: null,
  methods: [], // the engine's method table, methods() (the shell, at start)
  info: null, // the loaded model's description (files)
  inputSize: 'model', // the size images are explained at: 'model' (its own) or 'aspect' (the image's) (inputSize)
  inputInfo: null, // the description of the model that saw the image: app.info, or at the image's aspect its resized copy's (prediction)
  image: null, // { blob, bitmap, name, labels, items } (files; items: a gallery scene's objects with their mask files; the editor replaces the blob after edits)
  editor: null, // the scene editor: the image as edited, drawn everywhere instead of the original (editor)
  predictions: [], // (prediction)
  predictMs: 0, // (prediction)
  target: -1, // the class explained (prediction)
  imageVersion: 0, // counts predictions, so that the per-head views know when to ask again (prediction)
  imageId: null, // the worker's handle of the image as classified; every per-image request names it (prediction)
  explanation: null, // the main view's explanation as drawn (explanation)
  query: 0, // the query token, an index into the model's tokens (tokens.js); 0, the CLS token, by default (explanation)
  timeline: {}, // start-up stages, ms since navigation, and the worker's own ms of the first calls (reported with the first explanation)
  views: {},

  call,
  background: null, // background.js: ask(type, input, { rank, … }) for the page's own long requests
  setStatus,
  showError,
  clearError,
  mark,
  workerMs,
  stop,
  methodInfo: (name) => app.methods.find((m) => m.name === name),
  className: (c) => app.info?.classNames[c] ?? `class ${c}`,
  // Cancels every explain in flight (a new image, class or model); the views drop their results.
  cancelExplains() {
    app.client?.cancelAll('explain');
    app.client?.cancelAll('perturb');
    app.client?.cancelAll('faithfulness');
    emit('explains-cancelled');
  },
};

function mark(stage) {
  app.timeline[stage] ??= Math.round(performance.now());
}

// The worker's own time of the first call of a kind (`workerMs('explain', ex.ms)` → the
// timeline's explainMs): at the start these calls run mostly in baseline code (docs/performance.md,
// 2026-12-03, third session), and they vary less from page to page than the stages do.
function workerMs(call, ms) {
  app.timeline[`${call}Ms`] ??= Math.round(10 * ms) / 10;
}

// ---- status and errors ------------------------------------------------------------------

function setStatus(text) {
  $('status').textContent = text;
}

function showError(what, e) {
  if (e instanceof VitlensError && e.code === 'cancelled') return;
  const code = e?.code ? ` [${e.code}]` : '';
  $('error-text').textContent = `${what}: ${e?.message ?? e}${code}`;
  $('error').hidden = false;
  setStatus('Ready (see the error above)');
}

function clearError() {
  $('error').hidden = true;
}

function updateBusy() {
  const busy = app.client?.busy ?? false;
  $('busy').hidden = !busy;
  $('stop').disabled = !busy;
}

// A call to the worker that keeps the busy indicator right. The requests sent with priority in
// flight (the views' own and the perturbation curve) are counted in <html data-view-requests>,
// apart from the grid's work: the browser tests wait for a view without waiting for the grid.
let viewRequests = 0;
function countViewRequest(delta) {
  viewRequests += delta;
  document.documentElement.dataset.viewRequests = String(viewRequests);
}

// hooks.rank: a background request's (background.js), else a view's: with priority, the
// background requests of a lower rank in flight are withdrawn for it.
function call(type, input, transfer, hooks) {
  const priority = Boolean(hooks?.priority);
  if (priority) emit('priority-request', { rank: hooks.rank ?? RANK.view });
  const p = app.client.call(type, input, transfer, hooks);
  if (priority) countViewRequest(1);
  updateBusy();
  const done = () => {
    if (priority) countViewRequest(-1);
    setTimeout(updateBusy, 0);
  };
  p.then(done, done);
  return p;
}

// ---- the engine --------------------------------------------------------------------------

// Which engine build the worker runs and with how many threads (<html data-threads>, data-simd
// for tests).
function showEngine(init) {
  document.documentElement.dataset.threads = String(init.threads);
  document.documentElement.dataset.simd = init.simd;
  $('engine-info').textContent = init.threads > 1
    ? `Engine: ${init.engine}, ${init.threads} threads (the page is cross-origin isolated).`
    : `Engine: ${init.engine}, one thread${init.crossOriginIsolated ? '' : ' (the page is not cross-origin isolated: served with COOP/COEP headers, as scripts/start.sh does, it uses threads)'}.`;
  if (init.note) showError('Threads are off', new VitlensError('not_ready', init.note));
}

// Cancels what is queued and raises the cancel flags of what runs (the engine stops a long
// request at its next progress report); if the worker is still inside a wasm call after a moment
// (a call without progress reports, or a browser whose worker cannot read the flags), it is
// replaced by a fresh one (engine and model loaded again; counted in <html data-worker-restarts>).
async function stop() {
  app.client.cancelAll();
  emit('stopped');
  for (const deadline = performance.now() + 1000; app.client.busy && performance.now() < deadline;)
    await new Promise((r) => setTimeout(r, 25));
  if (!app.client.busy) {
    updateBusy();
    setStatus('Stopped');
    return;
  }
  app.client.restart();
  const root = document.documentElement;
  root.dataset.workerRestarts = String(Number(root.dataset.workerRestarts ?? 0) + 1);
  updateBusy();
  setStatus('Restarting the engine…');
  try {
    showEngine(await call('init', boot.ENGINE));
    await app.views.files.reloadModel();
    if (app.image && app.info) await app.views.prediction.restore();
    setStatus('Stopped');
  } catch (e) {
    showError('Could not restart the engine', e);
  }
}

// ---- start -------------------------------------------------------------------------------

async function main() {
  // The order of creation is the order in which the views hear each event.
  const v = app.views;
  app.background = createBackground(app);
  v.editor = createEditorView(app);
  v.explanation = createExplanationView(app);
  v.prediction = createPredictionView(app);
  v.inputSize = createInputSizeView(app);
  v.options = createOptionsView(app);
  v.grid = createGridView(app);
  v.walk = createWalkView(app);
  v.teaching = createTeachingView(app);
  v.heads = createHeadsView(app);
  v.matrices = createMatricesView(app);
  v.ff = createFfView(app);
  v.perturbation = createPerturbationView(app);
  v.compare = createCompareView(app);
  v.gallery = createGalleryView(app);
  v.files = createFilesView(app);
  $('error-close').addEventListener('click', clearError);
  $('stop').addEventListener('click', stop);
  mark('script');
  // The worker, its engine and the shipped model's download were started by boot.js.
  app.client = new WorkerClient({ worker: boot.worker });
  setStatus('Loading the engine…');
  const galleryP = v.gallery.load();
  try {
    const reply = await boot.engineReply;
    if (!reply) throw new VitlensError('worker', 'the worker could not start');
    const init = replyValue(reply);
    showEngine(init);
    mark('engine');
    app.methods = init.methods;
    v.options.buildMethods();
    v.grid.build();
  } catch (e) {
    showError('The engine could not start', e);
    v.gallery.showThumbnails();
    return;
  }
  try {
    const blob = await boot.shippedModel;
    if (!(blob instanceof Blob)) throw new VitlensError('network', `${boot.SHIPPED_MODEL}: HTTP ${blob}`);
    await v.files.loadShippedModel(blob);
    mark('model');
  } catch (e) {
    showError('The shipped model could not be loaded (load your own under “Model”)', e);
    v.gallery.showThumbnails();
  }
  const scenes = await galleryP;
  if (scenes.length && app.info) await v.gallery.open(scenes[0].image, scenes[0].names);
  else if (app.info) setStatus('Ready: drop or choose an image.');
}

main();
