// test_architecture.cpp — the layers of core/ depend one way: a file in core/src/<layer>/ or
// core/include/vitlens/<layer>/ includes headers only of its own layer and of the layers it
// depends on (directly or through them), as declared in core/CMakeLists.txt (VITLENS_LAYERS,
// passed in as a compile definition). A file that includes a header of a later layer fails here.
#include <catch2/catch.hpp>

#if !defined(__EMSCRIPTEN__)
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// "tensor:|layers:tensor|…" → layer → its direct dependencies.
std::map<std::string, std::vector<std::string>> parse_layers(const std::string& spec) {
  std::map<std::string, std::vector<std::string>> out;
  std::stringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, '|')) {
    const size_t colon = entry.find(':');
    std::vector<std::string>& deps = out[entry.substr(0, colon)];
    std::stringstream list(entry.substr(colon + 1));
    std::string dep;
    while (std::getline(list, dep, ','))
      if (!dep.empty()) deps.push_back(dep);
  }
  return out;
}

// The layer itself and everything it reaches through its dependencies.
std::set<std::string> reachable(const std::map<std::string, std::vector<std::string>>& g, const std::string& from) {
  std::set<std::string> seen{from};
  std::vector<std::string> todo{from};
  while (!todo.empty()) {
    const std::string l = todo.back();
    todo.pop_back();
    for (const std::string& d : g.at(l))
      if (seen.insert(d).second) todo.push_back(d);
  }
  return seen;
}

}  // namespace

TEST_CASE("layers include only the layers below them", "[architecture]") {
  const auto layers = parse_layers(VITLENS_LAYERS);
  REQUIRE(layers.size() >= 5);
  const fs::path core = fs::path(VITLENS_SOURCE_DIR) / "core";
  const std::regex include_re("#include \"vitlens/([a-z_]+)/[^\"]+\"");
  int files = 0;
  for (const fs::path& top : {core / "src", core / "include" / "vitlens"}) {
    for (const fs::directory_entry& dir : fs::directory_iterator(top)) {
      INFO(dir.path().string());
      REQUIRE(dir.is_directory());  // every file belongs to a layer folder
      const std::string layer = dir.path().filename().string();
      REQUIRE(layers.count(layer) == 1);  // and every folder is a declared layer
      const std::set<std::string> allowed = reachable(layers, layer);
      for (const fs::directory_entry& f : fs::recursive_directory_iterator(dir.path())) {
        if (!f.is_regular_file()) continue;
        ++files;
        std::ifstream in(f.path());
        std::string line;
        while (std::getline(in, line)) {
          std::smatch m;
          if (!std::regex_search(line, m, include_re)) continue;
          INFO(f.path().string() + ": " + line);
          CHECK(allowed.count(m[1].str()) == 1);
        }
      }
    }
  }
  CHECK(files > 40);
}

TEST_CASE("the layer check catches an include of a later layer", "[architecture]") {
  const auto layers = parse_layers("a:|b:a|c:b|d:a");
  CHECK(reachable(layers, "c") == std::set<std::string>{"a", "b", "c"});
  CHECK(reachable(layers, "d").count("b") == 0);
}
#endif
