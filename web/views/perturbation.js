// perturbation.js — "Faithfulness, live": the perturbation test for the current image and map,
// most and least relevant pixels first, each perturbed image shown and its class score plotted,
// with the AUCs. The engine computes all of it (as `vitlens eval` does); this view draws it.
// Owns the perturbation request in flight; another model clears what was drawn for the previous one.
// The request is background work (background.js): it passes the grid's queued explains and
// withdraws the grid's long methods, but is itself withdrawn for a view's own request (its 18
// forward passes took 1.3 s on a DeiT-tiny-sized model) and asked again behind it.
import { RANK } from '../background.js';
import { on } from '../events.js';
import { ORDER_NAMES, perturbationChart } from '../teach.js';
import { $ } from './util.js';

export function createPerturbationView(app) {
  let pending = null; // the perturbation request in flight

  on('explained', ({ explanation }) => run(explanation));
  on('stopped', () => {
    const note = $('faith-note');
    if (!pending || note.dataset.state === 'done') return;
    note.dataset.state = 'stopped';
    note.textContent = '— stopped';
  });
  on('model-changed', ({ reloaded }) => {
    if (!reloaded) clear('');
  });

  function clear(note) {
    $('faith-note').textContent = note;
    $('faith-plot').replaceChildren();
    $('faith-strips').replaceChildren();
  }

  async function run(ex) {
    const { imageW: w, imageH: h } = app.inputInfo;
    if (ex.width !== w || ex.height !== h) {
      clear(`(the map is ${ex.width}×${ex.height}, not the input’s ${w}×${h}: not computed)`);
      return;
    }
    pending?.cancel();
    // The test's state for the tests: #faith-note's data-state 'running' with data-percent, then
    // 'done'; data-restarts counts its withdrawals for a view's request.
    const note = $('faith-note');
    note.dataset.state = 'pending';
    delete note.dataset.restarts;
    const p = app.background.ask('perturb', { image: app.imageId, map: ex.pixelMap.slice(), target: ex.target }, {
      rank: RANK.perturbation,
      priority: true,
      onProgress: (f) => {
        if (pending !== p) return;
        note.dataset.state = 'running';
        note.dataset.percent = String(Math.round(100 * f));
        note.textContent = `— ${ex.method}: the perturbation test, ${note.dataset.percent} %…`;
      },
      onWithdrawn: () => {
        if (pending === p) note.dataset.restarts = String(Number(note.dataset.restarts ?? 0) + 1);
      },
    });
    pending = p;
    try {
      const out = await p;
      if (app.explanation !== ex) return;
      render(ex, out);
    } catch (e) {
      if (e.code !== 'cancelled') app.showError('The perturbation test failed', e);
    } finally {
      if (pending === p) pending = null;
    }
  }

  function render(ex, out) {
    const [pos, neg] = out.steps;
    const names = ORDER_NAMES;
    perturbationChart($('faith-plot'), [
      { name: names.positive, x: pos.fraction, y: pos.prob, colour: '#cf222e' },
      { name: names.negative, x: neg.fraction, y: neg.prob, colour: '#1f6feb', dash: '5 3' },
    ], app.className(ex.target));
    const aucP = pos.aucProb;
    const aucN = neg.aucProb;
    $('faith-note').textContent = `— ${ex.method}, “${app.className(ex.target)}”: AUC ${aucP.toFixed(1)} most relevant first (lower is better), ` +
      `${aucN.toFixed(1)} least relevant first (higher is better); ${out.ms.toFixed(0)} ms for 20 forward passes`;
    const strips = $('faith-strips');
    strips.replaceChildren();
    const { imageW: w, imageH: h } = app.inputInfo;
    for (const curve of out.steps) {
      const row = document.createElement('div');
      row.className = 'faith-strip';
      row.dataset.order = curve.order;
      const label = document.createElement('span');
      label.className = 'muted strip-label';
      label.textContent = names[curve.order];
      row.append(label);
      curve.views.forEach((view, k) => {
        const fig = document.createElement('figure');
        const c = document.createElement('canvas');
        c.width = w;
        c.height = h;
        c.getContext('2d').putImageData(new ImageData(view, w, h), 0, 0);
        const cap = document.createElement('figcaption');
        cap.textContent = `${Math.round(100 * curve.fraction[k])} % · ${(100 * curve.prob[k]).toFixed(0)} %`;
        fig.append(c, cap);
        row.append(fig);
      });
      strips.append(row);
    }
    $('faith-note').dataset.state = 'done';
    const root = document.documentElement;
    root.dataset.perturbations = String(Number(root.dataset.perturbations ?? 0) + 1);
  }
}
