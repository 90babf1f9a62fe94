// FieldError: one message, spelled per front end. The rendered texts are the ones the CLI and the
// API printed when the sampler wrote flag names and the server translated them back.
#include <gtest/gtest.h>

#include <string>

#include "diffusion/sampler_config.h"
#include "util/field_error.h"

namespace bicache {
namespace {

// The CLI's spelling (cli/render_error.cpp) and the API's (server/api_request.cpp).
std::string Flag(std::string_view f) {
  std::string s = "--";
  for (char c : f) s += c == '_' ? '-' : c;
  return s;
}
std::string ApiField(std::string_view f) {
  return f == "gen_length" ? "max_tokens" : std::string(f);
}

diffusion::SamplerConfig Valid() {
  diffusion::SamplerConfig c;
  c.gen_length = c.steps = c.block_length = 32;
  c.mask_id = 31;
  return c;
}

FieldError Thrown(const diffusion::SamplerConfig& c) {
  try {
    diffusion::Validate(c);
  } catch (const FieldError& e) {
    return e;
  }
  ADD_FAILURE() << "no FieldError";
  return FieldError(ErrorKind::kInternal, "");
}

TEST(FieldError, RenderFieldsSpellsOnlyFieldReferences) {
  std::string first;
  EXPECT_EQ(RenderFields("{a_b} and {c} but not {} {X} {a", Flag, &first),
            "--a-b and --c but not {} {X} {a");
  EXPECT_EQ(first, "a_b");
  EXPECT_EQ(RenderFields("no fields", Flag, &first), "no fields");
  EXPECT_EQ(first, "");
  const FieldError e(ErrorKind::kInvalidArgument, "{steps} must be > 0");
  EXPECT_STREQ(e.what(), "steps must be > 0");  // bare identifiers for callers that do not render
  EXPECT_EQ(e.field(), "steps");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
}

TEST(FieldError, SamplerMessagesRenderForTheCliAndTheApi) {
  auto c = Valid();
  c.gen_length = 0;
  EXPECT_EQ(Thrown(c).Render(Flag), "--gen-length must be > 0 (got 0)");
  EXPECT_EQ(Thrown(c).Render(ApiField), "max_tokens must be > 0 (got 0)");
  c = Valid();
  c.block_length = 5;
  EXPECT_EQ(Thrown(c).Render(Flag), "--block-length (5) must divide --gen-length (32)");
  c = Valid();
  c.block_length = 8;
  c.steps = 6;
  EXPECT_EQ(Thrown(c).Render(Flag),
            "--steps (6) must be a multiple of the number of blocks (4 = --gen-length / "
            "--block-length)");
  EXPECT_EQ(Thrown(c).Render(ApiField),
            "steps (6) must be a multiple of the number of blocks (4 = max_tokens / "
            "block_length)");
  c = Valid();
  c.cfg_scale = -1;
  EXPECT_EQ(Thrown(c).Render(Flag),
            "--cfg (cfg_scale) must be a finite value >= 0, 0 = off (got -1)");
  c = Valid();
  c.alg_temp = 0.5f;
  EXPECT_EQ(Thrown(c).Render(ApiField),
            "alg_temp applies to maskgit_plus, topk_margin and entropy only (got algorithm "
            "low_confidence)");
  EXPECT_EQ(Thrown(c).field(), "alg_temp");
  try {
    diffusion::ParseAlgorithm("beam");
    ADD_FAILURE();
  } catch (const FieldError& e) {
    EXPECT_EQ(e.Render(Flag),
              "--algorithm: unknown algorithm 'beam' (valid: low_confidence, random, origin, "
              "maskgit_plus, topk_margin, entropy)");
  }
}

}  // namespace
}  // namespace bicache
