// `bicache serve`: the OpenAI-compatible HTTP server (docs/serving.md).
//
// Signals: SIGTERM/SIGINT are blocked in every thread and taken synchronously by the main thread
// (sigtimedwait), so shutdown runs as ordinary code, not inside a signal handler.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include "cli/commands.h"
#include "engine/cache_mode.h"
#include "engine/depth_table.h"
#include "server/server.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

// Where the API key may come from; each `given` also when its value is empty.
struct KeySources {
  bool flag_given = false;  // --api-key
  std::string flag;
  bool file_given = false;  // --api-key-file
  std::string file;
};

bool IsBlank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

// A source that is given but empty (`--api-key ''`, `BICACHE_API_KEY=`, `BICACHE_API_KEY="$KEY"`
// with KEY unset, a file whose first line is blank) is an error, never an open server.
[[noreturn]] void ThrowEmptyKey(const std::string& source,
                                const char* wanted = "a non-empty API key") {
  throw Error(ErrorKind::kInvalidArgument, source + " is empty: give " + wanted + ", or leave " +
                                               source + " out to serve without authentication");
}

// The key from --api-key, --api-key-file or BICACHE_API_KEY (at most one of them); "" = none given.
// A key on the command line is visible to every local user in `ps`: warned about.
std::string ResolveApiKey(const KeySources& k) {
  const char* env = std::getenv("BICACHE_API_KEY");
  const int given = k.flag_given + k.file_given + (env != nullptr);
  if (given > 1) {
    throw Error(ErrorKind::kInvalidArgument,
                "give the API key one way only: --api-key, --api-key-file or BICACHE_API_KEY");
  }
  if (k.flag_given) {
    if (IsBlank(k.flag)) ThrowEmptyKey("--api-key");
    std::fprintf(stderr,
                 "bicache: warning: --api-key is visible to every local user (ps, /proc); use "
                 "BICACHE_API_KEY "
                 "or --api-key-file\n");
    return k.flag;
  }
  if (k.file_given) {
    if (k.file.empty())
      ThrowEmptyKey("--api-key-file", "the path of a file whose first line is the key");
    std::ifstream f(k.file);
    if (!f) throw Error(ErrorKind::kIo, "cannot read --api-key-file '" + k.file + "'");
    std::string key;
    std::getline(f, key);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
      key.pop_back();
    if (IsBlank(key))
      throw Error(ErrorKind::kInvalidArgument,
                  "--api-key-file '" + k.file + "': the first line is empty");
    return key;
  }
  if (env != nullptr && IsBlank(env)) ThrowEmptyKey("BICACHE_API_KEY");
  return env != nullptr ? std::string(env) : std::string();
}

// --api-key and --api-key-file, each recorded as given even when its value is empty.
void AddApiKeyFlags(CLI::App* cmd, std::shared_ptr<KeySources> key) {
  cmd->add_option_function<std::string>(
      "--api-key",
      [key](const std::string& v) {
        key->flag_given = true;
        key->flag = v;
      },
      "require 'Authorization: Bearer KEY' on /v1 routes (visible in `ps`: prefer BICACHE_API_KEY "
      "or --api-key-file)");
  cmd->add_option_function<std::string>(
      "--api-key-file",
      [key](const std::string& v) {
        key->file_given = true;
        key->file = v;
      },
      "read the API key from this file (first line)");
}

// Connection deadlines and the connection cap (server/http/http_server.h).
void AddConnectionFlags(CLI::App* cmd, server::ConnectionOptions* f) {
  const auto seconds = [cmd](const char* name, std::chrono::milliseconds* to, const char* help) {
    cmd->add_option_function<double>(
           name, [to](double s) { *to = std::chrono::milliseconds(std::llround(s * 1000)); }, help)
        ->check(CLI::Range(0.001, 86400.0));
  };
  seconds("--header-timeout", &f->header_timeout,
          "seconds a client has to send a request's whole head, from its first byte (default 10; "
          "408 after)");
  seconds("--body-timeout", &f->body_timeout,
          "seconds a client has to send a request's whole body, after the head (default 30; 408 "
          "after)");
  seconds("--idle-timeout", &f->idle_timeout,
          "seconds a kept-alive connection may sit idle between requests (default 15)");
  cmd->add_option("--max-connections", f->max_connections,
                  "open client connections held at once; more are answered 503 and closed")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
}

}  // namespace

Runner AddServe(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  struct Opts {
    server::ServerOptions s;
    std::string cache = "bicache";
    int threads = 0;
    double grace_s = 30;
    KeySources key;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->s.model_path);
  AddThreadsFlag(cmd, &o->threads);
  cmd->add_option("--host", o->s.host, "address to listen on (default 127.0.0.1: local only)");
  cmd->add_option("--port", o->s.port, "TCP port (0 = any free port)")->check(CLI::Range(0, 65535));
  AddApiKeyFlags(cmd, std::shared_ptr<KeySources>(o, &o->key));
  cmd->add_flag(
      "--no-mmap", [o](int64_t) { o->s.open.mmap = false; },
      "read the model into memory instead of memory-mapping it (a file rewritten in place can then "
      "not crash the server)");
  cmd->add_flag("--mlock", o->s.open.mlock,
                "lock the model's bytes in RAM (needs a large enough 'ulimit -l')");
  cmd->add_option("--model-id", o->s.model_id,
                  "model id reported by /v1/models (default: file name)");
  cmd->add_option("--cache", o->cache, "default cache mode for requests without a 'cache' field");
  AddDepthProfileFlag(cmd, &o->s.depth_profile);
  cmd->add_option(
         "--refresh", o->s.limits.default_refresh,
         "bicache: default refresh interval R for requests without a 'refresh' field (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--cache-budget-mb", o->s.cache_budget_mb,
                  "prefix cache budget (default: 25% of free memory)")
      ->check(NonNegative());
  cmd->add_option("--max-tokens-limit", o->s.limits.max_tokens_limit, "largest max_tokens accepted")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--default-max-tokens", o->s.limits.default_max_tokens,
                  "max_tokens when a request omits it")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-prompt-tokens", o->s.limits.max_prompt_tokens,
                  "largest prompt in tokens (0 = the model's context)")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-steps", o->s.limits.max_steps, "largest steps accepted")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-queue", o->s.max_queue, "requests waiting beyond the batch; more get 429")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--max-running", o->s.max_running, "requests batched together")
      ->check(CLI::Range(1, 1 << 12));
  cmd->add_option("--max-batch-tokens", o->s.max_batch_tokens,
                  "token budget of one batch (0 = unlimited)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--max-body-bytes", o->s.max_body_bytes, "largest request body (413 beyond)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  AddConnectionFlags(cmd, &o->s.connections);
  cmd->add_option("--shutdown-grace", o->grace_s,
                  "seconds in-flight requests get to finish on SIGTERM")
      ->check(NonNegative());
  return [=]() {
    o->s.api_key = ResolveApiKey(o->key);
    ApplyThreads(o->threads);
    o->s.threads =
        o->threads;  // the scheduler's worker thread applies it (OpenMP settings are per thread)
    o->s.limits.default_cache = engine::ParseCacheMode(o->cache);
    engine::CheckDepthProfile(o->s.model_path, o->s.depth_profile);
    if (o->s.limits.default_cache.prefix == engine::PrefixReuse::kBicache) {
      const std::string table =
          engine::DepthTable::PathForModel(o->s.model_path, o->s.depth_profile);
      std::error_code ec;
      if (!std::filesystem::exists(table, ec)) WarnNoDepthTable(table);
    }
    // Block the signals before any thread starts so every thread inherits the mask.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);  // a vanished client is a failed write, not a dead server

    server::Server srv(o->s);
    const int port = srv.Bind();
    std::printf("bicache: listening on http://%s:%d\n", o->s.host.c_str(), port);
    std::fflush(stdout);
    srv.StartLoading();
    std::thread http([&] { srv.Serve(); });
    int rc = 0;
    for (;;) {
      timespec tick{0, 200 * 1000 * 1000};
      const int sig = sigtimedwait(&set, nullptr, &tick);
      if (sig == SIGTERM || sig == SIGINT) {
        std::fprintf(stderr, "bicache: shutting down\n");
        break;
      }
      if (const std::string err = srv.load_error(); !err.empty()) {
        std::fprintf(stderr, "bicache: cannot load the model: %s\n", err.c_str());
        rc = 2;
        break;
      }
    }
    // From here a second SIGTERM/SIGINT exits at once.
    std::atomic<bool> finished{false};
    std::thread second_signal([&] {
      while (!finished.load()) {
        timespec tick{0, 100 * 1000 * 1000};
        const int sig = sigtimedwait(&set, nullptr, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
          std::fprintf(stderr, "bicache: second signal: exiting now\n");
          std::fflush(stderr);
          std::_Exit(rc == 0 ? 1 : rc);
        }
      }
    });
    srv.Shutdown(std::chrono::milliseconds(static_cast<int64_t>(o->grace_s * 1000)));
    // Every request has been answered or cancelled. The HTTP threads end as their connections do;
    // a client that keeps a connection open without finishing a request (a slow header, an idle
    // keep-alive) would hold one for ever, so after one more second the process exits with them
    // still open: the kernel closes them.
    std::mutex mu;
    std::condition_variable cv;
    bool http_done = false;
    std::thread joiner([&] {
      http.join();
      std::lock_guard<std::mutex> l(mu);
      http_done = true;
      cv.notify_all();
    });
    {
      std::unique_lock<std::mutex> l(mu);
      if (!cv.wait_for(l, std::chrono::seconds(1), [&] { return http_done; })) {
        std::fprintf(stderr,
                     "bicache: closing connections that are still open after the grace period\n");
        std::fflush(stdout);
        std::fflush(stderr);
        std::_Exit(rc);
      }
    }
    joiner.join();
    finished.store(true);
    second_signal.join();
    return rc;
  };
}

static CommandRegistrar register_serve(AddServe, 60);

}  // namespace bicache::cli
