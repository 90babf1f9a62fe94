// Kernel throughput: Linear (oneDNN bf16) at d_model 1024, tiled attention at 512 tokens, and the
// plain oneDNN GEMM yardstick Linear is judged against. Counters report GFLOP/s (2 flops per
// multiply-add). Thread count follows OMP_NUM_THREADS.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "format/gguf.h"
#include "kernels/few_rows.h"
#include "kernels/linear_route.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace {

using namespace bicache::kernels;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void SetGflops(benchmark::State& state, double flops_per_iter) {
  state.counters["GFLOP"] =
      benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: n (rows), in, out.
void BM_LinearForward(benchmark::State& state) {
  const size_t n = state.range(0), in = state.range(1), out = state.range(2);
  const auto w = Random(out * in, 1);
  const Linear lin = Linear::FromF32(w.data(), out, in);
  const auto x = Random(n * in, 2);
  std::vector<float> y(n * out);
  lin.Forward(x.data(), n, y.data());  // builds and caches the primitive
  for (auto _ : state) {
    lin.Forward(x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  SetGflops(state, 2.0 * n * in * out);
}
BENCHMARK(BM_LinearForward)
    ->ArgNames({"n", "in", "out"})
    // The embedded model's shapes (d_model 256, d_ff 704) at an 8-row block and a 40-row
    // request: one Q/K/V projection (256) against the fused one (768), one FFN input projection
    // (704) against fused gate+up (1408).
    ->Args({8, 256, 256})
    ->Args({8, 256, 768})
    ->Args({8, 256, 704})
    ->Args({8, 256, 1408})
    ->Args({40, 256, 256})
    ->Args({40, 256, 768})
    ->Args({40, 256, 704})
    ->Args({40, 256, 1408})
    ->Args({1, 1024, 1024})
    ->Args({32, 1024, 1024})
    ->Args({128, 1024, 1024})
    ->Args({512, 1024, 1024})
    ->Args({1024, 1024, 1024})
    ->Args({512, 1024, 2816})
    ->Args({512, 2816, 1024})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: m, n, k. The yardstick measures its own loop; one benchmark iteration = 5 GEMMs.
void BM_GemmYardstick(benchmark::State& state) {
  const size_t m = state.range(0), n = state.range(1), k = state.range(2);
  double sum = 0;
  int runs = 0;
  for (auto _ : state) {
    sum += MeasureGemmGflops(m, n, k, 5);
    ++runs;
  }
  state.counters["GFLOP/s"] = sum / runs;  // already a rate
}
BENCHMARK(BM_GemmYardstick)
    ->ArgNames({"m", "n", "k"})
    ->Args({512, 1024, 1024})
    ->Args({512, 2816, 1024})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: tokens (n_q = n_kv), n_head, n_kv_head, head_dim.
void BM_Attention(benchmark::State& state) {
  const size_t t = state.range(0), nh = state.range(1), nkv = state.range(2), hd = state.range(3);
  const auto q = Random(t * nh * hd, 3), k = Random(t * nkv * hd, 4), v = Random(t * nkv * hd, 5);
  std::vector<float> out(t * nh * hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto _ : state) {
    Attention(q.data(), t, nh * hd, k.data(), v.data(), t, nkv * hd, nh, nkv, hd, scale, out.data(),
              nh * hd);
    benchmark::DoNotOptimize(out.data());
  }
  SetGflops(state, 4.0 * t * t * hd * nh);  // QK^T and PV, 2 flops per multiply-add each
}
BENCHMARK(BM_Attention)
    ->ArgNames({"tok", "heads", "kv_heads", "hd"})
    ->Args({512, 16, 16, 64})
    ->Args({512, 8, 8, 128})
    ->Args({512, 16, 4, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Args: query rows, kv rows, n_head, n_kv_head, head_dim. Few query rows against a long K/V:
// the shape of a cached forward (a dual-cache block of 8, a request suffix of ~40) on the
// embedded model (4 heads x 64).
void BM_AttentionFewQueries(benchmark::State& state) {
  const size_t nq = state.range(0), nk = state.range(1), nh = state.range(2), nkv = state.range(3),
               hd = state.range(4);
  const auto q = Random(nq * nh * hd, 3), k = Random(nk * nkv * hd, 4),
             v = Random(nk * nkv * hd, 5);
  std::vector<float> out(nq * nh * hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto _ : state) {
    Attention(q.data(), nq, nh * hd, k.data(), v.data(), nk, nkv * hd, nh, nkv, hd, scale,
              out.data(), nh * hd);
    benchmark::DoNotOptimize(out.data());
  }
  SetGflops(state, 4.0 * nq * nk * hd * nh);
}
BENCHMARK(BM_AttentionFewQueries)
    ->ArgNames({"q", "kv", "heads", "kv_heads", "hd"})
    ->Args({1, 512, 4, 4, 64})
    ->Args({8, 512, 4, 4, 64})
    ->Args({16, 512, 4, 4, 64})
    ->Args({24, 512, 4, 4, 64})
    ->Args({40, 512, 4, 4, 64})
    ->Args({64, 512, 4, 4, 64})
    ->Args({128, 512, 4, 4, 64})
    ->UseRealTime();

void BM_RmsNorm(benchmark::State& state) {
  const size_t rows = 512, d = state.range(0);
  const auto x = Random(rows * d, 6), w = Random(d, 7);
  std::vector<float> y(rows * d);
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), y.data(), rows, d, 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * rows * d * 8));
}
BENCHMARK(BM_RmsNorm)->Arg(1024)->Arg(4096);

void BM_F32ToBf16(benchmark::State& state) {
  const size_t n = state.range(0);
  const auto x = Random(n, 8);
  std::vector<uint16_t> y(n);
  for (auto _ : state) {
    F32ToBf16(x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 6));
}
BENCHMARK(BM_F32ToBf16)->Arg(512 * 1024);

// Dequantization to bf16 (the per-panel cost of a quantized Linear), one 4096-wide row at a time
// over 64 rows of random blocks; reports ns per weight. Arg: the ggml type number.
void BM_DequantizeRowBf16(benchmark::State& state) {
  const auto type = static_cast<bicache::format::TensorType>(state.range(0));
  uint64_t elems = 0, bytes = 0;
  bicache::format::TensorTypeLayout(type, &elems, &bytes);
  const size_t in = 4096, rows = 64, row_bytes = in / elems * bytes;
  std::mt19937 rng(5);
  std::vector<uint8_t> q(rows * row_bytes);
  for (auto& b : q) b = static_cast<uint8_t>(rng() & 0x3B);  // keeps every f16 field finite
  std::vector<uint16_t> out(rows * in);
  for (auto _ : state) {
    for (size_t r = 0; r < rows; ++r)
      DequantizeRowBf16(type, q.data() + r * row_bytes, out.data() + r * in, in);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(bicache::format::TensorTypeName(type));
  state.counters["ns/weight"] = benchmark::Counter(
      static_cast<double>(rows * in) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DequantizeRowBf16)->Arg(8)->Arg(2)->Arg(12)->Arg(13)->Arg(14)->Arg(23)->Arg(30);

// Linear at LLaDA-8B's FFN input shape (W: [12288, 4096]) per stored type and row count, through
// whatever route kernels/linear_route.h picks (the label; BICACHE_FEW_ROWS / BICACHE_INT8 change
// it): "wGB/s" is W's bytes over the time, to hold against the machine's read bandwidth. Random
// blocks as above. Args: the ggml type number, n.
void BM_LinearByType(benchmark::State& state) {
  using bicache::format::TensorType;
  const auto type = static_cast<TensorType>(state.range(0));
  const size_t n = state.range(1), in = 4096, out = 12288;
  uint64_t elems = 0, bytes = 0;
  bicache::format::TensorTypeLayout(type, &elems, &bytes);
  const size_t row_bytes = in / elems * bytes;
  std::mt19937 rng(7);
  std::vector<uint8_t> q(out * row_bytes);
  for (auto& b : q) b = static_cast<uint8_t>(rng() & 0x3B);
  bicache::format::TensorInfo t;
  t.name = "bench.weight";
  t.ne = {in, out};
  t.type = type;
  t.n_elements = in * out;
  t.n_bytes = q.size();
  t.data = q.data();
  const Linear lin = Linear::FromTensor(t);
  const auto x = Random(n * in, 2);
  std::vector<float> y(n * out);
  lin.Forward(x.data(), n, y.data());
  for (auto _ : state) {
    lin.Forward(x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  const bool in_place =
      type != TensorType::BF16 || ActiveMatmulPrecision() == MatmulPrecision::kF32;
  state.SetLabel(bicache::format::TensorTypeName(type) + " " +
                 LinearRouteName(ChooseLinearRoute(type, in_place, n, in, ActiveMatmulPrecision(),
                                                   ActiveIntIsa())));
  state.counters["wGB/s"] = benchmark::Counter(static_cast<double>(q.size()) * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LinearByType)
    ->ArgsProduct({{12, 14, 8, 13, 10, 11, 30}, {1, 8, 12, 16, 24, 32}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// Many rows: the K-quant tile (Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14) against the Q8_0 tile
// (8) and BF16 (30) where the cut-overs between the routes are measured.
BENCHMARK(BM_LinearByType)
    ->ArgsProduct({{10, 11, 12, 13, 14, 8, 30}, {48, 64, 128, 256}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
