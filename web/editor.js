// editor.js — the scene editor: a copy of the image the user can paint on (brush, colour, size)
// and in which a rectangle of pixels can be selected and moved (pointer drag or arrow keys).
// It only edits pixels; the page decides when to classify and explain the result (app.js sends
// at most one request at a time, the latest edit winning).
//
// Coordinates are image pixels. The hole a moved selection leaves is filled with the mean colour
// of the one-pixel ring around the selection's original place (the local background).

const MAX_UNDO = 30;

export class SceneEditor {
  // onEdit(final): called after every change; `final` is false while a stroke or drag goes on.
  constructor(onEdit) {
    this.onEdit = onEdit;
    this.canvas = document.createElement('canvas');
    this.ctx = this.canvas.getContext('2d', { willReadFrequently: true });
    this.original = null;
    this.undoStack = [];
    this.sel = null; // { x, y, w, h, lifted: ImageData, base: ImageData } once moved
    this.drag = null;
    this.tool = 'inspect';
    this.colour = '#000000';
    this.size = 3; // brush diameter in pixels of the model's input (scaled to the image)
    this.scale = 1; // image pixels per model-input pixel
    this.edited = false;
  }

  get width() {
    return this.canvas.width;
  }

  get height() {
    return this.canvas.height;
  }

  // Starts editing a new image (an ImageBitmap); `scale` = image pixels per model pixel.
  load(bitmap, scale = 1) {
    this.canvas.width = bitmap.width;
    this.canvas.height = bitmap.height;
    this.ctx.clearRect(0, 0, bitmap.width, bitmap.height);
    this.ctx.drawImage(bitmap, 0, 0);
    this.original = this.snapshot();
    this.undoStack = [];
    this.sel = null;
    this.drag = null;
    this.scale = scale;
    this.edited = false;
  }

  snapshot() {
    return this.ctx.getImageData(0, 0, this.width, this.height);
  }

  pushUndo() {
    this.undoStack.push(this.snapshot());
    if (this.undoStack.length > MAX_UNDO) this.undoStack.shift();
  }

  undo() {
    const last = this.undoStack.pop();
    if (!last) return false;
    this.ctx.putImageData(last, 0, 0);
    this.sel = null;
    this.edited = this.undoStack.length > 0;
    this.onEdit(true);
    return true;
  }

  revert() {
    if (!this.original || !this.edited) return false;
    this.ctx.putImageData(this.original, 0, 0);
    this.undoStack = [];
    this.sel = null;
    this.edited = false;
    this.onEdit(true);
    return true;
  }

  setTool(tool) {
    this.tool = tool;
    this.sel = null;
    this.drag = null;
  }

  // The PNG of the edited image (what the worker classifies).
  toBlob() {
    return new Promise((resolve) => this.canvas.toBlob(resolve, 'image/png'));
  }

  // ---- pointer input (image coordinates) ----

  pointerDown(x, y) {
    if (this.tool === 'brush') {
      this.pushUndo();
      this.drag = { kind: 'brush', x, y };
      this.paint(x, y, x, y);
      this.changed(false);
      return true;
    }
    if (this.tool === 'move') {
      if (this.sel && inside(this.sel, x, y)) {
        this.drag = { kind: 'move', x, y, sx: this.sel.x, sy: this.sel.y };
      } else {
        this.sel = null;
        this.drag = { kind: 'select', x0: x, y0: y, x, y };
      }
      return true;
    }
    return false;
  }

  pointerMove(x, y) {
    const d = this.drag;
    if (!d) return false;
    if (d.kind === 'brush') {
      this.paint(d.x, d.y, x, y);
      d.x = x;
      d.y = y;
      this.changed(false);
    } else if (d.kind === 'select') {
      d.x = x;
      d.y = y;
    } else if (d.kind === 'move') {
      this.placeSelection(Math.round(d.sx + x - d.x), Math.round(d.sy + y - d.y), false);
    }
    return true;
  }

  pointerUp() {
    const d = this.drag;
    this.drag = null;
    if (!d) return false;
    if (d.kind === 'brush') this.changed(true);
    else if (d.kind === 'select') this.sel = this.rectOf(d);
    else if (d.kind === 'move') this.changed(true);
    return true;
  }

  // Moves the selection by (dx, dy) pixels (arrow keys); false when there is none.
  nudge(dx, dy) {
    if (!this.sel || this.tool !== 'move') return false;
    this.placeSelection(this.sel.x + dx, this.sel.y + dy, true);
    return true;
  }

  // The selection being drawn or the current one: { x, y, w, h } in image pixels, or null.
  selectionRect() {
    if (this.drag?.kind === 'select') return this.rectOf(this.drag);
    return this.sel;
  }

  // ---- edits ----

  paint(x0, y0, x1, y1) {
    const ctx = this.ctx;
    ctx.strokeStyle = this.colour;
    ctx.fillStyle = this.colour;
    ctx.lineWidth = Math.max(1, this.size * this.scale);
    ctx.lineCap = 'round';
    ctx.lineJoin = 'round';
    ctx.beginPath();
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1 + 0.01, y1);
    ctx.stroke();
  }

  rectOf(d) {
    const x = Math.max(0, Math.floor(Math.min(d.x0, d.x)));
    const y = Math.max(0, Math.floor(Math.min(d.y0, d.y)));
    const x1 = Math.min(this.width, Math.ceil(Math.max(d.x0, d.x)));
    const y1 = Math.min(this.height, Math.ceil(Math.max(d.y0, d.y)));
    if (x1 - x < 1 || y1 - y < 1) return null;
    return { x, y, w: x1 - x, h: y1 - y, lifted: null, base: null };
  }

  // Puts the selection's pixels at (x, y) over the image with the hole filled.
  placeSelection(x, y, final) {
    const s = this.sel;
    if (!s.lifted) {
      this.pushUndo();
      s.lifted = this.ctx.getImageData(s.x, s.y, s.w, s.h);
      const fill = this.ringColour(s);
      this.ctx.fillStyle = `rgb(${fill[0]},${fill[1]},${fill[2]})`;
      this.ctx.fillRect(s.x, s.y, s.w, s.h);
      s.base = this.snapshot();
    }
    s.x = Math.max(-s.w + 1, Math.min(this.width - 1, x));
    s.y = Math.max(-s.h + 1, Math.min(this.height - 1, y));
    this.ctx.putImageData(s.base, 0, 0);
    this.ctx.putImageData(s.lifted, s.x, s.y);
    this.changed(final);
  }

  // Mean RGB of the pixels just outside the rectangle (inside the image).
  ringColour(r) {
    const img = this.snapshot().data;
    const sum = [0, 0, 0];
    let count = 0;
    const add = (px, py) => {
      if (px < 0 || py < 0 || px >= this.width || py >= this.height) return;
      const i = (py * this.width + px) * 4;
      for (let c = 0; c < 3; c++) sum[c] += img[i + c];
      count++;
    };
    for (let px = r.x - 1; px <= r.x + r.w; px++) {
      add(px, r.y - 1);
      add(px, r.y + r.h);
    }
    for (let py = r.y; py < r.y + r.h; py++) {
      add(r.x - 1, py);
      add(r.x + r.w, py);
    }
    return count ? sum.map((v) => Math.round(v / count)) : [255, 255, 255];
  }

  changed(final) {
    this.edited = true;
    this.onEdit(final);
  }
}

function inside(r, x, y) {
  return x >= r.x && y >= r.y && x < r.x + r.w && y < r.y + r.h;
}
