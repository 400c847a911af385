// test_parallel.cpp — run_workers and the thread policy (core/include/vitlens/tensor/parallel.h).
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "vitlens/tensor/parallel.h"

using namespace vitlens;

TEST_CASE("run_workers runs every index once, whatever the threads", "[parallel]") {
  for (int n : {0, 1, 2, 3, 7, 64, 200}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(std::max(n, 1)));
    run_workers(n, [&](int t) { hits[size_t(t)]++; });
    for (int t = 0; t < n; ++t) CHECK(hits[size_t(t)].load() == 1);
  }
}

TEST_CASE("run_workers: index 0 runs on the calling thread", "[parallel]") {
  std::thread::id first;
  run_workers(4, [&](int t) {
    if (t == 0) first = std::this_thread::get_id();
  });
  CHECK(first == std::this_thread::get_id());
}

TEST_CASE("run_workers rethrows the first failing index's exception after all have finished", "[parallel]") {
  std::atomic<int> finished{0};
  try {
    run_workers(6, [&](int t) {
      if (t == 2) throw std::runtime_error("two");
      if (t == 4) throw std::runtime_error("four");
      finished++;
    });
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "two");
  }
  CHECK(finished.load() >= 2);  // 0 and 1 at least; a strand stops at its first failure
}

TEST_CASE("usable_threads and thread_limit", "[parallel]") {
  CHECK(thread_limit() >= 1);
  CHECK(usable_threads(0) == 1);
  CHECK(usable_threads(-3) == 1);
  CHECK(usable_threads(1) == 1);
#if defined(__EMSCRIPTEN__)
  CHECK(usable_threads(1000) == thread_limit());
  CHECK(thread_limit() <= wasm_thread_pool);
#else
  CHECK(usable_threads(12) == 12);  // natively the caller's request stands
#endif
}
