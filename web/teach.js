// teach.js — drawings for the teaching, faithfulness and comparison views: the attribution tree of
// Self-Attention Attribution (Hao et al., AAAI 2021) over the image, and line charts as inline
// SVG (the perturbation charts of "Faithfulness, live" and "Compare two methods" share their
// axes and order names here). It computes nothing the engine computes: the tree, the head scores
// and the curves with their AUCs come from the engine (worker.js: attattr, perturb, faithfulness).

const SVG = 'http://www.w3.org/2000/svg';

// Draws the image and the engine's tree ({ root, grid: [rows, cols], nodes: [{ token, row, col }],
// edges: [{ from, to, block, score }] }: tokens placed where the engine's nodes say; `from` is the
// parent, already in the tree) as arrows from each child patch's centre to its parent's (the
// direction information flows), coloured by block (light = low block).
export function drawTree(canvas, image, tree, depth) {
  const ctx = canvas.getContext('2d');
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.imageSmoothingEnabled = false;
  if (image) ctx.drawImage(image, 0, 0, canvas.width, canvas.height);
  ctx.fillStyle = 'rgba(0, 0, 0, 0.35)';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  const [gridH, gridW] = tree.grid;
  const cw = canvas.width / gridW;
  const ch = canvas.height / gridH;
  const at = new Map(tree.nodes.map((node) => [node.token, node]));
  const centre = (t) => [(at.get(t).col + 0.5) * cw, (at.get(t).row + 0.5) * ch];
  const unit = Math.max(1, canvas.width / 300);
  for (const e of tree.edges) {
    const [x0, y0] = centre(e.to);
    const [x1, y1] = centre(e.from);
    const shade = Math.round(120 + (135 * (e.block + 1)) / Math.max(1, depth - 1));
    ctx.strokeStyle = ctx.fillStyle = `rgb(255, ${Math.min(255, shade)}, 60)`;
    ctx.lineWidth = unit * (1 + 2 * Math.min(1, e.score));
    arrow(ctx, x0, y0, x1, y1, 7 * unit);
  }
  const [rx, ry] = centre(tree.root);
  ctx.strokeStyle = '#fff';
  ctx.lineWidth = 2 * unit;
  ctx.beginPath();
  ctx.arc(rx, ry, Math.min(cw, ch) * 0.35, 0, 2 * Math.PI);
  ctx.stroke();
}

function arrow(ctx, x0, y0, x1, y1, head) {
  const a = Math.atan2(y1 - y0, x1 - x0);
  const len = Math.hypot(x1 - x0, y1 - y0);
  const back = Math.min(len * 0.3, head * 0.6); // stop short of the centre so that arrows stay readable
  const ex = x1 - back * Math.cos(a);
  const ey = y1 - back * Math.sin(a);
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(ex, ey);
  ctx.stroke();
  ctx.beginPath();
  ctx.moveTo(ex, ey);
  ctx.lineTo(ex - head * Math.cos(a - 0.45), ey - head * Math.sin(a - 0.45));
  ctx.lineTo(ex - head * Math.cos(a + 0.45), ey - head * Math.sin(a + 0.45));
  ctx.closePath();
  ctx.fill();
}

function el(name, attrs = {}, text) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// A line chart in an <svg>: series [{ name, x: number[], y: number[], colour, dash?, stroke? }],
// axes with a few ticks, a legend (or none with legend: false, for a legend of the page's own:
// chartLegend), and one <circle> per point carrying data-series, data-x and data-y. xLabels
// (optional) replaces the numeric x ticks by names at the given x positions; markX (optional)
// draws a vertical line (class "mark") at that x; xMin / xMax widen the x range beyond the points'.
export function lineChart(svg, series, { width = 440, height = 240, xLabel = '', yLabel = '', yMin, yMax, xMin, xMax, xTicks, xLabels, refLine, markX, legend = true } = {}) {
  svg.replaceChildren();
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.setAttribute('width', width);
  svg.setAttribute('height', height);
  const pad = { l: 52, r: 12, t: 24, b: xLabels ? 84 : 38 };
  const xs = series.flatMap((s) => s.x);
  const ys = series.flatMap((s) => s.y).concat(refLine !== undefined ? [refLine] : []);
  const x0 = Math.min(...xs, xMin ?? Infinity);
  const x1 = Math.max(...xs, xMax ?? -Infinity);
  let y0 = yMin ?? Math.min(...ys);
  let y1 = yMax ?? Math.max(...ys);
  if (!(y1 > y0)) {
    y0 -= 0.5;
    y1 += 0.5;
  }
  const px = (x) => pad.l + ((x - x0) / (x1 - x0 || 1)) * (width - pad.l - pad.r);
  const py = (y) => height - pad.b - ((y - y0) / (y1 - y0)) * (height - pad.t - pad.b);
  const axis = el('g', { class: 'axis' });
  axis.append(el('line', { x1: pad.l, y1: height - pad.b, x2: width - pad.r, y2: height - pad.b }));
  axis.append(el('line', { x1: pad.l, y1: pad.t, x2: pad.l, y2: height - pad.b }));
  for (let k = 0; k <= 4; k++) {
    const y = y0 + ((y1 - y0) * k) / 4;
    axis.append(el('line', { x1: pad.l - 4, y1: py(y), x2: pad.l, y2: py(y) }));
    axis.append(el('text', { x: pad.l - 6, y: py(y) + 4, 'text-anchor': 'end' }, fmt(y)));
  }
  if (xLabels) {
    xLabels.forEach((label, i) => {
      if (!label) return;
      axis.append(el('line', { x1: px(i), y1: height - pad.b, x2: px(i), y2: height - pad.b + 4 }));
      const t = el('text', { x: px(i), y: height - pad.b + 10, 'text-anchor': 'end', transform: `rotate(-50 ${px(i)} ${height - pad.b + 10})` }, label);
      axis.append(t);
    });
  } else {
    for (const x of xTicks ?? [x0, x1]) {
      axis.append(el('line', { x1: px(x), y1: height - pad.b, x2: px(x), y2: height - pad.b + 4 }));
      axis.append(el('text', { x: px(x), y: height - pad.b + 16, 'text-anchor': 'middle' }, fmt(x)));
    }
  }
  axis.append(el('text', { x: (pad.l + width - pad.r) / 2, y: height - 4, 'text-anchor': 'middle' }, xLabel));
  axis.append(el('text', { x: 12, y: pad.t - 10, 'text-anchor': 'start' }, yLabel));
  svg.append(axis);
  if (refLine !== undefined) svg.append(el('line', { class: 'ref', x1: pad.l, y1: py(refLine), x2: width - pad.r, y2: py(refLine) }));
  if (markX !== undefined) svg.append(el('line', { class: 'mark', 'data-x': markX, x1: px(markX), y1: pad.t, x2: px(markX), y2: height - pad.b }));
  series.forEach((s, si) => {
    const g = el('g', { class: 'series', 'data-series': s.name });
    g.append(el('polyline', {
      points: s.x.map((x, i) => `${px(x)},${py(s.y[i])}`).join(' '),
      fill: 'none', stroke: s.colour, 'stroke-width': s.stroke ?? 2, 'stroke-dasharray': s.dash ?? '',
    }));
    s.x.forEach((x, i) => g.append(el('circle', { cx: px(x), cy: py(s.y[i]), r: 3, fill: s.colour, 'data-series': s.name, 'data-x': x, 'data-y': s.y[i] })));
    if (!legend) {
      svg.append(g);
      return;
    }
    const ly = pad.t - 10;
    const lx = width - pad.r - 150 * (series.length - si);
    g.append(el('line', { x1: lx, y1: ly - 4, x2: lx + 18, y2: ly - 4, stroke: s.colour, 'stroke-width': 2, 'stroke-dasharray': s.dash ?? '' }));
    g.append(el('text', { x: lx + 22, y: ly, class: 'legend' }, s.name));
    svg.append(g);
  });
}

function fmt(v) {
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-2 || a >= 1e4)) return v.toExponential(1);
  return String(Number(v.toPrecision(3)));
}

// The two orders of the perturbation test (Chefer et al. 2021) and of ROAD, as the page names them.
export const ORDER_NAMES = { positive: 'most relevant first', negative: 'least relevant first' };

// A chart of perturbation curves: the class's probability over the fraction of pixels removed
// (0 … 0.9), on a fixed 0 … 1 scale, so that charts of different maps compare at a glance.
export function perturbationChart(svg, series, className, options = {}) {
  lineChart(svg, series, {
    width: 440, height: 250, xLabel: 'fraction of pixels removed', yLabel: `p(“${className}”)`, yMin: 0, yMax: 1,
    xTicks: [0, 0.2, 0.4, 0.6, 0.8], ...options,
  });
}

// A legend in HTML for a chart drawn with legend: false: one item per series, a line sample in the
// series' colour, stroke and dash, then `text` (or the series' name). Wraps on narrow screens.
export function chartLegend(list, series) {
  list.replaceChildren();
  for (const s of series) {
    const item = document.createElement('li');
    item.dataset.series = s.name;
    const sample = document.createElementNS(SVG, 'svg');
    sample.setAttribute('width', 28);
    sample.setAttribute('height', 10);
    sample.setAttribute('aria-hidden', 'true');
    sample.append(el('line', { x1: 1, y1: 5, x2: 27, y2: 5, stroke: s.colour, 'stroke-width': s.stroke ?? 2, 'stroke-dasharray': s.dash ?? '' }));
    const text = document.createElement('span');
    text.textContent = s.text ?? s.name;
    item.append(sample, text);
    list.append(item);
  }
}
