// options.h — what a method's options and outputs are, declared once as data, and the one parser
// and validator every front end uses.
//
// Each method of the registry (methods.h, MethodInfo) carries a table of OptionSpec: the
// canonical kebab-case key ("start-layer"; the JS key is its camelCase "startLayer", the CLI flag
// "--start-layer"), the kind, the choices, the range (fixed, or a bound of the model such as
// "the last block" resolved against its Config), the default and the help text; and a table of
// OutputSpec: the named tensors an Explanation carries for it. The CLI's flags, `explain --list`
// and `--help`, the Embind conversion both ways, `methods()` in JS and vitlens.d.ts's check all
// iterate these tables.
//
// One path for values: a front end hands set_option() what it has — text (the CLI, the
// "key=value" of a method spec), a number or a boolean (JS), an image (the baseline) — and the
// same bad value raises the same Error (code and message) whichever front end it came from.
// explain() checks every option of the method again against the model (check_method_options), so
// C++ callers that fill MethodOptions directly get the same checks.
//
// Not here: reading files (a baseline image is loaded by the front end, io/ is a later layer) and
// the call-level requests of the JS API that are not method options (intermediates, onProgress).
#pragma once

#include <string>
#include <vector>

namespace vitlens {

struct Config;
struct Image;
struct MethodOptions;
struct MethodInfo;

enum class OptionKind {
  integer,  // a whole number
  number,   // a real number
  flag,     // true / false
  choice,   // one of OptionSpec::choices (stored as its index)
  method,   // the name of another method of the registry
  image,    // an input-shaped image (the integrated-gradients baseline)
};
const char* option_kind_name(OptionKind k);  // "integer", "number", "flag", "choice", "method", "image"

// A bound or a default that is a fixed number, or one that depends on the model or the build.
enum class OptionRef {
  none,          // OptionBound::value itself
  last_block,    // Config::depth − 1
  last_class,    // Config::classes − 1
  thread_limit,  // min(thread_limit(), limits::max_threads): all the threads this build can run
};
const char* option_ref_name(OptionRef r);  // "", "last-block", "last-class", "thread-limit"

struct OptionBound {
  double value = 0;  // the number (ref none), or the largest the ref can ever be (its cap)
  OptionRef ref = OptionRef::none;
};

// A value as a front end has it. Integer, number, flag and choice options are stored by
// set_option as `number` (a flag as 0/1, a choice as its index), method options as `text`,
// image options as `image`.
struct OptionValue {
  enum class Type { number, boolean, text, image } type = Type::number;
  double number = 0;
  bool boolean = false;
  std::string text;
  const Image* image = nullptr;

  static OptionValue of_number(double v);
  static OptionValue of_bool(bool v);
  static OptionValue of_text(std::string v);
  static OptionValue of_image(const Image* v);
};

struct OptionSpec {
  const char* key = "";              // kebab-case, canonical: "start-layer"
  OptionKind kind = OptionKind::integer;
  std::vector<std::string> choices;  // choice: the names, in enum order
  std::vector<std::string> choice_help;  // choice: what each stands for (a formula), or empty
  OptionBound min, max;              // integer, number: the closed range
  OptionBound def;                   // the default (flag 0/1, choice: index; method: see def_text)
  std::string def_text;              // method: the default method name
  bool zero_is_default = false;      // integer: 0 stands for `def` (C++ callers leave the field 0)
  // Bare words that stand for one value of the option: "no-grad" for weight=none. A word is given
  // alone (a method spec's "NAME:no-grad", the CLI's --no-grad, JS {noGrad: true}).
  struct Alias {
    const char* word;
    const char* value;  // the option's value as text
  };
  std::vector<Alias> aliases;

  const char* min_means = nullptr;   // integer: what the minimum stands for ("the predicted class")
  std::string help;                  // one line, for this method

  // How the option reads and writes MethodOptions: integer, number, flag (0/1) and choice (index)
  // through get; method through get_text; image through get_image. set takes what set_option parsed.
  double (*get)(const MethodOptions&) = nullptr;
  std::string (*get_text)(const MethodOptions&) = nullptr;
  const Image* (*get_image)(const MethodOptions&) = nullptr;
  void (*set)(MethodOptions&, const OptionValue& parsed) = nullptr;

  std::string js_key() const;  // "startLayer"
  std::string flag() const;    // "--start-layer"
};

// The named outputs of an Explanation (Explanation's fields; the JS keys are the camelCase keys).
enum class OutputId { token_map, pixel_map, conservation, relevance_sums, completeness, attattr, norm, intermediates };

struct OutputSpec {
  OutputId id;
  const char* key;                // kebab-case: "token-map"
  const char* shape;              // e.g. "(H/p, W/p)", "L × H × (n, n)"
  std::vector<const char*> dims;  // the same as symbols: "gridH", "gridW", "height", "width",
                                  // "depth", "heads", "tokens", "stages", "layers"
  const char* when;               // "always", or the condition under which it is filled
  const char* help;
  std::string js_key() const;
};

// kebab-case → camelCase ("start-layer" → "startLayer").
std::string camel_case(const std::string& kebab);

// The names of the enum choices, each list written once.
const char* head_fusion_name(int i);  // "mean", "max", "min"
constexpr int head_fusion_count = 3;
const char* quadrature_name(int i);   // "left", "right", "middle", "gauss-legendre"
constexpr int quadrature_count = 4;

// The option of `method` called `key` — its canonical key, its JS key or one of its alias words (or
// their camelCase); nullptr if the method does not read it.
const OptionSpec* find_option(const MethodInfo& method, const std::string& key);
// The same among every method's options (the first method that has it: a key has one kind and
// range everywhere, only its default and help may differ per method).
const OptionSpec* find_any_option(const std::string& key);
// find_option, or Error(bad_argument): "KEY does not apply to METHOD (its options: ...)" when
// another method reads it, "unknown option 'KEY' ..." when none does. One message for every front end.
const OptionSpec& method_option(const MethodInfo& method, const std::string& key);
// Every distinct option of the registry, in first-seen order (the CLI declares their flags).
std::vector<const OptionSpec*> all_options();

// A bound or default resolved: refs against `model` (nullptr: the ref's cap) and this build.
double resolve(const OptionBound& b, const Config* model);

// Parses, checks and stores one option, and records its key in MethodOptions::given (explain()
// then rejects it if the method does not read it). `value` may be text for any kind ("3", "0.5",
// "max", "true", a method name), a number for an integer or a number, a boolean for a flag, an
// image for an image. `model`: the model-dependent bounds are checked now (nullptr: only their
// caps; explain() checks them). Throws Error(bad_argument) — bad_shape for an image of the wrong
// shape — with one message per (option, value), whichever front end passed it.
void set_option(MethodOptions& opt, const OptionSpec& spec, const OptionValue& value, const Config* model);
// The same by key (canonical, JS key, or an alias word, which takes true or "true" and sets its
// value); Error(bad_argument) "unknown option" when no method has it.
void set_option(MethodOptions& opt, const std::string& key, const OptionValue& value, const Config* model);
// "key=value", or a bare "key" for a flag (sets it) or an alias word (sets its value): the form of
// the CLI's --key=value and of a method spec's NAME:key=value.
void set_option_text(MethodOptions& opt, const std::string& assignment, const Config* model);

// The options a front end starts from: MethodOptions' initialisers with the defaults of the
// options every method reads (the thread count resolved for this build) and, given a method, its
// own defaults (steps 20 for attattr, 32 for integrated-gradients, ...). A method's zero_is_default
// options left at 0 get the same defaults in explain().
MethodOptions default_options(const MethodInfo* method = nullptr);
// The default of one option as --list, --help and methods() show it ("20", "mean", "true",
// "saliency", "thread-limit"; "black" for the baseline).
std::string default_text(const OptionSpec& spec);

// Checks the options `method` reads against their ranges and `model`, and that every key in
// opt.given is one of them (explain() calls it).
void check_method_options(const MethodInfo& method, const Config& model, const MethodOptions& opt);
// `opt` with each zero_is_default option at 0 replaced by the method's default.
MethodOptions resolve_defaults(const MethodInfo& method, const MethodOptions& opt);

// The method specs of issue 16's shape: "NAME" or "NAME:key=value[:key=value…]" ("rollout:
// head-fusion=max:discard-ratio=0.9", "transformer-attribution:no-grad"). A value that is itself a
// spec (a method option: smoothgrad's inner method) goes in parentheses:
// "smoothgrad:inner=(rollout:head-fusion=max):samples=8". Returns the method and sets `opt` (from
// default_options) through set_option_text; the keys are checked against the method at once, and
// a key given twice in one spec is refused.
const MethodInfo& parse_method_spec(const std::string& spec, MethodOptions& opt, const Config* model);

// A spec combined with options given apart — the CLI's flags, a JS options object — that `opt`
// already holds (set through set_option, hence listed in opt.given): the spec's assignments are
// set on top. The two ways do not take precedence over each other: a key given both ways is
// refused (Error bad_argument "KEY is given twice ..."), whatever the values.
const MethodInfo& apply_method_spec(const std::string& spec, MethodOptions& opt, const Config* model);

// The method name of a spec, without checking it: "rollout" for "rollout:head-fusion=max".
std::string method_spec_name(const std::string& spec);

}  // namespace vitlens
