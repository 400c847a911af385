// grid.js — "All methods": every method's map for the same image and class, with the time each
// took; a click opens that method in the main view. Owns the grid's run: its requests in flight.
// Another model empties the cells until the grid runs again.
//
// The grid is background work: a view's own request (sent with priority, app.call) passes the
// grid's queued explains in the worker, but not the one running, which on a DeiT-tiny-sized model
// can be a long method of ~15 s (attattr). So its long methods are asked through background.js at
// the lowest rank: withdrawn for any request sent with priority and asked again behind it
// (going on from what the engine kept of the withdrawn pass: ExplainState).
import { RANK } from '../background.js';
import { on } from '../events.js';
import { drawOverlay, minMax } from '../render.js';
import { $, fitCanvas } from './util.js';

export function createGridView(app) {
  let run = 0; // counts runs; a result of an older run is dropped
  let pendingCalls = []; // the explain requests in flight, each with cancel() (raises a long one's flag)

  function cancelPending() {
    for (const p of pendingCalls) p.cancel();
    pendingCalls = [];
  }
  // A new image, class or model: app.cancelExplains has cancelled the run's explains (flags raised).
  on('explains-cancelled', () => {
    run++;
  });
  // Stop: the cells not done say so (their requests were cancelled; the run's late progress
  // reports are dropped).
  on('stopped', () => {
    run++;
    for (const cell of $('grid').children) {
      if (cell.dataset.state !== 'pending' && cell.dataset.state !== 'running') continue;
      cell.dataset.state = 'stopped';
      cell.querySelector('.cell-ms').textContent = 'stopped';
    }
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
    cancelPending();
    $('grid').dataset.runs = String(Number($('grid').dataset.runs ?? 0) + 1); // for the tests
    const cells = [...$('grid').children];
    cells.forEach((cell, i) => {
      cell.dataset.state = 'pending'; // then 'running' (a long method's progress), 'done', 'error' or 'stopped'
      delete cell.dataset.restarts; // how often a view's request stopped the cell's long method
      cell.title = describe(app.methods[i]); // not a previous run's error
      cell.querySelector('.cell-ms').textContent = '…';
    });
    const img = app.views.editor.imageSource();
    const display = app.views.explanation.display;
    await Promise.all(app.methods.map(async (m, i) => {
      const cell = cells[i];
      try {
        const ex = await explainCell(m, cell, thisRun);
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

  // One method's explanation for the run: a long one through app.background (withdrawn for a
  // view's request and asked again), counted in the cell's data-restarts.
  function explainCell(m, cell, thisRun) {
    const input = { image: app.imageId, method: m.name, options: { target: app.target } };
    let p;
    if (m.longRunning) {
      const ms = cell.querySelector('.cell-ms');
      p = app.background.ask('explain', input, {
        rank: RANK.grid,
        onProgress: (f) => {
          if (thisRun !== run) return;
          cell.dataset.state = 'running';
          ms.textContent = `${Math.round(100 * f)} %…`;
        },
        onWithdrawn: () => {
          if (thisRun !== run) return;
          cell.dataset.state = 'pending';
          cell.dataset.restarts = String(Number(cell.dataset.restarts ?? 0) + 1);
          ms.textContent = '…';
        },
      });
    } else {
      p = app.call('explain', input);
      p.cancel = () => app.client.cancel(p.id);
    }
    pendingCalls.push(p);
    const forget = () => {
      pendingCalls = pendingCalls.filter((q) => q !== p);
    };
    p.then(forget, forget);
    return p;
  }

  return { build, run: runAll };
}
