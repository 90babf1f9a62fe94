// POST /v1/completions and /v1/chat/completions: parse, submit to the scheduler, answer as one
// JSON body or as a Server-Sent Events stream of the committed (final) part of the canvas.
#pragma once

#include <memory>
#include <string>

#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "server/api_request.h"
#include "server/http/exchange.h"

namespace bicache::server {

struct GenerationContext {
  const engine::LoadedModel* lm = nullptr;
  engine::Scheduler* scheduler = nullptr;
  std::string model_id;
  ServerLimits limits;
};

// An OpenAI error body with `e.status`.
HttpResponse ErrorResponse(const ApiError& e);

// Handles one generation request (its JSON body checked for presence by the route, see
// server.cpp): answers through `ex` once the scheduler has finished it, or streams it. `ctx` must
// outlive the answer (streams read it later).
void HandleGeneration(const std::shared_ptr<Exchange>& ex, const GenerationContext& ctx, bool chat);

}  // namespace bicache::server
