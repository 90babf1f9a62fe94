#include "server/generation.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>

#include "server/answer_text.h"
#include "server/connection_watch.h"

namespace bicache::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

std::string NewId(bool chat) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(salt),
                static_cast<unsigned long long>(++counter));
  return std::string(chat ? "chatcmpl-" : "cmpl-") + buf;
}

// Engine outcomes -> HTTP. Validation already ran, so an engine error here is rare.
ApiError FromEngineError(const Error& e) {
  ApiError a;
  a.message = e.what();
  switch (e.kind()) {
    case ErrorKind::kInvalidArgument:
      a.status = 400;
      break;
    case ErrorKind::kCancelled:
      a.status = 503;
      a.type = "server_error";
      a.message = "the request was cancelled: the server is shutting down";
      break;
    case ErrorKind::kResource:
      a.status = 503;
      a.type = "server_error";
      break;
    default:
      a.status = 500;
      a.type = "server_error";
      break;
  }
  return a;
}

std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json Usage(size_t prompt, size_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

// Everything one request's callbacks share with its HTTP thread.
struct Shared {
  std::mutex m;
  std::condition_variable cv;
  std::optional<AnswerText> answer;  // the committed answer as text, cut at a stop string
  size_t appended = 0;               // answer tokens handed to `answer`
  bool finished = false;
  std::optional<ApiError> error;
  engine::RequestResult result;
  std::shared_ptr<engine::Scheduler::Handle> handle;  // set under `m`, before any callback reads it
  // stream_options.include_canvas (empty without it): the canvas as last seen, and the positions
  // changed since the last canvas event (so a slow reader costs one canvas, not one per step).
  std::vector<int32_t> canvas;  // [gen_length] the mask id where masked
  std::vector<char> changed;    // [gen_length]
  bool canvas_news = false;
  int canvas_step = 0, canvas_final = 0;

  // `tokens`: the final answer tokens so far (a prefix that only grows). Under `m`.
  void AppendLocked(std::span<const int32_t> tokens) {
    if (tokens.size() <= appended) return;
    answer->Append(tokens.subspan(appended));
    appended = tokens.size();
  }

  engine::RequestCallbacks Callbacks(const std::shared_ptr<Shared>& self) {
    engine::RequestCallbacks cb;
    cb.on_step = [self](const engine::StepEvent& e) {
      // Only the final part of the canvas counts: it never changes again. A stop string in it ends
      // the request here, before its next step (its batch slot goes to the next request).
      std::lock_guard<std::mutex> l(self->m);
      if (!self->canvas.empty()) self->SeeCanvasLocked(e);
      self->AppendLocked(e.canvas.first(static_cast<size_t>(e.final_length)));
      if (self->answer->stopped()) self->handle->EndEarly();
      self->cv.notify_all();
    };
    cb.on_done = [self](const engine::RequestResult& r) {
      std::lock_guard<std::mutex> l(self->m);
      self->result = r;
      self->AppendLocked(r.answer);
      self->answer->Finish();
      self->finished = true;
      self->cv.notify_all();
    };
    cb.on_error = [self](const Error& e) {
      std::lock_guard<std::mutex> l(self->m);
      self->error = FromEngineError(e);
      self->finished = true;
      self->cv.notify_all();
    };
    return cb;
  }

  void SeeCanvasLocked(const engine::StepEvent& e) {
    for (size_t i = 0; i < e.canvas.size() && i < canvas.size(); ++i) {
      if (canvas[i] != e.canvas[i]) {
        canvas[i] = e.canvas[i];
        changed[i] = 1;
        canvas_news = true;
      }
    }
    canvas_step = e.step;
    canvas_final = e.final_length;
  }

  // After on_done: why the answer ended and how many tokens it used.
  std::string FinishReasonLocked() const {
    return answer->stopped() ? "stop" : result.finish_reason;
  }
  size_t CompletionTokensLocked() const {
    return answer->stopped() ? answer->tokens_used() : result.answer.size();
  }
};

json CacheInfo(const engine::RequestResult& r, const engine::RequestOptions& o) {
  return {{"mode", o.cache.ToString()}, {"prefix_tokens", r.prefix_used},
          {"depth", r.depth},           {"hit", r.prefix_hit},
          {"steps", r.steps},           {"refresh", o.refresh_interval}};
}

// The SSE side of one streaming request; lives in the content provider.
class Streamer {
 public:
  Streamer(std::shared_ptr<Shared> sh, const GenerationContext& ctx, ParsedRequest p)
      : sh_(std::move(sh)),
        ctx_(ctx),
        p_(std::move(p)),
        id_(NewId(p_.chat)),
        created_(std::time(nullptr)) {}

  // One provider call: waits briefly for news, writes it. false = stop (client gone).
  bool Pump(httplib::DataSink& sink) {
    if (!started_) {
      started_ = true;
      // The first chat delta carries the role (clients key on it); sent at once for a fast first
      // byte.
      if (p_.chat && !Send(sink, Chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr)))
        return false;
      return true;
    }
    std::string text;            // sendable text not sent yet
    std::optional<json> canvas;  // a canvas event's data
    bool finished;
    std::optional<ApiError> error;
    engine::RequestResult result;
    std::string finish_reason;
    size_t completion_tokens = 0;
    {
      std::unique_lock<std::mutex> l(sh_->m);
      // Bounded wait so a silent client disconnect is noticed by the heartbeat below.
      sh_->cv.wait_for(l, 250ms, [&] {
        return sh_->finished || sh_->canvas_news || sh_->answer->Sendable().size() > sent_;
      });
      if (sh_->canvas_news) canvas = TakeCanvasLocked();
      const std::string_view sendable = sh_->answer->Sendable();
      if (sendable.size() > sent_) text = sendable.substr(sent_);
      sent_ = std::max(sent_, sendable.size());
      finished = sh_->finished;
      error = sh_->error;
      if (finished && !error) {
        result = sh_->result;
        finish_reason = sh_->FinishReasonLocked();
        completion_tokens = sh_->CompletionTokensLocked();
      }
    }
    if (canvas && !SendCanvas(sink, *canvas)) return false;
    if (!text.empty()) {
      if (!SendText(sink, text)) return false;
      idle_ = 0;
    } else if (!finished && ++idle_ >= 4) {
      // An SSE comment once a second while nothing commits: clients ignore it, and a write to a
      // closed connection fails, which is how a vanished client gets its request cancelled.
      idle_ = 0;
      if (!sink.write(": keep-alive\n\n", 14)) return false;
    }
    if (!finished) return sink.is_writable();
    if (error) {
      const std::string ev = "data: " + Dump(ErrorBody(*error)) + "\n\n";
      if (!sink.write(ev.data(), ev.size())) return false;
    } else {
      const json delta = p_.chat ? json::object() : json();
      if (!Send(sink, Chunk(delta, finish_reason, &result))) return false;
      if (p_.include_usage) {
        json u = Base();
        u["choices"] = json::array();
        u["usage"] = Usage(p_.options.prompt.size(), completion_tokens);
        if (!Send(sink, u)) return false;
      }
    }
    static const char kDone[] = "data: [DONE]\n\n";
    if (!sink.write(kDone, sizeof kDone - 1)) return false;
    sink.done();
    return true;
  }

 private:
  json Base() const {
    return {{"id", id_},
            {"object", p_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", ctx_.model_id}};
  }
  json Chunk(const json& delta_or_text, const json& finish,
             const engine::RequestResult* r = nullptr) const {
    json j = Base();
    json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (p_.chat) {
      choice["delta"] = delta_or_text;
    } else {
      choice["text"] = delta_or_text.is_string() ? delta_or_text : json("");
    }
    j["choices"] = json::array({choice});
    if (r) j["bicache"] = CacheInfo(*r, p_.options);
    return j;
  }
  // Under sh_->m: the positions changed since the last event, as {position, token, text}
  // (token and text null where the position is masked again), with the step and the committed
  // length. Token texts are decoded outside the lock (SendCanvas).
  json TakeCanvasLocked() {
    json changes = json::array();
    for (size_t i = 0; i < sh_->changed.size(); ++i) {
      if (!sh_->changed[i]) continue;
      sh_->changed[i] = 0;
      const int32_t t = sh_->canvas[i];
      const bool masked = t == p_.options.sampler.mask_id;
      changes.push_back({{"position", i}, {"token", masked ? json(nullptr) : json(t)}});
    }
    sh_->canvas_news = false;
    return {{"step", sh_->canvas_step}, {"final_length", sh_->canvas_final}, {"changes", changes}};
  }
  bool SendCanvas(httplib::DataSink& sink, json& data) {
    for (json& c : data["changes"]) {
      const json& t = c["token"];
      const int32_t id = t.is_null() ? 0 : t.get<int32_t>();
      c["text"] = t.is_null() ? json(nullptr) : json(ctx_.lm->tokenizer().Decode({&id, 1}));
    }
    const std::string ev = "event: bicache.canvas\ndata: " + Dump(data) + "\n\n";
    return sink.write(ev.data(), ev.size());
  }
  bool SendText(httplib::DataSink& sink, const std::string& text) {
    return Send(sink, Chunk(p_.chat ? json{{"content", text}} : json(text), nullptr));
  }
  bool Send(httplib::DataSink& sink, const json& j) {
    const std::string ev = "data: " + Dump(j) + "\n\n";
    return sink.write(ev.data(), ev.size());
  }

  std::shared_ptr<Shared> sh_;
  const GenerationContext& ctx_;
  ParsedRequest p_;
  std::string id_;
  std::time_t created_;
  size_t sent_ = 0;  // bytes of the answer text sent
  int idle_ = 0;
  bool started_ = false;
};

}  // namespace

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(Dump(ErrorBody(e)), "application/json");
}

void HandleGeneration(const httplib::Request& req, const std::string& body, httplib::Response& res,
                      const GenerationContext& ctx, bool chat) {
  ParsedRequest p;
  try {
    p = ParseGenerationRequest(body, chat, *ctx.lm, ctx.limits);
  } catch (const ApiException& e) {
    return SendError(res, e.error());
  } catch (const Error& e) {  // e.g. the tokenizer on odd input: still the client's request
    ApiError a;
    a.message = e.what();
    return SendError(res, a);
  }
  auto sh = std::make_shared<Shared>();
  sh->answer.emplace(ctx.lm->tokenizer(), p.stop);
  if (p.include_canvas) {
    const auto n = static_cast<size_t>(p.options.sampler.gen_length);
    sh->canvas.assign(n, p.options.sampler.mask_id);
    sh->changed.assign(n, 0);
  }
  try {
    // Under the lock: a callback may run before Submit returns, and reads the handle.
    std::lock_guard<std::mutex> l(sh->m);
    sh->handle = ctx.scheduler->Submit(p.options, sh->Callbacks(sh));
  } catch (const Error& e) {
    // A full queue is the client's to retry (429); a scheduler that stopped between the drain
    // check and here is the server going away (503, as every request after SIGTERM gets).
    ApiError a;
    const bool stopping = e.kind() == ErrorKind::kCancelled;
    a.status = stopping ? 503 : 429;
    a.type = stopping ? "server_error" : "rate_limit_error";
    a.code = stopping ? "" : "server_overloaded";
    a.message = e.what();
    res.set_header("Retry-After", "1");
    return SendError(res, a);
  }
  if (p.stream) {
    auto streamer = std::make_shared<Streamer>(sh, ctx, std::move(p));
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [streamer](size_t, httplib::DataSink& sink) { return streamer->Pump(sink); },
        // Runs when the response ends for any reason; cancelling a finished request is a no-op,
        // so a client that left mid-stream frees its batch slot and cache pin here.
        [sh](bool) { sh->handle->Cancel(); });
    return;
  }
  // The scheduler delivers exactly one outcome per request, also on shutdown, so this ends. While
  // waiting, a client that hangs up cancels its request (freeing its batch slot and cache pin);
  // see server/connection_watch.h for how the handler sees its socket.
  const std::optional<ConnectionWatch> watch = ConnectionWatch::Find(req);
  std::unique_lock<std::mutex> l(sh->m);
  while (!sh->cv.wait_for(l, 100ms, [&] { return sh->finished; })) {
    if (watch && !sh->handle->cancelled() && watch->PeerGone()) {
      l.unlock();  // a queued request's on_error runs inside Cancel() and takes sh->m
      sh->handle->Cancel();
      l.lock();
    }
  }
  if (sh->error) return SendError(res, *sh->error);
  const engine::RequestResult& r = sh->result;
  const std::string text(sh->answer->text());
  json choice = {{"index", 0}, {"finish_reason", sh->FinishReasonLocked()}, {"logprobs", nullptr}};
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  const json out = {{"id", NewId(chat)},
                    {"object", chat ? "chat.completion" : "text_completion"},
                    {"created", std::time(nullptr)},
                    {"model", ctx.model_id},
                    {"choices", json::array({choice})},
                    {"usage", Usage(p.options.prompt.size(), sh->CompletionTokensLocked())},
                    {"bicache", CacheInfo(r, p.options)}};
  res.set_content(Dump(out), "application/json");
}

}  // namespace bicache::server
