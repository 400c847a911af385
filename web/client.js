// client.js — the main thread's side of the worker protocol (see worker.js): request ids,
// promises, cancellation, and restarting a worker stuck in a long wasm call.
//
// Every reply { type: 'error', err: { code, message } } rejects its promise with a VitlensError
// carrying the code: this is the one place where worker (and engine) errors become JS Errors.
//
// Images are handles the page owns: `prepare` answers { image: id, … }; explain, teach, attattr
// and perturb name the image they are about, so answers never depend on the order of requests;
// `release` frees an image the page no longer shows.
import { raiseFlag } from './flags.js';

export class VitlensError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'VitlensError';
    this.code = code;
  }
}

// The value of a worker reply: `out` of { type: 'result', out }, or the VitlensError of
// { type: 'error', err }. Also used for the init reply boot.js received before this client existed.
export function replyValue(msg) {
  if (msg.type === 'result') return msg.out;
  throw new VitlensError(msg.err?.code ?? 'internal', msg.err?.message ?? 'unknown error');
}

export class WorkerClient {
  // `worker`: one already started from workerUrl (boot.js's), adopted instead of a new one.
  constructor({ workerUrl = new URL('./worker.js', import.meta.url), worker = null } = {}) {
    this.workerUrl = workerUrl;
    this.pending = new Map(); // id → { resolve, reject, type, onProgress, flag (kept alive: flags.js), cancelled }
    this.nextId = 1;
    this.cancelAlls = 0; // counts cancelAll calls: a caller tells its own cancels from everyone's
    this.cancelAllsOf = new Map(); // the same per type ('' for every type): cancelAllsFor
    this.start(worker);
  }

  start(worker = null) {
    this.worker = worker ?? new Worker(this.workerUrl, { type: 'module' });
    this.worker.onmessage = (event) => this.receive(event.data);
    this.worker.onerror = (event) => {
      event.preventDefault();
      this.rejectAll('worker', `the worker failed: ${event.message || 'it could not start'}`);
    };
    this.worker.onmessageerror = () => this.rejectAll('worker', 'a message from the worker could not be read');
  }

  receive(msg) {
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.type === 'progress') {
      if (!p.cancelled) p.onProgress?.(msg.out?.fraction ?? 0);
      return;
    }
    this.pending.delete(msg.id);
    try {
      // A result the worker sent before it read the cancel: dropped as the worker would have (an
      // image prepared for it is released, as the worker releases one it knows was cancelled).
      if (p.cancelled && msg.type === 'result') {
        if (p.type === 'prepare' && msg.out?.image !== undefined) this.worker.postMessage({ type: 'release', id: this.nextId++, in: { image: msg.out.image } });
        throw new VitlensError('cancelled', 'cancelled');
      }
      p.resolve(replyValue(msg));
    } catch (e) {
      p.reject(e);
    }
  }

  rejectAll(code, message) {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const p of all) p.reject(new VitlensError(code, message));
  }

  // Sends a request; the promise has the request's id as `.id` (for cancel). `onProgress(fraction)`
  // receives the worker's { type: 'progress', id, out: { fraction } } messages of long requests;
  // `priority` lets the request pass the non-priority explains queued in the worker (see worker.js).
  call(type, input = {}, transfer = [], { onProgress, priority = false } = {}) {
    const id = this.nextId++;
    // The request's cancel flag stays reachable while it is pending (a plain page's flag revokes
    // its URL once it is collected, which the engine would read as raised).
    const flag = input?.cancelFlag ?? null;
    const promise = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject, type, onProgress, flag }));
    this.worker.postMessage(priority ? { type, id, in: input, priority } : { type, id, in: input }, transfer);
    promise.id = id;
    return promise;
  }

  // Drops a queued request, or the result of the running one (the worker answers 'cancelled'), and
  // raises the request's cancel flag: the engine stops a running long one at its next progress
  // report instead of finishing work whose result is dropped. The promise rejects as 'cancelled'
  // even when the result was already on its way.
  cancel(id) {
    const p = this.pending.get(id);
    if (!p) return;
    p.cancelled = true;
    raiseFlag(p.flag);
    this.worker.postMessage({ type: 'cancel', id: this.nextId++, in: { id } });
  }

  // Cancels every pending request of the given type (all types when omitted), flags raised (a Stop
  // then needs no restart: app.stop).
  cancelAll(type) {
    this.cancelAlls++;
    this.cancelAllsOf.set(type ?? '', (this.cancelAllsOf.get(type ?? '') ?? 0) + 1);
    for (const [id, p] of this.pending) if (!type || p.type === type) this.cancel(id);
  }

  // How often cancelAll has cancelled the requests of `type` (a call for every type or for it).
  cancelAllsFor(type) {
    return (this.cancelAllsOf.get('') ?? 0) + (this.cancelAllsOf.get(type) ?? 0);
  }

  get busy() {
    return this.pending.size > 0;
  }

  // Stops the worker at once, even inside a wasm call; pending requests fail as 'cancelled'.
  // The new worker has no engine and no model: the caller loads them again.
  restart() {
    this.worker.terminate();
    this.rejectAll('cancelled', 'cancelled (the worker was restarted)');
    this.start();
  }

  terminate() {
    this.worker.terminate();
    this.rejectAll('cancelled', 'the worker was stopped');
  }
}
