// The int8 route for Q8_0 weights (kernels/int8_gemm.h, AVX512-VNNI): activation quantization and
// the packed products against their scalar twin (ref::Q8_0ProductInt8), against the exact float
// product within the activations' rounding, and Linear taking the route. Skipped, saying so, on a
// CPU without AVX512-VNNI (there Linear dequantizes Q8_0 to bf16 panels, tested elsewhere).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/int8_gemm.h"
#include "kernels/matmul.h"
#include "kernels/reference.h"
#include "test_util.h"

namespace bicache::kernels {
namespace {

using bicache::testing::RandomRows;

using format::TensorType;

// out rows of `in` Q8_0 values: random int8 quants (the extremes included), scales +-[2^-9, 2^-2).
std::vector<uint8_t> RandomQ8_0(size_t out, size_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(out * in / 32 * 34);
  for (size_t b = 0; b < w.size() / 34; ++b) {
    const auto h =
        static_cast<uint16_t>((rng() & 0x8000) | ((6 + rng() % 8) << 10) | (rng() & 0x3FF));
    std::memcpy(&w[b * 34], &h, 2);
    for (size_t j = 0; j < 32; ++j)
      w[b * 34 + 2 + j] = static_cast<uint8_t>(j == 0 ? 0x81 : j == 1 ? 0x7F : rng());
  }
  return w;
}

#define SKIP_WITHOUT_VNNI()                                                \
  if (!Int8RouteAvailable())                                               \
  GTEST_SKIP() << "no int8 route here (AVX512-VNNI missing, f32 path, or " \
                  "BICACHE_INT8=0)"

TEST(KernelsInt8, ActivationQuantizationMatchesScalarRule) {
  SKIP_WITHOUT_VNNI();
  const size_t n = 3, k = 96;
  const auto x = RandomRows(n, k, 1);
  std::vector<int8_t> q(n * k);
  std::vector<float> d(n * k / 32);
  std::vector<int32_t> s(n * k / 32);
  QuantizeActivationsQ8(x.data(), n, k, q.data(), d.data(), s.data());
  for (size_t b = 0; b < n * k / 32; ++b) {
    float amax = 0;
    for (size_t j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
    const float inv = amax == 0 ? 0 : 127.0f / amax;
    int32_t sum = 0;
    for (size_t j = 0; j < 32; ++j) {
      const int want = static_cast<int>(std::nearbyint(x[b * 32 + j] * inv));
      ASSERT_EQ(q[b * 32 + j], want) << "block " << b << " element " << j;
      sum += want;
    }
    EXPECT_EQ(d[b], amax == 0 ? 0.0f : amax / 127.0f) << b;
    EXPECT_EQ(s[b], sum) << b;
  }
}

TEST(KernelsInt8, ProductMatchesScalarTwinAndExactProduct) {
  SKIP_WITHOUT_VNNI();
  // out 100: three whole 32-column panels and a ragged one; n: padded tiles of 4 rows.
  const size_t in = 256, out = 100, row_bytes = in / 32 * 34;
  const auto w = RandomQ8_0(out, in, 2);
  std::vector<float> wf(out * in);
  ref::DequantizeRow(TensorType::Q8_0, w.data(), wf.data(), out * in);
  for (size_t n : {1, 5, 64}) {
    const auto x = RandomRows(n, in, static_cast<uint32_t>(n));
    std::vector<float> got(n * out, -1.0f), twin(n * out);
    Int8ForwardQ8_0(x.data(), n, in, w.data(), row_bytes, out, got.data());
    ref::Q8_0ProductInt8(x.data(), n, in, w.data(), row_bytes, out, twin.data());
    for (size_t r = 0; r < n; ++r) {
      for (size_t o = 0; o < out; ++o) {
        double mag = 0, exact = 0, rounding = 0;  // rounding: what 8-bit activations can move it by
        for (size_t kb = 0; kb < in / 32; ++kb) {
          float amax = 0;
          double wsum = 0;
          for (size_t j = 0; j < 32; ++j) {
            const size_t i = kb * 32 + j;
            amax = std::fmax(amax, std::fabs(x[r * in + i]));
            wsum += std::fabs(wf[o * in + i]);
            mag += std::fabs(x[r * in + i] * wf[o * in + i]);
            exact += static_cast<double>(x[r * in + i]) * wf[o * in + i];
          }
          rounding += wsum * amax / 254.0;
        }
        const size_t at = r * out + o;
        ASSERT_NEAR(got[at], twin[at], 1e-5 * mag + 1e-7)
            << "n=" << n << " [" << r << ", " << o << "]";
        ASSERT_NEAR(got[at], exact, rounding * 1.001 + 1e-5 * mag)
            << "n=" << n << " [" << r << ", " << o << "]";
      }
    }
  }
}

TEST(KernelsInt8, LinearTakesTheRouteForQ8_0) {
  SKIP_WITHOUT_VNNI();
  const size_t in = 128, out = 40, n = 40;  // n above the few-row cut-over: the tile route
  const auto w = RandomQ8_0(out, in, 3);
  const Linear lin =
      Linear::FromTensor(bicache::testing::MakeMatrixTensor(TensorType::Q8_0, in, out, w));
  const auto x = RandomRows(n, in, 4);
  std::vector<float> got(n * out), twin(n * out);
  lin.Forward(x.data(), n, got.data());
  ref::Q8_0ProductInt8(x.data(), n, in, w.data(), in / 32 * 34, out, twin.data());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], twin[i], 1e-4f * (1.0f + std::fabs(twin[i]))) << i;
}

TEST(KernelsInt8, BadShapesAreErrors) {
  SKIP_WITHOUT_VNNI();
  std::vector<float> x(64), y(64);
  std::vector<uint8_t> w(68);
  EXPECT_THROW(Int8ForwardQ8_0(x.data(), 1, 48, w.data(), 51, 1, y.data()),
               Error);  // 48 is not whole blocks
  EXPECT_THROW(Int8ForwardQ8_0(x.data(), 1, 64, w.data(), 60, 1, y.data()),
               Error);  // wrong row size
}

}  // namespace
}  // namespace bicache::kernels
