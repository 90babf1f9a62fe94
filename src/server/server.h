// The OpenAI-compatible HTTP server (docs/serving.md): the routes over one HTTP server
// (server/http/: Boost.Beast, one listener, the public port) in front of one Scheduler.
//
// Threads: Serve()'s thread runs the HTTP event loop (every connection); two pool threads run the
// route handlers, which parse and submit and never wait for the engine (answers come back through
// the scheduler's callbacks); the scheduler's worker runs every forward; the model loads on a
// background thread while /health answers 503.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "format/gguf.h"
#include "server/api_request.h"
#include "server/http/http_server.h"

namespace bicache::server {

struct GenerationContext;  // server/generation.h

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0 = any free port
  std::string model_path;
  std::string model_id;                // /v1/models id; default: the file name without .gguf
  std::string api_key;                 // "" = no authentication
  format::OpenOptions open;            // --no-mmap, --mlock
  std::string depth_profile = "safe";  // --depth-profile (engine::CheckDepthProfile'd by the CLI)
  ServerLimits limits;
  int max_queue = 64;
  int max_running = 8;
  int max_batch_tokens = 0;  // scheduler token budget; 0 = unlimited
  int threads = 0;           // OpenMP threads of the forwards; 0 = engine::ForwardThreads' default
  size_t max_body_bytes = 1 << 20;
  double cache_budget_mb = 0;  // 0 = the engine's default
  // Connection deadlines and cap (--header-timeout, --body-timeout, --idle-timeout,
  // --max-connections); its max_body_bytes is taken from max_body_bytes above.
  ConnectionOptions connections;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds the public socket; returns its port (useful with port 0). Throws Error(kIo).
  int Bind();
  // Loads the model on a background thread; /health turns 200 when done.
  void StartLoading();
  // Serves until Shutdown(); blocks the calling thread.
  void Serve();
  // Graceful: the public socket closes (no new connections), requests arriving on open ones get
  // 503; in-flight ones get up to `grace` to finish, then are cancelled; connections still open
  // then (a slow or idle client) get half a second for their last bytes and are closed, and
  // Serve() returns. Safe from any thread except a handler.
  void Shutdown(std::chrono::milliseconds grace);

  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // Non-empty when loading failed (the server then keeps answering 503).
  std::string load_error() const;

 private:
  void Handle(const std::shared_ptr<Exchange>& ex);  // the route table (a pool thread)
  std::optional<HttpResponse> Gate(const HttpRequest& req) const;  // API key, readiness
  HttpResponse Health() const;
  HttpResponse Models() const;
  void Generate(const std::shared_ptr<Exchange>& ex, bool chat);
  void Load();

  ServerOptions options_;
  std::unique_ptr<HttpServer> http_;
  std::shared_ptr<GenerationContext> gen_;
  std::unique_ptr<engine::LoadedModel> lm_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<engine::Scheduler> scheduler_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> scheduler_stopping_{false};  // Shutdown has begun the scheduler's Stop
  std::atomic<bool> load_done_{false};
  mutable std::mutex load_mutex_;
  std::string load_error_;
  std::thread loader_;
};

}  // namespace bicache::server
