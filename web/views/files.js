// files.js — files in and out: the model (the shipped one, a dropped .vitl, or a .safetensors
// checkpoint with its config.json, converted in the worker), images (chosen, dropped or pasted;
// decoded by the browser) and the exports (the overlay as PNG, the raw map as .npy). Owns the
// loaded model and how it was loaded (to load it again after a worker restart) and the image.
import { SHIPPED_MODEL } from '../boot.js';
import { VitlensError } from '../client.js';
import { emit, on } from '../events.js';
import { encodeNpy, saveBlob } from '../files.js';
import { drawOverlay } from '../render.js';
import { tokenLayout } from '../tokens.js';
import { $, cancelFlag, stopLong } from './util.js';

function shippedSpec() {
  return { kind: 'vitl', source: { url: new URL(SHIPPED_MODEL, location.href).href }, label: 'the shipped model', shipped: true };
}

function describeModel(info) {
  const kind = info.multiLabel ? 'multi-label (sigmoid)' : 'softmax';
  const { gridH, gridW } = tokenLayout(info);
  return `${info.imageH}×${info.imageW}×${info.channels} input, patch ${info.patch} (${gridH}×${gridW} patches), ` +
    `width ${info.dim}, ${info.depth} blocks × ${info.heads} heads, ${info.classes} classes, ${kind}, ` +
    `${(info.params / 1e3).toFixed(1)}k parameters${info.storedInt8 ? ', int8' : ''}.`;
}

function isModelFile(f) {
  return /\.(vitl|safetensors|json)$/i.test(f.name);
}

export function createFilesView(app) {
  let modelSpec = null; // how the current model was loaded

  on('explained', () => {
    $('export-png').disabled = false;
    $('export-npy').disabled = false;
  });

  $('image-file').addEventListener('change', (e) => {
    if (e.target.files[0]) openImage(e.target.files[0], e.target.files[0].name);
    e.target.value = '';
  });
  $('model-file').addEventListener('change', (e) => {
    onModelFiles(e.target.files);
    e.target.value = '';
  });
  $('model-reset').addEventListener('click', () => changeModel(shippedSpec()));
  $('model-save').addEventListener('click', saveModel);
  document.addEventListener('dragover', (e) => {
    e.preventDefault();
    document.body.classList.add('dragging');
  });
  document.addEventListener('dragleave', (e) => {
    if (!e.relatedTarget) document.body.classList.remove('dragging');
  });
  document.addEventListener('drop', (e) => {
    e.preventDefault();
    document.body.classList.remove('dragging');
    onFiles(e.dataTransfer.files);
  });
  document.addEventListener('paste', (e) => {
    const files = [...(e.clipboardData?.files ?? [])];
    if (files.length) {
      e.preventDefault();
      onFiles(files);
    }
  });
  $('export-png').addEventListener('click', exportPng);
  $('export-npy').addEventListener('click', exportNpy);

  // ---- the model -------------------------------------------------------------------------

  // Loads a model and tells the views: `reloaded` when it is the same model again in a new worker
  // (after a restart), so that they keep what they show.
  async function loadModel(spec, { reloaded = false } = {}) {
    app.setStatus(`Loading ${spec.label}…`);
    const out = spec.kind === 'vitl'
      ? await app.call('loadModel', { source: spec.source })
      : await importModel(spec);
    if (out.ms !== undefined) app.workerMs('loadModel', out.ms);
    app.info = out.info;
    modelSpec = spec;
    $('model-info').textContent = `${spec.label}: ${describeModel(out.info)}`;
    $('model-info').title = out.info.provenance || '';
    $('model-reset').hidden = spec.shipped === true;
    $('model-save').disabled = false;
    emit('model-changed', { info: out.info, reloaded });
    return out.info;
  }

  // A checkpoint converted in the worker, with a progress bar and Cancel (a ViT-B/16 is 330 MB).
  // Cancel stops the engine at its next tensor (the cancel flag, views/util.js), or — if it has not
  // stopped within 3 s — restarts the worker, which loads the previous model again.
  async function importModel(spec) {
    const flag = cancelFlag();
    const size = spec.checkpoint.blob?.size;
    const mb = (f) => (size ? ` (${Math.round((f * size) / 2 ** 20)} of ${Math.round(size / 2 ** 20)} MB)` : '');
    const what = `Converting ${spec.label}${spec.storage === 'int8' ? ' to int8' : ''}`;
    const row = $('model-progress-row');
    const show = (f) => {
      $('model-progress').value = f;
      $('model-progress-text').textContent = `${what}: ${Math.round(100 * f)} %${mb(f)}`;
      document.documentElement.dataset.importProgress = String(f);
    };
    show(0);
    const p = app.call('importModel', { checkpoint: spec.checkpoint, config: spec.config, storage: spec.storage, cancelFlag: flag },
      [], { onProgress: show });
    row.hidden = false;
    $('model-cancel').disabled = false;
    $('model-cancel').onclick = async () => {
      $('model-cancel').disabled = true;
      $('model-progress-text').textContent = `${what}: cancelling…`;
      await stopLong(app, p.id, flag);
    };
    try {
      return await p;
    } finally {
      row.hidden = true;
    }
  }

  async function saveModel() {
    app.clearError();
    try {
      // With priority, as every request a click sends: else it queued behind all of the grid's
      // explains (on a DeiT-tiny-sized model, tens of seconds of them).
      const { bytes, storage } = await app.call('saveModel', {}, [], { priority: true });
      const base = (modelSpec?.label ?? 'model').replace(/\.(vitl|safetensors)$/i, '');
      saveBlob(new Blob([bytes], { type: 'application/octet-stream' }), `${base}${storage === 'int8' ? '-int8' : ''}.vitl`);
    } catch (e) {
      app.showError('Could not save the model', e);
    }
  }

  async function changeModel(spec) {
    app.clearError();
    app.cancelExplains();
    try {
      await loadModel(spec);
    } catch (e) {
      app.showError(`Could not load ${spec.label}`, e);
      return;
    }
    if (app.image) await app.views.prediction.predict();
    else app.setStatus('Ready');
  }

  function onModelFiles(files) {
    const list = [...files];
    if (!list.length) return;
    const byExt = (ext) => list.find((f) => f.name.toLowerCase().endsWith(ext));
    const vitl = byExt('.vitl');
    const ckpt = byExt('.safetensors');
    const config = byExt('.json');
    if (vitl) changeModel({ kind: 'vitl', source: { blob: vitl }, label: vitl.name });
    else if (ckpt && config) {
      changeModel({
        kind: 'safetensors', checkpoint: { blob: ckpt }, config: { blob: config }, label: ckpt.name,
        storage: $('model-int8').checked ? 'int8' : 'f32',
      });
    }
    else if (ckpt) app.showError('Could not load the model', new VitlensError('bad_argument', 'choose the .safetensors checkpoint and its config.json together'));
    else changeModel({ kind: 'vitl', source: { blob: list[0] }, label: list[0].name });
  }

  // Loads the shipped model from its bytes (boot.js fetched them while the engine started).
  function loadShippedModel(blob) {
    return loadModel({ ...shippedSpec(), source: { blob } });
  }

  // After a worker restart: the new worker loads the same model again.
  async function reloadModel() {
    if (modelSpec) await loadModel(modelSpec, { reloaded: true });
  }

  // ---- images ----------------------------------------------------------------------------

  // The pixels the worker sees of an image (a Blob the browser can decode): a promise of the
  // ImageBitmap, rejected when the browser cannot decode it.
  function decode(blob) {
    return createImageBitmap(blob, { colorSpaceConversion: 'none' });
  }

  // Opens an image (a Blob the browser can decode), classifies and explains it; resolves once
  // the main explanation is drawn. `labels` names its objects (a gallery scene's), `items` lists
  // them with their masks ([{ cls, name, mask: url }], the scene's labels.json) when known;
  // `decoded` is its decode(blob) when started earlier.
  async function openImage(blob, name, labels = null, items = null, decoded = null) {
    app.clearError();
    // The worker decodes and classifies the bytes while this thread decodes them for drawing (a
    // gallery click's prepare went out 5–10 ms sooner, docs/performance.md 2026-12-03, fourth session).
    const prepared = app.info ? app.views.prediction.classify(blob) : null;
    let bitmap;
    try {
      bitmap = await (decoded ?? decode(blob));
    } catch {
      prepared?.then(({ image }) => app.call('release', { image }).catch(() => {}), () => {});
      app.showError(`Could not open ${name}`, new VitlensError('bad_image', 'this file is not an image the browser can decode (PNG, JPEG, GIF, WebP, BMP…)'));
      return;
    }
    app.image?.bitmap.close();
    app.image = { blob, bitmap, name, labels, items };
    emit('image-changed', { image: app.image });
    await app.views.prediction.predict({ prepared });
  }

  function onFiles(files) {
    const list = [...files];
    if (!list.length) return;
    if (list.some(isModelFile)) onModelFiles(list);
    else openImage(list[0], list[0].name || 'pasted image');
  }

  // ---- export ----------------------------------------------------------------------------

  function exportBase() {
    const ex = app.explanation;
    const stem = (app.image?.name ?? 'image').replace(/\.[^.]*$/, '').replace(/[^\w.-]+/g, '_');
    return `${stem}_${ex.method}_class${ex.target}`;
  }

  function exportPng() {
    const ex = app.explanation;
    const img = app.views.editor.imageSource();
    if (!ex || !img) return;
    const long = Math.min(1024, Math.max(512, img.width, img.height));
    const s = long / Math.max(img.width, img.height);
    const c = document.createElement('canvas');
    c.width = Math.round(img.width * s);
    c.height = Math.round(img.height * s);
    drawOverlay(c, img, ex.pixelMap, ex.width, ex.height, app.views.explanation.display);
    c.toBlob((blob) => saveBlob(blob, `${exportBase()}.png`), 'image/png');
  }

  // The raw map as the CLI's --save-map writes it: the token grid, or pixels for methods that
  // compute the map at the input.
  function exportNpy() {
    const ex = app.explanation;
    if (!ex) return;
    const pixels = app.methodInfo(ex.method)?.nativePixels;
    const bytes = pixels ? encodeNpy(ex.pixelMap, [ex.height, ex.width]) : encodeNpy(ex.tokenMap, [ex.gridH, ex.gridW]);
    saveBlob(new Blob([bytes], { type: 'application/octet-stream' }), `${exportBase()}.npy`);
  }

  return { decode, openImage, loadShippedModel, reloadModel };
}
