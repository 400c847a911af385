// parallel.cpp — run_workers and the thread policy of the three builds (see parallel.h).
#include "vitlens/tensor/parallel.h"

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace vitlens {

int thread_limit() {
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
  return 1;
#else
  const int hw = std::max(1, int(std::thread::hardware_concurrency()));
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

void run_workers(int n, const std::function<void(int)>& job) {
  if (n <= 0) return;
  const int threads = std::min(n, usable_threads(n));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  // Thread i runs t = i, i + threads, …; an exception stops that thread's remaining indices only.
  auto strand = [&](int first) {
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
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace vitlens
