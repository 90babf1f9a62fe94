// Subcommand registration for the `bicache` CLI. Each subcommand lives in its own cmd_*.cpp and
// registers its flags on the shared CLI11 app; the returned callback runs it.
#pragma once

#include "engine/loaded_model.h"
#include "model/config.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace bicache::cli {

using Runner = std::function<int()>;

using CommandFactory = Runner (*)(CLI::App& app);

// Each cmd_*.cpp registers its subcommand with a file-scope registrar:
//   static CommandRegistrar reg(AddInfo, 10);   // order = position in --help
struct CommandRegistrar {
  CommandRegistrar(CommandFactory factory, int order);
};
// Factories in registration order.
std::vector<CommandFactory> RegisteredCommands();

// The embedded model: $BICACHE_MODEL, else models/tiny-llada.gguf next to the binary's source
// tree or install prefix.
std::string DefaultModelPath();
// Adds `-m/--model FILE` (default: the embedded model) to a subcommand.
void AddModelFlag(CLI::App* cmd, std::string* path);
// Adds `--depth-profile safe|fast|FILE` (default safe): which depth table bicache serves with.
void AddDepthProfileFlag(CLI::App* cmd, std::string* profile);
// Checks the profile against the model file (engine::CheckDepthProfile), then loads the model and
// sets the profile on it: every front end that serves bicache starts here.
std::unique_ptr<engine::LoadedModel> LoadModelWithProfile(const std::string& path,
                                                          const std::string& profile);
// Adds `--suite FILE|NAME` (default: the held-out suite): a JSONL path, or a committed split's
// name (heldout, heldout-large, heldout-spread, calibration; harness::ResolveSuitePath), stored as
// its path.
// `what`: the kind of file, shown in --help.
void AddSuiteFlag(CLI::App* cmd, std::string* path, const std::string& what = "task suite JSONL");
// Adds `-t/--threads N` (0 .. 1024, 0 = the default) and applies it (OpenMP) when the command
// runs. `help` replaces the description for a command whose default differs (quantize).
void AddThreadsFlag(CLI::App* cmd, int* threads, const std::string& help = "");
// Adds bench's and bench-serve's workload shape: `--prefixes P` (0 .. 1000, 0 = every prefix group
// of the suite with M usable requests) and `--per-prefix M` (1 .. 1000).
void AddWorkloadFlags(CLI::App* cmd, int* prefixes, int* per_prefix, const std::string& per_help);
void ApplyThreads(int threads);
// Once the model is known: without -t, a small model's forwards run on one thread
// (engine::ForwardThreads, measured in docs/benchmarks.md).
void ApplyModelThreads(int threads, const model::ModelConfig& config);

// The warning of every command that runs the bicache cache mode without a depth table at `path`.
void WarnNoDepthTable(const std::string& path);

// Range checks for numeric flags whose message names the bound (CLI11's NonNegativeNumber and
// PositiveNumber print their upper bound, the largest double, in full).
CLI::Validator NonNegative();  // >= 0
CLI::Validator Positive();     // > 0
CLI::Validator Uint64();       // a whole number 0 .. 2^64-1 (CLI11 alone clamps larger ones)

}  // namespace bicache::cli
