// json_fixture.h — reading a JSON fixture in a test.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace vitlens::test {

// The parsed file; throws (Catch reports the test as failed) when it cannot be read.
inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read the fixture " + path);
  return nlohmann::json::parse(f);
}

}  // namespace vitlens::test
