#include "harness/eval.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "engine/engine_setup.h"
#include "util/error.h"
#include "util/field_error.h"

namespace bicache::harness {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Samples start in suite order (so prefix entries are built by the same samples whatever the
// batch) and up to `batch` of them step together; a finished one makes room for the next.
void RunBatched(const EvalOptions& o, const engine::LoadedModel& lm, engine::Engine& eng,
                const std::vector<const SuiteSample*>& selected,
                std::vector<EvalOutcome>& outcomes) {
  const int context_length = lm.model().config().context_length;
  int n_correct_so_far = 0, n_done = 0;
  auto finish = [&](size_t i) {
    n_correct_so_far += outcomes[i].correct;
    ++n_done;
    if (o.progress) o.progress(n_done, selected.size(), *selected[i], n_correct_so_far);
  };
  std::vector<std::pair<size_t, std::unique_ptr<engine::Request>>> running;
  size_t next = 0;
  while (next < selected.size() || !running.empty()) {
    while (next < selected.size() && static_cast<int>(running.size()) < o.batch) {
      const size_t i = next++;
      const SuiteSample* s = selected[i];
      outcomes[i].sample = s;
      const engine::Prompt prompt = SamplePrompt(lm, *s);
      const int need = static_cast<int>(prompt.tokens.size()) + o.base.sampler.gen_length;
      if (need > context_length) {
        outcomes[i].error = "needs " + std::to_string(need) + " tokens, the context holds " +
                            std::to_string(context_length);
        finish(i);
        continue;
      }
      engine::RequestOptions req = o.base;
      req.prompt = prompt.tokens;
      req.prefix_len = prompt.prefix_len;
      const auto ts = Clock::now();
      auto started =
          eng.Start(std::move(req));  // a prefix-entry build on a miss counts to this sample
      started->add_seconds(SecondsSince(ts));
      running.emplace_back(i, std::move(started));
    }
    if (running.empty()) continue;
    std::vector<engine::Request*> batch;
    for (auto& [i, r] : running) batch.push_back(r.get());
    eng.StepBatch(batch);
    for (auto it = running.begin(); it != running.end();) {
      if (!it->second->done()) {
        ++it;
        continue;
      }
      EvalOutcome& out = outcomes[it->first];
      out.r = it->second->result();
      out.answer = lm.Detokenize(out.r.answer);
      out.correct = IsCorrect(*out.sample, out.answer);
      finish(it->first);
      it = running.erase(it);
    }
  }
}

}  // namespace

std::vector<const SuiteSample*> SelectSamples(const std::vector<SuiteSample>& suite, int limit,
                                              const std::vector<std::string>& families) {
  const std::vector<std::string> known = Families(suite);
  for (const std::string& f : families) {
    if (std::find(known.begin(), known.end(), f) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw FieldError(ErrorKind::kInvalidArgument,
                       "{families}: '" + f + "' is not in the suite (it has: " + list + ")");
    }
  }
  std::map<std::string, int> taken;
  std::vector<const SuiteSample*> out;
  for (const auto& s : suite) {
    if (!families.empty() &&
        std::find(families.begin(), families.end(), s.family) == families.end())
      continue;
    if (limit > 0 && taken[s.family] >= limit) continue;
    taken[s.family]++;
    out.push_back(&s);
  }
  return out;
}

EvalReport RunEval(EvalOptions options, const engine::LoadedModel& lm,
                   const std::vector<SuiteSample>& suite,
                   const std::vector<const SuiteSample*>& selected) {
  const model::ModelConfig& cfg = lm.model().config();
  options.base.sampler.stop_ids = lm.stop_ids();
  options.base.sampler.mask_id = cfg.mask_token_id;
  diffusion::Validate(options.base.sampler);  // flag errors stop the run before any sample does
  engine::EngineOptions eo =
      engine::EngineOptionsFor(lm, {options.cache_budget_mb, options.audit_rate});
  EvalReport report;
  report.have_depth_table = !eo.depth_table.empty();
  report.depth_table_path = report.have_depth_table ? lm.depth_table_path() : "";
  engine::Engine eng(lm.model(), std::move(eo));

  const auto t0 = Clock::now();
  report.outcomes.resize(selected.size());
  RunBatched(options, lm, eng, selected, report.outcomes);
  report.wall_seconds = SecondsSince(t0);

  report.model_path = lm.path();
  report.context_length = cfg.context_length;
  report.family_order = Families(suite);
  report.options = std::move(options);
  return report;
}

void CheckSomeSampleFits(const EvalReport& report) {
  const auto errors = std::count_if(report.outcomes.begin(), report.outcomes.end(),
                                    [](const EvalOutcome& out) { return !out.error.empty(); });
  if (errors > 0 && static_cast<size_t>(errors) == report.outcomes.size()) {
    throw FieldError(
        ErrorKind::kInvalidArgument,
        "none of the " + std::to_string(errors) + " samples fits the model's context (" +
            std::to_string(report.context_length) + " tokens) with {gen_length} " +
            std::to_string(report.options.base.sampler.gen_length) + ": lower {gen_length}");
  }
}

}  // namespace bicache::harness
