// The per-sequence forward plan: which tokens are computed in which layers, and where the keys,
// values and hidden states of the tokens NOT computed come from.
//
// One small structure covers every cache mode the engine has:
//
//   mode                 partial_depth   compute range          kv_in holds
//   none (full)          0               (whole sequence)       -
//   BiCache, depth b     b               [prefix_len, n)        prefix K/V of layers < b, and
//                                                              hidden[b] of the prefix tokens
//   LLM-style prefix     n_layer         [prefix_len, n)        prefix K/V of every layer
//   Fast-dLLM dual       n_layer         [block_begin, block_end) K/V of every other token, all
//   layers
//
// In layers [0, partial_depth) only tokens in [compute_begin, compute_end) are computed; they
// attend to all n tokens, reading the K/V of the others from kv_in->layers[l]. At layer
// partial_depth (when < n_layer) the other tokens rejoin, starting from
// kv_in->hidden[partial_depth] (the output of layer partial_depth-1 as cached), and layers from
// there on run over all tokens.
//
// Positions are absolute: token i has RoPE position i in every mode, so cached prefix K/V computed
// from the prefix alone line up with the same tokens inside a longer request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace bicache::model {

// K and V of one layer for a whole sequence: [n_tok, kv_dim] each (post-RoPE K). Empty = not held.
struct LayerKv {
  std::vector<float> k;
  std::vector<float> v;
};

// Per-sequence store of K/V (per layer) and hidden states (per layer boundary), indexed by
// absolute position. Only the rows a plan reads need to be valid.
struct SeqKv {
  int n_tok = 0;
  std::vector<LayerKv> layers;             // [n_layer]
  std::vector<std::vector<float>> hidden;  // [n_layer + 1]; hidden[l]: input of layer l, [n_tok, d]

  void Reset(int n_layer, int n_tokens) {
    n_tok = n_tokens;
    layers.assign(n_layer, {});
    hidden.assign(n_layer + 1, {});
  }
  size_t bytes() const {
    size_t b = 0;
    for (const auto& l : layers) b += (l.k.size() + l.v.size()) * sizeof(float);
    for (const auto& h : hidden) b += h.size() * sizeof(float);
    return b;
  }
};

struct SeqPlan {
  std::span<const int32_t> tokens;  // [n] the whole sequence
  int partial_depth = 0;            // 0 = compute every token in every layer
  int compute_begin = 0;            // range computed in layers < partial_depth
  int compute_end = -1;             // -1 = n
  const SeqKv* kv_in = nullptr;     // required when partial_depth > 0 and the range is not [0, n)

  // Capture (optional): K/V of computed tokens for layers [0, capture_kv_layers), and hidden
  // inputs of layers 1..capture_hidden_max for computed tokens, written into kv_out at their
  // absolute positions (buffers are allocated on first use). kv_out may equal kv_in.
  SeqKv* kv_out = nullptr;
  int capture_kv_layers = 0;
  int capture_hidden_max = 0;

  // Logits wanted for absolute rows [logits_begin, logits_end), written to logits
  // ([logits_end - logits_begin, n_vocab]). The rows must be computed in the last layer.
  int logits_begin = 0;
  int logits_end = 0;
  float* logits = nullptr;
};

// What one forward call did (for the benchmark's efficiency line and the engine's counters).
struct ForwardStats {
  uint64_t token_layers = 0;   // sum over layers of tokens computed
  double matmul_flops = 0;     // 2*m*n*k over every projection, FFN and output head
  double attention_flops = 0;  // 4 * n_q * n_kv * head_dim * n_head per layer
  double seconds = 0;
};

}  // namespace bicache::model
