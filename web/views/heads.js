// heads.js — "Heads off by hand": an L × H grid of toggle buttons, one per head (a block button per
// row, "All on"), and for the model with the heads switched off: its prediction (the top classes,
// each with its change from the full model), the current method's map for the current class, and
// one image's pruning curves — the class's probability as heads go off one after another, ranked
// by this image's AttAttr importance, by its attention confidence, and in the order the user
// switched them off.
//
// Where each number comes from (the page computes none: it draws and formats):
//   the masked prediction        the worker's `mask` (Input.withHeadMask: core's ExplainState with
//                                the head mask), core's top_k and the probability of every class
//   the masked map               an `explain` of that masked input (every pass of the method is of
//                                the masked model: core/include/vitlens/methods/methods.h)
//   the three curves             the worker's `prune` (Input.pruningCurve: core's
//                                image_pruning_curve over core's image_head_ranking for AttAttr and
//                                confidence, over the clicked heads for the third)
//   the probability change       the masked probability minus the full model's (app.predictions):
//                                a difference of two of core's numbers, for display
// The main "Explanation" view stays the full model; this section says so.
//
// Keyboard: the grid is one tab stop; arrows move between heads (and to the block buttons at the
// row starts), Home / End to the row's ends, Space or Enter toggles. Changes are debounced, and a
// newer change cancels the requests of an older one.
import { RANK } from '../background.js';
import { on } from '../events.js';
import { drawOverlay, formatNumber } from '../render.js';
import { lineChart } from '../teach.js';
import { $, cancelFlag, fitCanvas } from './util.js';

const DEBOUNCE_MS = 150;
const TOP = 5; // classes listed
const SERIES = [
  { key: 'attattr', name: 'AttAttr importance', colour: '#d62728' },
  { key: 'attention-confidence', name: 'attention confidence', colour: '#1f77b4' },
  { key: 'clicks', name: 'your clicks', colour: '#2ca02c' },
];

export function createHeadsView(app) {
  let depth = 0;
  let heads = 0;
  let mask = []; // (L·H) 1 on, 0 off
  let clicks = []; // the heads now off, flat l·H + h, in the order they were switched off
  let focus = { b: 0, c: 1 }; // the grid's tab stop: row b, column c (0: the block button, c > 0: head c − 1)
  let version = 0; // counts changes; a result of an older version is dropped
  let timer = 0;
  let pending = []; // this view's requests in flight (cancelled by a newer change)
  let masked = null; // { id, image, key }: the worker's handle of the masked input, for app.imageId `image`
  let rankKey = ''; // `${image}:${target}` the ranking curves belong to
  let rankings = {}; // ranking → its curve (core's), for rankKey
  let rankingP = null;
  let rankPending = []; // the ranking requests in flight (cancelled only by another image, class or model)
  let rankProgress = ''; // what the note says about them while they run
  let shown = null; // what is drawn: { predictions, top, explanation, clicks: curve }

  const open = () => $('heads-open').open;

  on('model-changed', ({ reloaded }) => {
    if (reloaded) {
      masked = null; // the new worker has no handles
      schedule(0);
      return;
    }
    depth = app.info?.depth ?? 0;
    heads = app.info?.heads ?? 0;
    mask = new Array(depth * heads).fill(1);
    clicks = [];
    focus = { b: 0, c: 1 };
    masked = null;
    cancelRankings();
    shown = null;
    buildGrid();
    clearDrawing();
  });
  on('explained', () => schedule(0));
  // Another image, class or model: what this view computes for the last one (the ranked curves'
  // AttAttr: ~16 s on a DeiT-tiny-sized model) is stopped at once, not when the next explanation
  // arrives, which it would otherwise delay.
  on('explains-cancelled', () => {
    cancelPending();
    cancelRankings();
  });
  on('predicted', () => {
    masked = null; // a new image or an edit: its own masked input
    schedule(0);
  });
  $('heads-open').addEventListener('toggle', () => schedule(0));
  $('heads-all-on').addEventListener('click', () => {
    mask.fill(1);
    clicks = [];
    changed();
  });

  // ---- the grid ------------------------------------------------------------------------------
  function buildGrid() {
    const grid = $('heads-grid');
    grid.replaceChildren();
    grid.style.setProperty('--heads', String(heads));
    grid.setAttribute('aria-label', `${depth} blocks × ${heads} heads: pressed = on`);
    const corner = document.createElement('span');
    corner.className = 'heads-corner';
    corner.textContent = 'block \\ head';
    grid.append(corner);
    for (let h = 0; h < heads; h++) {
      const th = document.createElement('span');
      th.className = 'heads-colhead';
      th.textContent = String(h);
      grid.append(th);
    }
    for (let b = 0; b < depth; b++) {
      const row = document.createElement('button');
      row.type = 'button';
      row.className = 'heads-block';
      row.dataset.block = String(b);
      row.dataset.col = '0';
      row.textContent = `block ${b}`;
      row.addEventListener('click', () => toggleBlock(b));
      grid.append(row);
      for (let h = 0; h < heads; h++) {
        const btn = document.createElement('button');
        btn.type = 'button';
        btn.className = 'heads-head';
        btn.dataset.block = String(b);
        btn.dataset.head = String(h);
        btn.dataset.col = String(h + 1);
        btn.textContent = String(h);
        btn.addEventListener('click', () => toggleHead(b * heads + h));
        grid.append(btn);
      }
    }
    grid.onkeydown = keydown;
    grid.onfocusin = (e) => {
      const t = e.target.closest('button');
      if (t) focus = { b: Number(t.dataset.block), c: Number(t.dataset.col) };
      markGrid();
    };
    markGrid();
  }

  function buttonAt(b, c) {
    return $('heads-grid').querySelector(`button[data-block="${b}"][data-col="${c}"]`);
  }

  // aria-pressed (a head: on; a block: all on, mixed, or all off), the one tab stop, the counts.
  function markGrid() {
    for (const btn of $('heads-grid').querySelectorAll('button')) {
      const b = Number(btn.dataset.block);
      const c = Number(btn.dataset.col);
      if (c === 0) {
        const row = mask.slice(b * heads, (b + 1) * heads);
        const on = row.filter((v) => v === 1).length;
        btn.setAttribute('aria-pressed', on === heads ? 'true' : on === 0 ? 'false' : 'mixed');
        btn.setAttribute('aria-label', `block ${b}: ${on} of ${heads} heads on; switches the whole block ${on ? 'off' : 'on'}`);
      } else {
        const on = mask[b * heads + c - 1] === 1;
        btn.setAttribute('aria-pressed', String(on));
        btn.setAttribute('aria-label', `block ${b}, head ${c - 1}: ${on ? 'on' : 'off'}`);
      }
      btn.tabIndex = b === focus.b && c === focus.c ? 0 : -1;
    }
    const off = mask.filter((v) => v === 0).length;
    $('heads-count').textContent = `${off} of ${depth * heads} heads off` +
      (clicks.length ? `, in the order ${clicks.map(name).join(', ')}` : '');
    const section = $('heads-section');
    section.dataset.mask = mask.join('');
    section.dataset.clicks = JSON.stringify(clicks);
  }

  function keydown(e) {
    const move = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] }[e.key];
    let { b, c } = focus;
    if (move) {
      b = Math.min(depth - 1, Math.max(0, b + move[0]));
      c = Math.min(heads, Math.max(0, c + move[1]));
    } else if (e.key === 'Home') c = 0;
    else if (e.key === 'End') c = heads;
    else return;
    e.preventDefault();
    focus = { b, c };
    markGrid();
    buttonAt(b, c)?.focus();
  }

  const name = (f) => `${Math.floor(f / heads)}.${f % heads}`;

  function toggleHead(f) {
    if (mask[f] === 1) {
      mask[f] = 0;
      clicks.push(f);
    } else {
      mask[f] = 1;
      clicks = clicks.filter((x) => x !== f);
    }
    changed();
  }

  // A block with any head on goes all off (those heads join the clicks in head order); a block all
  // off goes all on.
  function toggleBlock(b) {
    const anyOn = mask.slice(b * heads, (b + 1) * heads).some((v) => v === 1);
    for (let h = 0; h < heads; h++) {
      const f = b * heads + h;
      if (anyOn && mask[f] === 1) {
        mask[f] = 0;
        clicks.push(f);
      } else if (!anyOn) mask[f] = 1;
    }
    if (!anyOn) clicks = clicks.filter((f) => Math.floor(f / heads) !== b);
    changed();
  }

  function changed() {
    markGrid();
    schedule(DEBOUNCE_MS);
  }

  // ---- requests ------------------------------------------------------------------------------
  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(refresh, ms);
  }

  function track(p) {
    pending.push(p);
    const drop = () => { pending = pending.filter((x) => x !== p); };
    p.then(drop, drop);
    return p;
  }

  function cancelPending() {
    for (const p of pending) app.client.cancel(p.id); // their flags raised too
    pending = [];
  }

  // Brings the section up to date with the mask, image, class and method: the masked input, its
  // prediction and map, the clicks' curve, and (once per image and class) the ranking curves.
  async function refresh() {
    if (!open() || !app.explanation || app.imageId === null || !depth) return;
    const my = ++version;
    cancelPending();
    const section = $('heads-section');
    section.dataset.ready = 'false';
    const image = app.imageId;
    const target = app.explanation.target;
    const method = app.methodInfo(app.explanation.method);
    const t0 = performance.now();
    const asked = mask.join(''); // the mask this refresh answers (a toggle may come before it does)
    if (rankKey !== `${image}:${target}`) cancelRankings(); // another image or class
    setNote(`Computing…${rankProgress ? ` (${rankProgress})` : ''}`);
    try {
      const off = clicks.slice();
      let predictions;
      let top;
      let explanation;
      if (!off.length) {
        // Every head on: the full model, whose prediction and map the page already has from core.
        predictions = app.predictions;
        top = [...app.predictions].sort((a, b) => b.logit - a.logit || a.class - b.class).slice(0, TOP);
        explanation = app.explanation;
      } else {
        const key = `${image}:${asked}`;
        if (masked?.key !== key) {
          const out = await track(app.call('mask', { image, mask: mask.slice(), top: TOP }, [], { priority: true }));
          if (my !== version) {
            app.call('release', { image: out.image }).catch(() => {});
            return;
          }
          if (masked) app.call('release', { image: masked.id }).catch(() => {});
          masked = { id: out.image, image, key, predictions: out.predictions, top: out.top };
        }
        predictions = masked.predictions;
        top = masked.top;
        const options = { ...app.views.options.request(method), target };
        if (!method.options.includes('target')) delete options.target;
        const explainFlag = method.longRunning ? cancelFlag() : null;
        const onProgress = method.longRunning ? (f) => setNote(`${method.name} of the masked model: ${Math.round(100 * f)} %`) : undefined;
        explanation = await track(app.call('explain', { image: masked.id, method: method.name, options, cancelFlag: explainFlag }, [],
          { priority: true, onProgress }));
      }
      const clicksCurve = await track(app.call('prune', { image, order: off, target }, [], { priority: true }));
      if (my !== version) return;
      const computeMs = performance.now() - t0;
      shown = { predictions, top, explanation, clicks: clicksCurve, off, target, computeMs, mask: asked };
      draw();
      // The ranked curves after the answer to the user's change, so that they never delay it.
      loadRankings(image, target);
    } catch (e) {
      if (my !== version) return;
      if (e.code === 'cancelled') {
        setNote('Cancelled by a newer image, class or change; the section follows it.');
        return;
      }
      setNote(`Failed: ${e.message}`);
      app.showError('Heads off by hand failed', e);
    }
  }

  // The attention-confidence and AttAttr curves of the image and class (once per pair; AttAttr's
  // matrices are the main view's when it shows attattr for this class, else the engine's, which
  // reuses or goes on with the image's attattr pass for the class (the grid's, or a withdrawn
  // one), with progress: seconds on a DeiT-tiny-sized model).
  function loadRankings(image, target) {
    const key = `${image}:${target}`;
    if (rankKey === key && (rankingP || Object.keys(rankings).length === 2)) return;
    cancelRankings();
    rankKey = key;
    const main = app.explanation;
    const attattr = main?.method === 'attattr' && main.target === target ? main.attattr : undefined;
    const one = (ranking, extra) => {
      const t0 = performance.now();
      const label = SERIES.find((s) => s.key === ranking).name;
      // Background work (background.js): a view's own request, this section's included, stops it
      // and it is asked again after that request.
      const p = app.background.ask('prune', { image, ranking, target, ...extra }, {
        rank: RANK.rankings,
        priority: true,
        onProgress: (f) => {
          if (rankKey !== key) return;
          rankProgress = `${label}: ${Math.round(100 * f)} %`;
          if (!pending.length) setNote(`The ranked curves: ${rankProgress}`);
        },
      });
      rankPending.push(p);
      return p.then((curve) => {
        if (rankKey !== key) return;
        curve.fetchMs = performance.now() - t0;
        rankings[ranking] = curve;
        rankProgress = '';
        if (shown) draw();
      });
    };
    rankingP = one('attention-confidence', {})
      .then(() => rankKey === key && one('attattr', attattr ? { attattr } : {}))
      .catch((e) => {
        if (rankKey !== key) return;
        rankKey = ''; // asked again with the next change
        if (e.code !== 'cancelled') app.showError('The pruning curves failed', e);
      })
      .finally(() => {
        if (rankKey === key || rankKey === '') {
          rankingP = null;
          rankPending = [];
        }
      });
  }

  function cancelRankings() {
    for (const p of rankPending) p.cancel();
    rankPending = [];
    rankingP = null;
    rankKey = '';
    rankings = {};
    rankProgress = '';
  }

  // ---- drawing -------------------------------------------------------------------------------
  function setNote(text) {
    $('heads-note').textContent = text;
  }

  function clearDrawing() {
    $('heads-pred').replaceChildren();
    $('heads-curve').replaceChildren();
    const c = $('heads-map');
    c.getContext('2d').clearRect(0, 0, c.width, c.height);
    $('heads-map-note').textContent = '';
    setNote('');
  }

  function draw() {
    if (!shown) return;
    const t0 = performance.now();
    const { predictions, top, explanation, clicks: clicksCurve, off, target } = shown;
    const full = new Map(app.predictions.map((p) => [p.class, p]));
    const multi = app.info.multiLabel;
    // The prediction: the masked model's best classes, and the class explained if not among them.
    const box = $('heads-pred');
    box.replaceChildren();
    const head = document.createElement('p');
    head.className = 'muted';
    head.textContent = `${off.length ? `With ${off.length} head${off.length === 1 ? '' : 's'} off` : 'Every head on'}: ` +
      `${multi ? 'sigmoid' : 'softmax'} probability, and its change from the full model.`;
    box.append(head);
    const list = document.createElement('ol');
    list.className = 'heads-top';
    const rows = [...top];
    if (!rows.some((p) => p.class === target)) rows.push(predictions.find((p) => p.class === target));
    for (const p of rows) {
      const li = document.createElement('li');
      const delta = p.prob - full.get(p.class).prob;
      li.dataset.class = String(p.class);
      li.dataset.prob = String(p.prob);
      li.dataset.delta = String(delta);
      if (p.class === target) li.className = 'heads-target';
      const bar = `<span class="score-bar"><span style="width:${(100 * p.prob).toFixed(1)}%"></span></span>`;
      li.innerHTML = `<span class="score-name"></span>${bar}<span class="score-value"></span><span class="heads-delta"></span>`;
      li.querySelector('.score-name').textContent = p.name + (p.class === target ? ' (explained)' : '');
      li.querySelector('.score-value').textContent = `${(100 * p.prob).toFixed(1)}%`;
      const d = li.querySelector('.heads-delta');
      d.textContent = `${delta >= 0 ? '+' : '−'}${Math.abs(100 * delta).toFixed(1)}`;
      d.classList.add(delta > 5e-4 ? 'up' : delta < -5e-4 ? 'down' : 'same');
      list.append(li);
    }
    box.append(list);

    // The map of the masked model (the main view above keeps the full model's).
    const c = $('heads-map');
    const img = app.views.editor.imageSource();
    if (img && explanation) {
      fitCanvas(c, img.width, img.height, 256);
      drawOverlay(c, img, explanation.pixelMap, explanation.width, explanation.height, app.views.explanation.display);
      c.dataset.method = explanation.method;
      c.dataset.target = String(explanation.target);
      c.dataset.tokenMap = JSON.stringify(Array.from(explanation.tokenMap)); // for the tests: core's raw map
    }
    $('heads-map-note').textContent = `${explanation?.method ?? ''} for “${app.className(target)}”, ` +
      (off.length ? `with ${off.map(name).join(', ')} off` : 'every head on') +
      '. The Explanation view above stays the full model.';

    // The curves: x = heads switched off, y = the class's probability.
    const series = [];
    for (const s of SERIES) {
      const curve = s.key === 'clicks' ? clicksCurve : rankings[s.key];
      if (!curve) continue;
      series.push({ name: s.name, x: curve.prob.map((_, k) => k), y: curve.prob, colour: s.colour, dash: s.key === 'clicks' ? '' : undefined });
    }
    const svg = $('heads-curve');
    lineChart(svg, series, {
      width: 640, height: 250, yMin: 0, yMax: 1, xTicks: [0, depth * heads], xLabel: 'heads switched off',
      yLabel: `p(“${app.className(target)}”)`,
    });
    for (const g of svg.querySelectorAll('g.series')) {
      const s = SERIES.find((x) => x.name === g.dataset.series);
      const curve = s.key === 'clicks' ? clicksCurve : rankings[s.key];
      g.dataset.key = s.key;
      g.querySelectorAll('circle').forEach((pt, k) => {
        const title = document.createElementNS('http://www.w3.org/2000/svg', 'title');
        const headOff = k ? `${curve.heads[k - 1]} off` : 'every head on';
        title.textContent = `${s.name}, ${k} off (${headOff}): p = ${formatNumber(curve.prob[k])}, top-1 ${app.className(curve.top[k])}`;
        pt.dataset.top = String(curve.top[k]);
        pt.append(title);
      });
    }
    const changes = SERIES.map((s) => {
      const curve = s.key === 'clicks' ? clicksCurve : rankings[s.key];
      if (!curve) return `${s.name}: computing…`;
      return `${s.name}: ${curve.firstChange >= 0 ? `the top-1 leaves “${app.className(curve.original)}” after ${curve.firstChange} head${curve.firstChange === 1 ? '' : 's'}` : 'the top-1 stays'}`;
    });
    $('heads-curve-note').textContent = `Heads switched off one after another: by this image’s AttAttr importance (max Attr, lowest first), ` +
      `by its attention confidence (mean_i max_j A, lowest first), and in the order you switched them off. ${changes.join('; ')}.`;

    const drawMs = performance.now() - t0;
    const section = $('heads-section');
    Object.assign(section.dataset, {
      ready: Object.keys(rankings).length === 2 ? 'true' : 'partial', target: String(target), drawMs: drawMs.toFixed(2),
      computeMs: shown.computeMs.toFixed(1), shownMask: shown.mask, method: explanation?.method ?? '',
    });
    const engineMs = [explanation?.ms, ...Object.values(rankings).map((r) => r.ms)].filter((x) => x !== undefined);
    setNote(`Drawn in ${drawMs.toFixed(1)} ms; the masked prediction, map and your curve took ${shown.computeMs.toFixed(0)} ms to arrive` +
      (engineMs.length ? ` (the map ${explanation?.ms?.toFixed(0) ?? '–'} ms in the engine; the ranked curves ` +
        `${Object.values(rankings).map((r) => `${r.ranking} ${r.ms.toFixed(0)} ms`).join(', ') || 'computing'})` : '') + '.');
  }

  return { refresh: () => schedule(0), state: () => ({ mask: mask.slice(), clicks: clicks.slice() }) };
}
