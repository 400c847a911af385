// tokens.js — the loaded model's token sequence as the page indexes it: the prefix tokens
// ([CLS][DIST][REG × r], each present or not: info().prefixKinds), then the gridH × gridW patches
// row by row, n tokens in all. Every n × n
// matrix the page draws (A, ∇A, R_A, AttAttr, the norm maps) and every token the engine names
// (the query, the attribution tree's nodes) goes through this layout; nothing else in web/
// computes n or assumes that token 0 is the class token.

// The layout of a model from its info() ({ imageH, imageW, patch, … }).
export function tokenLayout(info) {
  const gridH = Math.floor(info.imageH / info.patch);
  const gridW = Math.floor(info.imageW / info.patch);
  const kinds = info.prefixKinds ?? ['cls'];
  const prefix = kinds.length;
  return { prefix, kinds, cls: kinds.indexOf('cls'), gridH, gridW, patches: gridH * gridW, n: prefix + gridH * gridW };
}

// The token of patch p (row-major over the grid).
export function patchToken(layout, p) {
  return layout.prefix + p;
}

// The patch of token t, or −1 for a prefix token.
export function tokenPatch(layout, t) {
  return t >= layout.prefix && t < layout.n ? t - layout.prefix : -1;
}

// Row q (a query token) of an n × n row-major matrix, over the patches' keys only: gridH × gridW
// values (a view, not a copy).
export function patchRow(mat, layout, q) {
  return mat.subarray(q * layout.n + layout.prefix, (q + 1) * layout.n);
}

// How the page names token t: "the CLS token", "prefix token k", or "patch p (row r, column c)".
export function tokenName(layout, t) {
  if (t === layout.cls) return 'the CLS token';
  const p = tokenPatch(layout, t);
  if (p < 0 && layout.kinds[t] === 'dist') return 'the distillation token';
  if (p < 0 && layout.kinds[t] === 'reg') return `register ${t - layout.kinds.indexOf('reg')}`;
  if (p < 0) return `prefix token ${t}`;
  return `patch ${p} (row ${Math.floor(p / layout.gridW)}, column ${p % layout.gridW})`;
}
