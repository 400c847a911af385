// input_size.js — the "Input size" choice under the image: explain it at the model's own size
// (every image squeezed to the checkpoint's H×W and patch grid) or at the image's own aspect (the
// engine's Model.aspectInputSize gives h×w with about as many patches; the worker resizes the
// model to it, pos_embed resampled bicubically). Owns the choice, app.inputSize; the sizes it
// names are the engine's (the model's info, the `aspect` of the last classification). A change
// classifies and explains the image again; every view then follows the input's grid.
import { on } from '../events.js';
import { $ } from './util.js';

// "h×w (gh×gw patches)" of an input size in pixels.
function sizeText(h, w, patch) {
  return `${h}×${w}, ${Math.floor(h / patch)}×${Math.floor(w / patch)} patches`;
}

export function createInputSizeView(app) {
  app.inputSize = 'model';

  on('model-changed', ({ info, reloaded }) => {
    $('input-size-model').textContent = `(${sizeText(info.imageH, info.imageW, info.patch)})`;
    if (!reloaded) $('input-size-aspect').textContent = '';
  });
  on('image-changed', () => { $('input-size-aspect').textContent = ''; });
  on('predicted', ({ aspect }) => {
    $('input-size-aspect').textContent = `(${sizeText(aspect[0], aspect[1], app.info.patch)})`;
  });
  for (const r of document.querySelectorAll('input[name=input-size]')) r.addEventListener('change', () => choose(r.value));

  function choose(size) {
    app.inputSize = size;
    for (const r of document.querySelectorAll('input[name=input-size]')) r.checked = r.value === size;
    if (!app.image || !app.info) return;
    app.clearError();
    app.views.prediction.predict();
  }

  // The resized model could not be made: the page stays at the model's size (the image was
  // classified at it) and says why in the error bar.
  function fallBack(aspect, err) {
    app.inputSize = 'model';
    for (const r of document.querySelectorAll('input[name=input-size]')) r.checked = r.value === 'model';
    app.showError(`The model could not be resized to the image's aspect (${aspect[0]}×${aspect[1]}); explaining at its own size`, err);
  }

  return { fallBack };
}
