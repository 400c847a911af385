// stb_budget.h — the allocation budget every stb_image allocation goes through (guard 3 in
// image.cpp). Private to src/io: stb_impl.cpp compiles stb's implementation against it and
// image.cpp sets the budget around each stb call.
#pragma once

#include <cstddef>

namespace vitlens::stb {

// Sets the largest single allocation stb may make on this thread (0: none); stb_impl.cpp.
void set_alloc_limit(size_t bytes);

// The largest single allocation stb may make inside this scope (not nested).
class Budget {
 public:
  explicit Budget(size_t bytes) { set_alloc_limit(bytes); }
  ~Budget() { set_alloc_limit(0); }
  Budget(const Budget&) = delete;
  Budget& operator=(const Budget&) = delete;
};

}  // namespace vitlens::stb
