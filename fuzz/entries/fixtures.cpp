#include "fixtures.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "model/forward.h"
#include "model/weights.h"
#include "targets.h"
#include "util/error.h"

namespace bicache::fuzz {

void Violation(const std::string& what) {
  std::fprintf(stderr, "bicache fuzz: invariant violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

const engine::LoadedModel& GoldenLlada() {
  static const std::unique_ptr<engine::LoadedModel> lm =
      engine::LoadedModel::Load(BICACHE_SOURCE_DIR "/tests/data/golden/llada-tiny.gguf");
  return *lm;
}

const tokenizer::Tokenizer& GoldenDreamTokenizer() {
  static const tokenizer::Tokenizer tok = tokenizer::Tokenizer::FromGguf(
      format::GgufFile::Open(BICACHE_SOURCE_DIR "/tests/data/golden/dream-tiny.gguf"));
  return tok;
}

namespace {

template <typename F>
void Swallow(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

}  // namespace

void ExerciseParsedFile(format::GgufFile file) {
  const format::GgufFile& f = file;
  for (const auto& kv : f.metadata()) {
    const std::string& key = kv.first;  // a plain reference: clang 14 cannot capture bindings
    Swallow([&] { f.GetUInt(key); });
    Swallow([&] { f.GetInt(key); });
    Swallow([&] { f.GetFloat(key); });
    Swallow([&] { f.GetBool(key); });
    Swallow([&] { f.GetString(key); });
    Swallow([&] { f.GetStringArray(key); });
    Swallow([&] { f.GetIntArray(key); });
    Swallow([&] { f.GetFloatArray(key); });
  }
  uint8_t acc = 0;
  for (const format::TensorInfo& t : f.tensors()) {
    BICACHE_FUZZ_CHECK(t.data != nullptr, "tensor '" + t.name + "' has no data pointer");
    if (t.n_bytes > 0) acc ^= t.data[0] ^ t.data[t.n_bytes - 1];  // ASan checks both ends
  }
  (void)acc;

  std::unique_ptr<tokenizer::Tokenizer> tok;
  Swallow([&] { tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::FromGguf(f)); });
  if (tok) {
    Swallow([&] {
      const std::vector<int32_t> ids = tok->Encode("Hello <|mask|> world \xF0\x9F\x98\x80 12345");
      for (int32_t id : ids)
        BICACHE_FUZZ_CHECK(id >= 0 && id < tok->n_vocab(), "token id out of range");
      tok->Decode(ids);
    });
  }

  std::unique_ptr<model::Model> m;
  Swallow([&] { m = model::Model::FromFile(std::move(file)); });
  if (!m) return;
  const model::ModelConfig& c = m->config();
  // Up to two tokens, full forward: a config that passes validation must be safe to run.
  std::vector<int32_t> toks = {0, c.n_vocab - 1};
  if (c.context_length < 2) toks.resize(1);
  std::vector<float> logits(toks.size() * static_cast<size_t>(c.n_vocab));
  model::SeqPlan p;
  p.tokens = toks;
  p.logits_begin = 0;
  p.logits_end = static_cast<int>(toks.size());
  p.logits = logits.data();
  model::Forward(*m, {&p, 1});
}

}  // namespace bicache::fuzz
