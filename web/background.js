// background.js — the requests the page makes on its own, for what the user did not ask for at
// that moment: the all-methods grid's long methods (views/grid.js) and the live perturbation curve
// of each new explanation (views/perturbation.js). The worker runs one request at a time and a
// wasm call cannot be interrupted by a message, so a view's request (app.call with priority) had
// waited for the background request running: on a DeiT-tiny-sized model ~15 s behind the grid's
// attattr, and 1.3 s behind the perturbation curve (its 18 forward passes) for the walk's 74 ms
// (docs/performance.md, 2026-12-04); the heads section's ranked curves (AttAttr's: ~16 s) too. A
// background request is therefore asked with a cancel flag of its own and withdrawn for a request
// of a higher rank: dropped from the worker's queue if it has not started, else stopped at its next
// progress report (one forward pass); then asked again behind that request. What a stopped
// request had done is kept by the engine in the image's state: norm-based's finished blocks,
// attattr's finished units, integrated-gradients' and smoothgrad's running sums (ExplainState),
// the perturbation test's and the pruning curves' steps (the Input's PerturbationKept and
// PruningKept), so every background request goes on from where it was.
//
// Ranks: the grid's long methods 0, the perturbation curve 1, the heads section's ranked curves 2
// (views/heads.js), the feed-forward view's norm-based maps 3 (views/ff.js: asked for by opening
// the view, seconds on a DeiT-tiny-sized model, and resumed where it stopped), the views' own
// requests Infinity. Each withdraws only lower ranks, so two background requests never withdraw
// each other in turn. While views keep asking (a pointer moving over the image), a long request
// waits, and each withdrawal costs it at most the unit it was in (a block, a forward pass).
import { VitlensError } from './client.js';
import { on } from './events.js';
import { cancelFlag, raiseFlag } from './flags.js';
import { stopLong } from './views/util.js';

export const RANK = { grid: 0, perturbation: 1, rankings: 2, ff: 3, view: Infinity };

export function createBackground(app) {
  const inFlight = new Set(); // { id, flag, rank, started, preempted }

  function withdraw(a) {
    if (a.preempted) return;
    a.preempted = true;
    // Not started as far as the page knows: probably queued, dropped by the worker (if it did
    // start, its result is discarded and the flag, raised by cancel, stops it). Started: only the
    // flag, so that where the worker cannot read it (a plain page's blob URLs in some browsers)
    // its result is still used.
    if (!a.started) app.client.cancel(a.id);
    else raiseFlag(a.flag);
  }

  on('priority-request', ({ rank }) => {
    for (const a of inFlight) if (a.rank < rank) withdraw(a);
  });

  // Asks the worker for `type` with `input` (plus a cancel flag: the request must take
  // `cancelFlag` and report progress) at `rank`; `priority` as app.call's. Resolves to the result
  // however often it was withdrawn and asked again; rejects with the request's error, or as
  // 'cancelled' when the caller cancels it (`.cancel()` on the promise) or a Stop cancels
  // everything (app.stop: the client's cancelAll). `onProgress(fraction)` hears the attempt that
  // runs; `onWithdrawn()` each withdrawal.
  function ask(type, input, { rank, priority = false, onProgress, onWithdrawn } = {}) {
    let cancelled = false;
    let current = null;
    // A cancelAll of this type (or of every type: Stop) cancels it; the new explanation's of the
    // explains does not cancel another type's request (the feed-forward view's, the same for
    // every class).
    const cancelAlls = app.client.cancelAllsFor(type);
    const run = async () => {
      for (let attempt = 0; ; attempt++) {
        // Not asked again for an image the page has replaced since (the worker frees it).
        if (attempt > 0 && input.image !== undefined && input.image !== app.imageId) {
          throw new VitlensError('cancelled', 'cancelled: the image was replaced');
        }
        const a = { id: 0, flag: cancelFlag(), rank, started: false, preempted: false };
        current = a;
        const hooks = {
          priority,
          rank,
          onProgress: (f) => {
            a.started = true;
            if (!a.preempted && !cancelled) onProgress?.(f);
          },
        };
        const p = app.call(type, { ...input, cancelFlag: a.flag }, [], hooks);
        a.id = p.id;
        inFlight.add(a);
        try {
          return await p;
        } catch (e) {
          const withdrawn = a.preempted && !cancelled && e.code === 'cancelled' && app.client.cancelAllsFor(type) === cancelAlls;
          if (!withdrawn) throw e;
          onWithdrawn?.();
        } finally {
          inFlight.delete(a);
        }
      }
    };
    const promise = run();
    promise.cancel = () => {
      cancelled = true;
      if (current) app.client.cancel(current.id);
    };
    // A Cancel button's stop (views/util.js stopLong): through the flag, or by app.stop() if the
    // engine has not stopped within 3 s.
    promise.stop = async () => {
      const a = current;
      promise.cancel();
      if (a) await stopLong(app, a.id, a.flag);
    };
    return promise;
  }

  return { ask };
}
