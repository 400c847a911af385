// parallel.h — the engine's one way of using threads: run a job over worker indices.
//
// Three builds, one policy (usable_threads):
//   native                   std::thread, as many as asked for;
//   wasm (vitlens.js)        no pthreads: everything runs on the calling thread;
//   wasm (vitlens-mt.js)     pthreads from Emscripten's pool, which is started with the module and
//                            holds wasm_thread_pool workers at most (see wasm/CMakeLists.txt). A
//                            thread beyond the pool would wait for a Worker that cannot start
//                            while the caller blocks in join, so requests are capped to it.
// Results never depend on the thread count: callers split work by index, not by thread.
#pragma once

#include <functional>

namespace vitlens {

// The size cap of the pthreads build's pool; wasm/CMakeLists.txt passes the same number to
// -sPTHREAD_POOL_SIZE (as min(this, navigator.hardwareConcurrency)).
constexpr int wasm_thread_pool = 8;

// The most threads one call can run at once in this build: 1 without pthreads,
// min(hardware threads, wasm_thread_pool) in the pthreads wasm build, and natively the hardware
// thread count (at least 1).
int thread_limit();

// The number of threads a request for `requested` really gets: natively max(1, requested);
// in wasm clamped to [1, thread_limit()].
int usable_threads(int requested);

// Runs job(t) for every t = 0 … n−1 on usable_threads(n) threads (thread i takes t = i, i + T, …;
// t = 0 on the calling thread), then rethrows the first worker exception in t order. Every t
// runs whatever the thread count, so callers may index per-worker state by t.
void run_workers(int n, const std::function<void(int)>& job);

}  // namespace vitlens
