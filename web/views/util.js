// util.js — small helpers the views share: element lookup, canvas sizing, cancel flags (flags.js),
// stopping a long request.
import { raiseFlag } from '../flags.js';

export { cancelFlag } from '../flags.js';

export const $ = (id) => document.getElementById(id);

// Sizes a canvas to fit `box` CSS pixels on its long side, at the device's pixel ratio.
export function fitCanvas(canvas, w, h, box) {
  const s = box / Math.max(w, h);
  return sizeCanvas(canvas, Math.max(1, Math.round(w * s)), Math.max(1, Math.round(h * s)));
}

// Gives a canvas a CSS size and a backing store of as many device pixels; returns the device
// pixels per CSS pixel.
export function sizeCanvas(canvas, cssW, cssH) {
  const dpr = window.devicePixelRatio || 1;
  canvas.style.width = `${cssW}px`;
  canvas.style.height = `${cssH}px`;
  canvas.width = Math.round(cssW * dpr);
  canvas.height = Math.round(cssH * dpr);
  return dpr;
}

// Resolves once the browser has painted what was drawn before the call: a task queued from the
// next animation frame runs after that frame. At once in a hidden page (no frames), and after
// 100 ms at the latest (a page hidden meanwhile).
export function afterPaint() {
  if (document.visibilityState === 'hidden') return Promise.resolve();
  return new Promise((resolve) => {
    const late = setTimeout(resolve, 100);
    requestAnimationFrame(() => setTimeout(() => {
      clearTimeout(late);
      resolve();
    }, 0));
  });
}

// Stops the long request `id` through its cancel flag (the engine stops at its next progress
// report), or — without a flag, or if the engine has not stopped within 3 s (a browser whose
// worker cannot read the flag) — by app.stop(), which stops everything and restarts the worker
// if it is still busy a second later (the model and image loaded again).
export async function stopLong(app, id, flag) {
  if (!app.client.pending.has(id)) return;
  if (flag) {
    raiseFlag(flag);
    const deadline = performance.now() + 3000;
    while (app.client.pending.has(id) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    if (!app.client.pending.has(id)) return;
  }
  await app.stop();
}
