// test_eval_data.cpp — the benchmark beyond the shipped scenes (eval.h, image_set.h): method
// specs and their canonical form, the nearest-neighbour mask resize against hand-worked grids,
// the folder and labels.csv layouts and their errors, a run on a non-square gray sigmoid model
// with skipped files, a spec's options reaching explain(), shards whose union equals the
// unsharded run report for report, and (with Fashion-MNIST and the shipped model) exported scenes
// read back as labelled images giving the scene benchmark's records.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "helpers.h"
#include "vitlens/eval/eval.h"
#include "vitlens/eval/image_set.h"
#include "vitlens/io/image.h"
#include "vitlens/io/model_file.h"
#include "vitlens/methods/methods.h"
#include "vitlens/metrics/metrics.h"
#include "vitlens/tensor/error.h"

using namespace vitlens;
namespace fs = std::filesystem;

namespace {

// Expects `f` to throw Error(code) whose message holds `part`.
template <typename F>
void expect_error(F&& f, ErrorCode code, const std::string& part) {
  try {
    f();
    FAIL("no error; expected one with '" << part << "'");
  } catch (const Error& e) {
    CHECK(e.code() == code);
    INFO(e.what());
    CHECK(std::string(e.what()).find(part) != std::string::npos);
  }
}

// A non-square, gray, sigmoid model with named classes: nothing like a scene model.
Model tiny_model() {
  Config c;
  c.image_h = 16;
  c.image_w = 24;
  c.channels = 1;
  c.patch = 8;
  c.dim = 16;
  c.depth = 2;
  c.heads = 2;
  c.mlp_dim = 24;
  c.classes = 3;
  c.output = OutputKind::sigmoid;
  c.class_names = {"cat", "dog", "bird"};
  fill_config_defaults(c);
  return random_model(c, 5);
}

#if !defined(__EMSCRIPTEN__)  // the helpers of the tests that write files (not in the wasm suite)

// A fresh folder under the system's temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::temp_directory_path() / ("vitlens_test_" + name + "_" + std::to_string(uint64_t(this) & 0xffffff));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str(const std::string& rel = "") const { return rel.empty() ? path.string() : (path / rel).string(); }
};

// A w×h RGB image of pseudo-random pixels.
Pixels noise_image(int w, int h, uint64_t seed) {
  Pixels px;
  px.w = w;
  px.h = h;
  px.channels = 3;
  px.data.resize(size_t(w) * size_t(h) * 3);
  uint64_t s = seed;
  for (uint8_t& v : px.data) v = uint8_t(splitmix64(s++) >> 56);
  return px;
}

// A w×h gray mask: the left third of the columns set to 255.
Pixels left_mask(int w, int h) {
  Pixels px;
  px.w = w;
  px.h = h;
  px.channels = 1;
  px.data.assign(size_t(w) * size_t(h), 0);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w / 3; ++x) px.data[size_t(y) * size_t(w) + size_t(x)] = 255;
  return px;
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

void write_image(const std::string& path, const Pixels& px) {
  fs::create_directories(fs::path(path).parent_path());
  write_png(path, px);
}

// Images of three classes (by name and by index) with masks; `bad` adds an undecodable file and
// an image whose mask has another size.
void write_image_folder(const TempDir& t, bool bad) {
  const char* classes[] = {"cat", "1", "bird"};
  for (int k = 0; k < 6; ++k) {
    const std::string rel = std::string(classes[k % 3]) + "/img" + std::to_string(k) + ".png";
    const int w = 20 + 4 * k, h = 14 + 2 * k;
    write_image(t.str("images/" + rel), noise_image(w, h, uint64_t(100 + k)));
    write_image(t.str("masks/" + rel), left_mask(w, h));
  }
  write_text(t.str("images/cat/readme.txt"), "not an image, ignored");
  if (bad) {
    write_text(t.str("images/dog/broken.png"), "this is not a PNG");
    write_image(t.str("masks/dog/broken.png"), left_mask(4, 4));
    write_image(t.str("images/dog/wrongmask.png"), noise_image(10, 10, 7));
    write_image(t.str("masks/dog/wrongmask.png"), left_mask(12, 10));
  }
}

std::vector<EvalRecord> run_all(const Model& m, const EvalData& data, const EvalOptions& opt) {
  std::vector<EvalRecord> out;
  run_eval(m, nullptr, data, opt, {}, [&](const std::vector<EvalRecord>& b) { out.insert(out.end(), b.begin(), b.end()); });
  return out;
}

// The three reports of `records` with the timings dropped, as one string.
std::string reports(const std::vector<EvalRecord>& records, const std::vector<std::string>& methods, int n,
                    const std::string& kind) {
  std::vector<int> samples;
  for (int i = 0; i < n; ++i) samples.push_back(i);
  EvalSummary s = summarise_eval(records, methods, samples, kind);
  eval_drop_timings(s);
  std::string all = eval_markdown(s, "t", "c") + eval_csv(s);
  for (int c = 0; c < 2; ++c)
    for (int d = 0; d < 2; ++d) all += eval_svg(s, c, d);
  for (int d = 0; d < 2; ++d) all += eval_road_svg(s, d);
  return all;
}

#endif

}  // namespace

TEST_CASE("method specs: canonical form, options, and what eval refuses", "[eval]") {
  const Model m = tiny_model();
  const Config& c = m.config;
  CHECK(eval_canonical_spec("rollout:head-fusion=max:discard-ratio=0.9", &c) ==
        "rollout:discard-ratio=0.9:head-fusion=max");
  CHECK(eval_canonical_spec("rollout:discard-ratio=0.90:head-fusion=max", &c) ==
        "rollout:discard-ratio=0.9:head-fusion=max");
  CHECK(eval_canonical_spec("rollout:head-fusion=mean", &c) == "rollout");  // the default is dropped
  CHECK(eval_canonical_spec("transformer-attribution:weight=none", &c) == "transformer-attribution:no-grad");
  CHECK(eval_canonical_spec("transformer-attribution:weight=attn", &c) == "transformer-attribution:weight=attn");
  CHECK(eval_canonical_spec("lrp:linear-rule=separate:add-rule=plain", &c) == "lrp:add-rule=plain:linear-rule=separate");
  CHECK(eval_canonical_spec("smoothgrad:inner=(rollout:head-fusion=max)", &c) ==
        "smoothgrad:inner=(rollout:head-fusion=max)");
  CHECK(eval_canonical_spec("transformer-attribution:no-grad", &c) == "transformer-attribution:no-grad");
  CHECK(eval_canonical_spec("transformer-attribution:start-layer=1", &c) == "transformer-attribution:start-layer=1");
  CHECK(eval_canonical_spec("transformer-attribution:block=1:no-grad", &c) == "transformer-attribution:block=1:no-grad");
  CHECK(eval_canonical_spec("random", &c) == "random");

  const EvalMethod e = eval_parse_method("rollout:head-fusion=max:discard-ratio=0.9", &c);
  REQUIRE(e.info != nullptr);
  CHECK(std::string(e.info->name) == "rollout");
  CHECK(e.options.head_fusion == HeadFusion::max);
  CHECK(e.options.discard_ratio == 0.9);
  CHECK(e.options.threads == 1);
  CHECK(eval_parse_method("oracle", &c).info == nullptr);

  CHECK(eval_resolve_methods("rollout:discard-ratio=0.5,rollout,random", false, &c) ==
        std::vector<std::string>{"rollout:discard-ratio=0.5", "rollout", "random"});
  expect_error([&] { eval_resolve_methods("rollout:head-fusion=max:discard-ratio=0.9,rollout:discard-ratio=0.9:head-fusion=max", false, &c); },
               ErrorCode::bad_argument, "the same method spec");
  expect_error([&] { eval_resolve_methods("rollout,rollout:head-fusion=mean", false, &c); }, ErrorCode::bad_argument,
               "the same method spec (rollout)");
  expect_error([&] { eval_resolve_methods("rollout:steps=3", false, &c); }, ErrorCode::bad_argument, "steps");
  expect_error([&] { eval_resolve_methods("rollout:nonsense=1", false, &c); }, ErrorCode::bad_argument, "nonsense");
  expect_error([&] { eval_resolve_methods("rollout:discard-ratio=2", false, &c); }, ErrorCode::bad_argument,
               "out of range");
  expect_error([&] { eval_resolve_methods("transformer-attribution:start-layer=2", false, &c); },
               ErrorCode::bad_argument, "start-layer");  // the tiny model has 2 blocks
  expect_error([&] { eval_resolve_methods("rollout:target=1", false, &c); }, ErrorCode::bad_argument, "target");
  expect_error([&] { eval_resolve_methods("integrated-gradients:threads=2", false, &c); }, ErrorCode::bad_argument,
               "threads");
  expect_error([&] { eval_resolve_methods("random:seed=3", false, &c); }, ErrorCode::bad_argument, "no options");
  expect_error([&] { eval_resolve_methods(":start-layer=1", false, &c); }, ErrorCode::bad_argument, "NAME");
}

TEST_CASE("masks are resized by nearest neighbour", "[eval]") {
  // 2×2 → 4×4: each source pixel becomes a 2×2 block.
  Pixels two;
  two.w = two.h = 2;
  two.channels = 1;
  two.data = {9, 0, 0, 1};
  const std::vector<uint8_t> up = resize_mask_nearest(two, 4, 4);
  CHECK(up == std::vector<uint8_t>{1, 1, 0, 0,  //
                                   1, 1, 0, 0,  //
                                   0, 0, 1, 1,  //
                                   0, 0, 1, 1});
  // 3×3 → 2×2: output x = 0 reads ⌊0.5·1.5⌋ = 0, x = 1 reads ⌊1.5·1.5⌋ = 2 (the corners).
  Pixels three;
  three.w = three.h = 3;
  three.channels = 1;
  three.data = {1, 1, 0,  //
                1, 1, 1,  //
                5, 1, 0};
  CHECK(resize_mask_nearest(three, 2, 2) == std::vector<uint8_t>{1, 0, 1, 0});
  // 4×1 → 3×1 (non-square, rows kept): x reads ⌊(x + ½)·4/3⌋ = 0, 2, 3.
  Pixels row;
  row.w = 4;
  row.h = 1;
  row.channels = 1;
  row.data = {0, 1, 0, 7};
  CHECK(resize_mask_nearest(row, 3, 1) == std::vector<uint8_t>{0, 0, 1});
  // RGB: any colour channel; RGBA: alpha alone does not make an object.
  Pixels rgba;
  rgba.w = 2;
  rgba.h = 1;
  rgba.channels = 4;
  rgba.data = {0, 0, 3, 0, 0, 0, 0, 255};
  CHECK(resize_mask_nearest(rgba, 2, 1) == std::vector<uint8_t>{1, 0});
}

#if !defined(__EMSCRIPTEN__)

TEST_CASE("image folders and labels.csv: classes, order, masks and their errors", "[eval]") {
  const Model m = tiny_model();
  const Config& c = m.config;
  CHECK(class_of("dog", c) == 1);
  CHECK(class_of("2", c) == 2);
  CHECK(class_of("3", c) == -1);
  CHECK(class_of("Dog", c) == -1);
  CHECK(class_of("", c) == -1);

  TempDir t("layout");
  write_image_folder(t, false);
  fs::create_directories(t.str("images/.cache"));
  ImageSet set = list_image_folders(t.str("images"), c);
  REQUIRE(set.images.size() == 6);
  // Sorted by relative path: "1/…" before "bird/…" before "cat/…".
  CHECK(set.images[0].file == "1/img1.png");
  CHECK(set.images[0].cls == 1);
  CHECK(set.images[2].file == "bird/img2.png");
  CHECK(set.images[2].cls == 2);
  CHECK(set.images[5].file == "cat/img3.png");
  CHECK(set.images[5].cls == 0);
  attach_masks(set, t.str("masks"));
  CHECK(mask_path(set, set.images[0]) == t.str("masks/1/img1.png"));
  const std::string digest = image_set_digest(set);
  CHECK(digest.size() == 16);

  // labels.csv naming the same files and classes: the same set, the same digest.
  write_text(t.str("labels.csv"),
             "file,class\r\n\"cat/img0.png\",cat\r\ncat/img3.png,0\n1/img1.png,dog\n\n1/img4.png,1\n"
             "bird/img2.png,\"bird\"\nbird/img5.png,2\n");
  ImageSet listed = read_image_labels(t.str("images"), t.str("labels.csv"), c);
  attach_masks(listed, t.str("masks"));
  REQUIRE(listed.images.size() == 6);
  for (size_t i = 0; i < 6; ++i) {
    CHECK(listed.images[i].file == set.images[i].file);
    CHECK(listed.images[i].cls == set.images[i].cls);
  }
  CHECK(image_set_digest(listed) == digest);

  write_text(t.str("bad_class.csv"), "cat/img0.png,cow\n");
  expect_error([&] { read_image_labels(t.str("images"), t.str("bad_class.csv"), c); }, ErrorCode::bad_argument,
               "line 1: 'cow' is no class");
  write_text(t.str("twice.csv"), "cat/img0.png,0\ncat/img0.png,1\n");
  expect_error([&] { read_image_labels(t.str("images"), t.str("twice.csv"), c); }, ErrorCode::bad_argument, "twice");
  write_text(t.str("columns.csv"), "cat/img0.png,0,extra\n");
  expect_error([&] { read_image_labels(t.str("images"), t.str("columns.csv"), c); }, ErrorCode::bad_format, "line 1");
  write_text(t.str("empty.csv"), "file,class\n");
  expect_error([&] { read_image_labels(t.str("images"), t.str("empty.csv"), c); }, ErrorCode::bad_argument, "no image");

  fs::remove(t.str("masks/bird/img5.png"));
  ImageSet no_mask = set;
  expect_error([&] { attach_masks(no_mask, t.str("masks")); }, ErrorCode::bad_argument, "no mask");
  fs::create_directories(t.str("images/cow"));
  expect_error([&] { list_image_folders(t.str("images"), c); }, ErrorCode::bad_argument, "cow names no class");
  fs::create_directories(t.str("empty/cat"));
  expect_error([&] { list_image_folders(t.str("empty"), c); }, ErrorCode::bad_argument, "no image");
  expect_error([&] { list_image_folders(t.str("nowhere"), c); }, ErrorCode::io, "not a folder");
}

TEST_CASE("any model on labelled images: a non-square gray sigmoid model, bad files skipped", "[eval]") {
  const Model m = tiny_model();
  TempDir t("anymodel");
  write_image_folder(t, true);
  ImageSet set = list_image_folders(t.str("images"), m.config);
  REQUIRE(set.images.size() == 8);
  attach_masks(set, t.str("masks"));
  const EvalData data = image_data(set);
  CHECK(data.size == 8);
  CHECK(data.masks);

  EvalOptions opt;
  opt.methods = {"transformer-attribution", "rollout:discard-ratio=0.5:head-fusion=max", "random", "oracle"};
  opt.n = data.size;
  opt.threads = 2;
  opt.chunk = 3;
  const std::vector<EvalRecord> recs = run_all(m, data, opt);
  REQUIRE(recs.size() == 8 * opt.methods.size());
  int skipped = 0;
  for (const EvalRecord& r : recs) {
    if (!r.skipped.empty()) {
      ++skipped;
      const bool named = r.skipped.find("dog/broken.png") == 0 || r.skipped.find("dog/wrongmask.png") == 0;
      CHECK(named);
      continue;
    }
    CHECK(r.items == 1);
    CHECK(r.segmented);
    CHECK(r.classes[0] == set.images[size_t(r.scene)].cls);
    CHECK(r.seg.pixels == 16 * 24);
  }
  CHECK(skipped == 2 * int(opt.methods.size()));
  const EvalSummary s = summarise_eval(recs, opt.methods, eval_shard_samples(opt.n, 0, 1), data.kind);
  CHECK(s.skipped == 2);
  CHECK(s.single == 6);
  CHECK(s.two == 0);
  REQUIRE(s.skipped_reasons.size() == 2);
  CHECK(s.skipped_reasons[0].find("broken.png") != std::string::npos);
  CHECK(s.skipped_reasons[1].find("is 12×10, the image 10×10") != std::string::npos);
  const EvalMethodSummary& oracle = s.methods[3];
  CHECK(oracle.segmentation_scenes == 6);
  CHECK(oracle.pixel_acc == 1.0);  // the mask against itself
  CHECK(oracle.miou == 1.0);
  CHECK(std::isnan(oracle.share));  // no two-item samples
  const std::string md = eval_markdown(s, "tiny", "");
  CHECK(md.find("8 labelled images: 6 for the perturbation tests, 6 with a mask") != std::string::npos);
  CHECK(md.find("Skipped (2 samples could not be read)") != std::string::npos);
  CHECK(md.find("Class share") == std::string::npos);  // no two-item samples: no column
  CHECK(md.find("| rollout:discard-ratio=0.5:head-fusion=max |") != std::string::npos);

  // The oracle needs masks; n cannot exceed the images; nor can a shard be out of range.
  ImageSet bare = list_image_folders(t.str("images"), m.config);
  expect_error([&] { run_all(m, image_data(bare), opt); }, ErrorCode::bad_argument, "needs object masks");
  opt.methods = {"rollout"};
  EvalOptions too_many = opt;
  too_many.n = 9;
  expect_error([&] { run_all(m, data, too_many); }, ErrorCode::bad_argument, "only 8 samples");
  EvalOptions bad_shard = opt;
  bad_shard.shard_index = 3;
  bad_shard.shard_count = 3;
  expect_error([&] { run_all(m, data, bad_shard); }, ErrorCode::bad_argument, "shard");
  // Without masks: perturbation only, no segmentation figures.
  const std::vector<EvalRecord> plain = run_all(m, image_data(bare), opt);
  const EvalSummary ps = summarise_eval(plain, opt.methods, eval_shard_samples(opt.n, 0, 1), "images");
  CHECK(ps.skipped == 1);  // broken.png (its mask is not read now)
  CHECK(ps.methods[0].segmentation_scenes == 0);
  CHECK(std::isnan(ps.methods[0].miou));
  CHECK(eval_markdown(ps, "tiny", "").find("mIoU") == std::string::npos);
}

TEST_CASE("a spec's options reach the method: the record's segmentation is that of its map", "[eval]") {
  const Model m = tiny_model();
  TempDir t("specmap");
  write_image_folder(t, false);
  ImageSet set = list_image_folders(t.str("images"), m.config);
  attach_masks(set, t.str("masks"));
  const EvalData data = image_data(set);
  EvalOptions opt;
  opt.methods = {"rollout:discard-ratio=0.5:head-fusion=max", "rollout", "transformer-attribution:start-layer=1"};
  opt.n = data.size;
  for (int i = 0; i < data.size; ++i) {
    const std::vector<EvalRecord> recs = eval_sample(m, nullptr, data, opt, i);
    const EvalSample smp = data.load(i, m.config);
    ExplainState st;
    st.set_input(m, smp.x);
    const int pred = recs[0].pred;
    const int hw = m.config.image_h * m.config.image_w;
    MethodOptions o[3];
    o[0].head_fusion = HeadFusion::max;
    o[0].discard_ratio = 0.5;
    o[2].start_layer = 1;
    const char* names[3] = {"rollout", "rollout", "transformer-attribution"};
    for (int k = 0; k < 3; ++k) {
      o[k].target = pred;
      st.clear_derived();
      const Explanation e = explain(m, st, names[k], o[k]);
      const Mat px = upsample_bilinear(e.token_map, m.config.image_h, m.config.image_w);
      const SegmentationCounts want = segmentation_counts(px.data(), smp.items[0].mask.data(), hw);
      CHECK(recs[size_t(k)].method == opt.methods[size_t(k)]);
      CHECK(recs[size_t(k)].seg.inter == want.inter);
      CHECK(recs[size_t(k)].seg.uni == want.uni);
      CHECK(recs[size_t(k)].seg_ap == segmentation_ap(px.data(), smp.items[0].mask.data(), hw));
    }
  }
}

TEST_CASE("shards: their union is the unsharded run, report for report", "[eval]") {
  const Model m = tiny_model();
  TempDir t("shards");
  write_image_folder(t, true);
  ImageSet set = list_image_folders(t.str("images"), m.config);
  attach_masks(set, t.str("masks"));
  const EvalData data = image_data(set);
  EvalOptions opt;
  opt.methods = {"transformer-attribution", "rollout:head-fusion=min", "random", "oracle"};
  opt.n = data.size;
  opt.threads = 2;
  opt.randomisation = 5;  // samples 0…4 of 8, so that the shards hold some randomised samples each
  const std::vector<EvalRecord> whole = run_all(m, data, opt);
  const std::string want = reports(whole, opt.methods, opt.n, data.kind);
  CHECK(want.find("labelled images") != std::string::npos);
  // The metrics of issue 16 are part of what must be equal.
  for (const char* text : {"| ROAD LeRF ↑ |", "| SRG ROAD ↑ |", "| Mass acc. ↑ |", "**Model randomisation**", "ROAD MoRF"})
    CHECK(want.find(text) != std::string::npos);
  for (int count : {2, 3, 8}) {
    std::vector<EvalRecord> merged;
    for (int i = 0; i < count; ++i) {
      EvalOptions part = opt;
      part.shard_index = i;
      part.shard_count = count;
      for (const EvalRecord& r : run_all(m, data, part)) {
        CHECK(r.scene % count == i);
        merged.push_back(r);
      }
    }
    CHECK(merged.size() == whole.size());
    CHECK(reports(merged, opt.methods, opt.n, data.kind) == want);
    // A missing shard is noticed; a different record changes the reports (the comparison can fail).
    std::vector<EvalRecord> partial(merged.begin(), merged.end());
    partial.erase(std::remove_if(partial.begin(), partial.end(), [&](const EvalRecord& r) { return r.scene % count == 1; }),
                  partial.end());
    expect_error([&] { reports(partial, opt.methods, opt.n, data.kind); }, ErrorCode::bad_argument, "no result");
    std::vector<EvalRecord> changed = merged;
    for (EvalRecord& r : changed)
      if (r.skipped.empty() && r.method == "random" && r.items == 1) {
        r.top[0][1][0] = (r.top[0][1][0] + 1) % 3;
        break;
      }
    CHECK(reports(changed, opt.methods, opt.n, data.kind) != want);
    for (EvalRecord& r : merged)  // a randomisation figure of the last step changes the reports too
      if (r.method == "transformer-attribution" && !r.randomisation.empty()) {
        r.randomisation.back().spearman += 0.5;
        break;
      }
    CHECK(reports(merged, opt.methods, opt.n, data.kind) != want);
  }
  CHECK(eval_shard_samples(7, 1, 3) == std::vector<int>{1, 4});
  CHECK(eval_shard_samples(2, 2, 3).empty());
  expect_error([&] { eval_shard_samples(7, 3, 3); }, ErrorCode::bad_argument, "shard");
}

TEST_CASE("exported scenes read back as labelled images give the scene benchmark's records", "[eval]") {
  const bool ok = fs::exists(std::string(fashion_mnist_default_dir) + "/t10k-images-idx3-ubyte.gz") &&
                  fs::exists(test::source_path("models/vitlens-scenes.vitl"));
  if (!ok) {
    WARN("dataset-fashion-mnist or models/vitlens-scenes.vitl is absent: skipped");
    return;
  }
  const Model m = load_model_file(test::source_path("models/vitlens-scenes.vitl"));
  const FashionMnist test = load_fashion_mnist(fashion_mnist_default_dir, false);
  EvalOptions opt;
  opt.methods = {"transformer-attribution", "rollout:discard-ratio=0.9:head-fusion=max", "oracle"};
  opt.n = 16;
  opt.scenes.size = m.config.image_h;
  TempDir t("scenes");
  export_scenes(t.str("raw"), test, opt.scenes, opt.seed, 0, uint64_t(opt.n));
  // The single-item scenes as DIR/<class index>/scene_XXXX.png with their masks beside.
  std::vector<int> single;
  for (int i = 0; i < opt.n; ++i) {
    const Scene sc = make_scene(test, opt.scenes, opt.seed, uint64_t(i));
    if (sc.items.size() != 1) continue;
    single.push_back(i);
    char name[32];
    std::snprintf(name, sizeof name, "scene_%04d", i);
    const std::string rel = std::to_string(sc.items[0].cls) + "/" + name + ".png";
    fs::create_directories(t.str("images/" + std::to_string(sc.items[0].cls)));
    fs::create_directories(t.str("masks/" + std::to_string(sc.items[0].cls)));
    fs::copy_file(t.str("raw/" + std::string(name) + ".png"), t.str("images/" + rel));
    fs::copy_file(t.str("raw/" + std::string(name) + "_mask_0.png"), t.str("masks/" + rel));
  }
  REQUIRE(single.size() >= 4);
  ImageSet set = list_image_folders(t.str("images"), m.config);
  attach_masks(set, t.str("masks"));
  const EvalData data = image_data(set);
  EvalOptions iopt = opt;
  iopt.n = data.size;
  const std::vector<EvalRecord> from_images = run_all(m, data, iopt);
  std::vector<EvalRecord> from_scenes;
  run_eval(m, nullptr, test, opt, {}, [&](const std::vector<EvalRecord>& b) { from_scenes.insert(from_scenes.end(), b.begin(), b.end()); });
  int compared = 0;
  for (const EvalRecord& a : from_images) {
    const int scene = std::stoi(set.images[size_t(a.scene)].file.substr(set.images[size_t(a.scene)].file.find("scene_") + 6, 4));
    const auto it = std::find_if(from_scenes.begin(), from_scenes.end(),
                                 [&](const EvalRecord& b) { return b.scene == scene && b.method == a.method; });
    REQUIRE(it != from_scenes.end());
    CHECK(a.pred == it->pred);
    CHECK(a.classes == it->classes);
    CHECK(a.top == it->top);
    CHECK(a.seg.inter == it->seg.inter);
    CHECK(a.seg.uni == it->seg.uni);
    CHECK(a.seg_ap == it->seg_ap);
    ++compared;
  }
  CHECK(compared == int(single.size() * opt.methods.size()));
}

#endif
