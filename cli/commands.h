// commands.h — the CLI subcommands and the small argument parser they share.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vitlens::cli {

int cmd_info(int argc, char** argv);
int cmd_predict(int argc, char** argv);
int cmd_import(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_explain(int argc, char** argv);
int cmd_convert(int argc, char** argv);
int cmd_scenes(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_evaluate_model(int argc, char** argv);

// Parses `--name value`, `--flag` and positional arguments. Options are declared up front so
// that an unknown option or a missing value is an error (Error bad_argument), not a silent typo.
class Args {
 public:
  // value_opts take a value; flag_opts do not. Names without the leading dashes.
  Args(int argc, char** argv, const std::vector<std::string>& value_opts,
       const std::vector<std::string>& flag_opts);
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& def = "") const;
  int get_int(const std::string& name, int def) const;
  double get_double(const std::string& name, double def) const;
  uint64_t get_u64(const std::string& name, uint64_t def) const;  // seeds, indices
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace vitlens::cli
