// Subcommand registration for the `bicache` CLI. Each subcommand lives in its own cmd_*.cpp and
// registers its flags on the shared CLI11 app; the returned callback runs it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace bicache::cli {

using Runner = std::function<int()>;

Runner AddInfo(CLI::App& app);
Runner AddLogits(CLI::App& app);
Runner AddGenerate(CLI::App& app);
Runner AddTokenize(CLI::App& app);

// The embedded model: $BICACHE_MODEL, else models/tiny-llada.gguf next to the binary's source
// tree or install prefix.
std::string DefaultModelPath();
// Adds `-m/--model FILE` (default: the embedded model) to a subcommand.
void AddModelFlag(CLI::App* cmd, std::string* path);
// Adds `-t/--threads N` and applies it (OpenMP) when the command runs.
void AddThreadsFlag(CLI::App* cmd, int* threads);
void ApplyThreads(int threads);

}  // namespace bicache::cli
