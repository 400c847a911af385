// boot.js — what the page starts before its views have loaded: the worker with the engine, and
// the download of the shipped model. index.html loads this module on its own (async, and it
// imports nothing), so it runs as soon as it has arrived, while the browser is still fetching the
// two dozen modules of app.js; app.js imports the same module instance and takes both over
// (WorkerClient adopts the worker). The engine's download and compilation then overlap the
// page's own loading (issue 15, start-up).

// The engine builds: the pthreads one is used by the worker when the page is cross-origin
// isolated (COOP/COEP); of either, the worker runs the relaxed-SIMD build where the browser
// supports it (simd.js); ?simd=plain asks for the plain SIMD128 build (for comparisons).
export const ENGINE = {
  wasmUrl: new URL('./wasm/vitlens.js', location.href).href,
  wasmMtUrl: new URL('./wasm/vitlens-mt.js', location.href).href,
  simd: new URLSearchParams(location.search).get('simd') === 'plain' ? 'plain' : 'auto',
};

export const SHIPPED_MODEL = './models/vitlens-scenes.vitl';

export const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });

// The worker's reply to init, request id 0 (WorkerClient numbers its requests from 1):
// { type: 'result', out } or { type: 'error', err }, or null when the worker itself failed.
export const engineReply = new Promise((resolve) => {
  worker.addEventListener('message', function listen(e) {
    if (e.data?.id !== 0 || e.data.type === 'progress') return;
    worker.removeEventListener('message', listen);
    resolve(e.data);
  });
  worker.addEventListener('error', () => resolve(null), { once: true });
});
worker.postMessage({ type: 'init', id: 0, in: ENGINE });

// The shipped model's bytes as a Blob, or the HTTP status that refused them.
export const shippedModel = fetch(SHIPPED_MODEL).then((res) => (res.ok ? res.blob() : res.status));
shippedModel.catch(() => {});
