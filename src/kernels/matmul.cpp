// Linear and the GEMM yardstick through oneDNN 2.x (bf16 x bf16 -> f32 matmul).
//
// Weights stay in their [out, in] row-major bf16 layout and are described to oneDNN as the
// B operand [in, out] with strides {1, in} ("ba"): W is never reordered or copied by us.
// Primitive choice (measured on a loaded 2-core Zen 4 with AVX-512-bf16, in = 1024):
//  - n >= kFixedMinRows: a primitive compiled for the exact n (oneDNN picks brgemm; at n = 512,
//    1 thread: 4.6 ms vs 5.6 ms for the run-time-M gemm), cached process-wide by (n, in, out);
//  - n < kFixedMinRows: one primitive per (in, out) with a run-time row count (oneDNN's jit
//    gemm). At n = 1 it was 6x faster than the fixed-n brgemm (0.03 vs 0.18 ms), and with 2
//    threads on a busy machine the fixed-n kernels were 5-10x slower for n = 1..32; the single
//    entry also keeps the cache from filling with one primitive per small batch size.
// Scratchpads are user-managed (per thread) so one primitive can run on several threads at once.
#include "kernels/matmul.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/ops.h"
#include "util/error.h"
#include "util/grow.h"

namespace bicache::kernels {
namespace {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& CpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

// One compiled matmul C[m, n] = A[m, k] * B[k, n]; B is "ba" (transposed storage) or "ab".
struct GemmPrim {
  dnnl::matmul prim;
  memory::desc src, wei, dst, scratch;
};

constexpr size_t kMaxCachedPrims = 1024;  // beyond this the cache is dropped and refilled
constexpr size_t kFixedMinRows = 64;
constexpr size_t kRuntimeRows = 0;  // cache key for the run-time-M primitive

// m == kRuntimeRows builds the primitive with a run-time row count (DNNL_RUNTIME_DIM_VAL); its
// src/dst descs then hold the placeholder and RunGemm substitutes the real m.
std::shared_ptr<const GemmPrim> GetPrim(size_t m, size_t k, size_t n, bool b_transposed) {
  static std::mutex mu;
  static std::map<std::tuple<size_t, size_t, size_t, bool>, std::shared_ptr<const GemmPrim>> cache;
  const auto key = std::make_tuple(m, k, n, b_transposed);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= kMaxCachedPrims) cache.clear();  // holders keep theirs alive

  const auto M = m == kRuntimeRows ? DNNL_RUNTIME_DIM_VAL : static_cast<memory::dim>(m);
  const auto K = static_cast<memory::dim>(k), N = static_cast<memory::dim>(n);
  auto p = std::make_shared<GemmPrim>();
  p->src = memory::desc({M, K}, memory::data_type::bf16, Dims{K, 1});
  p->wei = b_transposed ? memory::desc({K, N}, memory::data_type::bf16, Dims{1, K})
                        : memory::desc({K, N}, memory::data_type::bf16, memory::format_tag::ab);
  p->dst = memory::desc({M, N}, memory::data_type::f32, Dims{N, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::desc desc(p->src, p->wei, p->dst);
  const dnnl::matmul::primitive_desc pd(desc, attr, CpuEngine());
  p->scratch = pd.scratchpad_desc();
  p->prim = dnnl::matmul(pd);
  cache.emplace(key, p);
  return p;
}

// Runs a cached primitive on raw pointers (a: [m, k] bf16, b: weights, c: [m, n] f32); the
// thread's scratchpad grows as needed.
void RunGemm(const GemmPrim& g, size_t m, const uint16_t* a, const uint16_t* b, float* c) {
  thread_local std::vector<uint8_t> scratchpad;
  const size_t sp_bytes = g.scratch.get_size();
  GrowTo(scratchpad, sp_bytes);
  auto& eng = CpuEngine();
  const auto M = static_cast<memory::dim>(m);
  const auto K = g.src.dims()[1], N = g.dst.dims()[1];
  memory src({{M, K}, memory::data_type::bf16, Dims{K, 1}}, eng, const_cast<uint16_t*>(a));
  memory wei(g.wei, eng, const_cast<uint16_t*>(b));
  memory dst({{M, N}, memory::data_type::f32, Dims{N, 1}}, eng, c);
  memory sp(g.scratch, eng, scratchpad.data());
  auto& stream = ThreadStream();
  g.prim.execute(stream, {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_WEIGHTS, wei},
                          {DNNL_ARG_DST, dst},
                          {DNNL_ARG_SCRATCHPAD, sp}});
  stream.wait();
}

[[noreturn]] void Rethrow(const dnnl::error& e, const std::string& what) {
  throw Error(ErrorKind::kInternal, what + ": oneDNN error " + std::to_string(e.status) + " (" +
                                        e.what() + ")");
}

// C[m, n] = A[m, k] * B through the primitive cache (the row-count rule above); a oneDNN failure
// becomes Error(kInternal) naming `what` and the shape.
void Multiply(const uint16_t* a, size_t m, size_t k, const uint16_t* b, size_t n, bool b_transposed, float* c,
              const char* what) {
  try {
    const auto g = GetPrim(m >= kFixedMinRows ? m : kRuntimeRows, k, n, b_transposed);
    RunGemm(*g, m, a, b, c);
  } catch (const dnnl::error& e) {
    Rethrow(e, std::string(what) + " [" + std::to_string(m) + " x " + std::to_string(k) + "] * [" +
                   std::to_string(k) + " x " + std::to_string(n) + "]");
  }
}

}  // namespace

struct Linear::Impl {
  size_t in = 0, out = 0;
  std::vector<uint16_t> owned;       // [out, in] bf16 when converted at load
  const uint16_t* w = nullptr;       // [out, in] bf16: owned.data() or the mapped file
};

Linear::Linear() = default;
Linear::~Linear() = default;
Linear::Linear(Linear&&) noexcept = default;
Linear& Linear::operator=(Linear&&) noexcept = default;

size_t Linear::in() const { return impl_ ? impl_->in : 0; }
size_t Linear::out() const { return impl_ ? impl_->out : 0; }

Linear Linear::FromF32(const float* w, size_t out, size_t in) {
  if (out == 0 || in == 0) {
    throw Error(ErrorKind::kInvalidArgument, "linear: zero-sized weight [" + std::to_string(out) +
                                                 ", " + std::to_string(in) + "]");
  }
  Linear l;
  l.impl_ = std::make_unique<Impl>();
  l.impl_->in = in;
  l.impl_->out = out;
  l.impl_->owned.resize(out * in);
  F32ToBf16(w, l.impl_->owned.data(), out * in);
  l.impl_->w = l.impl_->owned.data();
  return l;
}

Linear Linear::FromTensor(const format::TensorInfo& t) {
  using format::TensorType;
  for (size_t i = 2; i < t.ne.size(); ++i) {
    if (t.ne[i] != 1) {
      throw Error(ErrorKind::kModel, "tensor '" + t.name + "' is not a matrix (dimension " +
                                         std::to_string(i) + " is " + std::to_string(t.ne[i]) +
                                         ")");
    }
  }
  if (t.ne.size() < 2 || t.ne[0] == 0 || t.ne[1] == 0 || t.data == nullptr) {
    throw Error(ErrorKind::kModel, "tensor '" + t.name + "' is not a non-empty 2-D matrix");
  }
  const size_t in = t.ne[0], out = t.ne[1];
  size_t row_bytes = 0;
  switch (t.type) {
    case TensorType::F32: row_bytes = in * 4; break;
    case TensorType::F16:
    case TensorType::BF16: row_bytes = in * 2; break;
    case TensorType::Q8_0: row_bytes = in / 32 * 34; break;
    case TensorType::Q4_0: row_bytes = in / 32 * 18; break;
    default:
      throw Error(ErrorKind::kUnsupported,
                  "tensor '" + t.name + "' has type " +
                      std::to_string(static_cast<uint32_t>(t.type)) +
                      "; matrix weights must be F32, F16, BF16, Q8_0 or Q4_0");
  }
  if ((t.type == TensorType::Q8_0 || t.type == TensorType::Q4_0) && in % 32 != 0) {
    throw Error(ErrorKind::kModel, "tensor '" + t.name + "': quantised row length " +
                                       std::to_string(in) + " is not a multiple of 32");
  }
  if (t.n_bytes != 0 && t.n_bytes < row_bytes * out) {
    throw Error(ErrorKind::kModel, "tensor '" + t.name + "' holds " + std::to_string(t.n_bytes) +
                                       " bytes, expected " + std::to_string(row_bytes * out));
  }

  Linear l;
  l.impl_ = std::make_unique<Impl>();
  l.impl_->in = in;
  l.impl_->out = out;
  if (t.type == TensorType::BF16) {  // zero-copy: oneDNN reads the mapped rows directly
    l.impl_->w = reinterpret_cast<const uint16_t*>(t.data);
    return l;
  }
  // Convert once at load, rows in parallel (an 8B model is ~7e9 elements to convert).
  auto& owned = l.impl_->owned;
  owned.resize(out * in);
  const long n_rows = static_cast<long>(out);
#pragma omp parallel
  {
    std::vector<float> row(in);
#pragma omp for schedule(static)
    for (long r = 0; r < n_rows; ++r) {
      DequantizeRow(t.type, t.data + static_cast<size_t>(r) * row_bytes, row.data(), in);
      F32ToBf16(row.data(), owned.data() + static_cast<size_t>(r) * in, in);
    }
  }
  l.impl_->w = owned.data();
  return l;
}

void Linear::Forward(const float* x, size_t n, float* y) const {
  if (!impl_) throw Error(ErrorKind::kInternal, "linear: Forward on an empty Linear");
  if (n == 0) return;
  // x as bf16 [n, in]. Per-thread and only ever grown: at most n_max * max(in) * 2 bytes.
  thread_local std::vector<uint16_t> xb;
  uint16_t* xs = GrowTo(xb, n * impl_->in);
  F32ToBf16(x, xs, n * impl_->in);
  Multiply(xs, n, impl_->in, impl_->w, impl_->out, /*b_transposed=*/true, y, "linear");
}

void GemmBf16(const uint16_t* a, size_t m, size_t k, const uint16_t* b, size_t n, bool b_transposed,
              float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) throw Error(ErrorKind::kInvalidArgument, "gemm: inner dimension is zero");
  Multiply(a, m, k, b, n, b_transposed, c, "gemm");
}

double MeasureGemmGflops(size_t m, size_t n, size_t k, int iters) {
  if (m == 0 || n == 0 || k == 0 || iters <= 0) {
    throw Error(ErrorKind::kInvalidArgument, "gemm yardstick: sizes and iters must be positive");
  }
  std::vector<float> af(m * k), bf(k * n);
  for (size_t i = 0; i < af.size(); ++i) af[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  for (size_t i = 0; i < bf.size(); ++i) bf[i] = static_cast<float>(i % 7) * 0.02f - 0.06f;
  std::vector<uint16_t> a(m * k), b(k * n);
  F32ToBf16(af.data(), a.data(), a.size());
  F32ToBf16(bf.data(), b.data(), b.size());
  std::vector<float> c(m * n);
  try {
    const auto g = GetPrim(m, k, n, /*b_transposed=*/false);
    RunGemm(*g, m, a.data(), b.data(), c.data());  // warm-up: JIT, page faults, thread pool
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) RunGemm(*g, m, a.data(), b.data(), c.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return 2.0 * static_cast<double>(m) * n * k * iters / s * 1e-9;
  } catch (const dnnl::error& e) {
    Rethrow(e, "gemm yardstick");
  }
}

}  // namespace bicache::kernels
