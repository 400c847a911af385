// grid.js — "All methods": every method's map for the same image and class, with the time each
// took; a click opens that method in the main view. Owns the grid's run: its requests in flight
// and their cancel flags. Another model empties the cells until the grid runs again.
//
// The grid is background work: a view's own request (sent with priority, app.call) passes the
// grid's queued explains in the worker, but not the one running, which on a DeiT-tiny-sized model
// can be a long method of ~15 s (attattr): a view's data had waited 13.8 s for a 75 ms computation
// (docs/performance.md, 2026-12-04). So at a view's request the grid withdraws its long methods in
// flight (the queued ones dropped, the running one stopped through its cancel flag at the engine's
// next progress report) and asks for them again, behind the view's request. What a stopped
// method had done is lost.
import { on } from '../events.js';
import { drawOverlay, minMax } from '../render.js';
import { $, cancelFlag, fitCanvas, raiseFlag } from './util.js';

export function createGridView(app) {
  let run = 0; // counts runs; a result of an older run is dropped
  let pendingCalls = []; // the explain requests in flight
  let longInFlight = new Set(); // the run's long requests: { id, flag (views/util.js), started, preempted }

  function raiseAll() {
    for (const a of longInFlight) raiseFlag(a.flag);
    longInFlight = new Set();
  }
  on('explains-cancelled', () => {
    raiseAll();
    run++;
  });
  on('priority-request', () => {
    for (const a of longInFlight) {
      if (a.preempted) continue;
      a.preempted = true;
      // Not started as far as the page knows: probably queued, dropped by the worker (if it did
      // start, its result is discarded and the flag stops it). Started: only the flag, so that
      // where the worker cannot read it (a plain page's blob URLs) its result is still used.
      if (!a.started) app.client.cancel(a.id);
      raiseFlag(a.flag);
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
    for (const p of pendingCalls) app.client.cancel(p.id);
    raiseAll();
    pendingCalls = [];
    const cells = [...$('grid').children];
    cells.forEach((cell, i) => {
      cell.dataset.state = 'pending'; // then 'running' (a long method's progress), 'done' or 'error'
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

  // One method's explanation for the run; a long method withdrawn for a view's request is asked
  // for again (each request with a flag of its own: raising one stops only that request).
  async function explainCell(m, cell, thisRun) {
    const ms = cell.querySelector('.cell-ms');
    for (;;) {
      const attempt = m.longRunning ? { id: 0, flag: cancelFlag(), started: false, preempted: false } : null;
      const cancelAlls = app.client.cancelAlls; // a Stop (app.stop: cancelAll) is not asked again
      const hooks = attempt ? {
        onProgress: (f) => {
          attempt.started = true;
          if (thisRun !== run || attempt.preempted) return;
          cell.dataset.state = 'running';
          ms.textContent = `${Math.round(100 * f)} %…`;
        },
      } : undefined;
      const p = app.call('explain', { image: app.imageId, method: m.name, options: { target: app.target }, cancelFlag: attempt?.flag ?? null }, [], hooks);
      pendingCalls.push(p);
      if (attempt) {
        attempt.id = p.id;
        longInFlight.add(attempt);
      }
      try {
        return await p;
      } catch (e) {
        const withdrawn = attempt?.preempted && e.code === 'cancelled' && app.client.cancelAlls === cancelAlls;
        if (!(withdrawn && thisRun === run)) throw e;
        cell.dataset.state = 'pending';
        cell.dataset.restarts = String(Number(cell.dataset.restarts ?? 0) + 1);
        ms.textContent = '…';
      } finally {
        longInFlight.delete(attempt);
        pendingCalls = pendingCalls.filter((q) => q !== p);
      }
    }
  }

  return { build, run: runAll };
}
