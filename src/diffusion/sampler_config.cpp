#include "diffusion/sampler_config.h"

#include <cmath>
#include <string>

#include "util/field_error.h"

namespace bicache::diffusion {
namespace {

constexpr struct {
  const char* name;
  Algorithm algorithm;
} kAlgorithms[] = {
    {"low_confidence", Algorithm::kLowConfidence},
    {"random", Algorithm::kRandom},
    {"origin", Algorithm::kOrigin},
    {"maskgit_plus", Algorithm::kMaskgitPlus},
    {"topk_margin", Algorithm::kTopkMargin},
    {"entropy", Algorithm::kEntropy},
};

// Fields are named `{field}` so that each front end spells them its own way (util/field_error.h).
[[noreturn]] void Invalid(const std::string& message) {
  throw FieldError(ErrorKind::kInvalidArgument, message);
}

std::string Num(double v) {
  std::string s = std::to_string(v);
  // to_string prints 6 decimals; trim trailing zeros so "0.500000" reads "0.5".
  if (s.find('.') != std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

Algorithm ParseAlgorithm(std::string_view name) {
  for (const auto& a : kAlgorithms) {
    if (name == a.name) return a.algorithm;
  }
  std::string valid;
  for (const auto& a : kAlgorithms) valid += std::string(valid.empty() ? "" : ", ") + a.name;
  Invalid("{algorithm}: unknown algorithm '" + std::string(name) + "' (valid: " + valid + ")");
}

const char* AlgorithmName(Algorithm algorithm) {
  for (const auto& a : kAlgorithms) {
    if (a.algorithm == algorithm) return a.name;
  }
  return "unknown";
}

bool UsesTimestepSchedule(Algorithm algorithm) {
  return algorithm != Algorithm::kLowConfidence && algorithm != Algorithm::kRandom;
}

bool HasModelConfidence(Algorithm algorithm) {
  return algorithm != Algorithm::kRandom && algorithm != Algorithm::kOrigin;
}

void Validate(const SamplerConfig& c) {
  if (c.gen_length <= 0)
    Invalid("{gen_length} must be > 0 (got " + std::to_string(c.gen_length) + ")");
  if (c.block_length <= 0) {
    Invalid("{block_length} must be > 0 (got " + std::to_string(c.block_length) + ")");
  }
  if (c.gen_length % c.block_length != 0) {
    Invalid("{block_length} (" + std::to_string(c.block_length) + ") must divide {gen_length} (" +
            std::to_string(c.gen_length) + ")");
  }
  if (c.block_offset < 0 || c.block_offset >= c.block_length) {
    Invalid("block offset " + std::to_string(c.block_offset) + " must be in [0, {block_length})");
  }
  if (c.steps <= 0) Invalid("{steps} must be > 0 (got " + std::to_string(c.steps) + ")");
  const int blocks = c.num_blocks();
  if (c.steps % blocks != 0) {
    Invalid("{steps} (" + std::to_string(c.steps) +
            ") must be a multiple of the number of blocks (" + std::to_string(blocks) +
            " = {gen_length} / {block_length})");
  }
  // `!(x >= lo)` rather than `x < lo` so that NaN is rejected too.
  // OpenAI's range: beyond 2 the distribution over a vocabulary is close to uniform.
  if (!(c.temperature >= 0 && c.temperature <= 2)) {
    Invalid("{temperature} must be between 0 and 2 (got " + Num(c.temperature) + ")");
  }
  if (!(c.top_p > 0 && c.top_p <= 1))
    Invalid("{top_p} must be in (0, 1] (got " + Num(c.top_p) + ")");
  if (c.top_k < 0) Invalid("{top_k} must be >= 0, 0 = off (got " + std::to_string(c.top_k) + ")");
  if (!(c.eps > 0 && c.eps < 1)) Invalid("{eps} must be in (0, 1) (got " + Num(c.eps) + ")");
  if (!(c.cfg_scale >= 0) || std::isinf(c.cfg_scale)) {
    Invalid("{cfg} (cfg_scale) must be a finite value >= 0, 0 = off (got " + Num(c.cfg_scale) +
            ")");
  }
  if (!(c.threshold >= 0 && c.threshold < 1)) {
    Invalid("{threshold} must be in [0, 1), 0 = off (got " + Num(c.threshold) + ")");
  }
  const char* alg = AlgorithmName(c.algorithm);
  if (c.threshold > 0 && !HasModelConfidence(c.algorithm)) {
    Invalid(std::string(
                "{threshold} needs a confidence-ranked {algorithm} (low_confidence, maskgit_plus, "
                "topk_margin); '") +
            alg + "' has none");
  }
  if (c.threshold > 0 && c.algorithm == Algorithm::kEntropy) {
    // Negative entropy is <= 0, so a threshold in (0, 1) would never be reached.
    Invalid(
        "{threshold} cannot be used with {algorithm} entropy (its confidence, -entropy, is <= 0)");
  }
  if (!(c.alg_temp >= 0) || std::isinf(c.alg_temp)) {
    Invalid("{alg_temp} must be a finite value >= 0, 0 = off (got " + Num(c.alg_temp) + ")");
  }
  if (c.alg_temp > 0) {
    if (!UsesTimestepSchedule(c.algorithm) || !HasModelConfidence(c.algorithm)) {
      Invalid(std::string("{alg_temp} applies to maskgit_plus, topk_margin and entropy only (got "
                          "{algorithm} ") +
              alg + ")");
    }
    if (c.threshold > 0) Invalid("{alg_temp} cannot be combined with {threshold}");
  }
  if (c.mask_id < 0) {
    Invalid("mask_id (the model's mask token) must be >= 0 (got " + std::to_string(c.mask_id) +
            ")");
  }
  for (int32_t id : c.stop_ids) {
    if (id < 0) Invalid("stop_ids: token id " + std::to_string(id) + " is negative");
    if (id == c.mask_id) Invalid("stop_ids: token id " + std::to_string(id) + " is the mask token");
  }
}

}  // namespace bicache::diffusion
