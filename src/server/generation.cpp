#include "server/generation.h"

#include <atomic>
#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <random>

#include "server/answer_text.h"

namespace bicache::server {
namespace {

using nlohmann::json;

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

// Everything one request's callbacks share with its answer (a whole response or a stream).
struct Shared {
  std::mutex m;
  std::optional<AnswerText> answer;  // the committed answer as text, cut at a stop string
  size_t appended = 0;               // answer tokens handed to `answer`
  bool finished = false;
  std::optional<ApiError> error;
  engine::RequestResult result;
  std::shared_ptr<engine::Scheduler::Handle> handle;  // set under `m`, before any callback reads it
  std::function<void()> wake;  // set before Submit; runs (not under `m`) after every change
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
      self->See(e);
      self->wake();
    };
    cb.on_done = [self](const engine::RequestResult& r) {
      {
        std::lock_guard<std::mutex> l(self->m);
        self->result = r;
        self->AppendLocked(r.answer);
        self->answer->Finish();
        self->finished = true;
      }
      self->wake();
    };
    cb.on_error = [self](const Error& e) {
      {
        std::lock_guard<std::mutex> l(self->m);
        self->error = FromEngineError(e);
        self->finished = true;
      }
      self->wake();
    };
    return cb;
  }

  // Only the final part of the canvas counts: it never changes again. A stop string in it ends
  // the request here, before its next step (its batch slot goes to the next request).
  void See(const engine::StepEvent& e) {
    std::lock_guard<std::mutex> l(m);
    if (!canvas.empty()) SeeCanvasLocked(e);
    AppendLocked(e.canvas.first(static_cast<size_t>(e.final_length)));
    if (answer->stopped()) handle->EndEarly();
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

// The SSE side of one streaming request: the connection pulls what is new (server/http/exchange.h),
// so a slow reader merges text and canvas changes instead of queueing one event per step.
class Streamer {
 public:
  Streamer(std::shared_ptr<Shared> sh, const GenerationContext& ctx, ParsedRequest p)
      : sh_(std::move(sh)),
        ctx_(ctx),
        p_(std::move(p)),
        id_(NewId(p_.chat)),
        created_(std::time(nullptr)) {}

  StreamPiece Pull() {
    StreamPiece out;
    if (!started_) {
      started_ = true;
      // The first chat delta carries the role (clients key on it); sent at once for a fast first
      // byte.
      if (p_.chat) out.data += Event(Chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr));
    }
    std::string text;            // sendable text not sent yet
    std::optional<json> canvas;  // a canvas event's data
    bool finished;
    std::optional<ApiError> error;
    engine::RequestResult result;
    std::string finish_reason;
    size_t completion_tokens = 0;
    {
      std::lock_guard<std::mutex> l(sh_->m);
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
    if (canvas) out.data += CanvasEvent(*canvas);
    if (!text.empty())
      out.data += Event(Chunk(p_.chat ? json{{"content", text}} : json(text), nullptr));
    if (!finished) return out;
    if (error) {
      out.data += Event(ErrorBody(*error));
    } else {
      out.data += Event(Chunk(p_.chat ? json::object() : json(), finish_reason, &result));
      if (p_.include_usage) {
        json u = Base();
        u["choices"] = json::array();
        u["usage"] = Usage(p_.options.prompt.size(), completion_tokens);
        out.data += Event(u);
      }
    }
    out.data += "data: [DONE]\n\n";
    out.last = true;
    return out;
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
  // length. Token texts are decoded outside the lock (CanvasEvent).
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
  std::string CanvasEvent(json& data) const {
    for (json& c : data["changes"]) {
      const json& t = c["token"];
      const int32_t id = t.is_null() ? 0 : t.get<int32_t>();
      c["text"] = t.is_null() ? json(nullptr) : json(ctx_.lm->tokenizer().Decode({&id, 1}));
    }
    return "event: bicache.canvas\ndata: " + Dump(data) + "\n\n";
  }
  static std::string Event(const json& j) { return "data: " + Dump(j) + "\n\n"; }

  std::shared_ptr<Shared> sh_;
  const GenerationContext& ctx_;
  ParsedRequest p_;
  std::string id_;
  std::time_t created_;
  size_t sent_ = 0;  // bytes of the answer text sent
  bool started_ = false;
};

// The whole answer of a finished non-streaming request.
HttpResponse WholeAnswer(Shared& sh, const ParsedRequest& p, const GenerationContext& ctx) {
  std::lock_guard<std::mutex> l(sh.m);
  if (sh.error) return ErrorResponse(*sh.error);
  const std::string text(sh.answer->text());
  json choice = {{"index", 0}, {"finish_reason", sh.FinishReasonLocked()}, {"logprobs", nullptr}};
  if (p.chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  const json out = {{"id", NewId(p.chat)},
                    {"object", p.chat ? "chat.completion" : "text_completion"},
                    {"created", std::time(nullptr)},
                    {"model", ctx.model_id},
                    {"choices", json::array({choice})},
                    {"usage", Usage(p.options.prompt.size(), sh.CompletionTokensLocked())},
                    {"bicache", CacheInfo(sh.result, p.options)}};
  HttpResponse r;
  r.body = Dump(out);
  return r;
}

// 429 for a full queue (the client's to retry); 503 for a scheduler that stopped between the
// drain check and Submit (the server going away, as every request after SIGTERM gets).
HttpResponse SubmitRefused(const Error& e) {
  ApiError a;
  const bool stopping = e.kind() == ErrorKind::kCancelled;
  a.status = stopping ? 503 : 429;
  a.type = stopping ? "server_error" : "rate_limit_error";
  a.code = stopping ? "" : "server_overloaded";
  a.message = e.what();
  HttpResponse r = ErrorResponse(a);
  r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace

HttpResponse ErrorResponse(const ApiError& e) {
  HttpResponse r;
  r.status = e.status;
  r.body = Dump(ErrorBody(e));
  return r;
}

void HandleGeneration(const std::shared_ptr<Exchange>& ex, const GenerationContext& ctx,
                      bool chat) {
  ParsedRequest p;
  try {
    p = ParseGenerationRequest(ex->request().body, chat, *ctx.lm, ctx.limits);
  } catch (const ApiException& e) {
    return ex->Respond(ErrorResponse(e.error()));
  } catch (const Error& e) {  // e.g. the tokenizer on odd input: still the client's request
    ApiError a;
    a.message = e.what();
    return ex->Respond(ErrorResponse(a));
  }
  auto sh = std::make_shared<Shared>();
  sh->answer.emplace(ctx.lm->tokenizer(), p.stop);
  if (p.include_canvas) {
    const auto n = static_cast<size_t>(p.options.sampler.gen_length);
    sh->canvas.assign(n, p.options.sampler.mask_id);
    sh->changed.assign(n, 0);
  }
  std::shared_ptr<Streamer> streamer;
  if (p.stream) {
    streamer = std::make_shared<Streamer>(sh, ctx, p);
    sh->wake = [ex] { ex->Notify(); };
  } else {
    // The exchange is held here until the answer: the scheduler delivers exactly one outcome per
    // request (also on shutdown), so it is always answered.
    sh->wake = [ex, raw = sh.get(), p, &ctx] {
      bool done;
      {
        std::lock_guard<std::mutex> l(raw->m);
        done = raw->finished;
      }
      if (done) ex->Respond(WholeAnswer(*raw, p, ctx));
    };
  }
  try {
    // Under the lock: a callback may run before Submit returns, and reads the handle.
    std::lock_guard<std::mutex> l(sh->m);
    sh->handle = ctx.scheduler->Submit(p.options, sh->Callbacks(sh));
  } catch (const Error& e) {
    sh->wake = nullptr;
    return ex->Respond(SubmitRefused(e));
  }
  // A client that leaves, queued or running, cancels its request (freeing its batch slot and cache
  // pin); weak, so a finished request's exchange and state do not hold each other.
  ex->OnClientGone([weak = std::weak_ptr<Shared>(sh)] {
    if (auto s = weak.lock()) s->handle->Cancel();
  });
  if (streamer) {
    HttpResponse head;
    head.content_type = "text/event-stream";
    head.headers.emplace_back("Cache-Control", "no-cache");
    ex->BeginStream(
        std::move(head), [streamer] { return streamer->Pull(); }, ": keep-alive\n\n");
  }
}

}  // namespace bicache::server
