// Flags shared by every command that generates (generate, eval, bench, serve defaults).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "diffusion/sampler_config.h"
#include "engine/cache_mode.h"
#include "engine/request.h"

namespace bicache::cli {

struct SamplingFlags {
  int gen_length = 32;
  int steps = 0;         // 0 = gen_length
  int block_length = 0;  // 0 = gen_length
  std::string algorithm = "low_confidence";
  float temperature = 0, top_p = 1, alg_temp = 0, threshold = 0, cfg = 0, eps = 1e-3f;
  int top_k = 0;
  uint64_t seed = 0;
  std::string cache = "none";
  int refresh = engine::kDefaultRefreshInterval;
  double cache_budget_mb = 0;
  double audit_rate = 0;

  void Register(CLI::App* cmd);
  // Builds and validates the sampler settings (stop ids and mask id are the engine's to fill).
  diffusion::SamplerConfig Sampler() const;
  engine::CacheMode Cache() const;  // errors name --cache
};

}  // namespace bicache::cli
