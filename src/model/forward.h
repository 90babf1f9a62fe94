// The forward pass of every architecture (model/arch.h) over a ragged batch of sequences.
//
// Every sequence has its own SeqPlan (model/plan.h). Tokens of all sequences that are computed
// in a layer are stacked into one matrix so each projection is a single oneDNN matmul over the
// whole batch; attention runs per sequence (bidirectional, or block-causal over
// diffusion.block_length absolute positions for sdar / fast-dllm-v2; tiled online softmax).
#pragma once

#include <span>
#include <vector>

#include "model/plan.h"
#include "model/weights.h"

namespace bicache::model {

// Validates every plan (Error(kInvalidArgument) naming the sequence and field) before any work,
// then runs the forward and fills each plan's logits and captures.
void Forward(const Model& model, std::span<const SeqPlan> plans, ForwardStats* stats = nullptr);

// One whole sequence run through a range of layers (a prefix build in chunks, interleaved by the
// scheduler with the running requests' steps).
struct LayerChunk {
  std::span<const int32_t> tokens;  // [n]
  std::vector<float>* hidden;       // [n, d_model]: the input of layer `first` (not read when
                                    // first == 0: the embeddings), replaced by the output of
                                    // layer last - 1
  SeqKv* kv_out;                    // Reset() for n tokens; captures as in SeqPlan
  int capture_kv_layers = 0;
  int capture_hidden_max = 0;
};

// Runs layers [first, last) over every token of each chunk, in one stacked forward, capturing
// K/V of layers < capture_kv_layers and hidden inputs of layers 1..capture_hidden_max that fall
// in the range (the input of `last` included). Running [0, a), [a, b), ... gives what one Forward
// over the sequence captures. Error(kInvalidArgument) for a bad range or chunk.
void ForwardLayers(const Model& model, std::span<const LayerChunk> chunks, int first, int last,
                   ForwardStats* stats = nullptr);

}  // namespace bicache::model
