// recent.h — a few entries kept with the most recently used last: what an input keeps of its long
// computations so that a stopped one goes on (ExplainState::sampled, PerturbationKept, PruningKept).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace vitlens {

// The entry `found` points to (end() for none) moved to the end, the most recently used; for none,
// make() appended instead, after the least recently used (the first) is dropped when `capacity` are
// kept. Returns that entry: entries.back().
template <class T, class Make>
T& use_recent(std::vector<T>& entries, typename std::vector<T>::iterator found, size_t capacity, Make make) {
  if (found != entries.end()) {
    std::rotate(found, found + 1, entries.end());
  } else {
    if (entries.size() >= capacity) entries.erase(entries.begin());
    entries.push_back(make());
  }
  return entries.back();
}

}  // namespace vitlens
