// Mixture-of-experts feed-forward (llada-moe, rnd1, llada2): a router over `ffn_gate_inp` (softmax,
// or llada2's grouped sigmoid with a choice bias), the top-k experts per token, SwiGLU experts
// stored as 3-D tensors `ffn_{gate,up,down}_exps` (ne = {d, d_ff_exp, n_expert} for gate/up,
// {d_ff_exp, d, n_expert} for down).
//
// A denoising step routes every computed row. Rows are grouped by expert and each expert that at
// least one row chose runs one GEMM per projection over its rows (through kernels::Linear, on a
// slice of the memory-mapped tensor); experts no row chose are not touched.
#pragma once

#include <string>

#include "format/gguf.h"
#include "model/config.h"
#include "model/plan.h"
#include "model/weights.h"

namespace bicache::model {

// Loads layer `layer`'s router and experts into w, checking each tensor against the
// config: a missing tensor, an expert tensor whose third dimension is not expert_count, a router
// whose width is not expert_count, or any other shape is Error(kModel) naming the tensor.
void LoadMoeFfn(const format::GgufFile& f, const ModelConfig& c, int layer, LayerWeights* w);

// The router's choice for `rows` rows of logits [rows, n_expert] (overwritten by their softmax):
// ids/weights [rows, k], the k most probable experts of each row in descending order (ties: the
// lower id), weighted by their probability, renormalised to sum to 1 when `renormalise`.
void RouteTopK(float* logits, int rows, int n_expert, int k, bool renormalise, int* ids,
               float* weights);

// BailingMoeV2's routing (llada2), as its published modeling code defines it.
struct GroupRouting {
  int n_expert = 0;
  int k = 0;             // experts per row
  int n_group = 1;       // groups of n_expert / n_group consecutive experts
  int n_group_used = 1;  // groups a row may take its experts from
  bool renormalise = false;
  float scale = 1.0f;
  const float* bias = nullptr;  // [n_expert] choice bias, or nullptr for none
};

// The choice for `rows` rows of router logits [rows, n_expert]: s = sigmoid(logit); the choice
// score of expert e is s[e] + bias[e]; each group is scored by the sum of its two best choice
// scores and the n_group_used best groups are kept; ids [rows, k] are then the k best choice
// scores among the kept groups' experts in descending order (ties: the lower id). weights [rows,
// k] are the chosen experts' s, without the bias, divided by their sum (+1e-20) when
// `renormalise` and k > 1, times `scale`.
void RouteSigmoidGroupTopK(const float* logits, int rows, const GroupRouting& g, int* ids,
                           float* weights);

// x[rows, d] += MoE(h[rows, d]) with the layer's router and experts. Adds the active experts'
// GEMM FLOPs (and the router's and shared experts') to st->matmul_flops. llada2's shared experts
// run on every row and add to x beside the routed ones.
void MoeFeedForward(const ModelConfig& c, const LayerWeights& w, const float* h, int rows, float* x,
                    ForwardStats* st);

}  // namespace bicache::model
