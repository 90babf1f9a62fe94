#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "engine/threads.h"
#include "harness/suite.h"
#include "util/exe_path.h"

namespace bicache::cli {
namespace {

std::vector<std::pair<int, CommandFactory>>& Registry() {
  static std::vector<std::pair<int, CommandFactory>> registry;
  return registry;
}

CLI::Validator Bound(bool strict) {
  return CLI::Validator(
      [strict](std::string& value) -> std::string {
        double d = 0;
        if (!CLI::detail::lexical_cast(value, d) || !std::isfinite(d))
          return "'" + value + "' is not a number";
        if (strict ? !(d > 0) : !(d >= 0))
          return std::string("must be ") + (strict ? "> 0" : ">= 0") + ", got " + value;
        return "";
      },
      strict ? "POSITIVE" : "NONNEGATIVE");
}

}  // namespace

CLI::Validator NonNegative() {
  return Bound(false);
}
CLI::Validator Positive() {
  return Bound(true);
}
CLI::Validator Uint64() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const bool digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
        errno = 0;
        if (!digits || (std::strtoull(value.c_str(), nullptr, 10), errno == ERANGE)) {
          return "must be a whole number from 0 to 18446744073709551615, got " + value;
        }
        return "";
      },
      "UINT64");
}

void WarnNoDepthTable(const std::string& path) {
  std::fprintf(stderr,
               "bicache: warning: no depth table at %s: the bicache cache mode reuses no layers "
               "(depth 0); run `bicache calibrate`\n",
               path.c_str());
}

CommandRegistrar::CommandRegistrar(CommandFactory factory, int order) {
  Registry().emplace_back(order, factory);
}

std::vector<CommandFactory> RegisteredCommands() {
  auto entries = Registry();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<CommandFactory> out;
  for (const auto& e : entries) out.push_back(e.second);
  return out;
}

std::string DefaultModelPath() {
  if (const char* env = std::getenv("BICACHE_MODEL"); env && *env) return env;
  // A build inside the checkout finds its models/, an install its share/bicache/.
  for (const char* relative : {"models/tiny-llada.gguf", "share/bicache/tiny-llada.gguf"}) {
    if (const std::string dir = DirAboveExecutableHolding(relative); !dir.empty())
      return dir + "/" + relative;
  }
  return std::string(BICACHE_SOURCE_DIR) + "/models/tiny-llada.gguf";
}

void AddModelFlag(CLI::App* cmd, std::string* path) {
  *path = DefaultModelPath();
  cmd->add_option("-m,--model", *path, "GGUF model file (default: the embedded tiny model)");
}

void AddDepthProfileFlag(CLI::App* cmd, std::string* profile) {
  cmd->add_option("--depth-profile", *profile,
                  "the bicache depth table: safe (answers as without the cache, MODEL.depth.json), "
                  "fast (accuracy within 1 point, MODEL.depth.fast.json) or a table file")
      ->capture_default_str();
}

std::unique_ptr<engine::LoadedModel> LoadModelWithProfile(const std::string& path,
                                                          const std::string& profile) {
  engine::CheckDepthProfile(path, profile);
  auto lm = engine::LoadedModel::Load(path);
  lm->SetDepthProfile(profile);
  return lm;
}

void AddSuiteFlag(CLI::App* cmd, std::string* path, const std::string& what) {
  *path = harness::DefaultSuitePath();
  cmd->add_option("--suite", *path,
                  what +
                      ", or a committed split: heldout (default), heldout-large, heldout-spread, "
                      "calibration")
      ->transform(harness::ResolveSuitePath);
}

void AddThreadsFlag(CLI::App* cmd, int* threads, const std::string& help) {
  *threads = 0;
  cmd->add_option(
         "-t,--threads", *threads,
         !help.empty()
             ? help
             : "worker threads (default: 1 for a model with d_model <= 512, where waking a second "
               "thread costs more than it saves; else all cores; OMP_NUM_THREADS, when set, "
               "instead of that rule)")
      ->check(CLI::Range(0, 1024));
}

void AddWorkloadFlags(CLI::App* cmd, int* prefixes, int* per_prefix, const std::string& per_help) {
  cmd->add_option("--prefixes", *prefixes,
                  "distinct shared prefixes P (system messages; 0 = every prefix group of the "
                  "suite with M usable requests)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--per-prefix", *per_prefix, per_help)
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
}

void ApplyThreads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

void ApplyModelThreads(int threads, const model::ModelConfig& config) {
  engine::UseThreads(engine::ForwardThreads(threads, config));
}

}  // namespace bicache::cli
