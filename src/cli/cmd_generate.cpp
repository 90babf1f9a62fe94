// `bicache generate`: one request through the engine, with a live progress bar (and optionally
// the canvas being unmasked) when stderr is a terminal.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <span>

#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/engine.h"
#include "engine/engine_setup.h"
#include "engine/loaded_model.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

// Draws the progress line (and the canvas with --visual) on stderr.
class ProgressView {
 public:
  ProgressView(const engine::LoadedModel& lm, bool visual)
      : lm_(lm), visual_(visual), tty_(isatty(2)) {}
  void Update(const engine::StepEvent& e) {
    if (!tty_) return;
    const std::span<const int32_t> canvas = e.canvas;
    int committed = 0;
    const int32_t mask = lm_.model().config().mask_token_id;
    for (int32_t t : canvas) committed += t != mask;
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const int width = 30,
              filled = canvas.empty() ? 0 : width * committed / static_cast<int>(canvas.size());
    std::string bar(filled, '#');
    bar.resize(width, '.');
    std::fprintf(stderr, "\r\033[K[%s] step %d  %d/%zu tokens  %.1f tok/s", bar.c_str(), e.step,
                 committed, canvas.size(), secs > 0 ? committed / secs : 0.0);
    if (visual_) {
      std::string text;
      for (int32_t t : canvas)
        text += t == mask ? "\xE2\x96\x91" : lm_.Detokenize({&t, 1});  // U+2591 for masks
      for (char& c : text)
        if (c == '\n') c = ' ';
      std::fprintf(stderr, "\n\033[K%s\033[1A", text.c_str());
    }
    std::fflush(stderr);
  }
  void Finish() {
    if (tty_) std::fprintf(stderr, visual_ ? "\n\n" : "\n");
  }

 private:
  const engine::LoadedModel& lm_;
  bool visual_, tty_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace

Runner AddGenerate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate an answer with a diffusion sampler");
  struct Opts {
    std::string model, prompt, chat, system, prefix;
    int threads = 0;
    bool json = false, visual = false;
    SamplingFlags s;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->model);
  auto* p = cmd->add_option("-p,--prompt", o->prompt, "plain prompt text (special tokens parsed)");
  auto* c =
      cmd->add_option("--chat", o->chat, "user message, formatted with the model's chat template");
  p->excludes(c);
  cmd->add_option("--system", o->system, "system message (with --chat): the shareable prefix");
  cmd->add_option("--prefix", o->prefix,
                  "plain text prepended to --prompt and declared as the shared prefix");
  cmd->add_flag("--json", o->json, "print the answer and statistics as JSON");
  cmd->add_flag("--visual", o->visual, "show the canvas being unmasked (terminal only)");
  AddThreadsFlag(cmd, &o->threads);
  o->s.Register(cmd);
  return [=]() {
    if (o->prompt.empty() == o->chat.empty())
      throw Error(ErrorKind::kInvalidArgument, "give exactly one of -p/--prompt or --chat");
    if (!o->system.empty() && o->chat.empty())
      throw Error(ErrorKind::kInvalidArgument, "--system needs --chat");
    if (!o->prefix.empty() && o->prompt.empty())
      throw Error(ErrorKind::kInvalidArgument, "--prefix needs -p/--prompt");
    ApplyThreads(o->threads);
    engine::RequestOptions req;
    req.sampler = o->s.Sampler();
    req.cache = o->s.Cache();
    req.refresh_interval = o->s.refresh;
    auto lm = LoadModelWithProfile(o->model, o->s.depth_profile);
    ApplyModelThreads(o->threads, lm->model().config());
    UseModelBlock(lm->model().config(), o->s.block_length, &req.sampler);
    engine::Prompt prompt;
    if (!o->chat.empty()) {
      std::vector<tokenizer::ChatMessage> msgs;
      if (!o->system.empty()) msgs.push_back({"system", o->system});
      msgs.push_back({"user", o->chat});
      prompt = lm->ChatPrompt(msgs);
    } else {
      prompt = lm->PlainPrompt(o->prefix, o->prompt);
    }
    req.prompt = prompt.tokens;
    req.prefix_len = prompt.prefix_len;
    req.sampler.stop_ids = lm->stop_ids();
    engine::EngineOptions eo =
        engine::EngineOptionsFor(*lm, {o->s.cache_budget_mb, o->s.audit_rate});
    // A block-diffusion model reuses prefixes exactly: no depth table is involved.
    const bool depth_by_table =
        req.cache.prefix == engine::PrefixReuse::kBicache && !lm->model().config().block_causal();
    if (depth_by_table && eo.depth_table.empty()) WarnNoDepthTable(lm->depth_table_path());
    const std::string mismatch =
        depth_by_table
            ? engine::CalibrationMismatch(eo.depth_table, req.sampler, req.refresh_interval)
            : "";
    if (!mismatch.empty()) std::fprintf(stderr, "bicache: warning: %s\n", mismatch.c_str());
    engine::Engine eng(lm->model(), std::move(eo));
    ProgressView view(*lm, o->visual);
    engine::RequestResult r = eng.Run(req, [&](const engine::StepEvent& e) { view.Update(e); });
    view.Finish();
    const std::string text = lm->Detokenize(r.answer);
    if (o->json) {
      nlohmann::json j = {{"text", text},
                          {"tokens", r.answer},
                          {"finish_reason", r.finish_reason},
                          {"steps", r.steps},
                          {"forwards", r.forwards},
                          {"seconds", r.seconds},
                          {"tokens_per_s", r.seconds > 0 ? r.answer.size() / r.seconds : 0.0},
                          {"prompt_tokens", req.prompt.size()},
                          {"cache",
                           {{"mode", req.cache.ToString()},
                            {"prefix_tokens", r.prefix_used},
                            {"depth", r.depth},
                            {"hit", r.prefix_hit},
                            {"ratio", r.prefix_ratio}}}};
      std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
      std::printf("%s\n", text.c_str());
    }
    return 0;
  };
}

static CommandRegistrar register_generate(AddGenerate, 40);

}  // namespace bicache::cli
