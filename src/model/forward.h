// The forward pass of every architecture (model/arch.h) over a ragged batch of sequences.
//
// Every sequence has its own SeqPlan (model/plan.h). Tokens of all sequences that are computed
// in a layer are stacked into one matrix so each projection is a single oneDNN matmul over the
// whole batch; attention runs per sequence (bidirectional, or block-causal over
// diffusion.block_length absolute positions for sdar / fast-dllm-v2; tiled online softmax).
#pragma once

#include <span>

#include "model/plan.h"
#include "model/weights.h"

namespace bicache::model {

// Validates every plan (Error(kInvalidArgument) naming the sequence and field) before any work,
// then runs the forward and fills each plan's logits and captures.
void Forward(const Model& model, std::span<const SeqPlan> plans, ForwardStats* stats = nullptr);

}  // namespace bicache::model
