// walk.h — a guided walk through one method (issue 17, "A guided walk through a method"): the
// ordered steps from the input patches, through each block's quantities, to the final map, for
// transformer-attribution (Chefer, Gur & Wolf, CVPR 2021), attnlrp (Achtibat et al., ICML 2024)
// and rollout (Abnar & Zuidema, ACL 2020).
//
// Each step names what it computes (a title, the method's formula with the piece computed at this
// step marked, the equation written out), the tensors it reads and writes with their shapes, the
// values to draw (one value per token, an n × n matrix where the matrix is the point, or the map),
// and for the LRP methods Σ relevance after the step with where it is conserved and where not.
// Every number is one the method itself computed — its intermediates (methods.h), its relevance
// pass and conservation report (lrp.h) — read in the order of the method's formula; the walk adds
// only the query's row of a matrix (q·M, as the methods read their maps) and, for Ā_b, the head
// mean of the per-head terms the method reports. Deliberately not here: drawing.
//
// The steps (0-based blocks, as the page names them):
//   rollout                  input; per block b ≥ start-layer: A_b and F_b = fuse_h A_b,
//                            [discard], Â_b = rownorm(F_b + I), C_b = Â_b·C_(b−1); the map.
//   transformer-attribution  input; the seed R = onehot(t), the head and pooling, the final norm;
//                            per block b ≥ start-layer (or the one `block`): A_b, ∇A_b (weight
//                            grad), R_A_b, Ā_b, I + Ā_b, C_b; the map.
//   attnlrp                  input; the seed R = y_t·onehot(t), the head and pooling, the final
//                            norm; per block from the last down: add2's split, fc2·act·fc1, LN2,
//                            the residual join, add1's split, proj and A·v, softmax·q·kᵀ·W_qkv,
//                            LN1, the residual join; [norm_pre]; the token map at E0; the pixels.
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "vitlens/methods/methods.h"

namespace vitlens {

// A tensor a step reads or writes: its name as the formula writes it, its shape, and the shape in
// symbols ("H × n × n").
struct WalkTensor {
  std::string name;
  std::vector<int> shape;
  std::string dims;
};

// The method's formula as one line with the piece this step computes marked:
// before + mark + after (mark empty when the step computes no piece of it).
struct WalkFormula {
  std::string before, mark, after;
  std::string text() const { return before + mark + after; }
};

// A named part of a step's relevance: what arrives, a rule's shares, what a layer keeps.
struct WalkSum {
  std::string label;
  double value;
};

struct WalkStep {
  std::string id;     // stable: "input", "seed", "head", "norm", "block.3.grad", …, "map", "pixels"
  std::string title;
  int block = -1;     // the block (0-based), −1 outside the blocks
  WalkFormula formula;
  std::string equation;  // what this step computes, written out
  std::vector<WalkTensor> reads, writes;
  // What the step draws (each may be empty): `values` says what they are.
  std::string values;
  Vec row;     // (n) one value per token, the prefix tokens first
  Mat matrix;  // (n, n) where the matrix is the point (WalkOptions::matrices)
  Mat map;     // (H/p, W/p) the method's token map, or (H, W) its pixel map
  // Σ relevance after this step (LRP methods): the conservation report's number; NaN where the
  // step computes no relevance.
  double relevance = std::numeric_limits<double>::quiet_NaN();
  std::vector<WalkSum> sums;         // its parts
  std::string conservation;          // where relevance is conserved at this step and where not
  std::vector<std::string> layers;   // the conservation report's rows the step covers
  bool has_relevance() const { return !std::isnan(relevance); }
};

struct MethodWalk {
  std::string method;
  int target = -1;
  int query = -1;           // −1: the method's query q; else the token whose rows are drawn
  std::string query_text;   // the query in words
  double seed = std::numeric_limits<double>::quiet_NaN();  // Σ R at the logits (LRP methods)
  std::vector<WalkStep> steps;
};

struct WalkOptions {
  int query = -1;         // −1: the method's query q (METHODS.md "Method conventions"); else a token
  bool matrices = true;   // fill WalkStep::matrix
};

// Whether `method` has a walk (transformer-attribution, attnlrp, rollout), and their names.
bool has_walk(const std::string& method);
const std::vector<std::string>& walk_methods();

// The walk of `method` on the input `st` holds, with the method's options (checked as explain()
// checks them; the walk runs explain() with intermediates and reuses st's passes).
// Error(bad_argument) for a method without a walk or a query token outside 0…n−1.
MethodWalk method_walk(const Model& m, ExplainState& st, const std::string& method,
                       const MethodOptions& opt = {}, const WalkOptions& walk = {});

// The walk as JSON (vitlens explain --walk FILE): each step's fields by their names here, the
// arrays as lists of numbers (matrix row-major with matrix_shape, map with map_shape), NaN as null.
std::string walk_json(const MethodWalk& w);

}  // namespace vitlens
