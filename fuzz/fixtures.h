// Shared, load-once inputs of the fuzz entry points: the golden tiny models under tests/data.
// (Not models/: that file is rewritten by training runs.)
#pragma once

#include <memory>

#include "engine/loaded_model.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace bicache::fuzz {

// tests/data/golden/llada-tiny.gguf: llama-bpe pre-tokenizer, LLaDA chat template.
const engine::LoadedModel& GoldenLlada();
// tests/data/golden/dream-tiny.gguf's tokenizer: qwen2 pre-tokenizer, ChatML template.
const tokenizer::Tokenizer& GoldenDreamTokenizer();

// Touches everything a loader would read from a parsed file: typed getters on every key, every
// tensor's bytes (so an out-of-bounds data pointer shows up under ASan), then the tokenizer, the
// model and a two-token forward when those load. Typed errors are expected and swallowed.
void ExerciseParsedFile(format::GgufFile file);

}  // namespace bicache::fuzz
