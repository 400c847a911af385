// parallel.cpp — run_workers and the thread policy of the three builds (see parallel.h).
#include "vitlens/tensor/parallel.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace vitlens {

int thread_limit() {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  return 1;
#else
  // Asked once: in wasm under node each call is os.cpus() (an object per CPU), 0.7–1.1 % of an
  // explanation's profile when explain() resolved its options' thread limit.
  static const int hw = std::max(1, int(std::thread::hardware_concurrency()));
#if defined(__EMSCRIPTEN__)
  return std::min(hw, wasm_thread_pool);
#else
  return hw;
#endif
#endif
}

int usable_threads(int requested) {
#if defined(__EMSCRIPTEN__)
  return std::max(1, std::min(requested, thread_limit()));
#else
  return std::max(1, requested);
#endif
}

namespace {

// True on a thread that is running a job (a pool's, or a run_workers strand): a parallel call
// there runs inline.
thread_local bool t_in_job = false;

struct InJob {
  bool saved = t_in_job;
  InJob() { t_in_job = true; }
  ~InJob() { t_in_job = saved; }
};

// The pool of whose run this thread is the caller, while it runs that run's index 0 (else
// nullptr): there a run may use the pool's workers once the run's other indices have finished.
thread_local const WorkerPool* t_owner = nullptr;

struct Owner {
  const WorkerPool* saved = t_owner;
  explicit Owner(const WorkerPool* pool) { t_owner = pool; }
  ~Owner() { t_owner = saved; }
};

// Checks of an atomic before a waiting thread sleeps: about a millisecond, longer than any gap
// between two split pieces of one explanation (the serial steps between them take microseconds
// to tens of microseconds), so that a worker stays awake through an explanation and takes each
// piece at once; waking a sleeping one costs tens of microseconds. Measured on the shipped model
// with 2 threads (node, vitlens-mt-relaxed.js, lrp with its forward pass): 15.1 ms with 2¹⁴
// checks, 13.9 with 2¹⁷; with the layers' own splits (parallel.h) 12.2–12.6 with 2¹⁷, 11.6–12.3
// with 2²⁰.
constexpr int kSpins = 1 << 20;

void rethrow_first(const std::vector<std::exception_ptr>& errors) {
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

void run_workers(int n, const std::function<void(int)>& job) {
  if (n <= 0) return;
  const int threads = std::min(n, usable_threads(n));
#if defined(__EMSCRIPTEN__)
  // One pool of thread_limit() − 1 workers serves everything (parallel.h).
  if (threads > 1) {
    compute_pool().run(n, job);
    return;
  }
#endif
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  // Thread i runs t = i, i + threads, …; an exception stops that thread's remaining indices only.
  auto strand = [&](int first) {
    const InJob in_job;
    for (int t = first; t < n; t += threads) {
      try {
        job(t);
      } catch (...) {
        errors[size_t(t)] = std::current_exception();
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads - 1));
  int started = 1;
  try {
    for (; started < threads; ++started) pool.emplace_back(strand, started);
  } catch (const std::system_error&) {
    // No thread to be had (the wasm pool is exhausted, or the OS refused): the strands that did
    // not get one run here, after strand 0.
  }
  strand(0);
  for (int i = started; i < threads; ++i) strand(i);
  for (std::thread& th : pool) th.join();
  rethrow_first(errors);
}

WorkerPool::WorkerPool(int workers) { add_workers(workers); }

int WorkerPool::add_workers(int workers) {
  int started = 0;
  std::lock_guard<std::mutex> lock(mutex_);  // a new worker waits for a generation after this one
  threads_.reserve(threads_.size() + size_t(std::max(0, workers)));
  try {
    for (; started < workers; ++started) threads_.emplace_back([this, seen = generation_] { worker_loop(seen); });
  } catch (const std::system_error&) {
    // Fewer threads than asked for (the wasm pool is exhausted): the pool works with those it has.
  }
  return started;
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& th : threads_) th.join();
}

bool WorkerPool::others_done() const {
  // n_ is written only by the thread that owns the run, which is this one.
  return t_owner == this && done_.load(std::memory_order_acquire) == n_ - 1;
}

int WorkerPool::available() const {
  if (others_done()) return size();
  return t_in_job || busy_.load(std::memory_order_relaxed) ? 1 : size();
}

void WorkerPool::run(int n, const std::function<void(int)>& job) {
  if (n <= 0) return;
  if (n > 1 && !threads_.empty() && others_done()) {
    // In the caller's index 0 of a run whose other indices have finished: the workers are idle,
    // so this run uses them. The enclosing run keeps only its bookkeeping (its size and its
    // exceptions), set aside here and restored: no thread touches them meanwhile.
    const int outer_n = n_;
    const std::function<void(int)>* const outer_job = job_;
    std::vector<std::exception_ptr> outer_errors;
    outer_errors.swap(errors_);
    std::vector<std::exception_ptr> errors = publish_and_run(n, job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      n_ = outer_n;
      job_ = outer_job;
    }
    errors_.swap(outer_errors);
    done_.store(outer_n - 1, std::memory_order_release);
    rethrow_first(errors);
    return;
  }
  bool idle = false;
  if (n == 1 || threads_.empty() || t_in_job || !busy_.compare_exchange_strong(idle, true)) {
    std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
    const InJob in_job;
    for (int t = 0; t < n; ++t) {
      try {
        job(t);
      } catch (...) {
        errors[size_t(t)] = std::current_exception();
      }
    }
    rethrow_first(errors);
    return;
  }
  std::vector<std::exception_ptr> errors = publish_and_run(n, job);
  busy_.store(false, std::memory_order_release);
  rethrow_first(errors);
}

std::vector<std::exception_ptr> WorkerPool::publish_and_run(int n, const std::function<void(int)>& job) {
  unsigned gen = 0;
  {
    // The job, its size and its first free index (1: 0 is the caller's) are published together;
    // a worker takes indices of this generation only (work), so one still leaving the previous
    // run cannot take any of them.
    std::lock_guard<std::mutex> lock(mutex_);
    gen = generation_ + 1;
    job_ = &job;
    n_ = n;
    errors_.assign(size_t(n), nullptr);
    done_.store(0, std::memory_order_relaxed);
    claim_.store(uint64_t(gen) << 32 | 1u, std::memory_order_release);
    generation_ = gen;
  }
  wake_.notify_all();
  {
    const InJob in_job;
    const Owner owner(this);
    try {
      job(0);
    } catch (...) {
      errors_[0] = std::current_exception();
    }
  }
  done_.fetch_add(1, std::memory_order_acq_rel);
  work(gen, n, &job);
  for (int i = 0; i < kSpins && done_.load(std::memory_order_acquire) < n; ++i) {
  }
  if (done_.load(std::memory_order_acquire) < n) {
    std::unique_lock<std::mutex> lock(mutex_);
    finished_.wait(lock, [&] { return done_.load(std::memory_order_acquire) >= n; });
  }
  std::vector<std::exception_ptr> errors;
  errors.swap(errors_);
  return errors;
}

// Takes the indices of generation `gen` (job of n indices) until none is left. The claim word
// holds the generation and the next index, so a claim succeeds only within its own generation,
// while that run is still waiting for the index: `job` is alive.
void WorkerPool::work(unsigned gen, int n, const std::function<void(int)>* job) {
  const InJob in_job;
  for (;;) {
    uint64_t w = claim_.load(std::memory_order_acquire);
    int t = 0;
    for (;;) {
      if (uint32_t(w >> 32) != gen) return;
      t = int(uint32_t(w));
      if (t >= n) return;
      if (claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) break;
    }
    try {
      (*job)(t);
    } catch (...) {
      errors_[size_t(t)] = std::current_exception();
    }
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      std::lock_guard<std::mutex> lock(mutex_);  // the caller checks done_ under it before sleeping
      finished_.notify_all();
    }
  }
}

void WorkerPool::worker_loop(unsigned seen) {
  for (;;) {
    for (int i = 0; i < kSpins && claim_.load(std::memory_order_relaxed) >> 32 == seen; ++i) {
    }
    unsigned gen = 0;
    int n = 0;
    const std::function<void(int)>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = gen = generation_;
      n = n_;
      job = job_;
    }
    work(gen, n, job);
  }
}

WorkerPool& compute_pool() {
#if defined(__EMSCRIPTEN__)
  static WorkerPool pool(thread_limit() - 1);
#else
  static WorkerPool pool(0);
#endif
  return pool;
}

int start_compute_threads() {
  WorkerPool& pool = compute_pool();
#if defined(__EMSCRIPTEN__)
  pool.add_workers(thread_limit() - pool.size());
#endif
  return pool.size();
}

}  // namespace vitlens
