// grid.js — "All methods": every method's map for the same image and class, with the time each
// took; a click opens that method in the main view. Owns the grid's run: its requests in flight
// and their shared cancel flag. Another model empties the cells until the grid runs again.
import { on } from '../events.js';
import { drawOverlay, minMax } from '../render.js';
import { $, cancelFlag, fitCanvas, raiseFlag } from './util.js';

export function createGridView(app) {
  let run = 0; // counts runs; a result of an older run is dropped
  let pendingCalls = []; // the explain requests in flight
  let flag = null; // the run's cancel flag for its long methods (views/util.js)

  on('explains-cancelled', () => {
    raiseFlag(flag);
    flag = null;
    run++;
  });
  on('model-changed', ({ reloaded }) => {
    if (reloaded) return;
    for (const cell of $('grid').children) {
      const c = cell.querySelector('canvas');
      c.getContext('2d').clearRect(0, 0, c.width, c.height);
      cell.querySelector('.cell-ms').textContent = '';
      delete cell.dataset.state;
      delete cell.dataset.ms;
    }
  });

  function describe(m) {
    return `${m.description} — ${m.paper}`;
  }

  function build() {
    const grid = $('grid');
    grid.replaceChildren();
    for (const m of app.methods) {
      const cell = document.createElement('button');
      cell.type = 'button';
      cell.className = 'cell';
      cell.dataset.method = m.name;
      cell.title = describe(m);
      const c = document.createElement('canvas');
      c.width = 128;
      c.height = 128;
      const name = document.createElement('span');
      name.className = 'cell-name';
      name.textContent = m.name;
      const ms = document.createElement('span');
      ms.className = 'cell-ms muted';
      cell.append(c, name, ms);
      cell.addEventListener('click', () => app.views.options.choose(m.name));
      grid.append(cell);
    }
  }

  async function runAll() {
    const thisRun = ++run;
    for (const p of pendingCalls) app.client.cancel(p.id);
    raiseFlag(flag);
    flag = cancelFlag();
    const runFlag = flag;
    pendingCalls = [];
    const cells = [...$('grid').children];
    cells.forEach((cell, i) => {
      cell.dataset.state = 'pending';
      cell.title = describe(app.methods[i]); // not a previous run's error
      cell.querySelector('.cell-ms').textContent = '…';
    });
    const img = app.views.editor.imageSource();
    const display = app.views.explanation.display;
    await Promise.all(app.methods.map(async (m, i) => {
      const cell = cells[i];
      try {
        const hooks = m.longRunning ? {
          onProgress: (f) => {
            if (thisRun === run) cell.querySelector('.cell-ms').textContent = `${Math.round(100 * f)} %…`;
          },
        } : undefined;
        const p = app.call('explain', { image: app.imageId, method: m.name, options: { target: app.target }, cancelFlag: m.longRunning ? runFlag : null }, [], hooks);
        pendingCalls.push(p);
        const ex = await p;
        if (thisRun !== run) return;
        const c = cell.querySelector('canvas');
        fitCanvas(c, img.width, img.height, 128);
        drawOverlay(c, img, ex.pixelMap, ex.width, ex.height, display);
        const { min, max } = minMax(ex.pixelMap);
        cell.querySelector('.cell-ms').textContent = `${ex.ms.toFixed(1)} ms${max > min ? '' : ' · constant map'}`;
        cell.dataset.ms = ex.ms.toFixed(3);
        cell.dataset.state = 'done';
      } catch (e) {
        if (thisRun !== run || e.code === 'cancelled') return;
        cell.dataset.state = 'error';
        cell.querySelector('.cell-ms').textContent = `error: ${e.code}`;
        cell.title = e.message;
      }
    }));
  }

  return { build, run: runAll };
}
