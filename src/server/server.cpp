#include "server/server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <string_view>

#include "engine/engine_setup.h"
#include "engine/threads.h"
#include "server/generation.h"
#include "server/httplib_wrap.h"
#include "server/metrics.h"
#include "util/error.h"
#include "util/field_error.h"

namespace bicache::server {
namespace {

using nlohmann::json;

// Compares in time that depends only on the lengths, so response timing does not reveal how many
// leading characters of a guessed key were right.
bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

ApiError Unavailable(const std::string& message) {
  ApiError e;
  e.status = 503;
  e.type = "server_error";
  e.message = message;
  return e;
}

ApiError UnsupportedMediaType(const std::string& content_type) {
  ApiError e;
  e.status = 415;
  e.type = "invalid_request_error";
  e.code = "unsupported_media_type";
  e.message = "Content-Type '" + content_type.substr(0, 100) +
              "' cannot carry the request: send the JSON object as the body with Content-Type: "
              "application/json";
  return e;
}

bool StartsWithNoCase(const std::string& s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

bool IsKnownMethod(const std::string& m) {
  for (const char* k :
       {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}) {
    if (m == k) return true;
  }
  return false;
}

// The route table's methods for a path ("" for no route): a wrong method gets 405 naming them.
std::string AllowedMethods(const std::string& path) {
  if (path == "/health" || path == "/metrics" || path == "/v1/models") return "GET, HEAD";
  if (path == "/v1/completions" || path == "/v1/chat/completions") return "POST";
  return "";
}

}  // namespace

// cpp-httplib's server on a listening socket made by Bind(): 0.11 binds only to TCP addresses
// itself, and with a backlog of 5. svr_sock_, its listening descriptor, is a protected member, and
// listen_after_bind() runs the accept loop on whatever it holds.
class WorkerServer : public httplib::Server {
 public:
  void Adopt(int fd) { svr_sock_ = fd; }
  // The accept loop until stop().
  void Run() {
    ran_.store(true);
    listen_after_bind();
  }
  // The accept loop closes the socket when it ends (stop(), or an accept error): close it here
  // only when the loop never ran.
  ~WorkerServer() override {
    const int fd = svr_sock_.exchange(INVALID_SOCKET);
    if (fd != INVALID_SOCKET && !ran_.load()) close(fd);
  }

 private:
  std::atomic<bool> ran_{false};
};

Server::Server(ServerOptions options)
    : options_(std::move(options)),
      front_(nullptr),
      http_(std::make_unique<WorkerServer>()),
      gen_(std::make_shared<GenerationContext>()) {
  if (options_.model_id.empty())
    options_.model_id = std::filesystem::path(options_.model_path).stem().string();
  if (options_.max_running < 1 || options_.max_queue < 0 || options_.max_batch_tokens < 0) {
    // Fields named `{field}` (util/field_error.h): the CLI spells them as its flags.
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{max_running} must be >= 1, {max_queue} and {max_batch_tokens} >= 0");
  }
  if (options_.limits.max_tokens_limit < 1 || options_.limits.max_steps < 1 ||
      options_.limits.default_max_tokens < 1) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{max_tokens_limit}, {max_steps} and {default_max_tokens} must be >= 1");
  }
  if (options_.connections.max_connections < 1 || options_.connections.header_timeout.count() < 1 ||
      options_.connections.body_timeout.count() < 1 ||
      options_.connections.idle_timeout.count() < 1) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{max_connections}, {header_timeout}, {body_timeout} and {idle_timeout} must "
                     "be > 0");
  }
  options_.connections.max_body_bytes = options_.max_body_bytes;
  front_ = std::make_unique<front::FrontEnd>(options_.connections);
  // Every waiting or running request blocks one handler thread; a few more keep /health and
  // /metrics answering when all of those are busy.
  const size_t threads = static_cast<size_t>(options_.max_running + options_.max_queue + 4);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  Routes();
}

Server::~Server() {
  Shutdown(std::chrono::milliseconds(0));
  if (loader_.joinable()) loader_.join();
}

int Server::Bind() {
  const int port = front_->Bind(options_.host, options_.port);
  // httplib takes only complete requests from the front end, over a Unix-domain socket that only
  // this user can reach (docs/hardening.md, "The internal hop").
  socket_dir_ = std::make_unique<front::PrivateSocketDir>();
  http_->Adopt(front::ListenUnix(socket_dir_->socket_path()));
  front_->SetUpstream(socket_dir_->socket_path());
  return port;
}

void Server::StartLoading() {
  loader_ = std::thread([this] { Load(); });
}

void Server::Load() {
  try {
    lm_ = engine::LoadedModel::Load(options_.model_path, options_.open);
    lm_->SetDepthProfile(options_.depth_profile);
    engine_ = engine::MakeEngine(*lm_, {options_.cache_budget_mb, 0});
    scheduler_ = std::make_unique<engine::Scheduler>(
        *engine_, engine::SchedulerOptions{
                      options_.max_running, options_.max_queue, options_.max_batch_tokens,
                      engine::ForwardThreads(options_.threads, lm_->model().config())});
    gen_->lm = lm_.get();
    gen_->scheduler = scheduler_.get();
    gen_->model_id = options_.model_id;
    gen_->limits = options_.limits;
    ready_.store(true, std::memory_order_release);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> l(load_mutex_);
    load_error_ = e.what();
  }
  load_done_.store(true);
}

std::string Server::load_error() const {
  std::lock_guard<std::mutex> l(load_mutex_);
  return load_error_;
}

void Server::Serve() {
  std::thread workers([this] { http_->Run(); });
  front_->Run();
  workers.join();
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  draining_.store(true);
  if (front_) front_->BeginShutdown(grace);
  if (loader_.joinable() && loader_.get_id() != std::this_thread::get_id()) loader_.join();
  // A request relayed before the signal is in flight even while it waits for an httplib thread, so
  // it gets its grace too: the scheduler keeps taking submissions until every relayed request has
  // been answered or has begun its answer (a stream begins after its Submit), or the grace is over.
  // The front end answers any request arriving from now on with 503 itself.
  const auto end = std::chrono::steady_clock::now() + grace;
  while (front_ && front_->awaiting_answers() > 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Finish (or cancel) the requests first: their handlers are then answered and return, the
  // front end relays those answers, and stopping the listener joins the handler threads.
  scheduler_stopping_.store(true);
  if (scheduler_) {
    scheduler_->Stop(std::max(std::chrono::milliseconds(0),
                              std::chrono::duration_cast<std::chrono::milliseconds>(
                                  end - std::chrono::steady_clock::now())));
  }
  if (front_) front_->Finish(std::chrono::milliseconds(500));
  if (http_) http_->stop();
}

void Server::Routes() {
  InstallGate();
  InstallProbes();
  InstallGeneration();
  InstallErrorHandlers();
}

void Server::InstallGate() {
  // Auth and readiness gate everything under /v1; /health and /metrics stay open for probes.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // cpp-httplib reads a Content-Length that is not a number as 0 ("abc") or as a huge count
    // ("-1", then waiting for a body that never comes): refuse it before any body is read.
    if (const std::string length = req.get_header_value("Content-Length");
        !length.empty() && length.find_first_not_of("0123456789") != std::string::npos) {
      res.set_header("Connection", "close");
      SendError(res, ApiError{.message = "Content-Length '" + length.substr(0, 40) +
                                         "' is not a byte count"});
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (!options_.api_key.empty()) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string prefix = "Bearer ";
      const bool ok = auth.rfind(prefix, 0) == 0 &&
                      ConstantTimeEquals(auth.substr(prefix.size()), options_.api_key);
      if (!ok) {
        ApiError e;
        e.status = 401;
        e.type = "authentication_error";
        e.code = "invalid_api_key";
        e.message = "missing or invalid API key (send 'Authorization: Bearer <key>')";
        SendError(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // Draining alone does not refuse: what reaches httplib then was relayed before the signal and
    // gets the grace (the front end answers later requests itself). Once the scheduler stops
    // taking submissions (Shutdown), a request still arriving is too late.
    if (!ready() || scheduler_stopping_.load()) {
      SendError(res, Unavailable(ready() ? "the server is shutting down" : "the model is loading"));
      res.set_header("Retry-After", "1");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

void Server::InstallProbes() {
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready() && !draining_.load()) {
      res.set_content(R"({"status":"ok"})", "application/json");
    } else {
      res.status = 503;
      const std::string err = load_error();
      const json j = {{"status", draining_.load() ? "shutting_down"
                                 : err.empty()    ? "loading"
                                                  : "error"},
                      {"error", err.empty() ? json(nullptr) : json(err)}};
      res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    }
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    engine::SchedulerStats s;
    if (ready()) s = scheduler_->stats();
    res.set_content(RenderMetrics(s, options_.model_id, front_->stats()),
                    "text/plain; version=0.0.4");
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json j = {
        {"object", "list"},
        {"data", json::array({{{"id", options_.model_id},
                               {"object", "model"},
                               {"created", 0},
                               {"owned_by", "bicache"},
                               {"max_model_len", lm_->model().config().context_length}}})}};
    res.set_content(j.dump(), "application/json");
  });
}

void Server::InstallGeneration() {
  // Filled by Load() before ready() turns true; read by handlers only after checking ready().
  auto gen = gen_;
  // The body is read here rather than by cpp-httplib, which for a form Content-Type (what `curl -d`
  // sends) would parse it as a form and refuse anything over its compiled-in 8 KiB cap: every
  // Content-Type gets the same --max-body-bytes limit and is parsed as JSON.
  const size_t max_body = options_.max_body_bytes;
  auto route = [gen, max_body](bool chat) {
    return [gen, max_body, chat](const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& read) {
      // A multipart upload cannot carry the JSON body (and cpp-httplib would need a part reader):
      // 415, and the unread body ends the connection.
      const std::string type = req.get_header_value("Content-Type");
      if (StartsWithNoCase(type, "multipart/")) {
        res.set_header("Connection", "close");
        SendError(res, UnsupportedMediaType(type));
        return;
      }
      std::string body;
      bool too_large = false;
      const bool ok = read([&](const char* data, size_t n) {
        if (body.size() + n > max_body) {
          too_large = true;
          return false;
        }
        body.append(data, n);
        return true;
      });
      if (!ok || too_large) {
        // cpp-httplib sets 413 itself when a Content-Length is over the limit; a chunked body is
        // cut off by the receiver above (the error handler writes both); anything else is a broken
        // upload.
        if (too_large) {
          res.status = 413;
        } else if (res.status < 400) {
          SendError(res, ApiError{.message = "the request body could not be read (the connection "
                                             "ended or the chunked encoding was broken)"});
        }
        return;
      }
      if (body.empty()) {
        SendError(res, ApiError{.message = "the request has no body: send the JSON object as the "
                                           "body, with a Content-Length header (or "
                                           "Transfer-Encoding: chunked)"});
        return;
      }
      // `curl -d '{...}'` sends JSON labelled as a form: accepted. A real form (fields) is not
      // JSON.
      if (StartsWithNoCase(type, "application/x-www-form-urlencoded") && !json::accept(body)) {
        SendError(res, UnsupportedMediaType(type));
        return;
      }
      HandleGeneration(req, body, res, *gen, chat);
    };
  };
  http_->Post("/v1/completions", route(false));
  http_->Post("/v1/chat/completions", route(true));
}

void Server::InstallErrorHandlers() {
  const size_t max_body = options_.max_body_bytes;
  // Unknown routes, wrong methods, 413 from the body limit: an OpenAI error body for each.
  http_->set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    e.type = res.status >= 500 ? "server_error" : "invalid_request_error";
    if (res.status == 404 && !AllowedMethods(req.path).empty()) {
      e.status = 405;
      e.message = req.method.substr(0, 40) + " is not allowed on " + req.path +
                  " (allowed: " + AllowedMethods(req.path) + ")";
      res.set_header("Allow", AllowedMethods(req.path));
    } else if (res.status == 404) {
      e.message = "no route for " + req.method + " " + req.path;
    } else if (res.status == 413) {
      e.message = "the request body is too large (this server accepts up to " +
                  std::to_string(max_body) + " bytes)";
    } else if (res.status == 400 && !req.method.empty() && !IsKnownMethod(req.method)) {
      e.status = 501;
      e.message = "unsupported HTTP method '" + req.method.substr(0, 40) + "'";
    } else if (res.status == 400) {  // cpp-httplib's own: the request line or headers did not parse
      e.message =
          "the request could not be parsed: a malformed request line or header, or a header line "
          "over "
          "8 KiB";
    } else {
      e.message = "HTTP error " + std::to_string(res.status);
    }
    res.status = e.status;
    SendError(res, e);
  });
  http_->set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        SendError(res, Unavailable("internal error"));
        res.status = 500;
      });
}

}  // namespace bicache::server
