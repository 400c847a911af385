// parallel.h — the engine's ways of using threads: run a job over worker indices, and split one
// computation (a matrix product) over a pool of workers that outlives the call.
//
// Three builds, one policy (usable_threads):
//   native                   std::thread, as many as asked for; the products stay on the calling
//                            thread (Eigen's kernels, single-threaded: `vitlens bench` measures one
//                            thread, and the CLI's parallel work is whole images, run_workers);
//   wasm (vitlens.js)        no pthreads: everything runs on the calling thread;
//   wasm (vitlens-mt.js)     pthreads in the Web Workers wasm/threads.js loads with the module
//                            (or later, with `deferThreads`): thread_limit() − 1 of them. A
//                            thread beyond them would wait for a Worker that cannot start
//                            while the caller blocks in join, so requests are capped to it. Both
//                            run_workers and the products use one WorkerPool (compute_pool) of
//                            thread_limit() − 1 workers, so one explanation's products use every
//                            core and independent work (IG steps, attattr blocks) does not start
//                            more threads than there are.
// Results never depend on the thread count: callers split work by index, not by thread, and a
// product split over columns computes every element exactly as the whole product does.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vitlens {

// The cap on the pthreads build's threads (a caller and its pool's workers); wasm/threads.js
// loads min(this, navigator.hardwareConcurrency) − 1 Web Workers for them.
constexpr int wasm_thread_pool = 8;

// The most threads one call can run at once in this build: 1 without pthreads,
// min(hardware threads, wasm_thread_pool) in the pthreads wasm build, and natively the hardware
// thread count (at least 1).
int thread_limit();

// The number of threads a request for `requested` really gets: natively max(1, requested);
// in wasm clamped to [1, thread_limit()].
int usable_threads(int requested);

// Runs job(t) for every t = 0 … n−1 on usable_threads(n) threads (t = 0 on the calling thread),
// then rethrows the first exception in t order. Every t runs whatever the thread count, so
// callers may index per-worker state by t. Inside a job, compute_pool() runs inline: the threads
// are already busy (but see WorkerPool::run for the caller's own index).
void run_workers(int n, const std::function<void(int)>& job);

// Workers that wait for jobs between calls, so that splitting a product of a few hundred
// microseconds pays: waking a worker costs microseconds, starting a thread (a Web Worker's
// pthread in wasm) far more. The pool holds no data of any computation between calls.
class WorkerPool {
 public:
  explicit WorkerPool(int workers);  // threads besides the caller; fewer if the system refuses
  ~WorkerPool();

  // Starts `workers` more workers (fewer if the system refuses) and answers how many started.
  // Only from the thread that calls run(), and not during a run: a pool can start with none and
  // take its workers later (compute_pool, start_compute_threads).
  int add_workers(int workers);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // The threads a run() can use: the workers and the caller.
  int size() const { return int(threads_.size()) + 1; }
  // The threads a run() from this thread would use now: 1 inside a job or while the pool is busy,
  // except in the caller's own index of a run whose other indices have all finished (below).
  int available() const;

  // Runs job(t) for t = 0 … n−1: t = 0 on the caller, the others on whichever thread (the caller
  // included) takes them first; returns when all have finished, then rethrows the first exception
  // in t order. Runs everything inline, in order, when called from inside a job (of this or any
  // pool, or a run_workers strand) or while another thread is using the pool — with one
  // exception: inside the caller's index 0, once every other index of its run has finished, a
  // run uses the workers again (they would idle otherwise). Two unequal passes side by side
  // (transformer-attribution's backward and double forward) thus end with the longer one split.
  void run(int n, const std::function<void(int)>& job);

 private:
  // Publishes a run of n indices, runs index 0 here, helps with the others and waits for all;
  // answers the run's exceptions (one slot per index).
  std::vector<std::exception_ptr> publish_and_run(int n, const std::function<void(int)>& job);
  bool others_done() const;  // in the caller's index 0: every other index of its run has finished
  void work(unsigned gen, int n, const std::function<void(int)>* job);  // takes indices of gen
  void worker_loop(unsigned seen);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::atomic<bool> busy_{false};  // a caller is inside run()
  // Under mutex_: the current run's generation (one per run() that uses the workers), job and
  // size, and whether the pool is closing.
  unsigned generation_ = 0;
  const std::function<void(int)>* job_ = nullptr;
  int n_ = 0;
  bool stop_ = false;
  std::atomic<uint64_t> claim_{0};  // generation << 32 | the next index to take
  std::atomic<int> done_{0};        // indices finished in this run
  std::vector<std::exception_ptr> errors_;  // (n) one slot per index
};

// The pool the products use: thread_limit() − 1 workers in the pthreads wasm build, none elsewhere
// (natively the products stay on the calling thread). Started on first use; in the pthreads wasm
// build each worker needs a Web Worker that has loaded the engine (wasm/threads.js), and a module
// started without them (the page's `deferThreads`) gets a pool of none until
// start_compute_threads().
WorkerPool& compute_pool();

// Starts the workers compute_pool() lacks (up to thread_limit() − 1) and answers its size (the
// threads one explanation now uses). From the thread that makes the engine's calls, between them.
int start_compute_threads();

// The work below which a range of parallel_ranges is not worth a thread of its own, in
// multiply-adds (~5 µs on one core): the pool's workers spin between calls, so a split costs a
// few microseconds.
constexpr double range_split_macs = double(1 << 17);

// The grain for parallel_ranges when an item (a row) costs `macs` multiply-adds.
inline int grain_for(double macs) {
  return macs >= range_split_macs ? 1 : int(range_split_macs / std::max(macs, 1.0)) + 1;
}

// Runs fn(begin, end) over contiguous ranges covering [0, n), on compute_pool()'s threads when
// there are at least 2·grain items (each range then holds ≥ grain), else fn(0, n) here. For
// element- and row-wise loops between the products (the activation, the softmax): the results do
// not depend on the split.
template <typename F>
void parallel_ranges(int n, int grain, F&& fn) {
  WorkerPool& pool = compute_pool();
  const int parts = std::min(pool.available(), n / std::max(grain, 1));
  if (parts < 2) {
    if (n > 0) fn(0, n);
    return;
  }
  pool.run(parts, [&](int t) { fn(int(int64_t(n) * t / parts), int(int64_t(n) * (t + 1) / parts)); });
}

}  // namespace vitlens
