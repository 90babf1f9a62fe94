// `bicache`: the command-line front end. Every subcommand is a thin client of the library.
#include <cstdio>
#include <exception>
#include <map>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
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
    return app.exit(e);
  }
  try {
    for (auto& [cmd, run] : runners) {
      if (cmd->parsed()) return run();
    }
    return 1;
  } catch (const bicache::Error& e) {
    std::fprintf(stderr, "bicache: %s: %s\n", bicache::ErrorKindName(e.kind()), e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bicache: error: %s\n", e.what());
    return 2;
  }
}
