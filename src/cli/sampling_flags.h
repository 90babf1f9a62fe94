// Flags shared by every command that generates (generate, eval, bench, serve defaults).
//
// A flag that several commands take is registered by one function below, with the one set of
// bounds it has everywhere (checked at parse time: CLI11's message names the flag); a command
// passes its own help text only where its default differs. The cache flags are in cache_flags.h.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "cli/cache_flags.h"
#include "diffusion/sampler_config.h"
#include "engine/cache_mode.h"
#include "engine/request.h"

namespace bicache::cli {

// Largest token count and step count a flag accepts: a sanity bound (the model's context and the
// server's limits refuse far less); the server's --max-tokens-limit and --max-steps share it.
constexpr int kMaxLengthFlag = 1 << 20;

// --gen-length N (alias --max-tokens in bench-serve, which passes `alias`): tokens to generate,
// 1 .. kMaxLengthFlag.
CLI::Option* AddGenLengthFlag(CLI::App* cmd, int* gen_length, const std::string& help,
                              const std::string& alias = "");
// --steps N and --block-length N: 1 .. kMaxLengthFlag. The commands keep 0 as "not given" (a
// default derived from the gen length), so a literal 0 is refused.
CLI::Option* AddStepsFlag(CLI::App* cmd, int* steps, const std::string& help);
CLI::Option* AddBlockLengthFlag(CLI::App* cmd, int* block_length, const std::string& help);
// --seed S: a whole number 0 .. 2^64-1.
CLI::Option* AddSeedFlag(CLI::App* cmd, uint64_t* seed, const std::string& help);

// A block-diffusion model denoises blocks of its own (sub-)block length: `block_flag` (the
// --block-length given, 0 = none) must be 0 or that length (engine::ModelBlockLength's FieldError
// otherwise), and the sampler gets it. Other models: nothing changes.
void UseModelBlock(const model::ModelConfig& c, int block_flag, diffusion::SamplerConfig* s);

struct SamplingFlags {
  int gen_length = 32;
  int steps = 0;         // 0 = gen_length
  int block_length = 0;  // 0 = gen_length
  std::string algorithm = "low_confidence";
  float temperature = 0, top_p = 1, alg_temp = 0, threshold = 0, cfg = 0, eps = 1e-3f;
  int top_k = 0;
  uint64_t seed = 0;
  std::string cache = "none";
  std::string depth_profile = "safe";  // --depth-profile
  int refresh = engine::kDefaultRefreshInterval;
  double cache_budget_mb = 0;
  double audit_rate = 0;

  void Register(CLI::App* cmd);
  // Builds and validates the sampler settings (stop ids and mask id are the engine's to fill).
  diffusion::SamplerConfig Sampler() const;
  engine::CacheMode Cache() const;  // errors name --cache
};

}  // namespace bicache::cli
