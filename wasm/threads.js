// threads.js — post-js of vitlens-mt.js only: the Web Workers that run compute_pool()'s threads
// (core/src/tensor/parallel.cpp), loaded before the module resolves, or later with `deferThreads`.
//
// A pthread needs a Worker that has loaded the engine; pthread_create only takes one that is
// ready (PTHREAD_POOL_SIZE_STRICT=2, wasm/CMakeLists.txt), else the thread could not start while
// the caller blocks. So the module loads min(8, hardware threads) − 1 Workers at start-up, once
// the wasm is instantiated and before the runtime starts (a run dependency): the first call finds
// them ready. Emscripten's own PTHREAD_POOL_SIZE does the same but never resolves a module with a
// pool of none, which `deferThreads` needs.
// `deferThreads: true` (the page, web/worker.js) loads none: the module resolves without them,
// and loading a second copy of the engine does not compete with the page's first prediction and
// explanation for the cores. Module.startThreads() then loads them and starts the pool's threads;
// calls made before run on one thread, with the same results.
function vitlensLoadWorkers(count) {
  const loads = [];
  for (let i = 0; i < count; i++) {
    PThread.allocateUnusedWorker();
    const worker = PThread.unusedWorkers[PThread.unusedWorkers.length - 1];
    loads.push(new Promise((resolve, reject) => {
      if (worker.addEventListener) worker.addEventListener('error', (e) => reject(new Error(`a thread's Web Worker failed to load: ${e.message}`)));
      PThread.loadWasmModuleToWorker(worker, resolve);
    }));
  }
  return Promise.all(loads);
}

if (!ENVIRONMENT_IS_PTHREAD && !Module['deferThreads']) {
  addOnPreRun(() => {
    const cores = (typeof navigator == 'object' && navigator.hardwareConcurrency) ||
      (typeof process == 'object' && require('os').cpus().length) || 2;
    addRunDependency('vitlens-threads');
    vitlensLoadWorkers(Math.max(1, Math.min(8, cores) - 1)).then(() => removeRunDependency('vitlens-threads'), (e) => abort(e));
  });
}

let vitlensThreadsStarted = null;
Module['startThreads'] = () => {
  if (!vitlensThreadsStarted) {
    const missing = Module['threads']() - Module['activeThreads']() - PThread.unusedWorkers.length;
    vitlensThreadsStarted = vitlensLoadWorkers(Math.max(0, missing)).then(() => Module['startComputeThreads']());
  }
  return vitlensThreadsStarted;
};
