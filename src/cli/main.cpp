// `bicache`: the command-line front end. Every subcommand is a thin client of the library.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include "cli/commands.h"
#include "cli/render_error.h"
#include "util/error.h"

int main(int argc, char** argv) {
  // Idle OpenMP threads spin by default between the ~10 parallel regions of every layer; on a
  // machine whose cores are shared that spinning made a 512-token forward 2-3x slower
  // (docs/benchmarks.md). The runtime reads the policy only at start-up, so when the user has not
  // chosen one we set PASSIVE and restart the process once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);  // returns only on failure: then carry on with the default
  }
  CLI::App app{"bicache: diffusion language model inference with bidirectional prefix caching"};
  app.require_subcommand(1);
  std::map<CLI::App*, bicache::cli::Runner> runners;
  auto add = [&](bicache::cli::Runner (*fn)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    bicache::cli::Runner r = fn(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) runners[subs.back()] = std::move(r);
  };
  for (bicache::cli::CommandFactory f : bicache::cli::RegisteredCommands()) add(f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 says only "A subcommand is required" for a mistyped command: name it and the commands.
    const auto subs = app.get_subcommands({});
    const bool known = argc > 1 && std::any_of(subs.begin(), subs.end(),
                                               [&](CLI::App* s) { return s->check_name(argv[1]); });
    if (argc > 1 && argv[1][0] != '-' && !known) {
      std::string names;
      for (const CLI::App* sub : subs) names += (names.empty() ? "" : ", ") + sub->get_name();
      std::fprintf(
          stderr,
          "bicache: unknown command '%s' (commands: %s)\nRun with --help for more information.\n",
          argv[1], names.c_str());
      return e.get_exit_code();
    }
    return app.exit(e);
  }
  try {
    for (auto& [cmd, run] : runners) {
      if (cmd->parsed()) return run();
    }
    return 1;
  } catch (const bicache::Error& e) {
    std::fprintf(stderr, "bicache: %s: %s\n", bicache::ErrorKindName(e.kind()),
                 bicache::cli::RenderError(e).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bicache: error: %s\n", e.what());
    return 2;
  }
}
