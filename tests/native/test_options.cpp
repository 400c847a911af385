// test_options.cpp — the method option tables and their one parser (methods/options.h): text and
// typed values give the same result and the same error, ranges follow the model, defaults come
// from the table, explain() rejects options the method does not read, and the "NAME:key=value"
// method specs parse.
#include <catch2/catch.hpp>
#include <string>

#include "helpers.h"
#include "vitlens/methods/methods.h"
#include "vitlens/model/config.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;

namespace {

// The nonsquare reference model's config: 3 blocks, 5 classes, 3×24×40 input.
Config small_config() { return test::engine_fixture_model("nonsquare").config; }

// The error (code and message) of setting `key` to `v`, or "" if it is accepted.
std::string error_of(const std::string& key, const OptionValue& v, const Config* c) {
  MethodOptions opt;
  try {
    set_option(opt, key, v, c);
  } catch (const Error& e) {
    return std::string(error_code_name(e.code())) + ": " + e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("options: every method's table is well formed", "[options]") {
  for (const MethodInfo& m : method_registry()) {
    INFO(m.name);
    REQUIRE(!m.options.empty());
    CHECK(std::string(m.options.front().key) == "target");
    CHECK(std::string(m.options.back().key) == "threads");
    CHECK(m.outputs.size() >= 2);
    for (const OptionSpec& s : m.options) {
      INFO(s.key);
      CHECK(!s.help.empty());
      CHECK(s.set != nullptr);
      CHECK(find_option(m, s.key) == &s);
      CHECK(find_option(m, s.js_key()) == &s);
      if (s.kind == OptionKind::choice) CHECK(s.def.value < double(s.choices.size()));
      // Every default is accepted by the parser (as text, as --list shows it).
      if (s.kind != OptionKind::image && s.def.ref == OptionRef::none) {
        MethodOptions opt;
        CHECK_NOTHROW(set_option(opt, s, OptionValue::of_text(default_text(s)), nullptr));
      }
    }
  }
  CHECK(camel_case("start-layer") == "startLayer");
  CHECK(find_any_option("no-grad") == find_any_option("weight"));
  CHECK(find_any_option("noGrad") == find_any_option("weight"));
}

TEST_CASE("options: text and typed values parse alike and fail alike", "[options]") {
  const Config c = small_config();
  const std::pair<const char*, double> cases[] = {
      {"target", 4}, {"target", 5}, {"target", -1}, {"target", -2}, {"target", 1.5}, {"target", 1e12},
      {"start-layer", 2}, {"start-layer", 3}, {"block", -1}, {"block", -2}, {"steps", 0}, {"steps", 5000},
      {"discard-ratio", 1.5}, {"discard-ratio", 0.25}, {"noise", -1}, {"seed", 9007199254740992.0},
      {"threads", 0}, {"samples", 3},
  };
  for (const auto& [key, v] : cases) {
    char text[64];
    std::snprintf(text, sizeof text, "%.17g", v);
    INFO(key << " = " << text);
    CHECK(error_of(key, OptionValue::of_number(v), &c) == error_of(key, OptionValue::of_text(text), &c));
  }
  CHECK(error_of("start-layer", OptionValue::of_number(3), &c) ==
        "bad_argument: start-layer 3 is out of range: give 0 to 2 (the model has 3 blocks)");
  CHECK(error_of("target", OptionValue::of_number(-2), &c) ==
        "bad_argument: target -2 is out of range: give -1 to 4 (the model has 5 classes), where -1 is the predicted class");
  CHECK(error_of("target", OptionValue::of_number(1.5), &c) == "bad_argument: target needs an integer, got 1.5");
  CHECK(error_of("head-fusion", OptionValue::of_text("median"), &c) ==
        "bad_argument: head-fusion must be one of mean, max, min; got 'median'");
  CHECK(error_of("head-fusion", OptionValue::of_number(1), &c) == "bad_argument: head-fusion must be one of mean, max, min; got 1");
  CHECK(error_of("stage", OptionValue::of_text("atb-res-ln"), &c).empty());
  CHECK(error_of("weight", OptionValue::of_text("maybe"), &c) ==
        "bad_argument: weight must be one of grad, none, attn; got 'maybe'");
  CHECK(error_of("no-grad", OptionValue::of_bool(false), &c) ==
        "bad_argument: no-grad stands for weight=none and takes no other value; got false (give weight instead)");
  CHECK(error_of("linear-rule", OptionValue::of_text("alpha2beta1"), &c) ==
        "bad_argument: linear-rule must be one of shared, separate; got 'alpha2beta1'");
  CHECK(error_of("nope", OptionValue::of_number(1), &c).find("unknown option 'nope'") != std::string::npos);
  CHECK(error_of("inner", OptionValue::of_text("nope"), &c).find("inner must name a method") != std::string::npos);
  CHECK(error_of("discard-ratio", OptionValue::of_text("NaN"), &c) == "bad_argument: discard-ratio nan is out of range: give 0 to 1");
  // Without a model only the caps of the model-dependent bounds are checked (explain() does the rest).
  CHECK(error_of("start-layer", OptionValue::of_number(3), nullptr).empty());
}

TEST_CASE("options: alias words, defaults, and the checks explain() makes", "[options]") {
  const Config c = small_config();
  MethodOptions opt;
  CHECK(opt.weight == AttnWeight::grad);
  set_option_text(opt, "no-grad", &c);  // an alias word: weight=none
  CHECK(opt.weight == AttnWeight::none);
  CHECK(opt.given == std::vector<std::string>{"weight"});
  set_option_text(opt, "weight=attn", &c);
  CHECK(opt.weight == AttnWeight::attn);
  set_option(opt, "noGrad", OptionValue::of_bool(true), &c);
  CHECK(opt.weight == AttnWeight::none);
  set_option_text(opt, "no-grad=true", &c);
  CHECK(opt.weight == AttnWeight::none);
  set_option_text(opt, "linear-rule=separate", &c);
  set_option(opt, "addRule", OptionValue::of_text("plain"), &c);
  CHECK(opt.linear_rule == CheferLinear::separate);
  CHECK(opt.add_rule == CheferAdd::plain);
  CHECK_THROWS_WITH(set_option_text(opt, "steps", &c), Catch::Contains("steps needs a value"));
  CHECK_THROWS_WITH(set_option_text(opt, "weight", &c), Catch::Contains("weight needs a value"));

  const MethodInfo& attattr = *find_method("attattr");
  const MethodInfo& ig = *find_method("integrated-gradients");
  CHECK(default_options(&attattr).steps == 20);
  CHECK(default_options(&ig).steps == 32);
  CHECK(resolve_defaults(ig, MethodOptions{}).steps == 32);
  CHECK(resolve_defaults(*find_method("smoothgrad"), MethodOptions{}).samples == 32);
  CHECK(default_options().threads >= 1);

  // Options set through the parser must be read by the method.
  MethodOptions given;
  set_option(given, "startLayer", OptionValue::of_number(1), &c);
  CHECK_NOTHROW(check_method_options(*find_method("rollout"), c, given));
  CHECK_THROWS_WITH(check_method_options(*find_method("raw-attention"), c, given),
                    "start-layer does not apply to raw-attention (its options: target, threads)");
  MethodOptions self;
  self.inner = "smoothgrad";
  CHECK_THROWS_WITH(check_method_options(*find_method("smoothgrad"), c, self), Catch::Contains("other than smoothgrad"));
}

TEST_CASE("options: method specs NAME:key=value", "[options]") {
  const Config c = small_config();
  MethodOptions opt;
  CHECK(std::string(parse_method_spec("rollout:head-fusion=max:discard-ratio=0.9", opt, &c).name) == "rollout");
  CHECK(opt.head_fusion == HeadFusion::max);
  CHECK(opt.discard_ratio == 0.9);
  parse_method_spec("transformer-attribution:no-grad:block=1", opt, &c);
  CHECK(opt.weight == AttnWeight::none);
  CHECK(opt.block == 1);
  parse_method_spec("transformer-attribution:weight=attn:start-layer=1", opt, &c);
  CHECK(opt.weight == AttnWeight::attn);
  CHECK(opt.start_layer == 1);
  CHECK(opt.block == -1);  // a spec starts from the defaults
  parse_method_spec("lrp:linear-rule=separate:add-rule=plain", opt, &c);
  CHECK(opt.linear_rule == CheferLinear::separate);
  CHECK(opt.add_rule == CheferAdd::plain);
  parse_method_spec("attattr", opt, &c);
  CHECK(opt.steps == 20);
  CHECK_THROWS_WITH(parse_method_spec("rollout:block=1", opt, &c), Catch::Contains("block does not apply to rollout"));
  CHECK_THROWS_WITH(parse_method_spec("nope:steps=1", opt, &c), Catch::Contains("unknown method 'nope'"));
  CHECK_THROWS_WITH(parse_method_spec("rollout:start-layer=3", opt, &c), Catch::Contains("start-layer 3 is out of range"));
  CHECK_THROWS_WITH(parse_method_spec("rollout:", opt, &c), Catch::Contains("empty option"));
  CHECK_THROWS_WITH(parse_method_spec("transformer-attribution:no-grad:weight=attn", opt, &c),
                    "weight is given twice in the method spec 'transformer-attribution:no-grad:weight=attn'; give it once");
  CHECK_THROWS_WITH(parse_method_spec("lrp:weight=attn", opt, &c), Catch::Contains("weight does not apply to lrp"));
  CHECK_THROWS_WITH(parse_method_spec("partial-lrp:no-grad", opt, &c), Catch::Contains("weight does not apply to partial-lrp"));
  CHECK(method_spec_name("rollout:head-fusion=max") == "rollout");
}

TEST_CASE("options: a spec's method option takes a spec in parentheses", "[options]") {
  const Config c = small_config();
  MethodOptions opt;
  parse_method_spec("smoothgrad:inner=(rollout:head-fusion=max:start-layer=1):samples=2", opt, &c);
  CHECK(opt.inner == "rollout:head-fusion=max:start-layer=1");
  CHECK(opt.samples == 2);
  CHECK(opt.head_fusion == HeadFusion::mean);  // the inner spec's options stay in the inner spec
  CHECK_THROWS_WITH(parse_method_spec("smoothgrad:inner=(rollout:head-fusion=max", opt, &c),
                    Catch::Contains("unbalanced parentheses"));
  CHECK_THROWS_WITH(parse_method_spec("smoothgrad:inner=(rollout:nope=1)", opt, &c),
                    Catch::Contains("unknown option 'nope' for rollout"));
  parse_method_spec("smoothgrad:inner=(smoothgrad:samples=2)", opt, &c);  // explain() refuses it
  CHECK_THROWS_WITH(check_method_options(*find_method("smoothgrad"), c, opt),
                    Catch::Contains("must name a method other than smoothgrad"));
  // Without parentheses the inner options would be smoothgrad's: refused, since it does not read them.
  CHECK_THROWS_WITH(parse_method_spec("smoothgrad:inner=rollout:head-fusion=max", opt, &c),
                    Catch::Contains("head-fusion does not apply to smoothgrad"));
}

TEST_CASE("options: a spec and options given apart combine; a key given both ways is refused", "[options]") {
  const Config c = small_config();
  const MethodInfo& ta = *find_method("transformer-attribution");
  MethodOptions opt = default_options(&ta);
  set_option(opt, "target", OptionValue::of_number(2), &c);  // given apart (a flag, a JS key)
  set_option(opt, "block", OptionValue::of_number(0), &c);
  CHECK(std::string(apply_method_spec("transformer-attribution:no-grad", opt, &c).name) == "transformer-attribution");
  CHECK(opt.target == 2);
  CHECK(opt.block == 0);
  CHECK(opt.weight == AttnWeight::none);
  MethodOptions twice = default_options(&ta);
  set_option(twice, "startLayer", OptionValue::of_number(1), &c);
  CHECK_THROWS_WITH(apply_method_spec("transformer-attribution:start-layer=1", twice, &c),
                    "start-layer is given twice: in the method spec 'transformer-attribution:start-layer=1' and apart "
                    "from it (--start-layer, startLayer); give it once");
  MethodOptions alias = default_options(&ta);
  set_option(alias, "weight", OptionValue::of_text("attn"), &c);
  CHECK_THROWS_WITH(apply_method_spec("transformer-attribution:no-grad", alias, &c), Catch::Contains("weight is given twice"));
}
