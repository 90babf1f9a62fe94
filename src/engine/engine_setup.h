// How every front end (generate, eval, bench, serve, bench-serve's in-process server) configures
// the engine for a loaded model, in one place: the byte budget given in MiB, the audit rate, and
// the depth table saved next to the model file (docs/bicache.md).
#pragma once

#include <memory>

#include "engine/engine.h"
#include "engine/loaded_model.h"

namespace bicache::engine {

struct EngineSettings {
  double cache_budget_mb = 0;  // 0 = cache::DefaultBudgetBytes()
  double audit_rate = 0;       // see EngineOptions::audit_rate
};

// The options an engine for `lm` runs with; the depth table is read from lm.depth_table_path()
// (empty when there is none: bicache then reuses nothing).
EngineOptions EngineOptionsFor(const LoadedModel& lm, const EngineSettings& settings);

std::unique_ptr<Engine> MakeEngine(const LoadedModel& lm, const EngineSettings& settings);

}  // namespace bicache::engine
