// teaching.js — "Inside the model": block by block, the query token's row of A, ∇A, R_A and the
// rollout factor and product; the chosen block's per-head views; for AttAttr the head-importance
// grid and the attribution tree; for LRP methods Σ relevance layer by layer. Owns the block
// stepped to and the per-head data fetched for the current image; another model starts again at
// block 0 with no per-head data (its blocks, heads and tokens are its own: ../tokens.js). The
// maps are over the grid of the input (app.inputInfo: the image's aspect, when chosen).
import { on } from '../events.js';
import { saveBlob } from '../files.js';
import { drawGrid, formatNumber } from '../render.js';
import { drawTree, lineChart } from '../teach.js';
import { patchRow, tokenLayout, tokenName, tokenPatch } from '../tokens.js';
import { HEAD_PRODUCT_TEXT } from './method_text.js';
import { $, fitCanvas } from './util.js';

export function createTeachingView(app) {
  let teachBlock = 0;
  // { key, version, target, attn, grads, gradxa }: per block, per head A, ∂y_t/∂A and core's
  // (∂y_t/∂A ⊙ A)⁺ of the image classified as app.imageVersion (grads and gradxa for class
  // `target`, or null)
  let teachData = null;
  let teachP = []; // the pending requests for them
  const cancelTeach = () => {
    for (const p of teachP) app.client.cancel(p.id);
    teachP = [];
  };

  on('model-changed', ({ reloaded }) => {
    if (!reloaded) {
      teachData = null;
      cancelTeach();
    }
    setBlock(reloaded ? teachBlock : 0);
  });
  on('explained', ({ explanation }) => {
    render();
    fetchHeads(explanation);
  });
  on('query-changed', () => render({ extras: false }));
  $('block').addEventListener('input', () => setBlock(Number($('block').value)));
  $('block-prev').addEventListener('click', () => setBlock(teachBlock - 1));
  $('block-next').addEventListener('click', () => setBlock(teachBlock + 1));

  // Canvases of the figures a box held before it was redrawn, handed to its new figures: an image
  // switch redraws some 75 of them (a query click as many), and a canvas made anew each time costs
  // a new element, context and backing store (docs/performance.md, the image switch's trace).
  let spare = []; // canvases no longer in the page
  function spareCanvases(box) {
    spare = [...box.querySelectorAll('canvas'), ...spare].slice(0, 256);
  }
  function figureCanvas() {
    const c = spare.pop();
    if (!c) return document.createElement('canvas');
    for (const k of Object.keys(c.dataset)) delete c.dataset[k];
    return c;
  }

  // The rows over all blocks, then the chosen block's per-head views; `extras` also redraws what does
  // not depend on the query patch (the conservation chart, AttAttr's importance grid and tree).
  function render({ extras = true } = {}) {
    const ex = app.explanation;
    const box = $('teach');
    spareCanvases(box);
    box.replaceChildren();
    const blocks = ex?.intermediates?.blocks ?? [];
    const layout = app.inputInfo ? tokenLayout(app.inputInfo) : null;
    $('teach-query').textContent = layout ? `query: ${tokenName(layout, app.query)}` : '';
    const rows = [
      ['attn', 'A_b', 'attention, softmax(q·kᵀ/√d_h), mean over heads'],
      ['grad', '∇A_b', '∂y_t/∂A_b, gradient of the class logit, mean over heads'],
      ['relevance', 'R_A_b', 'LRP relevance at the attention probabilities, mean over heads'],
      ['step', 'this block’s factor', app.methodInfo(ex?.method)?.stepFormula || 'the factor of the product'],
      ['accumulated', 'accumulated', 'C_b = Â_b · C_(b−1): the product so far (row of the query)'],
    ];
    for (const [key, title, formula] of rows) {
      if (!blocks.length || !blocks.some((b) => b[key])) continue;
      const row = teachRow(key, title, formula);
      blocks.forEach((b, i) => {
        if (!b[key]) return;
        const fig = document.createElement('figure');
        if (i > teachBlock) fig.className = 'later';
        if (i === teachBlock) fig.classList.add('current');
        const c = figureCanvas();
        fitCanvas(c, layout.gridW, layout.gridH, 72);
        drawGrid(c, patchRow(b[key], layout, app.query), layout.gridW, layout.gridH, { cmap: 'viridis', outline: tokenPatch(layout, app.query) });
        const cap = document.createElement('figcaption');
        cap.textContent = `block ${i}`;
        fig.append(c, cap);
        row.append(fig);
      });
      box.append(row);
    }
    if (ex && !blocks.length) box.textContent = 'This method reports no per-block intermediates (head means); the per-head views above are the model’s own.';
    renderBlock();
    if (!extras) return;
    renderConservation(ex);
    renderExtra(ex);
  }

  // A small figure: a query row over the patch grid, a caption, and a data-kind for the tests.
  function gridFigure(row, layout, caption, kind) {
    const fig = document.createElement('figure');
    const c = figureCanvas();
    fitCanvas(c, layout.gridW, layout.gridH, 72);
    drawGrid(c, row, layout.gridW, layout.gridH, { cmap: 'viridis', outline: tokenPatch(layout, app.query) });
    c.dataset.kind = kind;
    const cap = document.createElement('figcaption');
    cap.textContent = caption;
    fig.append(c, cap);
    return fig;
  }

  function teachRow(kind, title, formula) {
    const row = document.createElement('div');
    row.className = 'teach-row';
    row.dataset.kind = kind;
    const head = document.createElement('div');
    head.className = 'teach-head';
    head.innerHTML = '<strong></strong><br><span class="formula"></span>';
    head.querySelector('strong').textContent = title;
    head.querySelector('span').textContent = formula;
    row.append(head);
    return row;
  }

  // The chosen block's per-head views: A (always), ∇A (methods that use it), AttAttr's Attr per
  // head and the norm-based stages (when the method is one of those).
  function renderBlock() {
    const box = $('teach-block');
    spareCanvases(box);
    box.replaceChildren();
    const ex = app.explanation;
    if (!ex || !app.info) return;
    const td = headsOf(ex);
    const b = Math.min(teachBlock, app.info.depth - 1);
    const layout = tokenLayout(app.inputInfo);
    const q = app.query;
    const qrow = (mat) => patchRow(mat, layout, q);
    if (td?.attn?.[b]) {
      const row = teachRow('head-attn', `block ${b}: attention per head`, 'A_b,h = softmax(q_h·k_hᵀ/√d_h); the query’s row, without the CLS key');
      td.attn[b].forEach((a, h) => row.append(gridFigure(qrow(a), layout, `head ${h}`, 'head-attn')));
      box.append(row);
    }
    if (td?.grads?.[b]) {
      const row = teachRow('head-grad', `block ${b}: ∇A per head`, `∇A_b,h = ∂y_t/∂A_b,h for “${app.className(td.target)}”`);
      td.grads[b].forEach((g, h) => row.append(gridFigure(qrow(g), layout, `head ${h}`, 'head-grad')));
      box.append(row);
      if (td.gradxa?.[b]?.length) {
        const row2 = teachRow('head-gradxa', `block ${b}: (∇A ⊙ A)⁺ per head`, HEAD_PRODUCT_TEXT.gradxa);
        td.gradxa[b].forEach((v, h) => row2.append(gridFigure(qrow(v), layout, `head ${h}`, 'head-gradxa')));
        box.append(row2);
      }
    }
    const rHeads = ex.intermediates?.blocks?.[b]?.relevanceHeads;
    if (rHeads?.length) {
      const row = teachRow('head-relevance', `block ${b}: R_A per head`, 'R_A_b,h = the LRP relevance reaching head h’s attention (Chefer et al. 2021); the query’s row');
      rHeads.forEach((r, h) => row.append(gridFigure(qrow(r), layout, `head ${h}`, 'head-relevance')));
      box.append(row);
      // The method weighted R_A by ∇A when it reports ∇A as well; its per-head terms of Ā_b are
      // then core's (∇A ⊙ R_A)⁺ (productHeads, filled for the blocks the method used).
      const block = ex.intermediates.blocks[b];
      if (block.grad && block.productHeads?.length) {
        const row2 = teachRow('head-gradxr', `block ${b}: (∇A ⊙ R_A)⁺ per head`, HEAD_PRODUCT_TEXT.gradxr);
        block.productHeads.forEach((v, h) => row2.append(gridFigure(qrow(v), layout, `head ${h}`, 'head-gradxr')));
        box.append(row2);
      }
    }
    if (ex.attattr?.[b]) {
      const row = teachRow('head-attattr', `block ${b}: AttAttr per head`, 'Attr_b,h = A_b,h ⊙ (1/m) Σ_k ∂F(α_k·A_b)/∂A_b,h, α_k = k/m');
      ex.attattr[b].forEach((a, h) => row.append(gridFigure(qrow(a), layout, `head ${h}`, 'head-attattr')));
      box.append(row);
    }
    if (ex.norm?.[b]) {
      const row = teachRow('norm-stages', `block ${b}: norm-based stages`, 'N[i, j] = ‖z_(i←j)‖₂ at each stage; r = mixing ratio of the query token');
      for (const [st, map] of Object.entries(ex.norm[b].maps ?? {})) {
        const fig = gridFigure(qrow(map), layout, '', 'norm-stage');
        const mix = ex.norm[b].mixing?.[st];
        fig.querySelector('figcaption').innerHTML = '<strong></strong><br><span class="formula"></span>';
        fig.querySelector('strong').textContent = `${st}${mix ? ` (r = ${formatNumber(mix[q])})` : ''}`;
        const stage = app.methodInfo(ex.method)?.optionSpecs.find((s) => s.key === 'stage');
        fig.querySelector('.formula').textContent = stage?.choiceHelp[stage.choices.indexOf(st)] ?? '';
        fig.className = 'norm-fig';
        row.append(fig);
      }
      row.append(stagesButton(ex));
      box.append(row);
    }
    if (!td) {
      const p = document.createElement('p');
      p.className = 'muted';
      p.textContent = 'Loading the per-head views…';
      box.append(p);
    }
  }

  // "Download stages (.npz)": every block's maps of every stage, the mixing ratios and the atb maps
  // per head, as the engine writes them for `vitlens explain --save-stages` (the worker's
  // normStages: core's encoder over this explanation's maps and the image's per-head maps).
  function stagesButton(ex) {
    const button = document.createElement('button');
    button.type = 'button';
    button.id = 'norm-stages-download';
    button.textContent = 'Download stages (.npz)';
    button.title = 'atb, atb_res, atb_res_ln, atb_res_ln_ff, layer (L, n, n); mixing_ratio (L, 5, n); atb_heads (L, H, n, n)';
    const image = app.imageId;
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        const bytes = await app.call('normStages', { image, norm: ex.norm }, [], { priority: true });
        const stem = (app.image?.name ?? 'image').replace(/\.[^.]*$/, '').replace(/[^\w.-]+/g, '_');
        saveBlob(new Blob([bytes], { type: 'application/octet-stream' }), `${stem}_norm-based_stages.npz`);
      } catch (e) {
        button.title = `Could not export: ${e.message}`;
      } finally {
        button.disabled = false;
      }
    });
    return button;
  }

  // The per-head data that belongs with explanation `ex`: of the image as last classified and, for
  // ∇A, of the class explained. Data of another image, class or model is not drawn.
  function headsOf(ex) {
    const td = teachData;
    if (!td || td.version !== app.imageVersion) return null;
    return td.grads && td.target !== ex.target ? { ...td, grads: null, gradxa: null } : td;
  }

  // Asks the worker for each head's A (and ∂y_t/∂A when the method uses it: when its per-block
  // intermediates include ∇A) of the current image; with ∇A also for grad-rollout's per-head
  // terms (∇A ⊙ A)⁺ (its intermediates' productHeads: core's product, on the passes teach ran).
  async function fetchHeads(ex) {
    const grads = (ex.intermediates?.blocks ?? []).some((blk) => blk.grad);
    const have = headsOf(ex);
    if (have && (have.grads || !grads)) {
      renderBlock();
      return;
    }
    cancelTeach();
    const version = app.imageVersion;
    const key = `${version}:${grads ? ex.target : '-'}`;
    const p = app.call('teach', { image: app.imageId, target: ex.target, grads }, [], { priority: true });
    const gr = grads
      ? app.call('explain', { image: app.imageId, method: 'grad-rollout', options: { target: ex.target, intermediates: true } }, [], { priority: true })
      : null;
    gr?.catch(() => {}); // awaited below only when teach succeeds; its failure is then reported
    teachP = gr ? [p, gr] : [p];
    try {
      const out = await p;
      const gradxa = gr ? (await gr).intermediates.blocks.map((blk) => blk.productHeads) : null;
      if (teachP[0] !== p) return; // dropped (another model) while the worker answered
      teachData = { key, version, target: ex.target, ...out, gradxa };
      renderBlock();
      document.documentElement.dataset.teachKey = key;
    } catch (e) {
      if (e.code !== 'cancelled') app.showError('The per-head views failed', e);
    } finally {
      if (teachP[0] === p) teachP = [];
    }
  }

  // AttAttr's head importance (max over i, j per block and head, this image) and the attribution
  // tree over the image, both computed by the engine from the explanation's attattr.
  async function renderExtra(ex) {
    const box = $('teach-extra');
    box.replaceChildren();
    if (!ex?.attattr?.length) return;
    let out;
    try {
      ex.attattrViews ??= app.call('attattr', { image: app.imageId, attattr: ex.attattr, target: ex.target, threshold: 0.4 }, [], { priority: true });
      out = await ex.attattrViews;
    } catch (e) {
      ex.attattrViews = null;
      app.showError('The attribution tree failed', e);
      return;
    }
    if (app.explanation !== ex) return;
    box.replaceChildren();
    const imp = out.heads.attattr;
    const fig = document.createElement('figure');
    fig.className = 'importance';
    const table = document.createElement('table');
    table.className = 'importance-grid';
    table.setAttribute('aria-label', 'head importance: max over i, j of Attr per block and head');
    const all = imp.flat();
    const lo = Math.min(...all);
    const hi = Math.max(...all);
    const head = document.createElement('tr');
    head.innerHTML = '<th></th>' + imp[0].map((_, h) => `<th>head ${h}</th>`).join('');
    table.append(head);
    imp.forEach((heads, b) => {
      const tr = document.createElement('tr');
      tr.innerHTML = `<th>block ${b}</th>`;
      for (const v of heads) {
        const td = document.createElement('td');
        const t = hi > lo ? (v - lo) / (hi - lo) : 0;
        td.style.background = `rgba(31, 111, 235, ${(0.1 + 0.9 * t).toFixed(3)})`;
        td.style.color = t > 0.55 ? '#fff' : '';
        td.textContent = formatNumber(v);
        tr.append(td);
      }
      table.append(tr);
    });
    const cap = document.createElement('figcaption');
    cap.textContent = 'Head importance for this image: I_b,h = max_i,j Attr_b,h[i, j] (Hao et al. sum it over a data set).';
    fig.append(table, cap);

    const tree = out.tree;
    const tfig = document.createElement('figure');
    tfig.className = 'tree';
    const c = document.createElement('canvas');
    c.id = 'attr-tree';
    c.dataset.edges = String(tree.edges.length);
    c.dataset.root = String(tree.root);
    const img = app.views.editor.imageSource();
    fitCanvas(c, img.width, img.height, 256);
    drawTree(c, img, tree, ex.attattr.length);
    const tcap = document.createElement('figcaption');
    tcap.innerHTML = '<strong>Attribution tree</strong> (circle = root; arrows point from a patch to the patch it informs, lighter = higher block)<br>' +
      '<span class="formula">M_l = Σ_h Attr_l,h / max over rows i ≥ 1; keep M_l[i, j] &gt; 0.4; root = the patch j with the largest Σ_i Σ_h Attr_L,h[i, j]; ' +
      'from block L−1 down, i → j when i is in the tree and j is not (one parent each)</span>';
    tfig.append(c, tcap);
    box.append(fig, tfig);
  }

  function renderConservation(ex) {
    const box = $('conservation');
    box.replaceChildren();
    if (!ex || !ex.conservation?.length) return;
    const s = ex.relevanceSums;
    const chartBox = document.createElement('figure');
    chartBox.className = 'cons-chart';
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.id = 'conservation-chart';
    svg.setAttribute('role', 'img');
    svg.setAttribute('aria-label', 'sum of relevance per layer');
    const layers = ex.conservation.map((l) => l.layer);
    // Only the block boundaries and the ends are named on the axis; every point has its layer as a tooltip.
    const named = layers.map((l) => (/^(head|patch_embed|blocks\.\d+\.add2)$/.test(l) ? l : ''));
    lineChart(svg, [{ name: 'Σ R in', x: layers.map((_, i) => i), y: ex.conservation.map((l) => l.relevanceIn), colour: '#1f6feb' }], {
      width: Math.min(1100, Math.max(440, 8 * layers.length + 80)), height: 230, yLabel: 'Σ relevance (propagation order →)', xLabels: named, refLine: s?.seed,
    });
    svg.querySelectorAll('circle').forEach((c, i) => {
      const title = document.createElementNS('http://www.w3.org/2000/svg', 'title');
      title.textContent = `${layers[i]}: Σ R in ${formatNumber(ex.conservation[i].relevanceIn)}, out ${formatNumber(ex.conservation[i].relevanceOut)}`;
      c.append(title);
    });
    const cap = document.createElement('figcaption');
    cap.innerHTML = '<span class="formula">Σ_i R_i^(in) = Σ_j R_j^(out) at every layer (dashed: the seed)</span>';
    chartBox.append(svg, cap);
    box.append(chartBox);
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    summary.textContent = 'Conservation: Σ relevance layer by layer (LRP) — ' +
      (s ? `seed ${formatNumber(s.seed)}, at the tokens E0 ${formatNumber(s.tokens)}, at the image ${formatNumber(s.image)}` : '');
    const table = document.createElement('table');
    table.innerHTML = '<thead><tr><th>layer</th><th>Σ R out</th><th>Σ R in</th><th></th></tr></thead>';
    const body = document.createElement('tbody');
    const scale = Math.max(1e-12, ...ex.conservation.map((l) => Math.abs(l.relevanceIn)));
    for (const l of ex.conservation) {
      const tr = document.createElement('tr');
      const bar = `<span class="cons-bar" style="width:${(100 * Math.abs(l.relevanceIn) / scale).toFixed(1)}%"></span>`;
      tr.innerHTML = `<td></td><td>${formatNumber(l.relevanceOut)}</td><td>${formatNumber(l.relevanceIn)}</td><td class="cons-cell">${bar}</td>`;
      tr.firstChild.textContent = l.layer;
      body.append(tr);
    }
    table.append(body);
    details.append(summary, table);
    box.append(details);
  }

  function setBlock(b) {
    const depth = app.info?.depth ?? 1;
    teachBlock = Math.min(depth - 1, Math.max(0, b));
    $('block').max = String(depth - 1);
    $('block').value = String(teachBlock);
    $('block-out').textContent = String(teachBlock);
    render();
  }

  return { setBlock };
}
