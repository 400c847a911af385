// cmd_train.cpp — `vitlens train`: trains a multi-label ViT on Fashion-MNIST scenes.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "commands.h"
#include "common.h"
#include "vitlens/tensor/error.h"
#include "vitlens/io/model_file.h"
#include "vitlens/train/train.h"

namespace vitlens::cli {

namespace {

// Architecture presets for 64×64 scenes (patch 8: 64 patches + CLS = 65 tokens).
Config preset(const std::string& name) {
  Config c;
  c.image_h = c.image_w = 64;
  c.channels = 3;
  c.patch = 8;
  c.ln_eps = 1e-6f;
  if (name == "small") {
    c.dim = 96, c.depth = 6, c.heads = 4, c.mlp_dim = 192;
  } else if (name == "tiny") {
    c.dim = 64, c.depth = 4, c.heads = 4, c.mlp_dim = 128;
  } else if (name == "micro") {
    c.dim = 32, c.depth = 2, c.heads = 2, c.mlp_dim = 64;
  } else {
    throw Error(ErrorCode::bad_argument, "--config must be small, tiny or micro, got '" + name + "'");
  }
  return c;
}

}  // namespace

int cmd_train(int argc, char** argv) {
  Args args(argc, argv,
            {"out", "config", "dim", "depth", "heads", "mlp", "patch", "steps", "epochs", "batch", "lr", "wd",
             "warmup", "decay", "seed", "threads", "eval-every", "eval-n", "checkpoint-every", "log-every", "stop-at", "data",
             "clip", "item-min", "item-max"},
            {"help", "resume", "no-augment"});
  if (args.has("help") || !args.has("out") || !args.positional().empty()) {
    std::printf(
        "usage: vitlens train --out DIR [--config small|tiny|micro] [--dim D --depth L --heads H --mlp M\n"
        "                     --patch P] [--steps N | --epochs E] [--batch 64] [--lr 1e-3] [--wd 0.05]\n"
        "                     [--warmup 200] [--decay D] [--clip 1] [--seed 1] [--threads 2] [--resume]\n"
        "                     [--eval-every K --eval-n 500] [--checkpoint-every 250] [--log-every 50]\n"
        "                     [--stop-at N] [--no-augment] [--item-min %d --item-max %d] [--data %s]\n\n"
        "Trains a ViT on 64×64 Fashion-MNIST scenes (train split, generated on the fly from the seed),\n"
        "multi-label: 10 sigmoid outputs, binary cross-entropy. AdamW (no decay on biases, LayerNorm,\n"
        "cls/pos), linear warm-up, then constant --lr until the last D steps (default: none), then cosine\n"
        "to 2%% of --lr; global-norm clipping; flip / shift / brightness / contrast / channel\n"
        "augmentation. An epoch is 60000 scenes.\n"
        "DIR receives checkpoint.vitl + checkpoint.state every --checkpoint-every steps; --resume\n"
        "continues from them bit-identically (with --decay D, --steps may be changed on resume while\n"
        "the checkpoint is still before the decay). At the end DIR/model-f32.vitl and DIR/model-int8.vitl.\n"
        "The result depends on the seed and the options, not on --threads. --eval-every reports\n"
        "validation figures on test-split scenes of seed 9001 (monitoring only), made like the\n"
        "training scenes (--item-min/--item-max: the side of a scaled item, pixels).\n",
        SceneOptions{}.min_item, SceneOptions{}.max_item, fashion_mnist_default_dir);
    return args.has("help") ? 0 : 2;
  }
  TrainOptions opt;
  opt.model = preset(args.get("config", "small"));
  opt.model.dim = args.get_int("dim", opt.model.dim);
  opt.model.depth = args.get_int("depth", opt.model.depth);
  opt.model.heads = args.get_int("heads", opt.model.heads);
  opt.model.mlp_dim = args.get_int("mlp", opt.model.mlp_dim);
  opt.model.patch = args.get_int("patch", opt.model.patch);
  opt.batch = args.get_int("batch", opt.batch);
  if (args.has("steps") && args.has("epochs"))
    throw Error(ErrorCode::bad_argument, "give --steps or --epochs, not both");
  if (args.has("epochs")) {
    const double e = args.get_double("epochs", 1.0);
    if (!(e > 0.0) || e > 1e4) throw Error(ErrorCode::bad_argument, "--epochs must be in (0, 10000]");
    opt.steps = int64_t(e * double(train_epoch_scenes) / double(std::max(1, opt.batch)) + 0.999);
  } else {
    opt.steps = args.get_int("steps", int(opt.steps));
  }
  opt.lr = float(args.get_double("lr", opt.lr));
  opt.adamw.weight_decay = float(args.get_double("wd", opt.adamw.weight_decay));
  opt.warmup = args.get_int("warmup", opt.warmup);
  opt.decay = args.get_int("decay", 0);
  opt.grad_clip = float(args.get_double("clip", opt.grad_clip));
  opt.seed = args.get_u64("seed", opt.seed);
  opt.threads = args.get_int("threads", opt.threads);
  if (opt.threads < 1) throw Error(ErrorCode::bad_argument, "--threads must be ≥ 1");
  opt.eval_every = args.get_int("eval-every", 0);
  opt.eval_scenes = args.get_int("eval-n", opt.eval_scenes);
  opt.checkpoint_every = args.get_int("checkpoint-every", int(opt.checkpoint_every));
  opt.log_every = args.get_int("log-every", int(opt.log_every));
  opt.stop_at = args.get_int("stop-at", -1);
  opt.resume = args.has("resume");
  if (args.has("no-augment")) opt.augment = Augment{false, 0, 0, 0, 0, false};
  opt.scenes.min_item = args.get_int("item-min", opt.scenes.min_item);
  opt.scenes.max_item = args.get_int("item-max", opt.scenes.max_item);
  opt.out_dir = args.get("out");
  fill_config_defaults(opt.model);

  const std::string data_dir = args.get("data", fashion_mnist_default_dir);
  const FashionMnist train_split = load_fashion_mnist(data_dir, true);
  FashionMnist val_split;
  if (opt.eval_every > 0) val_split = load_fashion_mnist(data_dir, false);
  std::printf("training %d×%d patch %d, width %d, depth %d, heads %d, MLP %d (%lld parameters)\n"
              "scene items %d…%d px, augmentation %s\n"
              "%lld steps × batch %d (%.2f epochs), lr %g, wd %g, warm-up %d, seed %llu, %d thread(s) → %s\n",
              opt.model.image_h, opt.model.image_w, opt.model.patch, opt.model.dim, opt.model.depth,
              opt.model.heads, opt.model.mlp_dim, (long long)param_count([&] {
                Config c = opt.model;
                c.classes = fashion_classes;
                return c;
              }()),
              opt.scenes.min_item, opt.scenes.max_item, args.has("no-augment") ? "off" : "on",
              (long long)opt.steps, opt.batch, double(opt.steps) * opt.batch / double(train_epoch_scenes),
              double(opt.lr), double(opt.adamw.weight_decay), opt.warmup, (unsigned long long)opt.seed,
              opt.threads, opt.out_dir.c_str());
  std::fflush(stdout);

  const TrainState s = train(opt, train_split, opt.eval_every > 0 ? &val_split : nullptr, [&](const TrainProgress& p) {
    const double epoch = double(p.step) * opt.batch / double(train_epoch_scenes);
    std::printf("step %6lld/%lld %5.1f%%  epoch %5.2f  loss %.4f  exact %5.1f%%  lr %.2e  %6.1f scenes/s  elapsed %s  ETA %s%s\n",
                (long long)p.step, (long long)p.steps, 100.0 * double(p.step) / double(p.steps), epoch, p.loss,
                100.0 * p.exact_acc, p.lr, p.scenes_per_s, clock_text(p.elapsed_s).c_str(), clock_text(p.eta_s).c_str(),
                p.checkpointed ? "  [checkpoint]" : "");
    if (p.has_eval)
      std::printf("  validation: mAP %.4f  exact-set %.1f%%  single-item top-1 %.1f%%\n", p.val_map,
                  100.0 * p.val_exact, 100.0 * p.val_single_top1);
    std::fflush(stdout);
  });
  if (s.step < opt.steps) {
    std::printf("stopped at step %lld of %lld; continue with the same options and --resume\n", (long long)s.step,
                (long long)opt.steps);
    return 0;
  }
  Model m = s.model;
  std::string cmd = "vitlens train";
  for (int i = 1; i < argc; ++i) cmd += std::string(" ") + argv[i];
  m.provenance = "Trained from scratch by `" + cmd +
                 "` (seed " + std::to_string(opt.seed) + ", " + std::to_string(opt.steps) + " steps × batch " +
                 std::to_string(opt.batch) +
                 ") on 64x64 scenes composed from Fashion-MNIST train images (Zalando SE, MIT licence; "
                 "Debian package dataset-fashion-mnist). Multi-label sigmoid over the 10 classes.";
  save_model_file(opt.out_dir + "/model-f32.vitl", m, Storage::f32);
  save_model_file(opt.out_dir + "/model-int8.vitl", m, Storage::int8);
  std::printf("wrote %s/model-f32.vitl and %s/model-int8.vitl\n", opt.out_dir.c_str(), opt.out_dir.c_str());
  return 0;
}

}  // namespace vitlens::cli
