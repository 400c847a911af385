// flags.js — cancel flags: how the page stops a long request inside the engine (a wasm call
// cannot hear a message). Used by the views (through views/util.js) and by the worker client,
// whose cancelAll raises the flags of what it cancels.
//
// The engine stops a long request at its next progress report once the request's cancel flag is
// raised; the worker cannot hear a message during the call. A cross-origin isolated page shares a
// one-Int32 flag with it (SharedArrayBuffer); a plain page has none, so its flag is a blob URL the
// worker reads, at most every 100 ms, and raising it revokes the URL (worker.js, cancelWatch);
// with it goes `probe`, a URL made once and never revoked, by which the worker learns whether it
// can read the page's URLs at all. Without this, a new image waited behind the grid's long methods
// there, ~160 ms on average and up to ~0.5 s (docs/performance.md, 2026-12-03, fourth session).
// A flag belongs to one request: the client raises it when the request is cancelled (client.js),
// so it must not be shared with another that should go on. Its URL lives as long as the flag
// object: it is revoked once the object is collected (the client keeps it while its request is
// pending).
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
