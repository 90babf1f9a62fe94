// Mixture-of-experts feed-forward (llada-moe): a softmax router over `ffn_gate_inp`, the top-k
// experts per token, and SwiGLU experts stored as 3-D tensors `ffn_{gate,up,down}_exps`
// (ne = {d, d_ff_exp, n_expert} for gate/up, {d_ff_exp, d, n_expert} for down).
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

// x[rows, d] += MoE(h[rows, d]) with the layer's router and experts. Adds the active experts'
// GEMM FLOPs (and the router's) to st->matmul_flops.
void MoeFeedForward(const ModelConfig& c, const LayerWeights& w, const float* h, int rows, float* x,
                    ForwardStats* st);

}  // namespace bicache::model
