// head_pruning.cpp — heads switched off by hand on one image (head_pruning.h): head lists as text,
// masks, one image's head rankings and its pruning curve, which reruns only the blocks from the
// newly switched-off head's block up.
#include "vitlens/methods/head_pruning.h"

#include <algorithm>
#include <cctype>

#include "vitlens/layers/layers.h"
#include "vitlens/model/block.h"
#include "vitlens/tensor/error.h"
#include "vitlens/tensor/recent.h"

namespace vitlens {

namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

// A non-negative decimal integer of at most 6 digits, or −1.
int small_index(const std::string& s) {
  if (s.empty() || s.size() > 6) return -1;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return -1;
    v = v * 10 + (ch - '0');
  }
  return v;
}

void check_heads(const std::vector<int>& heads, const Config& c, const char* what) {
  const int total = c.depth * c.heads;
  std::vector<char> seen(size_t(total), 0);
  for (int f : heads) {
    if (f < 0 || f >= total)
      throw Error(ErrorCode::bad_argument, std::string(what) + ": head index " + std::to_string(f) +
                                               " is out of range: the model has " + std::to_string(c.depth) + " blocks × " +
                                               std::to_string(c.heads) + " heads, flat indices 0…" + std::to_string(total - 1));
    if (seen[size_t(f)])
      throw Error(ErrorCode::bad_argument, std::string(what) + ": head " + head_name(f, c) + " is named twice");
    seen[size_t(f)] = 1;
  }
}

}  // namespace

std::vector<int> parse_head_list(const std::string& text, const Config& c) {
  std::vector<int> out;
  const std::string all = trim(text);
  if (all.empty()) return out;
  size_t start = 0;
  for (;;) {
    const size_t comma = all.find(',', start);
    const std::string entry = trim(all.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    const size_t dot = entry.find('.');
    const int block = dot == std::string::npos ? -1 : small_index(entry.substr(0, dot));
    const std::string head = dot == std::string::npos ? "" : entry.substr(dot + 1);
    if (block < 0 || head.empty() || (head != "*" && small_index(head) < 0))
      throw Error(ErrorCode::bad_argument, "'" + entry + "' is not a head: write B.H (block B, head H, from 0) or B.* (every head of block B), comma-separated");
    if (block >= c.depth)
      throw Error(ErrorCode::bad_argument, "head " + entry + ": block " + std::to_string(block) + " is out of range: the model has blocks 0…" +
                                               std::to_string(c.depth - 1));
    if (head == "*") {
      for (int h = 0; h < c.heads; ++h) out.push_back(block * c.heads + h);
    } else {
      const int h = small_index(head);
      if (h >= c.heads)
        throw Error(ErrorCode::bad_argument, "head " + entry + ": head " + std::to_string(h) + " is out of range: the model has heads 0…" +
                                                 std::to_string(c.heads - 1) + " in each block");
      out.push_back(block * c.heads + h);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  check_heads(out, c, "the head list");
  return out;
}

std::string head_name(int flat, const Config& c) {
  return std::to_string(flat / c.heads) + "." + std::to_string(flat % c.heads);
}

std::vector<float> head_mask_off(const std::vector<int>& off, const Config& c) {
  check_heads(off, c, "the heads switched off");
  std::vector<float> mask(size_t(c.depth) * size_t(c.heads), 1.0f);
  for (int f : off) mask[size_t(f)] = 0.0f;
  return mask;
}

const char* head_ranking_name(HeadRanking r) {
  switch (r) {
    case HeadRanking::attattr: return "attattr";
    case HeadRanking::attention_max: return "attention-max";
    case HeadRanking::attention: return "attention-confidence";
    case HeadRanking::taylor_loss: return "taylor-loss";
    case HeadRanking::taylor: return "taylor-prob";
  }
  return "";
}

HeadRanking parse_head_ranking(const std::string& name) {
  if (name == "attention") return HeadRanking::attention;
  for (int i = 0; i < head_ranking_count; ++i)
    if (name == head_ranking_name(HeadRanking(i))) return HeadRanking(i);
  throw Error(ErrorCode::bad_argument, "unknown head ranking '" + name +
                                           "': use attattr, attention-max, attention-confidence (or attention), taylor-loss or taylor-prob");
}

const MatD& ranking_scores(const HeadScores& s, HeadRanking r) {
  switch (r) {
    case HeadRanking::attattr: return s.attattr;
    case HeadRanking::attention_max: return s.attention_max;
    case HeadRanking::attention: return s.attention;
    case HeadRanking::taylor_loss: return s.taylor_loss;
    case HeadRanking::taylor: break;
  }
  return s.taylor;
}

ImageHeadRanking image_head_ranking(const Model& m, const Trace& tr, int target, HeadRanking r,
                                    const std::vector<AttAttrBlock>& attr) {
  const Config& c = m.config;
  if (tr.blocks.size() != size_t(c.depth) || tr.logits.size() != c.classes)
    throw Error(ErrorCode::bad_argument, "the ranking needs the forward pass of an image through this model");
  if (!tr.head_mask.empty())
    throw Error(ErrorCode::bad_argument, "the ranking needs the forward pass with every head on (this one has heads switched off)");
  if (target < 0 || target >= c.classes)
    throw Error(ErrorCode::bad_argument, "target class " + std::to_string(target) + " is out of range: the model has " +
                                             std::to_string(c.classes) + " classes");
  if (r == HeadRanking::attattr && attr.size() != size_t(c.depth))
    throw Error(ErrorCode::bad_argument, "the attattr ranking needs the image's attattr matrices (attattr_blocks)");
  ImageHeadRanking out;
  out.ranking = r;
  out.target = target;
  out.scores = head_scores_zero(c);
  head_scores_add(out.scores, m, tr, target, attr);
  out.order = pruning_order(ranking_scores(out.scores, r));
  return out;
}

namespace {

// The kept steps a curve of `order` starts from (PruningKept): an entry whose steps `order` begins
// with, or that begin with all of `order`; the one with most steps in common, of those the most
// recently used. end() when none.
std::vector<PruningKept::Steps>::iterator kept_start(PruningKept& kept, const std::vector<int>& order) {
  auto best = kept.entries.end();
  size_t best_common = 0;
  for (auto e = kept.entries.end(); e != kept.entries.begin();) {
    --e;
    const size_t common = std::min(e->order.size(), order.size());
    if (!std::equal(order.begin(), order.begin() + ptrdiff_t(common), e->order.begin())) continue;
    if (best == kept.entries.end() || common > best_common) {
      best = e;
      best_common = common;
    }
  }
  return best;
}

}  // namespace

ImagePruningCurve image_pruning_curve(const Model& m, const Image& x, const std::vector<int>& order, int target,
                                      const ProgressFn& progress, PruningKept* kept) {
  const Config& c = m.config;
  const Params& p = m.params;
  const int L = c.depth, H = c.heads;
  check_heads(order, c, "the pruning order");
  if (target < -1 || target >= c.classes)
    throw Error(ErrorCode::bad_argument, "target class " + std::to_string(target) + " is out of range: the model has " +
                                             std::to_string(c.classes) + " classes");
  PruningKept local;
  if (!kept) kept = &local;
  // The entry this curve reads and, when `order` goes beyond its steps, extends (now the most
  // recently used: entries.back()); a new one when none starts it.
  PruningKept::Steps& e = use_recent(kept->entries, kept_start(*kept, order), PruningKept::capacity,
                                     [] { return PruningKept::Steps(); });
  if (e.logits.empty()) {
    Trace tr;
    vit_logits(tr, m, x);  // every head on; the last block formed for the head's rows only
    // xs[b]: block b's input (n, d) under the heads switched off so far; xs[L]: the last block's
    // output (head_rows(c), d).
    e.xs.resize(size_t(L) + 1);
    for (int b = 0; b < L; ++b) e.xs[size_t(b)] = tr.blocks[size_t(b)].x;
    e.xs[size_t(L)] = tr.x_final;
    e.logits.push_back(tr.logits);
  }

  std::vector<float> mask = head_mask_off(e.order, c);
  BlockTrace bt;
  BlockScratch bs;
  HeadTrace head;
  for (size_t k = e.order.size(); k < order.size(); ++k) {
    const int f = order[k];
    mask[size_t(f)] = 0.0f;
    try {
      // Only the blocks from the switched-off head's block up change.
      for (int b = f / H; b < L; ++b) {
        bt.x = e.xs[size_t(b)];
        BlockOptionsT<float> o;
        o.head_mask = mask.data() + size_t(b) * size_t(H);
        if (b == L - 1) o.rows = head_rows(c);  // as vit_logits: only the head's rows reach the logits
        block_forward(e.xs[size_t(b) + 1], bt, bs, p.blocks[size_t(b)], c, 1, BlockRecord::backward, o);
      }
      head_forward(head, e.xs[size_t(L)], m);
    } catch (...) {
      kept->entries.pop_back();  // its blocks' inputs are half way into this step
      throw;
    }
    e.order.push_back(f);
    e.logits.push_back(head.logits);
    if (progress && !progress(double(k + 1) / double(order.size())))
      throw Error(ErrorCode::cancelled, "the pruning curve was cancelled");
  }

  ImagePruningCurve out;
  out.order = order;
  out.original = top_k(c, e.logits[0], 1)[0].cls;
  out.target = target >= 0 ? target : out.original;
  for (size_t k = 0; k <= order.size(); ++k) {
    const Vec& logits = e.logits[k];
    const Vec probs = output_probs(c, logits);  // (classes) softmax or sigmoid
    out.prob.push_back(double(probs[out.target]));
    out.logit.push_back(double(logits[out.target]));
    out.top.push_back(top_k(c, logits, 1)[0].cls);
    if (out.first_change < 0 && out.top.back() != out.original) out.first_change = int(k);
  }
  return out;
}

}  // namespace vitlens
