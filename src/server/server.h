// The OpenAI-compatible HTTP server (docs/serving.md): an epoll front end (server/front/) owns the
// public socket and every client connection and hands complete requests to cpp-httplib on a
// Unix-domain socket in a private directory (mode 0700: no other user can connect, and there is no
// second TCP listener), in front of one Scheduler.
//
// Threads: Serve()'s thread runs the front end's loop; httplib's pool runs handlers (each blocks on
// its own request's outcome, so the pool is sized max_running + max_queue + a few); the scheduler's
// worker runs every forward; the model loads on a background thread while /health answers 503.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "format/gguf.h"
#include "server/api_request.h"
#include "server/front/front_end.h"
#include "server/front/sockets.h"

namespace bicache::server {

struct GenerationContext;  // server/generation.h
class WorkerServer;        // server.cpp: cpp-httplib on the internal socket

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
  front::FrontOptions connections;
};

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();

  // Binds the public socket (the front end's) and httplib's internal one (a private directory,
  // removed with the Server); returns the public port (useful with port 0). Throws Error(kIo).
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
  void Routes();
  void InstallGate();           // Content-Length check, API key, readiness (pre-routing)
  void InstallProbes();         // /health, /metrics, /v1/models
  void InstallGeneration();     // POST /v1/completions and /v1/chat/completions
  void InstallErrorHandlers();  // OpenAI-shaped bodies for 404/413/400/501 and exceptions
  void Load();

  ServerOptions options_;
  std::unique_ptr<front::FrontEnd> front_;
  std::unique_ptr<front::PrivateSocketDir> socket_dir_;  // outlives http_ (destroyed after it)
  std::unique_ptr<WorkerServer> http_;
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
