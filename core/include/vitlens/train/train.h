// train.h — training a multi-label ViT on Fashion-MNIST scenes: sigmoid/BCE loss, AdamW,
// warm-up + cosine schedule, integer augmentation, data-parallel threads, checkpoints.
//
// Everything a run computes is a function of its TrainOptions: scene k of step t is
// make_scene(train split, scenes, seed, t·batch + k), its augmentation is drawn from a
// counter-based generator keyed on (seed, t·batch + k), and the initial weights from seed.
// A batch is cut into a fixed number of shards (train_shards, independent of the thread
// count); each shard accumulates its gradient into its own buffer and the shards are summed
// in shard order, so the parameters after any step do not depend on the number of threads or
// on timing. A checkpoint stores the f32 model, the AdamW moments and the step: a resumed run
// continues bit-identically. Results are reproducible on one build; a different compiler,
// -march or the wasm build may round differently.
//
// This file does not generate the data (scenes.h) nor define the layers (vit.h); it drives
// them. Evaluation on held-out scenes lives in scene_eval.h.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vitlens/model/model.h"
#include "vitlens/data/scenes.h"
#include "vitlens/model/vit.h"

namespace vitlens {

// Fixed number of gradient shards per batch (see the header comment).
constexpr int train_shards = 8;
// Scenes in one "epoch": the size of the train split.
constexpr int64_t train_epoch_scenes = 60000;

// AdamW hyper-parameters (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization").
struct AdamW {
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.05f;  // applied to weight matrices only (see decays_weight)
};

// Augmentation applied to a training scene, all in integer arithmetic on 8-bit pixels.
struct Augment {
  bool flip = true;            // mirror the scene horizontally with probability 1/2
  int shift = 4;               // translate by −shift … shift pixels in x and y, edges replicated
  int brightness = 24;         // add −b … b to every channel
  int contrast_percent = 20;   // scale around 128 by 100 ± c percent
  int channel_gain_percent = 10;  // scale each channel by 100 ± g percent
  bool channel_shuffle = true; // permute the RGB channels (one of 6) with probability 1/2
};

struct TrainOptions {
  Config model;                // architecture; classes, output kind, names and mean/std are set by train
  int64_t steps = 1000;        // optimiser steps in the whole run (the schedule spans them)
  int batch = 64;
  float lr = 1e-3f;            // peak learning rate
  float min_lr_ratio = 0.02f;  // the cosine ends at lr × this
  int warmup = 200;            // linear warm-up steps
  int64_t decay = 0;           // cosine over the last `decay` steps, constant lr before (0: all after warm-up)
  float grad_clip = 1.0f;      // clip the global gradient norm to this (0: off)
  AdamW adamw;
  Augment augment;
  SceneOptions scenes;         // how training scenes are made (size must equal the model input)
  uint64_t seed = 1;           // data stream, augmentation and initial weights
  int threads = 2;             // worker threads (1 under Emscripten); does not change results
  int norm_samples = 2000;     // training scenes used to estimate the per-channel mean/std
  int64_t checkpoint_every = 250;  // steps between checkpoints (0: only at the end)
  int64_t stop_at = -1;        // if ≥ 0, stop after this many steps (checkpointed): resume later
  int64_t log_every = 50;      // steps between progress reports
  int64_t eval_every = 0;      // steps between validation reports (0: off)
  int eval_scenes = 500;       // validation scenes (test split, eval_seed)
  uint64_t eval_seed = 9001;   // validation stream; the final report uses a different seed
  std::string out_dir;         // checkpoints go here; empty: none
  bool resume = false;         // continue from out_dir/checkpoint.* if present
};

// One progress report.
struct TrainProgress {
  int64_t step = 0, steps = 0;   // steps done, of the run
  double loss = 0;               // mean BCE (summed over classes) since the last report
  double exact_acc = 0;          // share of scenes whose thresholded set equals the true set
  double lr = 0;                 // learning rate of the last step
  double scenes_per_s = 0;       // since the last report
  double elapsed_s = 0, eta_s = 0;
  bool has_eval = false;         // the fields below are set
  double val_map = 0, val_exact = 0, val_single_top1 = 0;
  bool checkpointed = false;     // a checkpoint was written at this step
};

using TrainCallback = std::function<void(const TrainProgress&)>;

// Which parameters get weight decay: the linear / patch weights and the head weight, by name
// from param_list; not biases, LayerNorm, cls_token or pos_embed.
bool decays_weight(const std::string& name);

// Learning rate for step t (0-based) of `steps`: linear warm-up over `warmup` steps to lr,
// constant until the last `decay` steps (none when decay = 0), then cosine down to
// lr × min_lr_ratio at the last step. With decay > 0 the schedule's prefix does not depend on
// `steps`, so a run may be extended or shortened on resume while it is still in that prefix.
float lr_at(const TrainOptions& opt, int64_t t);

// The model a run starts from: shape from opt.model, 10 sigmoid outputs named after the
// Fashion-MNIST classes, mean/std given, weights drawn from opt.seed (std 0.02 weights, zero
// biases, unit LayerNorm, head bias −log 9 so that each class starts near p = 0.1).
Model train_init_model(const TrainOptions& opt, const std::vector<float>& mean, const std::vector<float>& std);

// Per-channel mean and std of v/255 over the first n scenes of the training stream (no
// augmentation), computed in integer sums: deterministic.
void scene_channel_stats(std::vector<float>& mean, std::vector<float>& std, const FashionMnist& src,
                         const SceneOptions& opt, uint64_t seed, int n);

// Applies the augmentation drawn from (seed, index) in place.
void augment_pixels(Pixels& px, const Augment& aug, uint64_t seed, uint64_t index);


// Statistics of one gradient evaluation.
struct BatchStats {
  double loss_sum = 0;   // Σ over scenes of Σ_classes BCE
  int exact = 0;         // scenes whose thresholded (p > 0.5) set equals the target set
  int count = 0;
};

// Produces sample i of a batch: its normalised input and multi-label target (classes).
using SampleFn = std::function<void(int i, Image& x, Vec& y)>;

// The gradient of the mean (over the batch) of Σ_classes BCE(sigmoid(logits), y) with respect
// to every parameter, written to grad (overwritten; shapes of params_zeros). Samples are made
// by `sample` inside the workers. Sharded and reduced as the header comment says.
BatchStats bce_gradient(Params& grad, const Model& m, int batch, const SampleFn& sample, int threads);

// One AdamW update of every tensor of p at step t (1-based, for the bias corrections):
//   m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²,  m̂ = m/(1−β1ᵗ),  v̂ = v/(1−β2ᵗ),
//   p ← p·(1 − lr·λ)  (decayed tensors only),  p ← p − lr·m̂/(√v̂ + ε).
void adamw_step(Params& p, Params& m, Params& v, Params& g, const Config& cfg, const AdamW& hp, float lr,
                int64_t t);

// Scales g so that its global L2 norm is at most max_norm; returns the norm before clipping.
double clip_grad_norm(Params& g, const Config& cfg, float max_norm);

// A run's full state: what a checkpoint holds.
struct TrainState {
  Model model;     // current weights (f32)
  Params m, v;     // AdamW first and second moments
  int64_t step = 0;  // optimiser steps done
};

// Writes out_dir/checkpoint.vitl (the model, f32) and out_dir/checkpoint.state (step, the
// options that must not change on resume, the moments, CRC-32), each through a temporary file
// and a rename. Throws Error(io).
void save_checkpoint(const std::string& out_dir, const TrainState& s, const TrainOptions& opt);
// Reads them back; throws Error(bad_argument) if the options differ from the checkpoint's
// (steps and decay may differ when the learning rate of every step already taken is the same),
// Error(io / bad_format / truncated / bad_value) for a missing or damaged checkpoint.
TrainState load_checkpoint(const std::string& out_dir, const TrainOptions& opt);

// The whole run: starts fresh (or from the checkpoint if opt.resume and one exists), trains
// until opt.steps (or opt.stop_at), checkpoints, reports progress. val may be null (no
// validation). Returns the final state.
TrainState train(const TrainOptions& opt, const FashionMnist& train_split, const FashionMnist* val_split,
                 const TrainCallback& on_progress);

}  // namespace vitlens
