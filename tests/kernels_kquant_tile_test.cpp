// The many-row K-quant kernels (kernels/kquant_tile.h) on every instruction set this CPU runs
// (AVX2, AVX512-VNNI): each against the scalar twin ref::FewRowsProduct (the same arithmetic as
// the few-row route) for Q2_K .. Q6_K with ragged panels and tiles, Linear taking the route above
// the few-row cut-over, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/few_rows.h"
#include "kernels/kquant_tile.h"
#include "kernels/linear_route.h"
#include "kernels/matmul.h"
#include "kernels/reference.h"
#include "test_util.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

using bicache::testing::RandomRows;
using format::TensorType;

struct KType {
  TensorType type;
  std::vector<size_t> halves;  // byte offsets of the f16 fields of one superblock
};

const KType kKTypes[] = {
    {TensorType::Q2_K, {80, 82}}, {TensorType::Q3_K, {108}}, {TensorType::Q4_K, {0, 2}},
    {TensorType::Q5_K, {0, 2}},   {TensorType::Q6_K, {208}},
};

size_t RowBytes(TensorType type, size_t in) {
  uint64_t elems = 0, bytes = 0;
  format::TensorTypeLayout(type, &elems, &bytes);
  return in / elems * bytes;
}

// out rows of `in` values: random bytes (every quant, scale and min pattern, Q6_K's scale -128
// included) with f16 fields +-[2^-9, 2^-2).
std::vector<uint8_t> RandomK(const KType& kt, size_t out, size_t in, uint32_t seed) {
  const size_t bytes = RowBytes(kt.type, 256);
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(out * in / 256 * bytes);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  for (size_t blk = 0; blk < w.size() / bytes; ++blk) {
    for (size_t off : kt.halves) {
      const auto h =
          static_cast<uint16_t>((rng() & 0x8000) | ((6 + rng() % 8) << 10) | (rng() & 0x3FF));
      std::memcpy(&w[blk * bytes + off], &h, 2);
    }
  }
  if (kt.type == TensorType::Q6_K) w[192] = 0x80;  // the most negative scale
  return w;
}

// sum_i (|a v_i| + |b|) |x_i|: the size of the terms the kernels add (bounds their rounding).
double TermMagnitude(TensorType type, const float* xr, const uint8_t* row, size_t in) {
  const size_t super_bytes = RowBytes(type, 256);
  int v[256];
  float a[16], b[16];
  double mag = 0;
  for (size_t sb = 0; sb < in / 256; ++sb) {
    const int sub = ref::DecodeIntSuperblock(type, row + sb * super_bytes, v, a, b);
    for (int i = 0; i < 256; ++i) {
      mag += (std::fabs(static_cast<double>(a[i / sub]) * v[i]) + std::fabs(b[i / sub])) *
             std::fabs(xr[sb * 256 + i]);
    }
  }
  return mag;
}

std::vector<IntIsa> CompiledIsas() {
  std::vector<IntIsa> v;
  if (CpuIntIsa() >= IntIsa::kAvx2) v.push_back(IntIsa::kAvx2);
  if (CpuIntIsa() >= IntIsa::kAvx512Vnni) v.push_back(IntIsa::kAvx512Vnni);
  return v;
}

void ExpectTwin(TensorType type, const std::vector<float>& x, const std::vector<uint8_t>& w,
                size_t n, size_t in, size_t out, const std::vector<float>& got) {
  std::vector<float> twin(n * out);
  const size_t row_bytes = RowBytes(type, in);
  ref::FewRowsProduct(type, x.data(), n, in, w.data(), row_bytes, out, twin.data());
  for (size_t r = 0; r < n; ++r) {
    for (size_t o = 0; o < out; ++o) {
      const double mag = TermMagnitude(type, x.data() + r * in, w.data() + o * row_bytes, in);
      ASSERT_NEAR(got[r * out + o], twin[r * out + o], 1e-5 * mag + 1e-7)
          << "[" << r << ", " << o << "]";
    }
  }
}

TEST(KernelsKQuantTile, EveryIsaMatchesTheTwin) {
  const auto isas = CompiledIsas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has no AVX2: the K-quant tile route never runs here";
  // out 37: one or two whole panels and a ragged one; n: ragged tiles of 2 and 4 rows.
  const size_t in = 512, out = 37;
  for (const KType& kt : kKTypes) {
    const auto w = RandomK(kt, out, in, 11);
    for (size_t n : {1, 6, 33}) {
      auto x = RandomRows(n, in, static_cast<uint32_t>(n + 200));
      std::fill(x.end() - 256, x.end(), 0.0f);  // a zero superblock (scale 0) in the last row
      for (IntIsa isa : isas) {
        SCOPED_TRACE(format::TensorTypeName(kt.type) + " n=" + std::to_string(n) + " " +
                     IntIsaName(isa));
        std::vector<float> got(n * out, -1.0f);
        KQuantTileForward(isa, kt.type, x.data(), n, in, w.data(), RowBytes(kt.type, in), out,
                          got.data());
        ExpectTwin(kt.type, x, w, n, in, out, got);
      }
    }
  }
}

// The largest activations and quants at once: the int16 pair sums stay below 2^15 (no
// saturation), the int32 superblock sums exact.
TEST(KernelsKQuantTile, ExtremeValuesDoNotSaturate) {
  const auto isas = CompiledIsas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 here";
  const size_t in = 256, out = 3, n = 2;
  for (const KType& kt : kKTypes) {
    auto w = RandomK(kt, out, in, 5);
    for (size_t o = 0; o < out; ++o) {  // every quant byte at its maximum, scales left random
      uint8_t* b = w.data() + o * RowBytes(kt.type, in);
      if (kt.type == TensorType::Q4_K) std::memset(b + 16, 0xFF, 128);
      if (kt.type == TensorType::Q5_K) std::memset(b + 16, 0xFF, 160);
      if (kt.type == TensorType::Q6_K) std::memset(b, 0xFF, 192);
      if (kt.type == TensorType::Q3_K) std::memset(b, 0xFF, 96);
      if (kt.type == TensorType::Q2_K) std::memset(b + 16, 0xFF, 64);
    }
    std::vector<float> x(n * in, 1.0f);
    for (size_t i = 0; i < in; ++i) x[in + i] = i % 2 ? -1.0f : 1.0f;
    for (IntIsa isa : isas) {
      SCOPED_TRACE(format::TensorTypeName(kt.type) + " " + IntIsaName(isa));
      std::vector<float> got(n * out);
      KQuantTileForward(isa, kt.type, x.data(), n, in, w.data(), RowBytes(kt.type, in), out,
                        got.data());
      ExpectTwin(kt.type, x, w, n, in, out, got);
    }
  }
}

TEST(KernelsKQuantTile, LinearTakesTheRouteAboveTheFewRowCutOver) {
  const IntIsa isa = ActiveIntIsa();
  if (isa == IntIsa::kNone) GTEST_SKIP() << "integer routes off or no AVX2 here";
  const size_t in = 256, out = 40;
  for (const KType& kt : kKTypes) {
    SCOPED_TRACE(format::TensorTypeName(kt.type));
    const size_t n = FewRowsCutover(kt.type, isa, ActiveMatmulPrecision()) + 1;
    ASSERT_EQ(ChooseLinearRoute(kt.type, true, n, in, ActiveMatmulPrecision(), isa),
              LinearRoute::kKQuantTile);
    const auto w = RandomK(kt, out, in, 3);
    const Linear lin = Linear::FromTensor(bicache::testing::MakeMatrixTensor(kt.type, in, out, w));
    const auto x = RandomRows(n, in, 4);
    std::vector<float> got(n * out);
    lin.Forward(x.data(), n, got.data());
    ExpectTwin(kt.type, x, w, n, in, out, got);
  }
}

TEST(KernelsKQuantTile, BadInputsAreErrors) {
  std::vector<float> x(512), y(4);
  std::vector<uint8_t> w(2 * 144);
  EXPECT_FALSE(KQuantTileSupports(TensorType::Q8_0, 256));
  EXPECT_FALSE(KQuantTileSupports(TensorType::Q4_K, 128));
  EXPECT_THROW(KQuantTileForward(IntIsa::kNone, TensorType::Q4_K, x.data(), 1, 256, w.data(), 144,
                                 1, y.data()),
               Error);
  if (CpuIntIsa() == IntIsa::kNone) return;
  EXPECT_THROW(KQuantTileForward(IntIsa::kAvx2, TensorType::Q8_0, x.data(), 1, 256, w.data(), 272,
                                 1, y.data()),
               Error);
  EXPECT_THROW(KQuantTileForward(IntIsa::kAvx2, TensorType::Q4_K, x.data(), 1, 256, w.data(), 140,
                                 1, y.data()),
               Error);  // wrong row size
}

}  // namespace
}  // namespace bicache::kernels
