// util.js — small helpers the views share: element lookup, canvas sizing, cancel flags, stopping a
// long request.

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

// The engine stops a long request at its next progress report once the request's cancel flag is
// raised; the worker cannot hear a message during the call. A cross-origin isolated page shares a
// one-Int32 flag with it (SharedArrayBuffer); a plain page has none, so its flag is a blob URL the
// worker reads, at most every 100 ms, and raising it revokes the URL (worker.js, cancelWatch);
// with it goes `probe`, a URL made once and never revoked, by which the worker learns whether it
// can read the page's URLs at all. Without this, a new image waited behind the grid's long methods
// there, ~160 ms on average and up to ~0.5 s (docs/performance.md, 2026-12-03, fourth session).
// A view may reuse a flag for requests one after another, so its URL lives as long as the flag
// object: it is revoked once the object is collected (the client keeps it while a request that
// carries it is pending).
const CAN_SHARE = self.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';
const PROBE = CAN_SHARE ? null : URL.createObjectURL(new Blob());
const collected = CAN_SHARE ? null : new FinalizationRegistry((url) => URL.revokeObjectURL(url));

// A cancel flag for long requests: a SharedArrayBuffer when the page is isolated, else
// { url, probe } (blob URLs).
export function cancelFlag() {
  if (CAN_SHARE) return new SharedArrayBuffer(4);
  const flag = { url: URL.createObjectURL(new Blob()), probe: PROBE };
  collected.register(flag, flag.url);
  return flag;
}

// Asks the engine to stop the requests watching `flag` at their next progress report.
export function raiseFlag(flag) {
  if (typeof flag?.url === 'string') URL.revokeObjectURL(flag.url);
  else if (flag) Atomics.store(new Int32Array(flag), 0, 1);
}

// Stops the long request `id` through its cancel flag (the engine stops at its next progress
// report), or — without a flag, or if the engine has not stopped within 3 s (a browser whose
// worker cannot read the flag) — by restarting the worker (app.stop(), which reloads the model
// and image).
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
