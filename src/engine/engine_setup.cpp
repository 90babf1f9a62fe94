#include "engine/engine_setup.h"

namespace bicache::engine {

EngineOptions EngineOptionsFor(const LoadedModel& lm, const EngineSettings& settings) {
  EngineOptions eo;
  eo.cache_budget_bytes = static_cast<size_t>(settings.cache_budget_mb * 1024 * 1024);
  eo.audit_rate = settings.audit_rate;
  eo.depth_table = lm.LoadDepthTable();
  return eo;
}

std::unique_ptr<Engine> MakeEngine(const LoadedModel& lm, const EngineSettings& settings) {
  return std::make_unique<Engine>(lm.model(), EngineOptionsFor(lm, settings));
}

}  // namespace bicache::engine
