// render.js — drawing attribution maps: colour maps, min-max normalisation for display, the
// heatmap overlay (opacity, threshold) over an image, small token-grid maps, and a colour bar.
// Pure drawing: it never computes an attribution, and it never changes the raw map.
//
// Colour maps: jet is the piecewise-linear formula the CLI uses (matplotlib's "jet" shape);
// viridis and inferno are linear interpolations between 11 evenly spaced anchor colours of
// matplotlib's maps (van der Walt & Smith, 2015) — close to, not identical with, the 256-entry tables.
// `diverging` (for signed values, e.g. the difference of two normalised maps) is a linear ramp
// from blue through white (0, the middle entry) to red.

const ANCHORS = {
  viridis: ['440154', '482475', '414487', '355f8d', '2a788e', '21918c', '22a884', '44bf70', '7ad151', 'bddf26', 'fde725'],
  inferno: ['000004', '160b39', '420a68', '6a176e', '932667', 'bc3754', 'dd513a', 'f37819', 'fca50a', 'f6d746', 'fcffa4'],
};

function lutFromAnchors(hex) {
  const rgb = hex.map((h) => [0, 2, 4].map((i) => parseInt(h.slice(i, i + 2), 16)));
  const lut = new Uint8ClampedArray(256 * 3);
  for (let i = 0; i < 256; i++) {
    const t = (i / 255) * (rgb.length - 1);
    const k = Math.min(rgb.length - 2, Math.floor(t));
    const f = t - k;
    for (let c = 0; c < 3; c++) lut[i * 3 + c] = Math.round(rgb[k][c] * (1 - f) + rgb[k + 1][c] * f);
  }
  return lut;
}

function jetLut() {
  const lut = new Uint8ClampedArray(256 * 3);
  const ramp = (x) => Math.round(255 * Math.min(1, Math.max(0, x)));
  for (let i = 0; i < 256; i++) {
    const v = i / 255;
    lut[i * 3] = ramp(1.5 - Math.abs(4 * v - 3));
    lut[i * 3 + 1] = ramp(1.5 - Math.abs(4 * v - 2));
    lut[i * 3 + 2] = ramp(1.5 - Math.abs(4 * v - 1));
  }
  return lut;
}

export const COLORMAPS = {
  jet: jetLut(),
  viridis: lutFromAnchors(ANCHORS.viridis),
  inferno: lutFromAnchors(ANCHORS.inferno),
  diverging: lutFromAnchors(['2166ac', 'ffffff', 'b2182b']),
};

export function minMax(map) {
  let min = Infinity;
  let max = -Infinity;
  for (const v of map) {
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max };
}

// The map normalised to [0, 1] by (m − min)/(max − min); a constant map becomes all 0.
export function normalise(map) {
  const { min, max } = minMax(map);
  const range = max > min ? max - min : 1;
  const out = new Float32Array(map.length);
  for (let i = 0; i < map.length; i++) out[i] = (map[i] - min) / range;
  return out;
}

// RGBA pixels of a w×h map: colour from the normalised value; alpha = opacity where the value is
// at or above the threshold, 0 below it.
export function mapImageData(map, w, h, { cmap = 'jet', opacity = 1, threshold = 0 } = {}) {
  const lut = COLORMAPS[cmap] ?? COLORMAPS.jet;
  const norm = normalise(map);
  const img = new ImageData(w, h);
  const a = Math.round(255 * opacity);
  for (let i = 0; i < w * h; i++) {
    const k = Math.round(norm[i] * 255) * 3;
    img.data[i * 4] = lut[k];
    img.data[i * 4 + 1] = lut[k + 1];
    img.data[i * 4 + 2] = lut[k + 2];
    img.data[i * 4 + 3] = norm[i] >= threshold ? a : 0;
  }
  return img;
}

function newCanvas(w, h) {
  const c = document.createElement('canvas');
  c.width = w;
  c.height = h;
  return c;
}

// The canvas a map is coloured into before it is drawn scaled onto a visible one: one per size,
// kept between draws (drawImage copies it at once). A new canvas and 2D context for every map
// drawn were most of the ~150 canvases the page made after an image switch. A drawing cache only:
// what it holds is overwritten before every use.
const scratch = new Map(); // "w×h" → canvas
function scratchCanvas(w, h) {
  const key = `${w}×${h}`;
  let c = scratch.get(key);
  if (!c) {
    if (scratch.size >= 8) scratch.clear(); // sizes come from the models loaded: a few at a time
    c = newCanvas(w, h);
    scratch.set(key, c);
  }
  return c;
}

// A canvas of an n × n matrix (row-major), one pixel a cell, coloured by `cmap` from `min` to
// `max` (values beyond are clamped); drawn scaled up without smoothing by the matrix views.
export function matrixCanvas(mat, n, { cmap = 'viridis', min, max }) {
  const lut = COLORMAPS[cmap] ?? COLORMAPS.viridis;
  const range = max > min ? max - min : 1;
  const img = new ImageData(n, n);
  for (let k = 0; k < n * n; k++) {
    const c = Math.round(Math.min(1, Math.max(0, (mat[k] - min) / range)) * 255) * 3;
    img.data[k * 4] = lut[c];
    img.data[k * 4 + 1] = lut[c + 1];
    img.data[k * 4 + 2] = lut[c + 2];
    img.data[k * 4 + 3] = 255;
  }
  const layer = newCanvas(n, n); // the caller keeps it: not a scratch canvas
  layer.getContext('2d').putImageData(img, 0, 0);
  return layer;
}

// RGBA pixels of a w×h map of signed values in [−limit, limit] (not normalised): the colour map's
// middle entry at 0, its ends at ±limit (values beyond are clamped), alpha = opacity.
export function signedImageData(values, w, h, { cmap = 'diverging', opacity = 1, limit = 1 } = {}) {
  const lut = COLORMAPS[cmap] ?? COLORMAPS.diverging;
  const img = new ImageData(w, h);
  const a = Math.round(255 * opacity);
  for (let i = 0; i < w * h; i++) {
    const t = Math.min(1, Math.max(0, (values[i] / limit + 1) / 2));
    const k = Math.round(t * 255) * 3;
    img.data[i * 4] = lut[k];
    img.data[i * 4 + 1] = lut[k + 1];
    img.data[i * 4 + 2] = lut[k + 2];
    img.data[i * 4 + 3] = a;
  }
  return img;
}

// Draws `image` (an ImageBitmap or canvas) stretched over the whole canvas, then the map over it.
// The model squeezes any image to its input size, so the map is stretched back the same way.
// opts.signed draws the map's raw values with signedImageData (opts.limit) instead of normalising it.
export function drawOverlay(canvas, image, map, mw, mh, opts = {}) {
  const ctx = canvas.getContext('2d');
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  if (image) {
    ctx.imageSmoothingEnabled = canvas.width < 2 * image.width;
    ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
  }
  if (!map) return;
  const layer = scratchCanvas(mw, mh);
  layer.getContext('2d').putImageData(opts.signed ? signedImageData(map, mw, mh, opts) : mapImageData(map, mw, mh, opts), 0, 0);
  ctx.imageSmoothingEnabled = opts.smooth ?? true;
  ctx.imageSmoothingQuality = 'high';
  ctx.drawImage(layer, 0, 0, canvas.width, canvas.height);
}

// A small map (e.g. one attention row over the patch grid) drawn as blocks, optionally with
// one cell outlined (the query patch).
export function drawGrid(canvas, map, gw, gh, { cmap = 'viridis', outline = -1 } = {}) {
  const ctx = canvas.getContext('2d');
  const layer = scratchCanvas(gw, gh);
  layer.getContext('2d').putImageData(mapImageData(map, gw, gh, { cmap }), 0, 0);
  ctx.imageSmoothingEnabled = false;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.drawImage(layer, 0, 0, canvas.width, canvas.height);
  if (outline >= 0) {
    const cw = canvas.width / gw;
    const ch = canvas.height / gh;
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = 2;
    ctx.strokeRect((outline % gw) * cw + 1, Math.floor(outline / gw) * ch + 1, cw - 2, ch - 2);
  }
}

// A horizontal colour bar with the raw minimum and maximum written at its ends.
export function drawColorbar(canvas, cmap, min, max) {
  const ctx = canvas.getContext('2d');
  const lut = COLORMAPS[cmap] ?? COLORMAPS.jet;
  const w = canvas.width;
  const barH = Math.round(canvas.height * 0.5);
  for (let x = 0; x < w; x++) {
    const k = Math.round((x / Math.max(1, w - 1)) * 255) * 3;
    ctx.fillStyle = `rgb(${lut[k]},${lut[k + 1]},${lut[k + 2]})`;
    ctx.fillRect(x, 0, 1, barH);
  }
  ctx.clearRect(0, barH, w, canvas.height - barH);
  ctx.fillStyle = getComputedStyle(canvas).color || '#000';
  ctx.font = `${Math.round(canvas.height * 0.38)}px system-ui, sans-serif`;
  ctx.textBaseline = 'bottom';
  ctx.textAlign = 'left';
  ctx.fillText(formatNumber(min), 0, canvas.height);
  ctx.textAlign = 'right';
  ctx.fillText(formatNumber(max), w, canvas.height);
}

export function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return '–';
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e4)) return v.toExponential(2);
  return v.toPrecision(3);
}
