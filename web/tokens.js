// tokens.js — the loaded model's token sequence as the page indexes it: the prefix tokens (today
// the class token only), then the gridH × gridW patches row by row, n tokens in all. Every n × n
// matrix the page draws (A, ∇A, R_A, AttAttr, the norm maps) and every token the engine names
// (the query, the attribution tree's nodes) goes through this layout; nothing else in web/
// computes n or assumes that token 0 is the class token.

// The layout of a model from its info() ({ imageH, imageW, patch, … }).
export function tokenLayout(info) {
  const gridH = Math.floor(info.imageH / info.patch);
  const gridW = Math.floor(info.imageW / info.patch);
  // info() does not say yet how many tokens come before the patches: one, the class token.
  // Models with a distillation token or registers (or none, without a class token) change this line.
  const prefix = 1;
  return { prefix, cls: prefix > 0 ? 0 : -1, gridH, gridW, patches: gridH * gridW, n: prefix + gridH * gridW };
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
  if (p < 0) return `prefix token ${t}`;
  return `patch ${p} (row ${Math.floor(p / layout.gridW)}, column ${p % layout.gridW})`;
}
