// import.cpp — importing timm / Hugging Face ViT checkpoints (safetensors + config.json).
//
// Every family the engine implements (shared METHODS.md, "Model variants") is mapped onto our
// parameters, which are named after timm's keys: timm VisionTransformer (DeiT-III, registers,
// no class token, avg pooling with fc_norm, norm_pre, distilled DeiT) and Hugging Face
// ViTForImageClassification, DeiTForImageClassificationWithTeacher, Dinov2ForImageClassification,
// Dinov2WithRegistersForImageClassification and CLIPForImageClassification.
//
// Nothing is guessed and nothing is ignored: each variant is read from config.json or inferred
// from the tensors where that is unambiguous, config.json and the tensors must agree, every
// config key is either read, known not to change the computation (kHarmlessKeys), or refused,
// and every tensor is placed or refused with the feature it belongs to. The only tensors
// accepted without being used are those the Hugging Face classifiers themselves never read:
// Dinov2's mask_token, CLIP's post_layernorm, and CLIP's position_ids buffer when it is the
// identity (0, 1, …, n−1). docs/import.md lists the names and keys.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "vitlens/io/safetensors.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/limits.h"

namespace vitlens {

namespace {

using json = nlohmann::json;

// ---- errors -------------------------------------------------------------------------------

[[noreturn]] void config_error(const std::string& msg) { throw Error(ErrorCode::bad_config, "config.json: " + msg); }

// A feature the engine does not implement: refused, never explained as another model.
[[noreturn]] void not_implemented(const std::string& what) {
  throw Error(ErrorCode::bad_config, "config.json: " + what +
                                         " is not implemented by vitlens; the checkpoint is refused rather than "
                                         "explained as another model");
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// What a tensor name reveals about a model the engine does not implement ("" when nothing).
std::string feature_of_tensor(const std::string& name) {
  struct Marker {
    const char* part;
    const char* feature;
  };
  static const Marker markers[] = {
      {"relative_position", "relative position bias (BEiT / Swin)"},
      {"rel_pos", "relative position embeddings"},
      {"rope", "rotary position embeddings (RoPE)"},
      {"freqs", "rotary position embeddings (RoPE)"},
      {"window", "windowed attention (Swin)"},
      {"attn_mask", "windowed attention (Swin)"},
      {"patch_embed.backbone", "a convolutional backbone before the patch embedding (ViT hybrid)"},
      {"backbone.", "a convolutional backbone (ViT hybrid)"},
      {"stem", "a convolutional stem"},
      {"attn_pool", "attention pooling (global_pool 'map')"},
      {"latent", "attention pooling (global_pool 'map')"},
      {"q_norm", "q/k normalisation (qk_norm)"},
      {"k_norm", "q/k normalisation (qk_norm)"},
      {"attn.norm", "a norm inside the attention (scale_attn_norm)"},
      {"mlp.norm", "a norm inside the MLP (scale_mlp_norm)"},
      {"weights_in", "a SwiGLU FFN (use_swiglu_ffn)"},
      {"weights_out", "a SwiGLU FFN (use_swiglu_ffn)"},
      {"w12", "a SwiGLU FFN"},
      {"mlp.w1", "a SwiGLU FFN"},
      {"mlp.w2", "a SwiGLU FFN"},
      {"mlp.w3", "a SwiGLU FFN"},
      {"fc1_g", "a gated (SwiGLU) FFN"},
      {"fc1_x", "a gated (SwiGLU) FFN"},
      {"q_bias", "separate q / v biases (the BEiT / EVA layout)"},
      {"v_bias", "separate q / v biases (the BEiT / EVA layout)"},
      {"gamma_1", "BEiT's layer scale layout"},
      {"lambda_q", "differential attention"},
      {"pooler", "a pooler head (ViTModel / DeiTModel), which the image classifiers do not have"},
      {"text_model", "CLIP's text tower (import a CLIPForImageClassification checkpoint)"},
      {"text_projection", "CLIP's text tower (import a CLIPForImageClassification checkpoint)"},
      {"visual_projection", "CLIP's image projection (import a CLIPForImageClassification checkpoint)"},
      {"logit_scale", "CLIP's contrastive head (import a CLIPForImageClassification checkpoint)"},
      {"mask_token", "a mask token (masked image modelling)"},
      {"head_dist", "a distillation head"},
      {"distillation", "a distillation head"},
  };
  for (const Marker& m : markers)
    if (contains(name, m.part)) return m.feature;
  return "";
}

[[noreturn]] void unknown_tensor(const std::string& name, const std::string& family) {
  const std::string feature = feature_of_tensor(name);
  throw Error(ErrorCode::unknown_tensor,
              "checkpoint: tensor '" + name + "' does not belong to a " + family + " vitlens implements" +
                  (feature.empty() ? std::string() : " (" + feature + ")"));
}

// ---- config.json --------------------------------------------------------------------------

// Keys that do not change what the model computes at inference (dropout, initialisation, dtype,
// bookkeeping, generation settings, heads the classifiers do not use): accepted and not read.
const std::set<std::string>& harmless_keys() {
  static const std::set<std::string> keys = {
      // dropout and stochastic depth (training only)
      "hidden_dropout_prob", "attention_probs_dropout_prob", "attention_dropout", "dropout", "drop_path_rate",
      "drop_rate", "pos_drop_rate", "proj_drop_rate", "attn_drop_rate", "patch_drop_rate", "classifier_dropout",
      "classifier_dropout_prob",
      // initialisation
      "initializer_range", "initializer_factor", "logit_scale_init_value",
      // dtype, versions, bookkeeping
      "torch_dtype", "dtype", "transformers_version", "_name_or_path", "_commit_hash", "_attn_implementation",
      "_attn_implementation_autoset", "attn_implementation", "gradient_checkpointing", "use_cache", "label2id",
      "finetuning_task", "task_specific_params", "tokenizer_class", "prefix",
      // outputs the caller asks for, not the computation
      "output_attentions", "output_hidden_states", "return_dict", "use_return_dict", "torchscript",
      "use_bfloat16", "tf_legacy_loss", "chunk_size_feed_forward",
      // encoder-decoder and text settings that a vision encoder does not use
      "is_encoder_decoder", "is_decoder", "add_cross_attention", "cross_attention_hidden_size",
      "tie_word_embeddings", "tie_encoder_decoder", "bos_token_id", "eos_token_id", "pad_token_id",
      "sep_token_id", "decoder_start_token_id",
      // generation
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
      "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
      "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
      "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens",
      "begin_suppress_tokens",
      // masked image modelling and backbone use (not the classifier)
      "use_mask_token", "encoder_stride", "out_features", "out_indices", "stage_names", "_out_features",
      "_out_indices", "apply_layernorm", "reshape_hidden_states",
      // ViTModel's pooler (ViTForImageClassification has none)
      "pooler_act", "pooler_output_size",
      // CLIP's text tower and projection (CLIPForImageClassification uses neither)
      "projection_dim", "text_config", "text_config_dict", "vision_config_dict",
  };
  return keys;
}

bool truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

// A JSON object whose keys are marked as they are read, so that any key left over can be
// refused unless it is harmless.
class Keys {
 public:
  // `where` prefixes the keys in messages ("vision_config." for CLIP's vision tower).
  explicit Keys(const json& j, std::string where = "") : j_(j), where_(std::move(where)) {}
  const std::string& where() const { return where_; }
  const json* get(const char* key) {
    used_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  std::optional<int> integer(const char* key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number_integer()) config_error("'" + where_ + key + "' must be an integer");
    return clamp(v->get<int64_t>());
  }
  int required_int(const char* key) {
    const std::optional<int> v = integer(key);
    if (!v) config_error("'" + where_ + key + "' is missing");
    return *v;
  }
  std::optional<bool> boolean(const char* key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) config_error("'" + where_ + key + "' must be true or false");
    return v->get<bool>();
  }
  std::optional<std::string> string(const char* key) {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) config_error("'" + where_ + key + "' must be a string");
    return v->get<std::string>();
  }
  // Every key not read must be harmless; known features get their own reason.
  void refuse_unread() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (used_.count(it.key()) || harmless_keys().count(it.key())) continue;
      if (it.key() == "pruned_heads" && it->empty()) continue;
      config_error("key '" + where_ + it.key() + "' is not one vitlens knows, and it may change what the model computes; " +
                   "the checkpoint is refused (docs/import.md lists the keys that are read and those that are ignored)");
    }
  }
  // Values within ±2^30 so that range checks report them (2^40 is "too large", not garbage).
  static int clamp(int64_t v) { return int(std::max<int64_t>(-(1ll << 30), std::min<int64_t>(v, 1ll << 30))); }

 private:
  const json& j_;
  std::string where_;
  std::set<std::string> used_;
};

// Keys that name a feature the engine does not implement, when set.
void refuse_features(const json& j) {
  auto set = [&](const char* key) { return j.contains(key) && truthy(j.at(key)); };
  if (j.contains("window_size")) not_implemented("windowed attention (Swin: window_size)");
  if (set("use_relative_position_bias") || set("use_shared_relative_position_bias"))
    not_implemented("relative position bias (BEiT: use_relative_position_bias / use_shared_relative_position_bias)");
  for (auto it = j.begin(); it != j.end(); ++it)
    if (starts_with(it.key(), "rope") && truthy(*it)) not_implemented("rotary position embeddings ('" + it.key() + "')");
  if (set("use_rope")) not_implemented("rotary position embeddings ('use_rope')");
  if (set("use_swiglu_ffn")) not_implemented("a SwiGLU FFN (use_swiglu_ffn: true)");
  if (set("backbone_config") || set("backbone") || set("use_timm_backbone"))
    not_implemented("a hybrid with a convolutional backbone (ViT hybrid)");
  if (set("pool_include_prefix")) not_implemented("avg pooling over the prefix tokens too (pool_include_prefix)");
  if (set("qk_norm")) not_implemented("q/k normalisation (qk_norm)");
  if (set("scale_attn_norm") || set("scale_mlp_norm")) not_implemented("a norm inside the attention or MLP (scale_attn_norm / scale_mlp_norm)");
  if (j.contains("proj_bias") && j.at("proj_bias") == false)
    not_implemented("linear layers without bias after the attention and in the MLP (proj_bias: false)");
  if (set("pruned_heads")) not_implemented("pruned attention heads (pruned_heads)");
  if (j.contains("problem_type") && j.at("problem_type") == "regression")
    not_implemented("a regression head (problem_type 'regression'; vitlens explains classifiers)");
}

// The families, as config.json's model_type / architectures and the tensors name them.
enum class Family { timm, vit, deit, dinov2, dinov2_reg, clip };

const char* family_name(Family f) {
  switch (f) {
    case Family::timm: return "timm VisionTransformer";
    case Family::vit: return "Hugging Face ViTForImageClassification";
    case Family::deit: return "Hugging Face DeiTForImageClassificationWithTeacher";
    case Family::dinov2: return "Hugging Face Dinov2ForImageClassification";
    case Family::dinov2_reg: return "Hugging Face Dinov2WithRegistersForImageClassification";
    case Family::clip: return "Hugging Face CLIPForImageClassification";
  }
  return "?";
}

const char* deit_without_teacher =
    "Hugging Face DeiTForImageClassification (a [DIST] token, but only the CLS head is read) is not implemented "
    "by vitlens, whose distilled models average the CLS and distillation heads; import the "
    "DeiTForImageClassificationWithTeacher weights of the same model instead";

std::optional<Family> family_of_architecture(const std::string& a) {
  if (a == "ViTForImageClassification") return Family::vit;
  if (a == "DeiTForImageClassificationWithTeacher") return Family::deit;
  if (a == "Dinov2ForImageClassification") return Family::dinov2;
  if (a == "Dinov2WithRegistersForImageClassification") return Family::dinov2_reg;
  if (a == "CLIPForImageClassification") return Family::clip;
  if (a == "DeiTForImageClassification") throw Error(ErrorCode::bad_config, std::string("config.json: ") + deit_without_teacher);
  if (starts_with(a, "Swin")) not_implemented("architecture '" + a + "' (windowed attention)");
  if (starts_with(a, "Beit") || starts_with(a, "Data2VecVision")) not_implemented("architecture '" + a + "' (relative position bias)");
  if (starts_with(a, "ViTHybrid") || starts_with(a, "DPT")) not_implemented("architecture '" + a + "' (a convolutional stem, hybrid)");
  if (starts_with(a, "Siglip")) not_implemented("architecture '" + a + "' (attention pooling, 'map')");
  not_implemented("architecture '" + a + "' (vitlens imports ViTForImageClassification, "
                  "DeiTForImageClassificationWithTeacher, Dinov2ForImageClassification, "
                  "Dinov2WithRegistersForImageClassification, CLIPForImageClassification and timm ViTs)");
}

std::optional<Family> family_of_model_type(const std::string& t) {
  if (t == "vit") return Family::vit;
  if (t == "deit") return Family::deit;
  if (t == "dinov2") return Family::dinov2;
  if (t == "dinov2_with_registers") return Family::dinov2_reg;
  if (t == "clip") return Family::clip;
  if (t == "swin" || t == "swinv2" || t == "donut-swin" || t == "maskformer-swin")
    not_implemented("model_type '" + t + "' (windowed attention, Swin)");
  if (t == "beit" || t == "data2vec-vision") not_implemented("model_type '" + t + "' (relative position bias)");
  if (t == "vit_hybrid" || t == "dpt") not_implemented("model_type '" + t + "' (a convolutional stem, hybrid)");
  if (t == "siglip" || t == "siglip_vision_model") not_implemented("model_type '" + t + "' (attention pooling, 'map')");
  not_implemented("model_type '" + t + "' (vitlens imports vit, deit, dinov2, dinov2_with_registers and clip)");
}

// timm's `architecture` (a model name): markers of computations that the tensor names alone do
// not reveal.
void check_timm_architecture(const std::string& a) {
  struct Marker {
    const char* part;
    const char* feature;
  };
  static const Marker markers[] = {
      {"rope", "rotary position embeddings"}, {"swin", "windowed attention (Swin)"},
      {"relpos", "relative position embeddings"}, {"beit", "relative position bias (BEiT)"},
      {"hybrid", "a convolutional stem (hybrid)"}, {"resnet", "a convolutional stem (hybrid)"},
      {"_map", "attention pooling ('map')"}, {"siglip", "attention pooling ('map')"},
      {"_rpn_", "residual post-norm blocks"}, {"18x2", "parallel blocks"}, {"eva", "the EVA block (RoPE, SwiGLU)"},
      {"naflex", "NaFlexViT's variable patch grid"},
  };
  for (const Marker& m : markers)
    if (contains(a, m.part)) not_implemented("timm architecture '" + a + "' (" + m.feature + ")");
}

// What config.json says. Optional fields are left to the tensors (or to the family).
struct Declared {
  Config cfg;                      // dimensions, eps, act, classes, normalisation
  std::optional<Family> family;    // from architectures / model_type
  std::optional<bool> class_token, no_embed_class, pre_norm, layer_scale, fc_norm, final_norm, qkv_bias;
  std::optional<int> registers;
  std::string registers_key;       // "reg_tokens" or "num_register_tokens"
  std::optional<Pooling> pool;
  std::optional<int> mlp_ratio_dim;  // hidden_size · mlp_ratio
  bool eps_given = false, act_given = false;
  std::optional<int> num_features;   // timm: must be hidden_size
};

int int_value(const json& v, const char* key) {
  if (!v.is_number_integer()) config_error(std::string("'") + key + "' must be an integer");
  return Keys::clamp(v.get<int64_t>());
}

// The model's dimensions and activation from `k` (the top level, or CLIP's vision_config).
void read_dimensions(Keys& k, Declared& d) {
  Config& c = d.cfg;
  const std::string W = k.where();  // "vision_config." for CLIP
  if (const json* size = k.get("image_size")) {
    if (size->is_array()) {
      if (size->size() != 2) config_error("'" + W + "image_size' must be an integer or [height, width]");
      c.image_h = int_value((*size)[0], "image_size");
      c.image_w = int_value((*size)[1], "image_size");
    } else {
      c.image_h = c.image_w = int_value(*size, "image_size");
    }
  }
  if (const json* p = k.get("patch_size")) {
    if (p->is_array()) {
      if (p->size() != 2 || (*p)[0] != (*p)[1]) not_implemented("a non-square patch (patch_size " + p->dump() + ")");
      c.patch = int_value((*p)[0], "patch_size");
    } else {
      c.patch = int_value(*p, "patch_size");
    }
  } else {
    config_error("'" + W + "patch_size' is missing");
  }
  c.channels = k.integer("num_channels").value_or(3);
  c.dim = k.required_int("hidden_size");
  c.depth = k.required_int("num_hidden_layers");
  c.heads = k.required_int("num_attention_heads");
  const std::optional<int> inter = k.integer("intermediate_size");
  if (const json* r = k.get("mlp_ratio")) {
    if (!r->is_number() || !(r->get<double>() > 0.0) || r->get<double>() > 1e6) config_error("'" + W + "mlp_ratio' must be a positive number");
    d.mlp_ratio_dim = Keys::clamp(int64_t(double(c.dim) * r->get<double>()));  // int(hidden · ratio), as HF and timm
  }
  if (inter && d.mlp_ratio_dim && *inter != *d.mlp_ratio_dim)
    config_error("'intermediate_size' " + std::to_string(*inter) + " disagrees with hidden_size · mlp_ratio = " +
                 std::to_string(*d.mlp_ratio_dim));
  if (inter) c.mlp_dim = *inter;
  else if (d.mlp_ratio_dim) c.mlp_dim = *d.mlp_ratio_dim;
  else config_error("'" + W + "intermediate_size' (or 'mlp_ratio') is missing");
  if (const json* eps = k.get("layer_norm_eps")) {
    if (!eps->is_number()) config_error("layer_norm_eps must be a number");
    c.ln_eps = eps->get<float>();
    d.eps_given = true;
  }
  if (const json* act = k.get("hidden_act")) {
    const std::string a = act->is_string() ? act->get<std::string>() : act->dump();
    if (a == "gelu") c.act = Activation::gelu;
    else if (a == "gelu_pytorch_tanh" || a == "gelu_new") c.act = Activation::gelu_tanh;
    else if (a == "quick_gelu") c.act = Activation::quick_gelu;
    else
      config_error("hidden_act '" + a + "' is not supported; vitlens implements 'gelu' (exact), 'gelu_pytorch_tanh' / "
                   "'gelu_new' (tanh approximation) and 'quick_gelu'");
    d.act_given = true;
  }
  d.qkv_bias = k.boolean("qkv_bias");
}

std::vector<float> float_list(const json& v, const char* key) {
  if (!v.is_array() || v.size() > size_t(limits::max_channels)) config_error(std::string(key) + " must be a list of numbers");
  std::vector<float> out;
  for (const json& x : v) {
    if (!x.is_number()) config_error(std::string(key) + " must hold numbers");
    out.push_back(x.get<float>());
  }
  return out;
}

Declared read_config(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw Error(ErrorCode::bad_format, "config.json is not a JSON object");
  Declared d;
  Config& c = d.cfg;
  refuse_features(j);
  Keys k(j);

  // The family, from Hugging Face's model_type / architectures (they must agree).
  if (const json* archs = k.get("architectures")) {
    if (!archs->is_array() || archs->size() != 1 || !(*archs)[0].is_string())
      config_error("'architectures' must name one class");
    d.family = family_of_architecture((*archs)[0].get<std::string>());
  }
  if (const std::optional<std::string> type = k.string("model_type")) {
    const std::optional<Family> f = family_of_model_type(*type);
    if (d.family && *f != *d.family)
      config_error("model_type '" + *type + "' disagrees with architectures (" + family_name(*d.family) + ")");
    if (!d.family) d.family = f;
  }
  if (const std::optional<std::string> arch = k.string("architecture")) check_timm_architecture(*arch);

  // CLIP keeps the vision tower's dimensions in vision_config; labels stay at the top level.
  const json* vision = k.get("vision_config");
  if (vision && d.family != Family::clip) config_error("'vision_config' is read only for CLIP (model_type 'clip')");
  if (d.family == Family::clip) {
    if (!vision || !vision->is_object()) config_error("a CLIP config.json needs its 'vision_config'");
    refuse_features(*vision);
    Keys v(*vision, "vision_config.");
    if (const std::optional<std::string> t = v.string("model_type"); t && *t != "clip_vision_model")
      config_error("vision_config's model_type must be 'clip_vision_model', not '" + *t + "'");
    read_dimensions(v, d);
    // The vision tower's own labels and architectures are defaults that CLIPForImageClassification
    // does not use (its labels are the top-level ones).
    v.get("id2label");
    v.get("num_labels");
    v.get("architectures");
    v.get("problem_type");
    v.refuse_unread();
  } else {
    read_dimensions(k, d);
  }

  // timm-style variant keys (METHODS.md, "Model variants").
  if (const std::optional<std::string> pool = k.string("global_pool")) {
    if (*pool == "token") d.pool = Pooling::token;
    else if (*pool == "avg") d.pool = Pooling::avg;
    else if (*pool == "token+avg") d.pool = Pooling::token_avg;
    else if (*pool == "map") not_implemented("attention pooling (global_pool 'map')");
    else if (pool->empty()) not_implemented("a head on every token without pooling (global_pool '')");
    else if (*pool == "max" || *pool == "avgmax") not_implemented("max pooling (global_pool '" + *pool + "')");
    else not_implemented("global_pool '" + *pool + "' (vitlens implements 'token', 'avg' and 'token+avg')");
  }
  d.class_token = k.boolean("class_token");
  d.no_embed_class = k.boolean("no_embed_class");
  d.pre_norm = k.boolean("pre_norm");
  d.fc_norm = k.boolean("fc_norm");
  d.final_norm = k.boolean("final_norm");
  for (const char* key : {"reg_tokens", "num_register_tokens"}) {
    const std::optional<int> r = k.integer(key);
    if (!r) continue;
    if (d.registers && *d.registers != *r)
      config_error("'reg_tokens' " + std::to_string(*d.registers) + " disagrees with 'num_register_tokens' " + std::to_string(*r));
    d.registers = *r;
    d.registers_key = key;
  }
  for (const char* key : {"layerscale_value", "init_values"}) {
    if (const json* v = k.get(key)) {
      if (!v->is_number()) config_error(std::string("'") + key + "' must be a number (or null)");
      d.layer_scale = true;  // LayerScale present; its γ come from the checkpoint
    }
  }
  if (const std::optional<int> nf = k.integer("num_features")) d.num_features = nf;
  k.get("use_swiglu_ffn");  // false (true was refused above)

  // Classes and their names.
  if (const json* p = k.get("problem_type"); p && *p == "multi_label_classification") c.output = OutputKind::sigmoid;
  const std::optional<int> num_classes = k.integer("num_classes");  // timm
  const std::optional<int> num_labels = k.integer("num_labels");
  std::string classes_from;
  if (const json* labels = k.get("id2label"); labels && labels->is_object()) {
    if (labels->size() > size_t(limits::max_classes)) throw Error(ErrorCode::limit, "config.json: too many labels");
    c.classes = int(labels->size());
    c.class_names.assign(size_t(c.classes), "");
    for (auto it = labels->begin(); it != labels->end(); ++it) {
      char* end = nullptr;
      const long id = std::strtol(it.key().c_str(), &end, 10);
      if (*end || it.key().empty() || id < 0 || id >= c.classes || !it->is_string())
        config_error("id2label must map 0…N−1 to names (bad key '" + it.key() + "')");
      c.class_names[size_t(id)] = it->get<std::string>();
    }
    classes_from = "the labels of id2label";
  } else if (num_labels || num_classes) {
    c.classes = num_labels ? *num_labels : *num_classes;
    classes_from = num_labels ? "num_labels" : "num_classes";
  } else {
    config_error("needs id2label (or num_labels) to know the classes");
  }
  for (const auto& [key, n] : {std::pair<const char*, std::optional<int>>{"num_labels", num_labels}, {"num_classes", num_classes}})
    if (n && *n != c.classes)
      config_error(std::string("'") + key + "' " + std::to_string(*n) + " disagrees with the " + std::to_string(c.classes) +
                   " classes of " + classes_from);

  // Input normalisation: Hugging Face's image_mean / image_std, or timm's pretrained_cfg.
  if (const json* v = k.get("image_mean")) c.mean = float_list(*v, "image_mean");
  if (const json* v = k.get("image_std")) c.std = float_list(*v, "image_std");
  if (const json* pc = k.get("pretrained_cfg")) {
    if (!pc->is_object()) config_error("'pretrained_cfg' must be an object");
    if (c.mean.empty() && pc->contains("mean") && !pc->at("mean").is_null()) c.mean = float_list(pc->at("mean"), "pretrained_cfg.mean");
    if (c.std.empty() && pc->contains("std") && !pc->at("std").is_null()) c.std = float_list(pc->at("std"), "pretrained_cfg.std");
  }
  k.refuse_unread();
  return d;
}

// ---- the checkpoint's names ---------------------------------------------------------------

// Where one of our tensors comes from: one or more checkpoint tensors (q, k, v stacked along the
// first dimension), each with the shape the checkpoint stores.
struct Source {
  std::string name;
  std::vector<int64_t> shape;
};

struct Layout {
  Family family;
  std::string prefix;  // "vit.", "deit.", "dinov2.", "dinov2_with_registers.", "vision_model." or ""
};

std::vector<int64_t> shape_of(const ParamSpec& r) { return std::vector<int64_t>(r.shape.begin(), r.shape.end()); }

// The checkpoint tensors that fill our tensor `r`, in order.
std::vector<Source> sources(const ParamSpec& r, const Layout& n, const Config& c) {
  const std::string& ours = r.name;
  const std::vector<int64_t> shape = shape_of(r);
  if (n.family == Family::timm) return {{ours, shape}};
  const std::string& P = n.prefix;
  const int64_t d = c.dim;
  const bool clip = n.family == Family::clip, dino = n.family == Family::dinov2 || n.family == Family::dinov2_reg;
  const std::string E = P + "embeddings.";
  if (ours == "patch_embed.proj.weight") return {{E + (clip ? "patch_embedding.weight" : "patch_embeddings.projection.weight"), shape}};
  if (ours == "patch_embed.proj.bias") return {{E + (clip ? "patch_embedding.bias" : "patch_embeddings.projection.bias"), shape}};
  if (ours == "cls_token") return {{E + (clip ? "class_embedding" : "cls_token"), clip ? std::vector<int64_t>{d} : shape}};
  if (ours == "dist_token") return {{E + "distillation_token", shape}};
  if (ours == "reg_token") return {{E + "register_tokens", shape}};
  if (ours == "pos_embed")
    return {{E + (clip ? "position_embedding.weight" : "position_embeddings"),
             clip ? std::vector<int64_t>{c.pos_rows(), d} : shape}};
  if (starts_with(ours, "norm_pre.")) return {{P + "pre_layrnorm." + ours.substr(9), shape}};
  if (starts_with(ours, "norm.")) return {{P + "layernorm." + ours.substr(5), shape}};
  if (starts_with(ours, "head_dist.")) return {{"distillation_classifier." + ours.substr(10), shape}};
  if (starts_with(ours, "head."))
    return {{(n.family == Family::deit ? "cls_classifier." : "classifier.") + ours.substr(5), shape}};
  // blocks.N.<part>
  const size_t dot = ours.find('.', 7);
  const std::string b = ours.substr(7, dot - 7), part = ours.substr(dot + 1);
  const std::string L = P + "encoder." + (clip ? "layers." : "layer.") + b + ".";
  const std::string w = part.substr(part.rfind('.') + 1);  // weight | bias | gamma
  if (part == "attn.qkv.weight" || part == "attn.qkv.bias") {
    std::vector<Source> qkv;
    std::vector<int64_t> s = shape;
    s[0] /= 3;
    for (const char* x : {"q", "k", "v"})
      qkv.push_back({L + (clip ? std::string("self_attn.") + x + "_proj." : std::string("attention.attention.") +
                                     (x[0] == 'q' ? "query." : x[0] == 'k' ? "key." : "value.")) + w, s});
    return qkv;
  }
  auto one = [&](const std::string& name) { return std::vector<Source>{{L + name, shape}}; };
  if (part == "attn.proj.weight" || part == "attn.proj.bias") return one((clip ? "self_attn.out_proj." : "attention.output.dense.") + w);
  if (starts_with(part, "norm1.")) return one((clip ? "layer_norm1." : dino ? "norm1." : "layernorm_before.") + w);
  if (starts_with(part, "norm2.")) return one((clip ? "layer_norm2." : dino ? "norm2." : "layernorm_after.") + w);
  if (starts_with(part, "mlp.fc1.")) return one((clip || dino ? "mlp.fc1." : "intermediate.dense.") + w);
  if (starts_with(part, "mlp.fc2.")) return one((clip || dino ? "mlp.fc2." : "output.dense.") + w);
  if (part == "ls1.gamma") return one("layer_scale1.lambda1");
  if (part == "ls2.gamma") return one("layer_scale2.lambda1");
  return {};
}

// The tensors a family's checkpoint carries that its classifier never reads.
bool unused_by_classifier(const std::string& name, const Layout& n, const SafeTensors& st, int pos_rows) {
  if ((n.family == Family::dinov2 || n.family == Family::dinov2_reg) && name == n.prefix + "embeddings.mask_token")
    return true;
  if (n.family != Family::clip) return false;
  if (name == n.prefix + "post_layernorm.weight" || name == n.prefix + "post_layernorm.bias") return true;
  if (name == n.prefix + "embeddings.position_ids") {
    // A buffer of the position indices: harmless only when it is 0, 1, …, n−1.
    const SafeTensor& t = st.tensors.at(name);
    if (t.dtype != "I64" || t.shape != std::vector<int64_t>{1, pos_rows} || t.end - t.begin != size_t(pos_rows) * 8)
      return false;
    std::vector<uint8_t> ids(t.end - t.begin);
    st.read(st.data_offset + t.begin, ids.size(), ids.data());
    for (int i = 0; i < pos_rows; ++i) {
      int64_t v;
      std::memcpy(&v, ids.data() + size_t(i) * 8, 8);
      if (v != i) return false;
    }
    return true;
  }
  return false;
}

// The naming from the tensors: timm, or the prefix of a Hugging Face family.
Layout detect_naming(const SafeTensors& st, const std::optional<Family>& declared) {
  auto has = [&](const std::string& n) { return st.tensors.count(n) > 0; };
  const std::string patch = "embeddings.patch_embeddings.projection.weight";
  struct Prefixed {
    const char* prefix;
    Family family;
  };
  for (const Prefixed& p : {Prefixed{"vit.", Family::vit}, Prefixed{"deit.", Family::deit},
                            Prefixed{"dinov2.", Family::dinov2}, Prefixed{"dinov2_with_registers.", Family::dinov2_reg}})
    if (has(p.prefix + patch)) return {p.family, p.prefix};
  if (has("vision_model.embeddings.patch_embedding.weight")) return {Family::clip, "vision_model."};
  if (has(patch)) {  // a base model's names without the classifier's prefix: the family from config.json
    const Family f = declared.value_or(Family::vit);
    if (f == Family::clip) config_error("CLIP tensors are named 'vision_model.…'");
    return {f, ""};
  }
  if (has("patch_embed.proj.weight")) return {Family::timm, ""};
  for (const auto& [name, t] : st.tensors) {
    const std::string feature = feature_of_tensor(name);
    if (!feature.empty())
      throw Error(ErrorCode::missing_tensor, "checkpoint: no ViT patch embedding, and tensor '" + name + "' belongs to " +
                                                 feature + ", which vitlens does not implement");
  }
  throw Error(ErrorCode::missing_tensor,
              "checkpoint: no 'patch_embed.proj.weight' (timm) or '…embeddings.patch_embeddings.projection.weight' / "
              "'vision_model.embeddings.patch_embedding.weight' (Hugging Face) tensor; is this a ViT classifier checkpoint?");
}

// ---- from what config.json says and what the tensors hold, the model's variants -----------------

std::string yes_no(bool v) { return v ? "true" : "false"; }

// `declared` (from config.json), if given, must equal what the family or the tensors fix.
void agree(const char* key, const std::optional<bool>& declared, bool actual, const std::string& because) {
  if (declared && *declared != actual)
    config_error("'" + std::string(key) + ": " + yes_no(*declared) + "' contradicts " + because);
}

// Whether the tensors (one or three per block) are all present (true) or all absent (false); some
// of each is an error.
bool all_or_none(const SafeTensors& st, const std::vector<std::string>& names_per_block, const std::string& what) {
  size_t present = 0;
  std::string a_present, a_missing;
  for (const std::string& n : names_per_block) {
    if (st.tensors.count(n)) {
      ++present;
      if (a_present.empty()) a_present = n;
    } else if (a_missing.empty()) {
      a_missing = n;
    }
  }
  if (present == 0) return false;
  if (present == names_per_block.size()) return true;
  throw Error(ErrorCode::missing_tensor, "checkpoint: " + what + " is present in some blocks and not in others ('" +
                                             a_present + "' is there, '" + a_missing + "' is missing)");
}

Config resolve(const Declared& d, const Layout& n, const SafeTensors& st, bool* qkv_bias, bool* patch_bias) {
  Config c = d.cfg;
  fill_config_defaults(c);
  validate_config(c);  // the sizes first (as the plain model), before they are used below
  auto has = [&](const std::string& name) { return st.tensors.count(name) > 0; };
  const std::string& P = n.prefix;
  const std::string fam = family_name(n.family);

  // The family named by config.json must be the one the tensors are named for. timm names come
  // with a hand-written config.json, which may name the Hugging Face class that computes the
  // same (ViT, or DeiT with teacher).
  if (d.family && *d.family != n.family &&
      !(n.family == Family::timm && (*d.family == Family::vit || *d.family == Family::deit)))
    config_error(std::string("config.json names ") + family_name(*d.family) + " but the checkpoint's tensors are named for " + fam);
  if (n.family == Family::deit && !has("cls_classifier.weight") && has("classifier.weight"))
    throw Error(ErrorCode::bad_config, std::string("checkpoint: ") + deit_without_teacher);

  // Per family, what is fixed and what the declared keys may not contradict.
  switch (n.family) {
    case Family::timm: {
      c.class_token = d.class_token.value_or(has("cls_token"));
      c.dist_token = has("dist_token");
      if (has("dist_token") != has("head_dist.weight"))
        throw Error(ErrorCode::missing_tensor, has("dist_token")
                                                   ? "checkpoint: a distillation token 'dist_token' without its head 'head_dist.weight'"
                                                   : "checkpoint: a distillation head 'head_dist.weight' without its token 'dist_token'");
      c.pool = d.pool.value_or(c.class_token ? Pooling::token : Pooling::avg);
      if (c.pool != Pooling::avg && !c.class_token)
        config_error(std::string("global_pool '") + pooling_name(c.pool) + "' needs a class token, but " +
                     (d.class_token ? "class_token is false" : "the checkpoint has no 'cls_token'"));
      agree("class_token", d.class_token, has("cls_token"),
            "the checkpoint, which " + std::string(has("cls_token") ? "has" : "has no") + " 'cls_token'");
      // The one LayerNorm after the blocks is either the final `norm` (all tokens, before pooling)
      // or `fc_norm` (the pooled vector); timm has one or the other (or neither: final_norm
      // false). Which one, the tensor names say: for every checkpoint timm itself loads, this is
      // timm's rule (fc_norm when global_pool is 'avg'), and a checkpoint with `norm` and avg
      // pooling (made with fc_norm=False) pools the normed tokens instead of failing.
      const bool has_fc = has("fc_norm.weight"), has_norm = has("norm.weight");
      if (has_fc && has_norm)
        throw Error(ErrorCode::unknown_tensor, "checkpoint: both a final 'norm' and an 'fc_norm' (timm has one or the other)");
      const bool use_fc_norm = d.fc_norm.value_or(has_fc);
      const bool final_norm = d.final_norm.value_or(has_fc || has_norm);
      c.final_norm = final_norm && !use_fc_norm;
      c.fc_norm = final_norm && use_fc_norm;
      if (c.fc_norm && c.pool != Pooling::avg)
        not_implemented(std::string(d.fc_norm ? "'fc_norm: true'" : "an 'fc_norm'") + " with global_pool '" + pooling_name(c.pool) +
                        "' (timm's norm on the pooled token; vitlens implements fc_norm for 'avg' pooling)");
      const std::string keys = "'fc_norm: " + yes_no(use_fc_norm) + "', 'final_norm: " + yes_no(final_norm) + "'";
      if (c.fc_norm != has_fc)
        config_error(keys + (c.fc_norm ? " imply an 'fc_norm', which the checkpoint lacks"
                                       : " imply no 'fc_norm', but the checkpoint has 'fc_norm.weight'"));
      if (c.final_norm != has_norm)
        config_error(keys + (c.final_norm ? " imply a final 'norm', which the checkpoint lacks"
                                          : " imply no final 'norm', but the checkpoint has 'norm.weight'"));
      c.pre_norm = d.pre_norm.value_or(has("norm_pre.weight"));
      agree("pre_norm", d.pre_norm, has("norm_pre.weight"),
            std::string("the checkpoint, which ") + (has("norm_pre.weight") ? "has" : "has no") + " 'norm_pre.weight'");
      break;
    }
    case Family::vit:
    case Family::deit:
    case Family::dinov2:
    case Family::dinov2_reg:
    case Family::clip: {
      const bool clip = n.family == Family::clip;
      c.class_token = true;
      c.dist_token = n.family == Family::deit;
      c.pool = n.family == Family::dinov2 || n.family == Family::dinov2_reg ? Pooling::token_avg
               : clip                                                       ? Pooling::avg
                                                                            : Pooling::token;
      c.final_norm = !clip;  // CLIP's post_layernorm is not read by the classifier
      c.fc_norm = false;
      c.pre_norm = clip;
      if (c.pool == Pooling::token_avg && c.image_h != c.image_w)
        not_implemented("Dinov2 with a non-square image_size (" + std::to_string(c.image_h) + "×" + std::to_string(c.image_w) +
                        "): Hugging Face's Dinov2 resamples pos_embed, as a square grid, for every non-square input");
      const std::string because = fam + ", which pools '" + pooling_name(c.pool) + "'";
      if (d.pool && *d.pool != c.pool)
        config_error(std::string("'global_pool: ") + pooling_name(*d.pool) + "' contradicts " + because);
      agree("class_token", d.class_token, true, fam + " (always a class token)");
      agree("fc_norm", d.fc_norm, false, fam + " (no fc_norm)");
      agree("final_norm", d.final_norm, c.final_norm, fam);
      agree("pre_norm", d.pre_norm, c.pre_norm, fam);
      break;
    }
  }

  // Register tokens: declared, or the rows of the register tensor.
  const std::string reg = n.family == Family::timm ? "reg_token" : P + "embeddings.register_tokens";
  if (has(reg) && n.family != Family::timm && n.family != Family::dinov2_reg)
    unknown_tensor(reg, fam);
  const std::vector<int64_t> reg_shape = has(reg) ? st.tensors.at(reg).shape : std::vector<int64_t>{};
  if (has(reg) && (reg_shape.size() != 3 || reg_shape[0] != 1 || reg_shape[2] != c.dim))
    throw Error(ErrorCode::bad_shape, "checkpoint: register tokens '" + reg + "' have shape " + shape_str(reg_shape) +
                                          ", expected [1, registers, " + std::to_string(c.dim) + "] (hidden_size " +
                                          std::to_string(c.dim) + ")");
  const int reg_rows = has(reg) ? Keys::clamp(reg_shape[1]) : 0;
  if (d.registers && has(reg) && *d.registers != reg_rows)
    config_error("'" + d.registers_key + "' " + std::to_string(*d.registers) + " disagrees with the checkpoint's " +
                 std::to_string(reg_rows) + " register tokens ('" + reg + "' " + shape_str(reg_shape) + ")");
  if (d.registers && !has(reg) && *d.registers > 0 && *d.registers <= limits::max_registers)
    throw Error(ErrorCode::missing_tensor, "checkpoint: config.json's '" + d.registers_key + "' " + std::to_string(*d.registers) +
                                               " needs the register tokens '" + reg + "', which are missing");
  if (d.registers && n.family != Family::timm && n.family != Family::dinov2_reg && *d.registers != 0)
    config_error("'" + d.registers_key + "' contradicts " + fam + " (no register tokens)");
  c.registers = d.registers.value_or(reg_rows);

  // LayerScale: declared (layerscale_value) or present in the checkpoint; Dinov2 always has it.
  const std::string ls = n.family == Family::timm ? "blocks.0.ls1.gamma" : P + "encoder.layer.0.layer_scale1.lambda1";
  const bool dino = n.family == Family::dinov2 || n.family == Family::dinov2_reg;
  if (dino) c.layer_scale = true;
  else if (n.family == Family::timm) c.layer_scale = d.layer_scale.value_or(false) || has(ls);
  else c.layer_scale = false;
  if (d.layer_scale && !c.layer_scale) config_error("'layerscale_value' contradicts " + fam + " (no LayerScale)");
  if (d.layer_scale && n.family == Family::timm && !has(ls))
    throw Error(ErrorCode::missing_tensor, "checkpoint: config.json sets layerscale_value, but the LayerScale tensor '" + ls +
                                               "' is missing");

  // Activation and LayerNorm eps: each family's default when config.json does not say.
  if (!d.act_given && n.family == Family::clip) c.act = Activation::quick_gelu;  // CLIPVisionConfig's default
  if (!d.eps_given) {
    switch (n.family) {
      case Family::timm: c.ln_eps = 1e-6f; break;
      case Family::dinov2_reg: c.ln_eps = 1e-6f; break;
      case Family::clip: c.ln_eps = 1e-5f; break;
      default: c.ln_eps = 1e-12f; break;
    }
  }

  // pos_embed: with the [CLS][DIST] rows, or (timm no_embed_class) the patches only; a pos_embed
  // with register rows is refused.
  const std::string pos = n.family == Family::timm ? "pos_embed"
                          : n.family == Family::clip ? P + "embeddings.position_embedding.weight"
                                                     : P + "embeddings.position_embeddings";
  if (has(pos) && c.patch > 0 && c.image_h > 0 && c.image_w > 0 && c.image_h % c.patch == 0 && c.image_w % c.patch == 0 &&
      c.registers >= 0 && c.registers <= limits::max_registers) {
    const std::vector<int64_t>& s = st.tensors.at(pos).shape;
    const int64_t rows = s.size() >= 2 ? s[s.size() - 2] : -1;
    const int64_t patches = int64_t(c.grid_h()) * c.grid_w(), k = int64_t(c.class_token) + int64_t(c.dist_token);
    if (c.registers > 0 && rows == patches + k + c.registers)
      not_implemented("a pos_embed with rows for the register tokens ('" + pos + "' has " + std::to_string(rows) + " rows = " +
                      std::to_string(patches) + " patches + " + std::to_string(k + c.registers) +
                      " prefix tokens; some timm *_reg*_gap models), while vitlens gives register tokens no position embedding");
    if (n.family == Family::timm) {
      // Not inferred: without the key, timm's default (false), and a pos_embed of the patches only
      // is reported as mis-shaped with a hint.
      c.no_embed_class = d.no_embed_class.value_or(false);
      const bool patches_only = rows == patches && k > 0;
      if (d.no_embed_class && k > 0 && *d.no_embed_class != patches_only)
        config_error("'no_embed_class: " + yes_no(*d.no_embed_class) + "' contradicts '" + pos + "' with " +
                     std::to_string(rows) + " rows for " + std::to_string(patches) + " patches and " + std::to_string(k) +
                     " class/distillation token(s)");
      if (!d.no_embed_class && patches_only && !d.family)
        throw Error(ErrorCode::bad_shape, "checkpoint: tensor '" + pos + "' has " + std::to_string(rows) +
                                              " rows, one per patch, but config.json implies " + std::to_string(rows + k) +
                                              " (the class token's row too); if pos_embed covers the patches only "
                                              "(timm no_embed_class, as in deit3), say \"no_embed_class\": true");
    }
  }
  if (n.family != Family::timm) agree("no_embed_class", d.no_embed_class, false, fam);

  // Biases that may be absent: q/k/v (timm qkv_bias: false, or none in any block) and the patch
  // embedding's (CLIP, timm with pre_norm); both then load as zeros.
  // Blocks the checkpoint does not have at all are left to the tensor mapping, which names them.
  std::vector<std::string> qkv_b;
  for (int b = 0; b < std::min(c.depth, int(limits::max_depth)); ++b) {
    const std::string blk = std::to_string(b);
    const std::string weight = n.family == Family::timm ? "blocks." + blk + ".attn.qkv.weight"
                               : n.family == Family::clip ? P + "encoder.layers." + blk + ".self_attn.q_proj.weight"
                                                          : P + "encoder.layer." + blk + ".attention.attention.query.weight";
    if (!has(weight)) continue;
    if (n.family == Family::timm) qkv_b.push_back("blocks." + blk + ".attn.qkv.bias");
    else if (n.family == Family::clip)
      for (const char* x : {"q", "k", "v"}) qkv_b.push_back(P + "encoder.layers." + blk + ".self_attn." + x + "_proj.bias");
    else
      for (const char* x : {"query", "key", "value"}) qkv_b.push_back(P + "encoder.layer." + blk + ".attention.attention." + x + ".bias");
  }
  *qkv_bias = !qkv_b.empty() && all_or_none(st, qkv_b, "the q/k/v bias");
  if (d.qkv_bias && *d.qkv_bias != *qkv_bias)
    config_error(std::string("'qkv_bias: ") + yes_no(*d.qkv_bias) + "' contradicts the checkpoint, which " +
                 (*qkv_bias ? "has" : "has no") + " q/k/v biases ('" + (qkv_b.empty() ? std::string() : qkv_b[0]) + "')");
  const std::string pb = n.family == Family::timm ? "patch_embed.proj.bias"
                         : n.family == Family::clip ? P + "embeddings.patch_embedding.bias"
                                                    : P + "embeddings.patch_embeddings.projection.bias";
  *patch_bias = has(pb);

  if (d.num_features && *d.num_features != c.dim)
    config_error("'num_features' " + std::to_string(*d.num_features) + " disagrees with hidden_size " + std::to_string(c.dim));
  c.pos_grid_h = c.pos_grid_w = 0;  // the model at its checkpoint's own size
  fill_config_defaults(c);
  validate_config(c);  // sizes and contradictions among the variants, before the checks below

  // A timm checkpoint whose config.json names a Hugging Face class must be a model of that class.
  if (n.family == Family::timm && d.family) {
    const bool deit = *d.family == Family::deit;
    std::string differs;
    if (!c.class_token) differs = "no class token";
    else if (c.dist_token != deit) differs = deit ? "no distillation token" : "a distillation token";
    else if (c.pool != Pooling::token) differs = std::string("'") + pooling_name(c.pool) + "' pooling";
    else if (c.registers) differs = "register tokens";
    else if (c.layer_scale) differs = "LayerScale";
    else if (c.pre_norm) differs = "a norm before the blocks";
    else if (c.no_embed_class) differs = "a pos_embed without the class token's row";
    if (!differs.empty())
      config_error(std::string("config.json names ") + family_name(*d.family) + ", but the timm checkpoint has " + differs);
  }
  return c;
}

Model import_unchecked(const SafeTensors& st, const std::string& config_json, Naming* detected,
                       const ImportProgressFn& progress) {
  const Declared declared = read_config(config_json);
  const Layout naming = detect_naming(st, declared.family);
  if (detected) *detected = naming.family == Family::timm ? Naming::timm : Naming::huggingface;
  const std::string fam = family_name(naming.family);

  bool qkv_bias = true, patch_bias = true;
  Model m;
  m.config = resolve(declared, naming, st, &qkv_bias, &patch_bias);
  if (param_count(m.config) > limits::max_params)
    throw Error(ErrorCode::limit, "config.json: the model has " + std::to_string(param_count(m.config)) +
                                      " parameters; vitlens loads at most " + std::to_string(limits::max_params));
  m.provenance = "imported from a " + fam + " safetensors checkpoint";
  auto meta = st.metadata.find("provenance");
  if (meta != st.metadata.end()) m.provenance += ": " + meta->second;

  // Every tensor the config needs is checked (present, shaped as the config implies, of a float
  // dtype) and every tensor of the file accounted for before the parameters are allocated: a
  // truncated or hostile checkpoint fails without allocating what its config.json claims.
  const std::vector<ParamSpec> specs = param_specs(m.config);
  std::vector<std::vector<Source>> plan(specs.size());  // per parameter, its sources; empty: zeros
  std::set<std::string> used;
  for (size_t k = 0; k < specs.size(); ++k) {
    const ParamSpec& r = specs[k];
    const bool is_qkv_bias = r.name.size() > 14 && r.name.compare(r.name.size() - 14, 14, ".attn.qkv.bias") == 0;
    if ((is_qkv_bias && !qkv_bias) || (r.name == "patch_embed.proj.bias" && !patch_bias)) continue;  // zeros
    plan[k] = sources(r, naming, m.config);
    assert(!plan[k].empty());
    for (const Source& src : plan[k]) {
      auto it = st.tensors.find(src.name);
      if (it == st.tensors.end())
        throw Error(ErrorCode::missing_tensor, "checkpoint: tensor '" + src.name + "' is missing (needed for " + r.name + ")");
      if (it->second.shape != src.shape)
        throw Error(ErrorCode::bad_shape, "checkpoint: tensor '" + src.name + "' has shape " + shape_str(it->second.shape) +
                                              " but config.json implies " + shape_str(src.shape));
      st.float_count(src.name);  // an importable dtype
      used.insert(src.name);
    }
  }
  for (const auto& [name, t] : st.tensors)
    if (!used.count(name) && !unused_by_classifier(name, naming, st, m.config.pos_rows())) unknown_tensor(name, fam);

  // The parameters, at most twice the bytes of the file (F16 / BF16 widened to F32). Every
  // element is written below (a source tensor or zeros), so they are not zero-filled first.
  m.params = params_alloc(m.config);
  std::vector<ParamRef> refs = param_list(m.params, m.config);
  const double total = double(std::max<uint64_t>(1, st.data_size));  // progress: data bytes read
  double placed = 0;
  for (size_t k = 0; k < refs.size(); ++k) {
    if (plan[k].empty()) std::fill(refs[k].data, refs[k].data + refs[k].size, 0.0f);
    size_t filled = 0;
    for (const Source& src : plan[k]) {
      const size_t n = st.float_count(src.name);
      st.read_floats(src.name, refs[k].data + filled, n);
      filled += n;
      const SafeTensor& t = st.tensors.at(src.name);
      placed += double(t.end - t.begin);
      if (progress && !progress(std::min(1.0, placed / total)))
        throw Error(ErrorCode::cancelled, "the import was cancelled");
    }
    assert(plan[k].empty() || filled == refs[k].size);
  }
  return m;
}

}  // namespace

Model import_checkpoint(const SafeTensors& st, const std::string& config_json, Naming* detected,
                        const ImportProgressFn& progress) {
  try {
    return import_unchecked(st, config_json, detected, progress);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::bad_format, std::string("checkpoint: ") + e.what());
  }
}

Model import_checkpoint(const uint8_t* bytes, size_t size, const std::string& config_json, Naming* detected) {
  return import_checkpoint(parse_safetensors(bytes, size), config_json, detected);
}

}  // namespace vitlens
