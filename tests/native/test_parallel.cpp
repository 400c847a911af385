// test_parallel.cpp — run_workers and the thread policy (core/include/vitlens/tensor/parallel.h).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
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

TEST_CASE("WorkerPool runs every index once, over many runs, from the caller too", "[parallel]") {
  WorkerPool pool(3);  // in wasm without pthreads it gets no workers and runs everything inline
#if !defined(__EMSCRIPTEN__) || defined(__EMSCRIPTEN_PTHREADS__)
  CHECK(pool.size() == 4);
#endif
  CHECK(pool.available() == pool.size());
  for (int round = 0; round < 2000; ++round) {
    const int n = 1 + round % 9;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::thread::id first;
    pool.run(n, [&](int t) {
      if (t == 0) first = std::this_thread::get_id();
      hits[size_t(t)]++;
    });
    for (int t = 0; t < n; ++t) REQUIRE(hits[size_t(t)].load() == 1);
    REQUIRE(first == std::this_thread::get_id());
  }
}

namespace {
// Waits until done() or 10 s have passed (a test that fails rather than hangs); answers done().
template <typename F>
bool wait_for(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  return done();
}
}  // namespace

TEST_CASE("WorkerPool: a run inside a job runs inline; another caller runs inline while busy", "[parallel]") {
  WorkerPool pool(2);
  std::atomic<int> inner{0}, inline_seen{0};
  std::atomic<bool> checked{false};
  pool.run(3, [&](int t) {
    // Index 0 looks while the others wait for it (not finished): the pool is not available to
    // it; the others never get it.
    if (t != 0) wait_for([&] { return checked.load(); });
    inline_seen += pool.available() == 1;
    checked = true;
    pool.run(4, [&](int) { inner++; });
  });
  CHECK(inner.load() == 12);
  CHECK(inline_seen.load() == 3);
#if !defined(__EMSCRIPTEN__) || defined(__EMSCRIPTEN_PTHREADS__)
  // Two threads using one pool: whichever comes second runs its job inline; both complete.
  std::atomic<int> total{0};
  std::thread other([&] {
    for (int i = 0; i < 200; ++i) pool.run(5, [&](int) { total++; });
  });
  for (int i = 0; i < 200; ++i) pool.run(5, [&](int) { total++; });
  other.join();
  CHECK(total.load() == 2000);
#endif
}

TEST_CASE("WorkerPool: in the caller's index 0, once the others have finished, a run uses the workers", "[parallel]") {
  WorkerPool pool(1);
#if !defined(__EMSCRIPTEN__) || defined(__EMSCRIPTEN_PTHREADS__)
  const std::thread::id caller = std::this_thread::get_id();
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> one_done{false};
    std::atomic<int> nested_hits{0}, nested_on_worker{0}, available_after{0};
    pool.run(2, [&](int t) {
      if (t == 1) {
        one_done = true;
        return;
      }
      // Index 0 waits until index 1 has finished: from then on the pool is available to it.
      REQUIRE(wait_for([&] { return pool.available() == 2; }));
      for (int nested = 0; nested < 3; ++nested) {
        std::atomic<bool> started{false};
        pool.run(2, [&](int u) {
          nested_hits++;
          if (u == 1) {
            nested_on_worker += std::this_thread::get_id() != caller;
            started = true;
            return;
          }
          wait_for([&] { return started.load(); });  // so that the worker, not the caller, takes 1
        });
        available_after += pool.available() == 2;  // still the caller's, still idle workers
      }
    });
    REQUIRE(one_done.load());
    CHECK(nested_hits.load() == 6);
    CHECK(nested_on_worker.load() == 3);
    CHECK(available_after.load() == 3);
    CHECK(pool.available() == 2);
  }
  // The enclosing run's exceptions survive its nested runs, and a nested run's reach its caller.
  std::atomic<bool> caught_inner{false};
  try {
    pool.run(2, [&](int t) {
      if (t == 1) throw std::runtime_error("one");
      REQUIRE(wait_for([&] { return pool.available() == 2; }));
      try {
        pool.run(3, [&](int u) {
          if (u == 2) throw std::runtime_error("inner");
        });
      } catch (const std::runtime_error& e) {
        caught_inner = std::string(e.what()) == "inner";
      }
      pool.run(2, [&](int) {});
    });
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "one");
  }
  CHECK(caught_inner.load());
  std::atomic<int> after{0};
  pool.run(2, [&](int) { after++; });
  CHECK(after.load() == 2);
#endif
}

TEST_CASE("WorkerPool rethrows the first failing index's exception after every index ran", "[parallel]") {
  WorkerPool pool(2);
  for (int round = 0; round < 50; ++round) {
    std::atomic<int> finished{0};
    try {
      pool.run(8, [&](int t) {
        if (t == 5) throw std::runtime_error("five");
        if (t == 3) throw std::runtime_error("three");
        finished++;
      });
      FAIL("no exception");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "three");
    }
    CHECK(finished.load() == 6);
  }
  int after = 0;
  pool.run(1, [&](int) { after++; });  // still usable
  CHECK(after == 1);
}

TEST_CASE("WorkerPool without workers, and the products' pool natively", "[parallel]") {
  WorkerPool pool(0);
  std::vector<int> order;
  pool.run(4, [&](int t) { order.push_back(t); });
  CHECK(order == std::vector<int>{0, 1, 2, 3});
#if !defined(__EMSCRIPTEN__)
  CHECK(compute_pool().size() == 1);  // natively the products stay on the calling thread
#endif
}

TEST_CASE("WorkerPool: workers added later take part in the next runs", "[parallel]") {
  WorkerPool pool(0);
  std::vector<int> hits(4, 0);
  pool.run(4, [&](int t) { hits[size_t(t)]++; });  // before: all on the caller
  CHECK(hits == std::vector<int>{1, 1, 1, 1});
#if !defined(__EMSCRIPTEN__)
  REQUIRE(pool.add_workers(1) == 1);
  CHECK(pool.size() == 2);
  // Index 0 (the caller's) waits until index 1 has run, so a thread other than the caller must
  // have taken it: the added worker. (Give up after 10 s rather than hang.)
  for (int run = 0; run < 20; ++run) {
    std::atomic<bool> second_done{false};
    std::thread::id second;
    const std::thread::id caller = std::this_thread::get_id();
    pool.run(2, [&](int t) {
      if (t == 1) {
        second = std::this_thread::get_id();
        second_done = true;
        return;
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!second_done && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
    REQUIRE(second_done.load());
    CHECK(second != caller);
  }
  CHECK(start_compute_threads() == 1);  // natively the products' pool stays without workers
#endif
}
