// editor.js — the scene editor's tools above the image (inspect, brush, move a selection; colour,
// size, Undo, Revert) and the pointer and keys on the main canvas. Owns the editor (../editor.js,
// which only edits pixels) and the live update after edits: every edit is drawn at once under
// the previous map and the image is classified and explained again — one request at a time,
// the latest edit winning; the grid waits for the end of a stroke or a drag.
import { SceneEditor } from '../editor.js';
import { on } from '../events.js';
import { $ } from './util.js';

const TOOL_HINTS = {
  inspect: 'Inspect: hover a patch (or focus the image and use the arrow keys) to choose the query patch of the views below.',
  brush: 'Brush: paint on the image with the colour and size chosen; the explanation follows as you paint.',
  move: 'Move: drag a rectangle to select pixels, then drag inside it (or use the arrow keys) to move them; the hole takes the colour around it.',
};

export function createEditorView(app) {
  const editor = new SceneEditor(onEdit);
  const live = { running: false, dirty: false, final: false };
  const main = () => app.views.explanation;
  app.editor = editor;
  editor.size = Number($('brush-size').value);

  on('image-changed', ({ image }) => {
    editor.load(image.bitmap, scaleOf(image));
    updateButtons();
  });
  // The brush size and the arrow keys' step are in pixels of the model's input (at the size the
  // image was classified at: the model's, or the image's aspect).
  on('model-changed', () => {
    if (app.image) editor.scale = scaleOf(app.image);
  });
  on('predicted', () => { editor.scale = scaleOf(app.image); });

  // Image pixels per pixel of the model's input.
  function scaleOf(image) {
    return image.bitmap.width / ((app.inputInfo ?? app.info)?.imageW ?? image.bitmap.width);
  }

  const canvas = $('main-canvas');
  canvas.addEventListener('pointermove', onMove);
  canvas.addEventListener('pointerdown', onDown);
  canvas.addEventListener('pointerup', onUp);
  canvas.addEventListener('pointercancel', onUp);
  canvas.addEventListener('pointerleave', () => {
    if (editor.tool === 'inspect') main().setQuery(0);
  });
  canvas.addEventListener('keydown', onKey);
  for (const r of document.querySelectorAll('input[name=tool]')) r.addEventListener('change', () => chooseTool(r.value));
  $('brush-colour').addEventListener('input', () => { editor.colour = $('brush-colour').value; });
  $('brush-size').addEventListener('input', () => {
    editor.size = Number($('brush-size').value);
    $('brush-size-out').textContent = $('brush-size').value;
  });
  $('edit-undo').addEventListener('click', () => editor.undo());
  $('edit-revert').addEventListener('click', () => editor.revert());

  // What is drawn as the image: the editor's copy (the original until it is edited).
  function imageSource() {
    return app.image ? editor.canvas : null;
  }

  function updateButtons() {
    $('edit-undo').disabled = !editor.undoStack.length;
    $('edit-revert').disabled = !editor.edited;
  }

  function onEdit(final) {
    main().draw();
    updateButtons();
    live.dirty = true;
    if (final) live.final = true;
    if (!live.running) liveLoop();
  }

  async function liveLoop() {
    live.running = true;
    document.documentElement.dataset.live = '1';
    try {
      while (live.dirty && app.image) {
        live.dirty = false;
        const final = live.final;
        live.final = false;
        app.image.blob = await editor.toBlob();
        await app.views.prediction.predict({ grid: final });
      }
    } finally {
      live.running = false;
      delete document.documentElement.dataset.live;
    }
  }

  function imagePoint(event) {
    const r = canvas.getBoundingClientRect();
    return [((event.clientX - r.left) / r.width) * editor.width, ((event.clientY - r.top) / r.height) * editor.height];
  }

  function onDown(event) {
    if (!app.image || editor.tool === 'inspect' || event.button !== 0) return;
    if (editor.pointerDown(...imagePoint(event))) {
      event.currentTarget.setPointerCapture(event.pointerId);
      event.preventDefault();
      main().draw();
    }
  }

  function onMove(event) {
    if (!app.image) return;
    if (editor.tool === 'inspect') {
      main().queryAt(event);
      return;
    }
    if (editor.pointerMove(...imagePoint(event)) && editor.drag?.kind === 'select') main().draw();
  }

  function onUp() {
    if (editor.pointerUp()) main().draw();
  }

  function chooseTool(tool) {
    editor.setTool(tool);
    $('tool-hint').textContent = TOOL_HINTS[tool];
    canvas.dataset.tool = tool;
    main().draw();
  }

  function onKey(event) {
    if (!app.explanation) return;
    const moves = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] };
    if (moves[event.key] && editor.tool === 'move' && editor.selectionRect()) {
      const step = Math.max(1, Math.round(editor.scale));
      editor.nudge(moves[event.key][0] * step, moves[event.key][1] * step);
      event.preventDefault();
      return;
    }
    if (event.key === 'Escape' && editor.sel) {
      editor.sel = null;
      main().draw();
    } else if (event.key === 'Escape') {
      main().setQuery(0);
    } else if (moves[event.key]) {
      main().moveQuery(...moves[event.key]);
    } else {
      return;
    }
    event.preventDefault();
  }

  // The selection being moved, outlined (dashed, black on white) over the main canvas.
  function outlineSelection(c) {
    const r = editor.selectionRect();
    if (!r) return;
    const sx = c.width / editor.width;
    const sy = c.height / editor.height;
    const ctx = c.getContext('2d');
    ctx.lineWidth = Math.max(1, window.devicePixelRatio || 1);
    ctx.setLineDash([4, 3]);
    ctx.strokeStyle = '#fff';
    ctx.strokeRect(r.x * sx, r.y * sy, r.w * sx, r.h * sy);
    ctx.lineDashOffset = 3.5;
    ctx.strokeStyle = '#000';
    ctx.strokeRect(r.x * sx, r.y * sy, r.w * sx, r.h * sy);
    ctx.setLineDash([]);
    ctx.lineDashOffset = 0;
  }

  return { imageSource, outlineSelection };
}
