// vitlens.d.ts — hand-written types for the Embind API in wasm/bindings.cpp.
//
// Errors: every call may throw a JS Error whose message starts with an error code
// ("bad_format: ...", "truncated: ...", "bad_argument: ..."). Model and Input objects hold wasm
// memory: call .delete() when done.

export interface Prediction {
  class: number;
  name: string;
  logit: number;
  prob: number;
}

export interface ModelInfo {
  imageH: number;
  imageW: number;
  channels: number;
  patch: number;
  dim: number;
  depth: number;
  heads: number;
  mlpDim: number;
  classes: number;
  lnEps: number;
  multiLabel: boolean;
  params: number;
  storedInt8: boolean;
  provenance: string;
  classNames: string[];
  mean: number[];
  std: number[];
  /** n = prefix + patches: the token sequence [CLS][DIST][REG × r][patches]. */
  tokens: number;
  prefix: number;
  /** One entry per prefix token, in order. */
  prefixKinds: ("cls" | "dist" | "reg")[];
  pooling: "token" | "distilled" | "avg" | "token+avg";
  activation: "gelu" | "gelu_pytorch_tanh" | "quick_gelu";
  layerScale: boolean;
  preNorm: boolean;
  fcNorm: boolean;
  finalNorm: boolean;
  /** The methods' query (n token weights): the map is qᵀ·M on the patch columns. */
  query: Float32Array;
  /** The grid pos_embed was trained on, [rows, cols] (differs from the grid after atInputSize). */
  checkpointGrid: [number, number];
}

export interface DecodedImage {
  width: number;
  height: number;
  channels: number; // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
  data: Uint8Array;
}

export type MethodName =
  | "raw-attention"
  | "rollout"
  | "attn-gradcam"
  | "grad-rollout"
  | "transformer-attribution"
  | "partial-lrp"
  | "lrp"
  | "attnlrp"
  | "attattr"
  | "norm-based"
  | "saliency"
  | "grad-x-input"
  | "integrated-gradients"
  | "smoothgrad";

/**
 * A method spec: a method name with options, "NAME:key=value[:key=value…]" with the options'
 * canonical keys (OptionSpec.key) and text values, a bare key for a flag or an alias word:
 * "transformer-attribution:start-layer=1", "transformer-attribution:no-grad",
 * "lrp:linear-rule=separate:add-rule=plain". A method option's value that is itself a spec goes in
 * parentheses: "smoothgrad:inner=(rollout:head-fusion=max):samples=8".
 */
export type MethodSpec = MethodName | `${MethodName}:${string}`;

/**
 * One option of a method, from core's option table (core/include/vitlens/methods/options.h).
 * tests/node/options.test.mjs checks ExplainOptions below against these tables.
 */
export interface OptionSpec {
  /** Canonical kebab-case key, as in a method spec "NAME:key=value": "start-layer". */
  key: string;
  /** The ExplainOptions key: "startLayer". */
  jsKey: keyof ExplainOptions;
  /** The CLI flag: "--start-layer". */
  flag: string;
  /** Bare words that stand for one value: [{word: "no-grad", jsKey: "noGrad", value: "none"}] for
   * weight. A spec takes the word ("NAME:no-grad"), the CLI its flag (--no-grad), explain() {noGrad: true}. */
  aliases: { word: string; jsKey: string; value: string }[];
  kind: "integer" | "number" | "flag" | "choice" | "method" | "image";
  /** choice: the accepted strings; method: the methods it may name; otherwise empty. */
  choices: string[];
  /** choice: what each choice stands for (norm-based stages: the decomposition's formula), or empty. */
  choiceHelp: string[];
  /** integer / number: the closed range; null when it depends on the model, then minOf / maxOf names it
   * ("lastBlock" = info().depth − 1, "lastClass" = info().classes − 1). null for other kinds. */
  min: number | null;
  minOf: "lastBlock" | "lastClass" | null;
  max: number | null;
  maxOf: "lastBlock" | "lastClass" | null;
  /** The value used when the option is absent (threads: resolved for this build); null for the baseline (black). */
  default: number | boolean | string | null;
  /** The default as the CLI's --list shows it ("20", "mean", "thread-limit", "black"). */
  defaultText: string;
  /** integer: 0 also stands for the default (steps, samples). */
  zeroIsDefault: boolean;
  /** What the minimum stands for ("the predicted class" for target −1, "all blocks" for block −1). */
  minMeans: string | null;
  help: string;
}

/** One named output of a method: a field of Explanation. */
export interface OutputSpec {
  /** kebab-case: "token-map". */
  key: string;
  /** The Explanation field: "tokenMap". */
  jsKey: keyof Explanation;
  /** e.g. "(H/p, W/p)", "L × H × (n, n)". */
  shape: string;
  /** The shape as symbols: "gridH", "gridW", "height", "width", "depth", "heads", "tokens", "stages", "layers". */
  dims: string[];
  /** "always", or when it is filled ("when asked for": options.intermediates). */
  when: string;
  help: string;
}

/** One entry of the method registry (`methods()`). */
export interface MethodInfo {
  name: MethodName;
  description: string;
  paper: string;
  /** The ExplainOptions keys the method reads (optionSpecs' jsKeys); explain() rejects the others. */
  options: Array<keyof ExplainOptions>;
  /** The full table of those options, in display order (target first, threads last). */
  optionSpecs: OptionSpec[];
  /** The Explanation fields the method fills, besides method, target and conservation. */
  outputs: OutputSpec[];
  /** The map depends on the target class (false for raw-attention and rollout). */
  classSpecific: boolean;
  /** An LRP method: `conservation` and `relevanceSums` are filled. */
  reportsRelevance: boolean;
  /** Σ relevance should equal the seed down to the token embeddings (Chefer's rules). */
  conserves: boolean;
  /** The pixel map is computed at the input (lrp, attnlrp), not upsampled from the tokens. */
  nativePixels: boolean;
  /** Many passes (integrated gradients, smoothgrad, attattr): reports progress, can be cancelled. */
  longRunning: boolean;
  /** The factor the method multiplies per block (rollout-like methods), for teaching views; "" otherwise. */
  stepFormula: string;
  /** The method a front end opens with (one in the registry). */
  featured: boolean;
  /** The method has a guided walk (Input.walk): transformer-attribution, attnlrp, rollout. */
  walk: boolean;
}

/**
 * The options of explain(). Each key but intermediates and onProgress is an option of the method
 * tables (methods()[i].optionSpecs: kind, range, default, help); a key the method does not read
 * throws "bad_argument: KEY does not apply to METHOD ...". Numbers, booleans and strings are also
 * accepted as the CLI's text ("3", "true"). Checked against methods() by tests/node/options.test.mjs.
 */
export interface ExplainOptions {
  /** Every method: class to explain; default −1 = the predicted (arg-max) class. */
  target?: number;
  /** rollout, transformer-attribution: first block (0-based) of the product; default 0. */
  startLayer?: number;
  /** rollout: how heads are fused; default "mean". */
  headFusion?: "mean" | "max" | "min";
  /** rollout: fraction (0…1) of the fused attention zeroed, lowest first; default 0. */
  discardRatio?: number;
  /** transformer-attribution: one block only (the paper's ablation); default −1 = all blocks. */
  block?: number;
  /**
   * transformer-attribution: what weights each head's relevance R_A before (·)⁺ and the head mean;
   * default "grad" (the method, E_h[(∇A ⊙ R_A)⁺]). "none": E_h[(R_A)⁺], the paper's "without
   * gradients" ablation as its code runs it; "attn": E_h[(A ⊙ R_A)⁺], the ablation as its text
   * states it (∇A replaced by A).
   */
  weight?: "grad" | "none" | "attn";
  /** transformer-attribution: true = weight "none" (the alias word no-grad). */
  noGrad?: true;
  /**
   * transformer-attribution, partial-lrp, lrp: LRP-α1β0 at the linear layers with one denominator
   * for both signs ("shared", default, conserving) or one per sign ("separate": the older rule of
   * the paper's LRP and partial-LRP baseline rows, not conserving).
   */
  linearRule?: "shared" | "separate";
  /** transformer-attribution, partial-lrp, lrp: the adds' rule, "normalised" (default) or "plain"
   * (no renormalisation: the older rule of the paper's baseline rows). */
  addRule?: "normalised" | "plain";
  /** partial-lrp, attnlrp: the activations the relevance rules read, "float64" (default: a forward
   * pass recomputed in double, exact) or "float32" (the prediction's float pass: faster, the map
   * within ~4e-4 of its maximum in our measurements; README). */
  precision?: "float64" | "float32";
  /** attattr: Riemann steps m (default 20); integrated-gradients: n (default 32); smoothgrad: the inner method's; 0 = default. */
  steps?: number;
  /** integrated-gradients, smoothgrad: default "gauss-legendre". */
  quadrature?: "left" | "right" | "middle" | "gauss-legendre";
  /** integrated-gradients, smoothgrad: the baseline, normalised C×H×W (preprocessRGBA); default black. */
  baseline?: Float32Array;
  /** norm-based: the stage whose per-block maps are rolled out; default "layer". */
  stage?: NormStageName;
  /** smoothgrad: the wrapped method (default "saliency"), noisy copies (32), σ as a fraction of the input range (0.15), noise seed (0). */
  inner?: MethodSpec;
  samples?: number;
  noise?: number;
  seed?: number;
  /** Every method: threads for the methods that split work; default, and at most, threads(); results do not depend on it. */
  threads?: number;
  /** Not a method option: also return the per-block intermediates; default false. */
  intermediates?: boolean;
  /** Not a method option: long methods call this with the fraction done (0…1); returning false cancels ("cancelled: ..."). */
  onProgress?: (fraction: number) => boolean | void;
}

/** Σ relevance arriving at a layer (relevanceOut) and passed to its inputs (relevanceIn). */
export interface LayerRelevance {
  layer: string; // "head", "pool", "norm", "blocks.N.add2", …, "patch_embed"
  relevanceOut: number;
  relevanceIn: number;
}

/** Per block, head means (and two per-head lists), each n×n row-major (n = tokens), or null when not computed.
 * Every block's arrays are views of one ArrayBuffer (as are attattr's, and those of attention(),
 * attentionGrads() and normHeads()): one allocation for all of them; name it once in a transfer list. */
export interface BlockIntermediates {
  attn: Float32Array | null; // E_h[A_b]
  grad: Float32Array | null; // E_h[∂y_t/∂A_b]
  relevance: Float32Array | null; // E_h[R_A_b] (LRP methods)
  relevanceHeads: Float32Array[]; // R_A_b,h per head (LRP methods; empty otherwise)
  /** Each head's term of Ā_b = mean_h of these (step = I + Ā_b): (∇A_b,h ⊙ A_b,h)⁺ for grad-rollout,
   * (W_h ⊙ R_A_b,h)⁺ for transformer-attribution (W = ∇A, A, or none as its weight says); empty for
   * the other methods and for the blocks a method does not use. */
  productHeads: Float32Array[];
  step: Float32Array | null; // this block's factor of the rollout product
  accumulated: Float32Array | null; // the product from the first block used up to this one
}

export interface Explanation {
  method: MethodName;
  target: number;
  /** Raw, unnormalised token map, gridH×gridW row-major. */
  tokenMap: Float32Array;
  gridH: number;
  gridW: number;
  /** height×width: the token map upsampled (bilinear, half-pixel centres), or native for lrp/attnlrp. */
  pixelMap: Float32Array;
  height: number;
  width: number;
  /** LRP methods: Σ relevance after each layer, in propagation order, as far as the input's pass has
   * gone (transformer-attribution and partial-lrp stop at their lowest block's attn.q_kT unless a
   * method that went further ran first; empty for the other methods). */
  conservation: LayerRelevance[];
  /** LRP methods: the seed, each block's input, the tokens E0 and the image (null if not reached). */
  relevanceSums?: { seed: number; blockInputs: Array<number | null>; tokens: number | null; image: number | null };
  /** When options.intermediates. */
  intermediates?: { tokens: number; blocks: BlockIntermediates[] };
  /** integrated-gradients (and smoothgrad over it): Σ attributions vs F(x) − F(baseline). */
  completeness?: { attributionSum: number; fInput: number; fBaseline: number; gap: number };
  /** attattr: per block, per head, the n×n attribution matrix (row-major). */
  attattr?: Float32Array[][];
  /** norm-based: per block, the n×n norm map and the n mixing ratios of each stage. */
  norm?: Array<{ maps: Record<NormStageName, Float32Array>; mixing: Record<NormStageName, Float32Array> }>;
}

export type NormStageName = "atb" | "atb-res" | "atb-res-ln" | "atb-res-ln-ff" | "layer";

/** One block of normImageSummary: the FF's transition atb-res-ln → atb-res-ln-ff on one image
 * (core's norm_image_summary, eval/norm_ff.h). */
export interface NormImageBlock {
  /** n×n row-major: key j's share of query i's context before the FF, s[i, j] = N[i, j] / Σ_{k≠i} N[i, k]; s[i, i] = 0. */
  shareBefore: Float32Array;
  /** The same after the FF (atb-res-ln-ff). */
  shareAfter: Float32Array;
  /** n: Spearman ρ between query row i of the two maps (over all n keys). */
  rhoQuery: Float64Array;
  /** ρ between the two n×n maps flattened. */
  rhoFlat: number;
  /** The mean of rhoQuery. */
  rhoRows: number;
  /** Each stage's mixing ratio averaged over the n tokens. */
  mixingMean: Record<NormStageName, number>;
}

/** A tensor a walk step reads or writes: its name as the formula writes it, its shape, the shape in symbols. */
export interface WalkTensor {
  name: string; // "A_3", "R(x')"
  shape: number[]; // e.g. [3, 197, 197]
  dims: string; // "H × n × n"
}

/** One step of a guided walk (core's WalkStep, core/include/vitlens/methods/walk.h). */
export interface WalkStep {
  /** Stable: "input", "seed", "head", "norm", "block.3.attn", "block.3.grad", …, "prenorm", "map", "pixels". */
  id: string;
  title: string;
  /** 0-based block, −1 outside the blocks. */
  block: number;
  /** The method's formula, the piece computed at this step marked: before + mark + after. */
  formula: { before: string; mark: string; after: string };
  /** What the step computes, written out (the rule, for a relevance step). */
  equation: string;
  reads: WalkTensor[];
  writes: WalkTensor[];
  /** What row / matrix / map are. */
  values: string;
  /** n values, one per token (prefix tokens first): the query's row of a matrix, or Σ_d R per token. */
  row: Float32Array | null;
  /** n×n row-major, where the matrix is the point (options.matrices). */
  matrix: Float32Array | null;
  /** The method's map: its token map (gridH × gridW) at the step "map", its pixel map (H × W) at "pixels". */
  map: Float32Array | null;
  mapShape: [number, number] | null;
  /** LRP methods: Σ relevance after this step (the conservation report's number); null where none. */
  relevance: number | null;
  /** Its parts: what arrives, a rule's shares, the change at the step. */
  sums: Array<{ label: string; value: number | null }>;
  /** Where relevance is conserved at this step and where not, in words ("" without relevance). */
  conservation: string;
  /** The conservation report's layers the step covers. */
  layers: string[];
}

/** Input.walk: the guided walk through a method, from the input patches to the map. */
export interface MethodWalk {
  method: "transformer-attribution" | "attnlrp" | "rollout";
  target: number;
  /** −1: the method's query q; else the token whose rows the steps draw. */
  query: number;
  queryText: string;
  /** LRP methods: Σ R at the logits; null for rollout. */
  seed: number | null;
  steps: WalkStep[];
}

/** Options of Input.walk: the method's (as explain takes them, without intermediates) and the walk's own. */
export type WalkOptions = Omit<ExplainOptions, 'intermediates' | 'onProgress'> & {
  /** A token (0 … n−1) whose rows the steps draw; default −1, the method's query q. */
  query?: number;
  /** Each step's n×n matrix where the matrix is the point; default true. */
  matrices?: boolean;
};

/** One direction of the perturbation test of a map on an input (core's perturbation_curve, as
 * `vitlens eval` runs it): step s = 0 … 9 removes the first removed[s] = floor(n·s/10) pixels in
 * core's perturbation order (ties: lower pixel index first, both directions), set to 0 in [0, 1]. */
export interface PerturbationCurve {
  positive: boolean; // most relevant first (else least relevant first)
  target: number; // the class whose prob / logit are reported
  fraction: number[]; // 0, 0.1, …, 0.9
  removed: number[]; // pixels removed
  top: number[]; // arg-max class (ties: lower index)
  prob: number[]; // the target's probability
  logit: number[];
  correct: number[]; // 1 when top === target, else 0
  aucProb: number; // core's perturbation_auc of prob (trapezoid, × 100)
  aucAccuracy: number; // the same of correct (what `vitlens eval` averages over scenes)
  nonfinite: boolean; // the map held NaN or ±Inf, set to 0 (as the benchmark does)
  inputs?: Float32Array[]; // options.inputs: each step's perturbed C×H×W input
}

/** One order of a curve of Input.faithfulness: the fields of PerturbationCurve but `target`,
 * `nonfinite` and `inputs` (those are the call's), prob = core's curve_probabilities (softmax, or
 * the class's sigmoid for a multi-label model, in double: what SRG integrates). */
export type FaithfulnessCurve = Omit<PerturbationCurve, "target" | "nonfinite" | "inputs">;

/** Both orders of one fill (black, or ROAD's noisy linear imputation) and their Symmetric Relevance
 * Gain (Blücher et al. 2024): 100 · (area under `negative`'s prob − area under `positive`'s), p from 0 to 1. */
export interface FaithfulnessOrders {
  positive: FaithfulnessCurve; // most relevant first (MoRF)
  negative: FaithfulnessCurve; // least relevant first (LeRF)
  srg: number;
}

/** Every faithfulness figure of one map for one class (core's map_faithfulness; what `vitlens eval`
 * records per sample). */
export interface Faithfulness {
  target: number;
  nonfinite: boolean; // the map held NaN or ±Inf, set to 0 (as the benchmark does)
  black: FaithfulnessOrders | null; // options.black (default true)
  road: (FaithfulnessOrders & { noise: number; seed: number }) | null; // options.road (default false)
  /** With options.mask: the map against the object (fractions in [0, 1]). */
  mask: {
    massAccuracy: number; // Arras et al. 2022: positive relevance inside / all positive relevance
    rankAccuracy: number; // share of the |mask| most relevant pixels inside (ties shared)
    pointing: number; // the maximum inside (several maxima: the share of them inside)
    pixelAccuracy: number; // the segmentation test: min-max map > its mean against the mask
    iouBackground: number;
    iouObject: number;
    miou: number;
    ap: number; // average precision of [1 − m, m] against [1 − mask, mask]
    share: number | null; // with options.otherMask: positive relevance on the object / on both objects
    maskPixels: number;
  } | null;
}

export interface FaithfulnessOptions {
  target?: number; // default −1 = the arg-max class (as the benchmark)
  black?: boolean; // the perturbation test (black fill), both orders; default true (18 forward passes)
  road?: boolean; // ROAD (Rong et al. 2022), both orders; default false (18 forward passes and sparse solves)
  roadNoise?: number; // σ of ROAD's noise in [0, 1] pixel units; default 0.01
  roadSeed?: number; // ROAD's noise seed (an integer < 2^53); default 0
  mask?: Uint8Array; // H·W bytes at the input's size, nonzero = the explained object (maskFromImage)
  otherMask?: Uint8Array; // the same for a second object (class share); needs mask
  /** After each forward pass, the share done (0 … 1]; return false to cancel ("cancelled: …"). */
  onProgress?: (fraction: number) => boolean | void;
}

/** The attribution tree of attattr (Hao et al. 2021), core's attr_tree_json. */
export interface AttrTree {
  root: number; // token (≥ 1; patch root − 1)
  threshold: number;
  grid: [number, number]; // patch rows, cols
  nodes: Array<{ token: number; row: number; col: number }>; // in the order they joined, root first
  edges: Array<{ from: number; to: number; block: number; score: number }>; // from = parent (query), to = child
  target: number;
}

/** Per-head scores of one input (core's head_scores_add), each depth×heads. */
export interface HeadScores {
  attattr: number[][]; // max_{i,j} Attr_{l,h}
  attention: number[][]; // mean_i max_j A_{l,h}
  taylor: number[][]; // |Σ A ⊙ ∂F/∂A|
  target: number;
}

/** attrTree / headScores: attattr computed for target and steps, or the given explanation's. */
export interface AttattrQuery {
  target?: number; // default −1 = the predicted class
  steps?: number; // attattr's m; default 20
  threads?: number;
  /** An "attattr" explanation's attattr for this input and target: used instead of computing it. */
  attattr?: Float32Array[][];
}

/** Input.pruningCurve's options: an order of heads, or a ranking of this image's heads. */
export interface PruningCurveOptions extends AttattrQuery {
  /** Flat head indices l·H + h, the first to switch off first (e.g. the heads a user clicked). */
  order?: number[];
  /** This image's heads by their scores, the lowest first (core's image_head_ranking); only on an
   * input without a head mask. The attattr ranking uses AttattrQuery's steps, threads, attattr. */
  ranking?: "attattr" | "attention-max" | "attention-confidence" | "attention" | "taylor-loss" | "taylor-prob";
  /** Only the first `count` heads of the order. */
  count?: number;
  /** Called with the fraction done (the attattr ranking's matrices, then the curve); returning
   * false cancels (Error "cancelled: …"). */
  onProgress?: (fraction: number) => boolean | void;
}

/** One image's pruning curve (core's image_pruning_curve): k = 0 … K heads of `order` off. */
export interface PruningCurve {
  target: number; // the class followed (−1 given: the unpruned prediction)
  original: number; // the top-1 class with every head on
  ranking: string; // the ranking's name, or "order" for an order given
  order: number[]; // (K) flat l·H + h
  heads: string[]; // (K) "B.H"
  prob: number[]; // (K + 1) the target's probability (softmax, or sigmoid for a multi-label model)
  logit: number[]; // (K + 1)
  top: number[]; // (K + 1) the top-1 class
  firstChange: number; // the first k whose top-1 is not `original`; −1: none
  scores?: number[][]; // depth × heads, the ranking's scores (rankings only)
}

/**
 * One input of a model (Model.prepare / prepareRGBA, or Input.withHeadMask): its forward pass and
 * what explain derived from it. Inputs are independent: any number can be alive, calls on them may
 * come in any order.
 * Holds wasm memory: call .delete() when done (the model's weights live until its inputs are deleted).
 */
export interface Input {
  /** The k best classes, best first. */
  predict(k: number): Prediction[];
  logits(): Float32Array;
  /** The normalised C×H×W tensor the model sees. */
  tensor(): Float32Array;
  /**
   * An attribution map of this input, by method name or method spec ("rollout:head-fusion=max").
   * A spec's options and `options` combine; a key given both ways throws "bad_argument: KEY is
   * given twice ...". Its forward pass is reused, and the backward and relevance passes too while
   * the target (and the rule set) stays the same. norm-based keeps its finished blocks, attattr
   * its finished units (for the last target and steps, shared with attrTree, headScores and the
   * attattr ranking of pruningCurve), integrated-gradients and smoothgrad their running sums (for
   * the last two targets and option sets): asked again after a cancel, they go on from there, and what
   * they have already is not reported to onProgress again.
   * Both arguments are required (Embind checks the count): pass {} for the defaults.
   * Throws "bad_argument: ..." for an unknown method or an option out of range.
   */
  explain(method: MethodSpec, options: ExplainOptions): Explanation;
  /**
   * The guided walk through transformer-attribution, attnlrp or rollout (a name or a spec) on this
   * input: its steps from the input patches to the map, each with the formula's piece it computes,
   * the tensors it reads and writes, its values and (LRP methods) Σ relevance. Reuses the input's
   * passes. Throws "bad_argument: ..." for another method or a query that is not a token.
   */
  walk(method: MethodSpec, options: WalkOptions): MethodWalk;
  /** Per block, per head: A (n×n row-major, row i = query i). */
  attention(): Float32Array[][];
  /** Per block, per head: ∂y_t/∂A for class `target` (−1 = the predicted class): the gradients
   * the methods read, computed once per class and kept by this input. */
  attentionGrads(target: number): Float32Array[][];
  /** The perturbation test of `map` (H×W at the model's input size). Throws "bad_shape: ..." for another size,
   * "bad_argument: unknown option ..." for another key. onProgress(fraction) is called after each of the 9
   * forward passes; returning false stops the test with "cancelled: ...". The input keeps the steps
   * of its last eight maps, directions and fills (ROAD's with faithfulness()): a stopped test of the
   * same map goes on from the step it was in, and faithfulness() reads them too. */
  perturbation(map: Float32Array, options: { positive?: boolean; target?: number; inputs?: boolean; onProgress?: (fraction: number) => boolean | void }): PerturbationCurve;
  /**
   * Every faithfulness figure of `map` (H×W at the input's size) for one class: the perturbation
   * test and ROAD in both orders, their SRGs, and with a mask the relevance mass and rank accuracy,
   * the pointing game, the segmentation test and the class share. The perturbation test and ROAD
   * read and extend the steps the input keeps (see perturbation): figures stopped by onProgress go
   * on from the step they were in when asked again with the same map, noise and seed. Throws
   * "bad_shape: ..." for a map or mask of another size, "bad_argument: ..." for an unknown option or
   * class.
   */
  faithfulness(map: Float32Array, options: FaithfulnessOptions): Faithfulness;
  /** A 0/1 object mask at this input's size (H·W bytes) from an image file's bytes (nonzero colour =
   * object), resized by nearest neighbour as `vitlens eval --masks` does. */
  maskFromImage(bytes: Uint8Array): Uint8Array;
  attrTree(options: AttattrQuery & { threshold?: number }): AttrTree;
  headScores(options: AttattrQuery): HeadScores;
  /** Per block, per head: the atb stage's norm map ‖A_h[i, j]·V_h'[j]‖ (n×n row-major). */
  normHeads(): Float32Array[][];
  /**
   * The same image with heads switched off: `mask` holds depth × heads numbers, block by block,
   * 1 = on and 0 = off (null: every head on). An off head's attention is × 0 (the projection bias
   * stays); the new Input's prediction, explanations, attention, gradients and head scores are of
   * that masked model (attention-based methods read A = 0 for it: docs/methods.md). Its
   * perturbation() is refused. This input is unchanged; delete() the new one.
   * Throws "bad_argument: the head mask must be …" for another length or a value not 0 or 1.
   */
  withHeadMask(mask: ArrayLike<number> | null): Input;
  /** This input's head mask (depth × heads; all 1 without one). */
  headMask(): Float32Array;
  /** One image's pruning curve, from every head on (whatever this input's mask). The input keeps
   * the steps of its last three curves: a stopped curve goes on where it was, an order that adds
   * heads to a kept one runs only the new steps, one that drops heads from its end none. */
  pruningCurve(options: PruningCurveOptions): PruningCurve;
  delete(): void;
}

/** A loaded model: immutable. Holds wasm memory: call .delete() when done. */
export interface Model {
  info(): ModelInfo;
  /** The model input (C×H×W, normalised) for RGBA pixels of any size. */
  preprocessRGBA(rgba: Uint8Array | Uint8ClampedArray, width: number, height: number): Float32Array;
  /** An input from RGBA pixels of any size (resized and normalised as preprocessRGBA). */
  prepareRGBA(rgba: Uint8Array | Uint8ClampedArray, width: number, height: number): Input;
  /** An input from a normalised C×H×W tensor, used exactly. */
  prepare(x: Float32Array): Input;
  /** The model as a .vitl file. */
  save(storage: "f32" | "int8"): Uint8Array;
  /** The model at another input size h × w (pixels, multiples of the patch; at most 4097 tokens),
   * pos_embed's patch rows resampled bicubically. A new Model (a copy of the weights): delete() it.
   * Throws "bad_argument: ..." on a model that is itself resampled (resize the original). */
  atInputSize(h: number, w: number): Model;
  /** [h, w] for an image of imgH × imgW pixels at its own aspect, with about as many patches as
   * the checkpoint. */
  aspectInputSize(imgH: number, imgW: number): [number, number];
  delete(): void;
}

/** Options of Model.fromSafetensors. */
export interface ImportOptions {
  /** Called after each tensor is converted with the share of the checkpoint's bytes read so far
   * (0…1]; returning false cancels the import (Error "cancelled: …"). */
  onProgress?: (fraction: number) => boolean | void;
  /** "int8": quantise the linear and patch weights per output channel, as an int8 .vitl file
   * stores them (the model then saves as a quarter of the f32 size); default "f32". */
  storage?: "f32" | "int8";
}

export interface ModelStatic {
  /** Loads a .vitl model file (format version 1 or 2). */
  fromBytes(bytes: Uint8Array): Model;
  /**
   * Imports a safetensors checkpoint with its config.json text: timm VisionTransformer names, or
   * Hugging Face ViT, DeiT (with teacher), Dinov2, Dinov2 with registers and CLIP image
   * classifiers, with their variants (docs/import.md). What the engine does not implement is
   * refused with an Error naming the feature, key or tensor.
   */
  fromSafetensors(checkpoint: Uint8Array | ArrayBuffer, configJson: string, options?: ImportOptions): Model;
}

export interface VitlensModule {
  Model: ModelStatic;
  decodeImage(bytes: Uint8Array): DecodedImage;
  /** The attribution methods, in display order. */
  methods(): MethodInfo[];
  /** The wasm heap's size in bytes (it only grows) and the bytes malloc holds in use (for leak tests). */
  memoryStats(): { heapBytes: number; allocatedBytes: number };
  /**
   * Runs the engine's three matrix-product kernels briefly (a few milliseconds) and returns 192, a
   * check that they ran. A page calls it once, as soon as the module starts: V8 then optimises
   * those kernels in the background while the model loads, instead of running the first
   * prediction and explanation with their slower baseline code (gemm.h, gemm_warm_up).
   */
  warmUp(): number;
  /** Threads one call can use: 1 in vitlens.js; in vitlens-mt.js min(8, hardware threads). */
  threads(): number;
  /** Threads one call uses now: threads(), except in a vitlens-mt.js made with `deferThreads`
   * before startThreads() has resolved (1). */
  activeThreads(): number;
  /**
   * vitlens-mt.js only: starts the worker threads a module made with `deferThreads: true` did not
   * start with (each loads the engine in a Web Worker first; calls made meanwhile run on one
   * thread, with the same results). Resolves with activeThreads(); again, the same promise.
   */
  startThreads?(): Promise<number>;
  /**
   * The .npz `vitlens explain --method norm-based --save-stages` writes, from an explanation's
   * `norm` and Input.normHeads() (or [] for none): atb, atb_res, atb_res_ln, atb_res_ln_ff, layer
   * (L, n, n), mixing_ratio (L, 5, n), atb_heads (L, H, n, n), all float32.
   */
  encodeNormStages(norm: NonNullable<Explanation['norm']>, heads: Float32Array[][]): Uint8Array;
  /** Per block, the FF's effect on the image of an explanation's `norm` (what `vitlens explain
   * --method norm-based --ff-summary --json` prints, plus the context shares). */
  normImageSummary(norm: NonNullable<Explanation['norm']>): NormImageBlock[];
  /** vitlens-mt.js only (Emscripten's pthread pool): terminateAllThreads() lets node exit. */
  PThread?: { terminateAllThreads(): void };
}

export default function createVitlens(options?: {
  wasmBinary?: ArrayBuffer | Uint8Array;
  locateFile?: (path: string) => string;
  /** vitlens-mt.js: start without worker threads (the module resolves sooner and loads no second
   * engine while the page starts); startThreads() adds them. */
  deferThreads?: boolean;
}): Promise<VitlensModule>;
