// args.cpp — the small declared-options argument parser shared by the subcommands.
#include <cerrno>
#include <cstdlib>

#include "commands.h"
#include "vitlens/tensor/error.h"

namespace vitlens::cli {

Args::Args(int argc, char** argv, const std::vector<std::string>& value_opts,
           const std::vector<std::string>& flag_opts) {
  auto is = [](const std::vector<std::string>& list, const std::string& s) {
    for (const std::string& x : list)
      if (x == s) return true;
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool long_opt = a.size() > 2 && a[0] == '-' && a[1] == '-';
    const bool short_opt = a.size() == 2 && a[0] == '-' && a[1] != 'h' && !(a[1] >= '0' && a[1] <= '9');
    if (long_opt || short_opt) {
      std::string name = a.substr(long_opt ? 2 : 1), value;
      const size_t eq = name.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (is(flag_opts, name) && !inline_value) {
        values_[name] = "1";
      } else if (is(value_opts, name)) {
        if (!inline_value) {
          if (i + 1 >= argc) throw Error(ErrorCode::bad_argument, "option --" + name + " needs a value");
          value = argv[++i];
        }
        values_[name] = value;
      } else {
        throw Error(ErrorCode::bad_argument, "unknown option --" + name + " (see --help)");
      }
    } else if (a == "-h") {
      values_["help"] = "1";
    } else {
      positional_.push_back(a);
    }
  }
}

bool Args::has(const std::string& name) const { return values_.count(name) > 0; }

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

int Args::get_int(const std::string& name, int def) const {
  if (!has(name)) return def;
  const std::string s = get(name);
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < -(1l << 30) || v > (1l << 30))
    throw Error(ErrorCode::bad_argument, "--" + name + " needs an integer, got '" + s + "'");
  return int(v);
}

double Args::get_double(const std::string& name, double def) const {
  if (!has(name)) return def;
  const std::string s = get(name);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end) throw Error(ErrorCode::bad_argument, "--" + name + " needs a number, got '" + s + "'");
  return v;
}

uint64_t Args::get_u64(const std::string& name, uint64_t def) const {
  if (!has(name)) return def;
  const std::string s = get(name);
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || s[0] == '-' || *end || errno == ERANGE)
    throw Error(ErrorCode::bad_argument, "--" + name + " needs a non-negative integer, got '" + s + "'");
  return uint64_t(v);
}

}  // namespace vitlens::cli
