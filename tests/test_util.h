// Shared helpers for tests: paths to fixtures, small file utilities, typed-error checks and
// hand-made tensor infos.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "util/error.h"

namespace bicache::testing {

inline std::string DataPath(const std::string& rel) {
  return std::string(BICACHE_TEST_DATA) + "/" + rel;
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

}  // namespace bicache::testing
