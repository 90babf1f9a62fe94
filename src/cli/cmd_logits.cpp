// `bicache logits -m FILE (-p TEXT | --tokens 1,2,3) [--out FILE]`: one full forward pass; writes
// every position's logits as raw little-endian float32 [n_tokens x n_vocab] and prints the top
// token per position, so a converted file can be checked against another engine.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/tokenize_input.h"
#include "model/forward.h"
#include "model/weights.h"
#include "util/error.h"

namespace bicache::cli {

std::vector<int32_t> ParseTokenList(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos)
      throw Error(ErrorKind::kInvalidArgument, "--tokens: empty item in '" + text + "'");
    item = item.substr(b, e - b + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--tokens: '" + item + "' is not a non-negative integer");
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty()) throw Error(ErrorKind::kInvalidArgument, "--tokens: no token ids given");
  // getline yields no item after a trailing comma, so "1,2," would otherwise pass as "1,2".
  if (const size_t last = text.find_last_not_of(" \t");
      last != std::string::npos && text[last] == ',') {
    throw Error(ErrorKind::kInvalidArgument,
                "--tokens: empty item after the last ',' in '" + text + "'");
  }
  return ids;
}

Runner AddLogits(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("logits", "Run one full forward pass and dump every position's logits");
  struct Opts {
    std::string model, prompt, tokens, out;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->model);
  auto* p = cmd->add_option("-p,--prompt", o->prompt,
                            "prompt text (tokenized with the model's tokenizer, no BOS added)");
  auto* t = cmd->add_option("--tokens", o->tokens, "comma-separated token ids");
  p->excludes(t);
  cmd->add_option("--out", o->out,
                  "write logits here as little-endian float32 [n_tokens x n_vocab]");
  AddThreadsFlag(cmd, &o->threads);
  return [=]() {
    if (o->prompt.empty() == o->tokens.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "give exactly one of -p/--prompt or --tokens");
    }
    ApplyThreads(o->threads);
    auto model = model::Model::Load(o->model);
    ApplyModelThreads(o->threads, model->config());
    const auto& c = model->config();
    std::vector<int32_t> ids =
        o->tokens.empty() ? TokenizeForCli(*model, o->prompt) : ParseTokenList(o->tokens);
    std::vector<float> logits(ids.size() * static_cast<size_t>(c.n_vocab));
    model::SeqPlan plan;
    plan.tokens = ids;
    plan.logits_begin = 0;
    plan.logits_end = static_cast<int>(ids.size());
    plan.logits = logits.data();
    model::ForwardStats stats;
    model::Forward(*model, {&plan, 1}, &stats);
    if (!o->out.empty()) {
      std::ofstream f(o->out, std::ios::binary);
      f.write(reinterpret_cast<const char*>(logits.data()), logits.size() * sizeof(float));
      if (!f) throw Error(ErrorKind::kIo, "cannot write logits to '" + o->out + "'");
    }
    std::printf("%zu tokens x %d vocab, forward %.1f ms%s%s\n", ids.size(), c.n_vocab,
                stats.seconds * 1e3, o->out.empty() ? "" : ", logits written to ", o->out.c_str());
    for (size_t i = 0; i < ids.size(); ++i) {
      const float* row = &logits[i * c.n_vocab];
      const int top = static_cast<int>(std::max_element(row, row + c.n_vocab) - row);
      std::printf("  pos %zu: token %d -> top %d (%.4f) %s\n", i, ids[i], top, row[top],
                  TokenTextForCli(*model, top).c_str());
    }
    return 0;
  };
}

static CommandRegistrar register_logits(AddLogits, 20);

}  // namespace bicache::cli
