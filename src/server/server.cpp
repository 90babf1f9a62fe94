#include "server/server.h"

#include <cctype>
#include <filesystem>
#include <string_view>

#include "engine/engine_setup.h"
#include "engine/threads.h"
#include "server/generation.h"
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

bool MethodAllowed(const std::string& allowed, const std::string& method) {
  size_t at = 0;
  while (at < allowed.size()) {
    const size_t end = std::min(allowed.find(", ", at), allowed.size());
    if (allowed.compare(at, end - at, method) == 0) return true;
    at = end + 2;
  }
  return false;
}

}  // namespace

Server::Server(ServerOptions options)
    : options_(std::move(options)), gen_(std::make_shared<GenerationContext>()) {
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
  http_ = std::make_unique<HttpServer>(options_.connections,
                                       [this](std::shared_ptr<Exchange> ex) { Handle(ex); });
}

Server::~Server() {
  Shutdown(std::chrono::milliseconds(0));
  if (loader_.joinable()) loader_.join();
  http_.reset();  // its handler threads end before the scheduler they submit to goes
}

int Server::Bind() {
  return http_->Bind(options_.host, options_.port);
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
  http_->Run();
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  draining_.store(true);
  if (http_) http_->BeginShutdown(grace);
  if (loader_.joinable() && loader_.get_id() != std::this_thread::get_id()) loader_.join();
  // A request handed to a handler before the signal is in flight even before its Submit, so it
  // gets its grace too: the scheduler keeps taking submissions until every such request has been
  // answered or has begun its answer (a stream begins after its Submit), or the grace is over.
  // The HTTP server answers any request arriving from now on with 503 itself.
  const auto end = std::chrono::steady_clock::now() + grace;
  while (http_ && http_->awaiting_answers() > 0 && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Finish (or cancel) the requests first: their answers then go out before the connections
  // close.
  scheduler_stopping_.store(true);
  if (scheduler_) {
    scheduler_->Stop(std::max(std::chrono::milliseconds(0),
                              std::chrono::duration_cast<std::chrono::milliseconds>(
                                  end - std::chrono::steady_clock::now())));
  }
  if (http_) http_->Finish(std::chrono::milliseconds(500));
}

void Server::Handle(const std::shared_ptr<Exchange>& ex) {
  const HttpRequest& req = ex->request();
  const auto error = [](int status, const std::string& message) {
    HttpResponse r;
    r.status = status;
    r.body = ErrorJson(status, message);
    return r;
  };
  if (!IsKnownMethod(req.method))
    return ex->Respond(error(501, "unsupported HTTP method '" + req.method.substr(0, 40) + "'"));
  const std::string allowed = AllowedMethods(req.path);
  if (allowed.empty())
    return ex->Respond(error(404, "no route for " + req.method + " " + req.path));
  if (!MethodAllowed(allowed, req.method)) {
    HttpResponse r =
        error(405, req.method + " is not allowed on " + req.path + " (allowed: " + allowed + ")");
    r.headers.emplace_back("Allow", allowed);
    return ex->Respond(std::move(r));
  }
  if (auto refused = Gate(req)) return ex->Respond(std::move(*refused));
  if (req.path == "/health") return ex->Respond(Health());
  if (req.path == "/metrics") {
    engine::SchedulerStats s;
    if (ready()) s = scheduler_->stats();
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = RenderMetrics(s, options_.model_id, http_->stats());
    return ex->Respond(std::move(r));
  }
  if (req.path == "/v1/models") return ex->Respond(Models());
  Generate(ex, req.path == "/v1/chat/completions");
}

std::optional<HttpResponse> Server::Gate(const HttpRequest& req) const {
  // Auth and readiness gate everything under /v1; /health and /metrics stay open for probes.
  if (req.path.rfind("/v1/", 0) != 0) return std::nullopt;
  if (!options_.api_key.empty()) {
    const std::string auth = req.header("Authorization");
    const std::string prefix = "Bearer ";
    const bool ok = auth.rfind(prefix, 0) == 0 &&
                    ConstantTimeEquals(auth.substr(prefix.size()), options_.api_key);
    if (!ok) {
      ApiError e;
      e.status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      e.message = "missing or invalid API key (send 'Authorization: Bearer <key>')";
      return ErrorResponse(e);
    }
  }
  // Draining alone does not refuse: a request handed over before the signal gets the grace (the
  // HTTP server answers later requests itself). Once the scheduler stops taking submissions
  // (Shutdown), a request still arriving is too late.
  if (!ready() || scheduler_stopping_.load()) {
    HttpResponse r = ErrorResponse(
        Unavailable(ready() ? "the server is shutting down" : "the model is loading"));
    r.headers.emplace_back("Retry-After", "1");
    return r;
  }
  return std::nullopt;
}

HttpResponse Server::Health() const {
  HttpResponse r;
  if (ready() && !draining_.load()) {
    r.body = R"({"status":"ok"})";
    return r;
  }
  r.status = 503;
  const std::string err = load_error();
  const json j = {{"status", draining_.load() ? "shutting_down"
                             : err.empty()    ? "loading"
                                              : "error"},
                  {"error", err.empty() ? json(nullptr) : json(err)}};
  r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

HttpResponse Server::Models() const {
  const json j = {
      {"object", "list"},
      {"data", json::array({{{"id", options_.model_id},
                             {"object", "model"},
                             {"created", 0},
                             {"owned_by", "bicache"},
                             {"max_model_len", lm_->model().config().context_length}}})}};
  HttpResponse r;
  r.body = j.dump();
  return r;
}

void Server::Generate(const std::shared_ptr<Exchange>& ex, bool chat) {
  const HttpRequest& req = ex->request();
  // A multipart upload cannot carry the JSON body: 415. Every other Content-Type is read as JSON
  // (`curl -d '{...}'` labels JSON as a form), under the same --max-body-bytes limit.
  const std::string type = req.header("Content-Type");
  if (StartsWithNoCase(type, "multipart/"))
    return ex->Respond(ErrorResponse(UnsupportedMediaType(type)));
  if (req.body.empty()) {
    ApiError e;
    e.message =
        "the request has no body: send the JSON object as the body, with a Content-Length header "
        "(or Transfer-Encoding: chunked)";
    return ex->Respond(ErrorResponse(e));
  }
  // A real form (fields) is not JSON.
  if (StartsWithNoCase(type, "application/x-www-form-urlencoded") && !json::accept(req.body))
    return ex->Respond(ErrorResponse(UnsupportedMediaType(type)));
  HandleGeneration(ex, *gen_, chat);
}

}  // namespace bicache::server
