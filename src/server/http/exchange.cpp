#include "server/http/exchange.h"

#include <strings.h>

namespace bicache::server {

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return "";
}

Exchange::Exchange(HttpRequest request, std::weak_ptr<Sink> sink, Post post,
                   std::shared_ptr<std::atomic<int>> awaiting)
    : request_(std::move(request)),
      sink_(std::move(sink)),
      post_(std::move(post)),
      awaiting_(std::move(awaiting)) {
  awaiting_->fetch_add(1, std::memory_order_relaxed);
}

Exchange::~Exchange() {
  if (!TakeAnswer()) return;
  HttpResponse r;
  r.status = 500;
  r.body = R"({"error":{"message":"internal error: the request got no response","type":)"
           R"("server_error","param":null,"code":null}})";
  post_([sink = sink_, r = std::move(r)]() mutable {
    if (auto s = sink.lock()) s->Answer(std::move(r));
  });
}

bool Exchange::TakeAnswer() {
  std::lock_guard<std::mutex> l(m_);
  if (answered_) return false;
  answered_ = true;
  awaiting_->fetch_sub(1, std::memory_order_relaxed);
  return true;
}

void Exchange::Respond(HttpResponse response) {
  if (!TakeAnswer()) return;
  post_([sink = sink_, r = std::move(response)]() mutable {
    if (auto s = sink.lock()) s->Answer(std::move(r));
  });
}

void Exchange::BeginStream(HttpResponse head, std::function<StreamPiece()> pull, std::string idle) {
  if (!TakeAnswer()) return;
  post_([sink = sink_, h = std::move(head), p = std::move(pull), i = std::move(idle)]() mutable {
    if (auto s = sink.lock()) s->Stream(std::move(h), std::move(p), std::move(i));
  });
}

void Exchange::Notify() {
  post_([sink = sink_] {
    if (auto s = sink.lock()) s->Pump();
  });
}

void Exchange::OnClientGone(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> l(m_);
    if (!gone_) {
      on_gone_ = std::move(f);
      return;
    }
  }
  f();
}

void Exchange::ClientGone() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> l(m_);
    if (gone_) return;
    gone_ = true;
    f = std::move(on_gone_);
  }
  if (f) f();
}

}  // namespace bicache::server
