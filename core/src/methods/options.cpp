// options.cpp — the one parser and validator of method options (options.h): kinds, ranges,
// defaults, the lookup by key and the "key=value" / "NAME:key=value" text forms. The per-method
// tables themselves are in methods.cpp, beside the registry.
#include "vitlens/methods/options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "vitlens/methods/methods.h"
#include "vitlens/model/config.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"
#include "vitlens/tensor/parallel.h"
#include "vitlens/tensor/tensor.h"

namespace vitlens {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw Error(ErrorCode::bad_argument, msg); }

// A number as messages show it: 3, 1.5, 1000000000000, nan.
std::string num_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.16g", v);
  return buf;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string method_names() {
  std::vector<std::string> v;
  for (const MethodInfo& m : method_registry()) v.push_back(m.name);
  return join(v, ", ");
}

// "give 0 to 2 (the last block)", "give 1 to 4096, or 0 for the default".
std::string range_text(const OptionSpec& s, const Config* model) {
  auto bound = [&](const OptionBound& b) {
    std::string t = num_text(resolve(b, model));
    if (b.ref == OptionRef::last_block) t += model ? " (the model has " + std::to_string(model->depth) + " blocks)" : " (the last block)";
    if (b.ref == OptionRef::last_class) t += model ? " (the model has " + std::to_string(model->classes) + " classes)" : " (the last class)";
    return t;
  };
  std::string t = "give " + bound(s.min) + " to " + bound(s.max);
  if (s.min_means) t += ", where " + num_text(resolve(s.min, model)) + " is " + s.min_means;
  if (s.zero_is_default) t += ", or 0 for the default";
  return t;
}

// The text form of a value as it was given, for "got ..." in messages.
std::string given(const OptionValue& v) {
  switch (v.type) {
    case OptionValue::Type::number: return num_text(v.number);
    case OptionValue::Type::boolean: return v.boolean ? "true" : "false";
    case OptionValue::Type::text: return "'" + v.text + "'";
    case OptionValue::Type::image: return "an image";
  }
  return "?";
}

// A whole text parsed as a number (no trailing characters); false if it is not one.
bool parse_number(const std::string& t, double& out) {
  if (t.empty() || std::isspace(static_cast<unsigned char>(t[0]))) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(t.c_str(), &end);
  return *end == '\0';
}

void check_range(const OptionSpec& s, double v, const Config* model) {
  const bool default_zero = s.zero_is_default && v == 0;
  if (!default_zero && !(v >= resolve(s.min, model) && v <= resolve(s.max, model)))
    fail(std::string(s.key) + " " + num_text(v) + " is out of range: " + range_text(s, model));
}

// Checks a value the option already holds (set_option's last step, and explain()'s checks).
void check_stored(const OptionSpec& s, const MethodOptions& opt, const Config* model) {
  switch (s.kind) {
    case OptionKind::integer:
    case OptionKind::number: check_range(s, s.get(opt), model); break;
    case OptionKind::flag:
    case OptionKind::choice: break;
    case OptionKind::method: {
      const std::string name = s.get_text(opt);
      if (!find_method(method_spec_name(name))) fail(std::string(s.key) + " must name a method (" + method_names() + "); got '" + name + "'");
      break;
    }
    case OptionKind::image: {
      const Image* im = s.get_image(opt);
      if (im && model && (im->c != model->channels || im->h != model->image_h || im->w != model->image_w))
        throw Error(ErrorCode::bad_shape, std::string(s.key) + " must have the model's input shape " +
                                              std::to_string(model->channels) + "×" + std::to_string(model->image_h) +
                                              "×" + std::to_string(model->image_w));
      break;
    }
  }
}

// The alias of `s` called `word` (or its camelCase), or nullptr.
const OptionSpec::Alias* alias_of(const OptionSpec& s, const std::string& word) {
  for (const OptionSpec::Alias& a : s.aliases)
    if (word == a.word || word == camel_case(a.word)) return &a;
  return nullptr;
}

}  // namespace

const char* option_kind_name(OptionKind k) {
  switch (k) {
    case OptionKind::integer: return "integer";
    case OptionKind::number: return "number";
    case OptionKind::flag: return "flag";
    case OptionKind::choice: return "choice";
    case OptionKind::method: return "method";
    case OptionKind::image: return "image";
  }
  return "?";
}

const char* option_ref_name(OptionRef r) {
  switch (r) {
    case OptionRef::none: return "";
    case OptionRef::last_block: return "last-block";
    case OptionRef::last_class: return "last-class";
    case OptionRef::thread_limit: return "thread-limit";
  }
  return "?";
}

OptionValue OptionValue::of_number(double v) {
  OptionValue o;
  o.type = Type::number;
  o.number = v;
  return o;
}
OptionValue OptionValue::of_bool(bool v) {
  OptionValue o;
  o.type = Type::boolean;
  o.boolean = v;
  return o;
}
OptionValue OptionValue::of_text(std::string v) {
  OptionValue o;
  o.type = Type::text;
  o.text = std::move(v);
  return o;
}
OptionValue OptionValue::of_image(const Image* v) {
  OptionValue o;
  o.type = Type::image;
  o.image = v;
  return o;
}

std::string camel_case(const std::string& kebab) {
  std::string out;
  bool up = false;
  for (char ch : kebab) {
    if (ch == '-') {
      up = true;
      continue;
    }
    out += up ? char(std::toupper(static_cast<unsigned char>(ch))) : ch;
    up = false;
  }
  return out;
}

std::string OptionSpec::js_key() const { return camel_case(key); }
std::string OptionSpec::flag() const { return std::string("--") + key; }
std::string OutputSpec::js_key() const { return camel_case(key); }

const char* head_fusion_name(int i) {
  static const char* names[head_fusion_count] = {"mean", "max", "min"};
  return i >= 0 && i < head_fusion_count ? names[i] : "?";
}

const char* quadrature_name(int i) {
  static const char* names[quadrature_count] = {"left", "right", "middle", "gauss-legendre"};
  return i >= 0 && i < quadrature_count ? names[i] : "?";
}

double resolve(const OptionBound& b, const Config* model) {
  switch (b.ref) {
    case OptionRef::none: return b.value;
    case OptionRef::last_block: return model ? model->depth - 1 : b.value;
    case OptionRef::last_class: return model ? model->classes - 1 : b.value;
    case OptionRef::thread_limit: return std::min(thread_limit(), limits::max_threads);
  }
  return b.value;
}

const OptionSpec* find_option(const MethodInfo& method, const std::string& key) {
  for (const OptionSpec& s : method.options)
    if (key == s.key || key == s.js_key() || alias_of(s, key)) return &s;
  return nullptr;
}

const OptionSpec* find_any_option(const std::string& key) {
  for (const MethodInfo& m : method_registry())
    if (const OptionSpec* s = find_option(m, key)) return s;
  return nullptr;
}

std::vector<const OptionSpec*> all_options() {
  std::vector<const OptionSpec*> out;
  for (const MethodInfo& m : method_registry())
    for (const OptionSpec& s : m.options)
      if (std::none_of(out.begin(), out.end(), [&](const OptionSpec* o) { return std::string(o->key) == s.key; }))
        out.push_back(&s);
  return out;
}

const OptionSpec& method_option(const MethodInfo& method, const std::string& key) {
  if (const OptionSpec* s = find_option(method, key)) return *s;
  std::vector<std::string> own;
  for (const OptionSpec& s : method.options) own.push_back(s.key);
  if (const OptionSpec* s = find_any_option(key))
    fail(std::string(s->key) + " does not apply to " + method.name +
         " (its options: " + join(own, ", ") + ")");
  fail("unknown option '" + key + "' for " + method.name + " (its options: " + join(own, ", ") + ")");
}

void set_option(MethodOptions& opt, const OptionSpec& s, const OptionValue& v, const Config* model) {
  using T = OptionValue::Type;
  const std::string key = s.key;
  OptionValue parsed;
  switch (s.kind) {
    case OptionKind::integer:
    case OptionKind::number: {
      double x = v.number;
      const bool ok = v.type == T::number || (v.type == T::text && parse_number(v.text, x));
      const char* what = s.kind == OptionKind::integer ? " needs an integer, got " : " needs a number, got ";
      if (!ok) fail(key + what + given(v));
      // An integer must be whole; its range (below) keeps it inside the field's type.
      if (s.kind == OptionKind::integer && !(std::isfinite(x) && x == std::floor(x))) fail(key + what + num_text(x));
      check_range(s, x, model);
      parsed = OptionValue::of_number(x);
      break;
    }
    case OptionKind::flag: {
      const bool ok = v.type == T::boolean || (v.type == T::text && (v.text == "true" || v.text == "false"));
      if (!ok) fail(key + " needs true or false, got " + given(v));
      parsed = OptionValue::of_number((v.type == T::boolean ? v.boolean : v.text == "true") ? 1 : 0);
      break;
    }
    case OptionKind::choice: {
      int index = -1;
      for (size_t i = 0; i < s.choices.size(); ++i)
        if (v.type == T::text && v.text == s.choices[i]) index = int(i);
      if (index < 0) fail(key + " must be one of " + join(s.choices, ", ") + "; got " + given(v));
      parsed = OptionValue::of_number(index);
      break;
    }
    case OptionKind::method: {
      // A method name or a whole spec ("rollout:head-fusion=max"), checked by parsing it. Which
      // methods it may name depends on the method it is given to: explain() checks that.
      if (v.type != T::text || !find_method(method_spec_name(v.text)))
        fail(key + " must name a method (" + method_names() + "); got " + given(v));
      MethodOptions inner;
      parse_method_spec(v.text, inner, model);
      parsed = v;
      break;
    }
    case OptionKind::image:
      if (v.type != T::image || !v.image) fail(key + " must be an image, got " + given(v));
      parsed = v;
      break;
  }
  MethodOptions trial = opt;
  s.set(trial, parsed);
  check_stored(s, trial, model);
  if (std::find(trial.given.begin(), trial.given.end(), key) == trial.given.end()) trial.given.push_back(key);
  opt = std::move(trial);
}

void set_option(MethodOptions& opt, const std::string& key, const OptionValue& value, const Config* model) {
  const OptionSpec* s = find_any_option(key);
  if (!s) {
    std::vector<std::string> keys;
    for (const OptionSpec* o : all_options()) keys.push_back(o->key);
    fail("unknown option '" + key + "' (the options: " + join(keys, ", ") + ")");
  }
  if (const OptionSpec::Alias* a = alias_of(*s, key)) {
    // A bare word: true (or "true") sets its value; there is nothing for false to mean.
    const bool yes = (value.type == OptionValue::Type::boolean && value.boolean) ||
                     (value.type == OptionValue::Type::text && value.text == "true");
    if (!yes)
      fail(std::string(a->word) + " stands for " + s->key + "=" + a->value + " and takes no other value; got " + given(value) +
           " (give " + s->key + " instead)");
    return set_option(opt, *s, OptionValue::of_text(a->value), model);
  }
  set_option(opt, *s, value, model);
}

void set_option_text(MethodOptions& opt, const std::string& assignment, const Config* model) {
  const size_t eq = assignment.find('=');
  const std::string key = assignment.substr(0, eq);
  if (eq != std::string::npos) return set_option(opt, key, OptionValue::of_text(assignment.substr(eq + 1)), model);
  const OptionSpec* s = find_any_option(key);
  if (s && s->kind != OptionKind::flag && !alias_of(*s, key)) fail(std::string(s->key) + " needs a value: " + s->key + "=VALUE");
  set_option(opt, key, OptionValue::of_bool(true), model);
}

MethodOptions default_options(const MethodInfo* method) {
  MethodOptions opt;
  auto apply = [&](const OptionSpec& s) {
    if (s.kind == OptionKind::method) s.set(opt, OptionValue::of_text(s.def_text));
    else if (s.kind != OptionKind::image) s.set(opt, OptionValue::of_number(resolve(s.def, nullptr)));
  };
  if (method) {
    for (const OptionSpec& s : method->options) apply(s);
    return opt;
  }
  // The options every method reads.
  for (const OptionSpec* s : all_options())
    if (std::all_of(method_registry().begin(), method_registry().end(),
                    [&](const MethodInfo& m) { return find_option(m, s->key) != nullptr; }))
      apply(*s);
  return opt;
}

std::string default_text(const OptionSpec& s) {
  switch (s.kind) {
    case OptionKind::integer:
    case OptionKind::number:
      return s.def.ref == OptionRef::none ? num_text(s.def.value) : option_ref_name(s.def.ref);
    case OptionKind::flag: return s.def.value != 0 ? "true" : "false";
    case OptionKind::choice: return s.choices[size_t(s.def.value)];
    case OptionKind::method: return s.def_text;
    case OptionKind::image: return "black";
  }
  return "";
}

void check_method_options(const MethodInfo& method, const Config& model, const MethodOptions& opt) {
  for (const std::string& key : opt.given) method_option(method, key);
  for (const OptionSpec& s : method.options) {
    check_stored(s, opt, &model);
    if (s.kind == OptionKind::method && method_spec_name(s.get_text(opt)) == method.name)
      fail(std::string(s.key) + " must name a method other than " + method.name + "; got '" + method.name + "'");
  }
}

MethodOptions resolve_defaults(const MethodInfo& method, const MethodOptions& opt) {
  MethodOptions out = opt;
  for (const OptionSpec& s : method.options)
    if (s.zero_is_default && s.get(out) == 0) s.set(out, OptionValue::of_number(resolve(s.def, nullptr)));
  return out;
}

namespace {

// A spec's parts at its top-level colons: the method name, then one "key=value" or bare word each;
// a parenthesised value keeps its own colons and loses its parentheses.
std::vector<std::string> spec_parts(const std::string& spec) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char ch : spec) {
    if (ch == ':' && depth == 0) {
      parts.emplace_back();
      continue;
    }
    if (ch == '(') ++depth;
    if (ch == ')' && --depth < 0) break;
    parts.back() += ch;
  }
  if (depth != 0) fail("unbalanced parentheses in the method spec '" + spec + "'");
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string& p = parts[i];
    const size_t eq = p.find('=');
    if (p.empty()) fail("empty option in the method spec '" + spec + "' (NAME:key=value:key=value)");
    if (eq != std::string::npos && eq + 1 < p.size() && p[eq + 1] == '(' && p.back() == ')')
      p = p.substr(0, eq + 1) + p.substr(eq + 2, p.size() - eq - 3);
  }
  return parts;
}

}  // namespace

std::string method_spec_name(const std::string& spec) { return spec.substr(0, spec.find(':')); }

const MethodInfo& apply_method_spec(const std::string& spec, MethodOptions& opt, const Config* model) {
  const std::vector<std::string> parts = spec_parts(spec);
  const MethodInfo* m = find_method(parts[0]);
  if (!m) fail("unknown method '" + parts[0] + "'; the methods are: " + method_names());
  const std::vector<std::string> apart = opt.given;  // what the front end set before the spec
  std::vector<std::string> in_spec;
  for (size_t i = 1; i < parts.size(); ++i) {
    const OptionSpec& s = method_option(*m, parts[i].substr(0, parts[i].find('=')));
    const std::string key = s.key;
    if (std::find(apart.begin(), apart.end(), key) != apart.end())
      fail(key + " is given twice: in the method spec '" + spec + "' and apart from it (" + s.flag() + ", " +
           s.js_key() + "); give it once");
    if (std::find(in_spec.begin(), in_spec.end(), key) != in_spec.end())
      fail(key + " is given twice in the method spec '" + spec + "'; give it once");
    in_spec.push_back(key);
    set_option_text(opt, parts[i], model);
  }
  return *m;
}

const MethodInfo& parse_method_spec(const std::string& spec, MethodOptions& opt, const Config* model) {
  const MethodInfo* m = find_method(method_spec_name(spec));
  if (!m) fail("unknown method '" + method_spec_name(spec) + "'; the methods are: " + method_names());
  opt = default_options(m);
  return apply_method_spec(spec, opt, model);
}

}  // namespace vitlens
