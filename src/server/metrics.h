// Prometheus text exposition (format 0.0.4) of the scheduler and cache state, with the vLLM metric
// names that existing routers scrape (vLLM production-stack router, Gateway API Inference
// Extension), so a bicache replica can sit behind them unchanged.
#pragma once

#include <string>

#include "engine/scheduler.h"
#include "server/http/http_server.h"

namespace bicache::server {

std::string RenderMetrics(const engine::SchedulerStats& s, const std::string& model_id,
                          const ConnectionStats& connections = {});

}  // namespace bicache::server
