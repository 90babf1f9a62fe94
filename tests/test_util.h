// Shared helpers for tests: paths to fixtures, small file utilities, typed-error checks, hand-made
// tensor infos and a plain full-sequence forward.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/forward.h"
#include "model/plan.h"
#include "model/weights.h"
#include "util/error.h"

namespace bicache::testing {

// n values drawn uniformly from [lo, hi) with a fixed seed.
inline std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Activations [n, in] drawn from N(0, 1), with the first 32 values of row 0 zero (a block whose
// quantization scale is 0).
inline std::vector<float> RandomRows(size_t n, size_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n * in);
  for (auto& v : x) v = dist(rng);
  for (size_t j = 0; j < 32 && j < in; ++j) x[j] = 0.0f;  // an all-zero block (scale 0)
  return x;
}

// |a - b| <= abs_tol + rel_tol * |b| element-wise, reporting the first mismatch.
inline void ExpectNear(const std::vector<float>& a, const std::vector<float>& b, float rel_tol,
                       float abs_tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_LE(std::fabs(a[i] - b[i]), abs_tol + rel_tol * std::fabs(b[i]))
        << what << " at " << i << ": got " << a[i] << " want " << b[i];
  }
}

// tests/data/REL in the source tree (test_paths.cpp: the one test file that knows the path).
std::string DataPath(const std::string& rel);

// The largest |a[i] - b[i]| over n values (the golden-logit tests' measure).
inline float MaxAbsDiff(const float* a, const float* b, size_t n) {
  float d = 0;
  for (size_t i = 0; i < n; ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

inline std::vector<float> ReadF32File(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  std::vector<float> v(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), v.size() * sizeof(float));
  return v;
}

// Runs f, expects it to throw bicache::Error of `kind`, and returns the message ("" otherwise).
template <typename F>
std::string ErrorMessage(ErrorKind kind, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << ErrorKindName(e.kind()) << ": " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected Error(" << ErrorKindName(kind) << "), nothing was thrown";
  return "";
}

// Runs f and expects bicache::Error of `kind` whose message contains `needle` ("" = any message).
// Other exception types propagate, so gtest reports them as what they are.
template <typename F>
void ExpectError(F&& f, ErrorKind kind, const std::string& needle = "") {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << ErrorKindName(e.kind()) << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message '" << e.what() << "' does not contain '" << needle << "'";
    return;
  }
  ADD_FAILURE() << "expected Error(" << ErrorKindName(kind) << ")"
                << (needle.empty() ? "" : " containing '" + needle + "'") << ", nothing was thrown";
}

// A matrix tensor [out, in] (ne = {in, out}) of `type` over `bytes`, as the reader would describe
// it.
inline format::TensorInfo MakeMatrixTensor(format::TensorType type, size_t in, size_t out,
                                           const std::vector<uint8_t>& bytes,
                                           const std::string& name = "blk.0.test.weight") {
  format::TensorInfo t;
  t.name = name;
  t.ne = {in, out};
  t.type = type;
  t.n_elements = in * out;
  t.n_bytes = bytes.size();
  t.data = bytes.data();
  return t;
}

// Logits [toks.size(), n_vocab] of one forward over the whole sequence with nothing cached: the
// reference the golden files and every partial plan are compared against. With `capture`, also
// records every layer's K/V and boundary hidden states into it.
inline std::vector<float> FullLogits(const model::Model& m, const std::vector<int32_t>& toks,
                                     model::SeqKv* capture = nullptr) {
  std::vector<float> out(toks.size() * m.config().n_vocab);
  model::SeqPlan p;
  p.tokens = toks;
  p.logits_begin = 0;
  p.logits_end = static_cast<int>(toks.size());
  p.logits = out.data();
  if (capture) {
    capture->Reset(m.config().n_layer, static_cast<int>(toks.size()));
    p.kv_out = capture;
    p.capture_kv_layers = m.config().n_layer;
    p.capture_hidden_max = m.config().n_layer;
  }
  model::Forward(m, {&p, 1});
  return out;
}

}  // namespace bicache::testing
