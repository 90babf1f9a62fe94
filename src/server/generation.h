// POST /v1/completions and /v1/chat/completions: parse, submit to the scheduler, answer as one
// JSON body or as a Server-Sent Events stream of the committed (final) part of the canvas.
#pragma once

#include <string>

#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "server/api_request.h"
#include "server/httplib_wrap.h"

namespace bicache::server {

struct GenerationContext {
  const engine::LoadedModel* lm = nullptr;
  engine::Scheduler* scheduler = nullptr;
  std::string model_id;
  ServerLimits limits;
};

// Writes an OpenAI error body with `e.status`.
void SendError(httplib::Response& res, const ApiError& e);

// Handles one generation request whose JSON body is `body` (read by the route, see server.cpp).
// `ctx` must outlive the response (streams read it later).
void HandleGeneration(const httplib::Request& req, const std::string& body, httplib::Response& res,
                      const GenerationContext& ctx, bool chat);

}  // namespace bicache::server
