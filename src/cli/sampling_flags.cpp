#include "cli/sampling_flags.h"

#include "cli/commands.h"
#include "engine/request_check.h"

#include "util/error.h"

namespace bicache::cli {

CLI::Option* AddGenLengthFlag(CLI::App* cmd, int* gen_length, const std::string& help,
                              const std::string& alias) {
  const std::string names = "--gen-length" + (alias.empty() ? "" : "," + alias);
  return cmd->add_option(names, *gen_length, help)->check(CLI::Range(1, kMaxLengthFlag));
}

CLI::Option* AddStepsFlag(CLI::App* cmd, int* steps, const std::string& help) {
  return cmd->add_option("--steps", *steps, help)->check(CLI::Range(1, kMaxLengthFlag));
}

CLI::Option* AddBlockLengthFlag(CLI::App* cmd, int* block_length, const std::string& help) {
  return cmd->add_option("--block-length", *block_length, help)
      ->check(CLI::Range(1, kMaxLengthFlag));
}

CLI::Option* AddSeedFlag(CLI::App* cmd, uint64_t* seed, const std::string& help) {
  return cmd->add_option("--seed", *seed, help)->check(Uint64());
}

void SamplingFlags::Register(CLI::App* cmd) {
  AddGenLengthFlag(cmd, &gen_length, "tokens to generate (the mask canvas)");
  AddStepsFlag(cmd, &steps, "denoising steps (default: gen length)");
  AddBlockLengthFlag(cmd, &block_length, "semi-autoregressive block length (default: gen length)");
  cmd->add_option(
      "--algorithm", algorithm,
      "low_confidence, random (LLaDA); origin, maskgit_plus, topk_margin, entropy (Dream)");
  cmd->add_option("--temperature", temperature, "sampling temperature (0 = greedy)");
  cmd->add_option("--top-p", top_p, "nucleus sampling (Dream algorithms)");
  cmd->add_option("--top-k", top_k, "top-k sampling (Dream algorithms; 0 = off)");
  cmd->add_option("--alg-temp", alg_temp, "Dream: randomness of position selection");
  cmd->add_option("--eps", eps, "Dream: final timestep of the schedule");
  cmd->add_option("--threshold", threshold,
                  "parallel decoding: commit every masked token of the block above this confidence "
                  "(0 < X < 1)");
  cmd->add_option("--cfg", cfg, "classifier-free guidance scale (0 = off)");
  AddSeedFlag(cmd, &seed, "random seed");
  cmd->add_option(
      "--cache", cache,
      "none, llm, fixed:B, bicache, prefix (block-diffusion models), dual, bicache+dual, ...");
  AddRefreshFlag(cmd, &refresh,
                 "bicache/fixed:B: compute the prefix past the reused depth every R steps only, "
                 "reusing its K/V in between (0 = every step)");
  AddDepthProfileFlag(cmd, &depth_profile);
  AddCacheBudgetFlag(cmd, &cache_budget_mb, "prefix cache budget (default: 25% of free memory)");
  cmd->add_option("--audit-rate", audit_rate,
                  "recompute this fraction of prefix-reusing requests without cache and log the "
                  "similarity seen");
}

diffusion::SamplerConfig SamplingFlags::Sampler() const {
  diffusion::SamplerConfig s;
  s.gen_length = gen_length;
  s.steps = steps == 0 ? gen_length : steps;
  s.block_length = block_length == 0 ? gen_length : block_length;
  s.algorithm = diffusion::ParseAlgorithm(algorithm);
  s.temperature = temperature;
  s.top_p = top_p;
  s.top_k = top_k;
  s.alg_temp = alg_temp;
  s.eps = eps;
  s.threshold = threshold;
  s.cfg_scale = cfg;
  s.seed = seed;
  if (!(audit_rate >= 0 && audit_rate <= 1))
    throw Error(ErrorKind::kInvalidArgument, "--audit-rate must be in [0, 1]");
  return s;
}

void UseModelBlock(const model::ModelConfig& c, int block_flag, diffusion::SamplerConfig* s) {
  if (c.block_causal()) s->block_length = engine::ModelBlockLength(c, block_flag);
}

engine::CacheMode SamplingFlags::Cache() const {
  try {
    return engine::ParseCacheMode(cache);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string("--cache: ") + e.what());
  }
}

}  // namespace bicache::cli
