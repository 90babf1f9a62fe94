// Linear and the GEMM yardstick through oneDNN 2.x (bf16 x bf16 -> f32 matmul, or f32 x f32 -> f32
// where this CPU has no bf16 kernel; see ActiveMatmulPrecision below).
//
// BF16 weights stay in their [out, in] row-major layout and are described to oneDNN as the
// B operand [in, out] with strides {1, in} ("ba"): W is never reordered or copied by us.
// Block-quantized weights stay in the file's blocks; each product dequantizes them one panel of
// rows at a time (PanelForward below), so nothing the size of the model is ever allocated.
// Primitive choice (measured on a loaded 2-core Zen 4 with AVX-512-bf16, in = 1024):
//  - n >= kFixedMinRows: a primitive compiled for the exact n (oneDNN picks brgemm; at n = 512,
//    1 thread: 4.6 ms vs 5.6 ms for the run-time-M gemm), cached process-wide by (n, in, out);
//  - n < kFixedMinRows: one primitive per (in, out) with a run-time row count (oneDNN's jit
//    gemm). At n = 1 it was 6x faster than the fixed-n brgemm (0.03 vs 0.18 ms), and with 2
//    threads on a busy machine the fixed-n kernels were 5-10x slower for n = 1..32; the single
//    entry also keeps the cache from filling with one primitive per small batch size.
// Scratchpads are user-managed (per thread) so one primitive can run on several threads at once.
//
// The f32 path (CPUs without AVX-512, e.g. an AVX2-only Zen 3, where oneDNN 2.6 has no bf16 matmul
// at all: "could not create a primitive descriptor iterator") keeps the bf16 path's numbers: the
// weights are the same bf16 values widened to f32 (F32/F16 files once at load; BF16 and quantized
// files per panel, so the file is not doubled in memory), and every activation is rounded to bf16
// before it is widened, so the products are exact in f32 and only the summation order can differ
// from the bf16 kernels'.
#include "kernels/matmul.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/few_rows.h"
#include "kernels/int8_gemm.h"
#include "kernels/kquant_tile.h"
#include "kernels/linear_route.h"
#include "kernels/ops.h"
#include "util/error.h"
#include "util/grow.h"

namespace bicache::kernels {
namespace {

using dnnl::memory;
using Dims = memory::dims;
using DataType = memory::data_type;

dnnl::engine& CpuEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& ThreadStream() {
  thread_local dnnl::stream stream(CpuEngine());
  return stream;
}

DataType OperandType(MatmulPrecision p) {
  return p == MatmulPrecision::kBf16 ? DataType::bf16 : DataType::f32;
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
// A and B are `dt` (bf16 or f32); C is always f32.
std::shared_ptr<const GemmPrim> GetPrim(size_t m, size_t k, size_t n, bool b_transposed,
                                        DataType dt) {
  static std::mutex mu;
  static std::map<std::tuple<size_t, size_t, size_t, bool, DataType>,
                  std::shared_ptr<const GemmPrim>>
      cache;
  const auto key = std::make_tuple(m, k, n, b_transposed, dt);
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= kMaxCachedPrims) cache.clear();  // holders keep theirs alive

  const auto M = m == kRuntimeRows ? DNNL_RUNTIME_DIM_VAL : static_cast<memory::dim>(m);
  const auto K = static_cast<memory::dim>(k), N = static_cast<memory::dim>(n);
  auto p = std::make_shared<GemmPrim>();
  p->src = memory::desc({M, K}, dt, Dims{K, 1});
  p->wei = b_transposed ? memory::desc({K, N}, dt, Dims{1, K})
                        : memory::desc({K, N}, dt, memory::format_tag::ab);
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

// Runs a cached primitive on raw pointers (a: [m, k] and b: weights, both of the primitive's
// operand type; c: [m, n] f32); the thread's scratchpad grows as needed.
void RunGemm(const GemmPrim& g, size_t m, const void* a, const void* b, float* c) {
  thread_local std::vector<uint8_t> scratchpad;
  const size_t sp_bytes = g.scratch.get_size();
  GrowTo(scratchpad, sp_bytes);
  auto& eng = CpuEngine();
  const auto M = static_cast<memory::dim>(m);
  const auto K = g.src.dims()[1], N = g.dst.dims()[1];
  memory src({{M, K}, g.src.data_type(), Dims{K, 1}}, eng, const_cast<void*>(a));
  memory wei(g.wei, eng, const_cast<void*>(b));
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
  throw Error(ErrorKind::kInternal,
              what + ": oneDNN error " + std::to_string(e.status) + " (" + e.what() + ")");
}

// C[m, n] = A[m, k] * B through the primitive cache (the row-count rule above); a oneDNN failure
// becomes Error(kInternal) naming `what` and the shape.
// A and B are `dt` values.
void Multiply(const void* a, size_t m, size_t k, const void* b, size_t n, bool b_transposed,
              float* c, DataType dt, const char* what) {
  try {
    const auto g = GetPrim(m >= kFixedMinRows ? m : kRuntimeRows, k, n, b_transposed, dt);
    RunGemm(*g, m, a, b, c);
  } catch (const dnnl::error& e) {
    Rethrow(e, std::string(what) + " [" + std::to_string(m) + " x " + std::to_string(k) + "] * [" +
                   std::to_string(k) + " x " + std::to_string(n) + "]");
  }
}

// Widens n bf16 values to f32 into `buf` (grown as needed; callers pass thread-local ones) and
// returns it.
const float* Widened(std::vector<float>& buf, const uint16_t* src, size_t n) {
  float* dst = GrowTo(buf, n);
  Bf16ToF32(src, dst, n);
  return dst;
}

// True when oneDNN can build a bf16 matmul for this CPU with a kernel other than its reference
// one (which runs at a few GFLOP/s). A bf16 primitive for a small shape is the probe.
bool ProbeBf16() {
  try {
    const memory::desc a({64, 64}, DataType::bf16, memory::format_tag::ab);
    const memory::desc b({64, 64}, DataType::bf16, Dims{1, 64});
    const memory::desc c({64, 64}, DataType::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), CpuEngine());
    return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
  } catch (const dnnl::error&) {
    return false;
  }
}

MatmulPrecision DecidePrecision() {
  const char* env = std::getenv("BICACHE_MATMUL");
  const auto forced = ParseMatmulPrecision(env == nullptr ? "" : env);
  const bool bf16 = Bf16MatmulAvailable();
  if (!forced) return bf16 ? MatmulPrecision::kBf16 : MatmulPrecision::kF32;
  if (*forced == MatmulPrecision::kBf16 && !bf16) {
    throw Error(
        ErrorKind::kUnsupported,
        "BICACHE_MATMUL=bf16: oneDNN has no bf16 matmul kernel for this CPU (it needs AVX-512); "
        "use BICACHE_MATMUL=f32 or auto");
  }
  return *forced;
}

}  // namespace

std::optional<MatmulPrecision> ParseMatmulPrecision(std::string_view value) {
  if (value.empty() || value == "auto") return std::nullopt;
  if (value == "bf16") return MatmulPrecision::kBf16;
  if (value == "f32") return MatmulPrecision::kF32;
  throw Error(ErrorKind::kInvalidArgument,
              "BICACHE_MATMUL must be auto, bf16 or f32, got '" + std::string(value) + "'");
}

bool Bf16MatmulAvailable() {
  static const bool available = ProbeBf16();
  return available;
}

MatmulPrecision ActiveMatmulPrecision() {
  static const MatmulPrecision p = DecidePrecision();  // a throw leaves it undecided: retried
  return p;
}

const char* MatmulPrecisionName(MatmulPrecision p) {
  return p == MatmulPrecision::kBf16 ? "bf16" : "f32";
}

struct Linear::Impl {
  size_t in = 0, out = 0;
  MatmulPrecision precision = MatmulPrecision::kBf16;
  format::TensorType type =
      format::TensorType::BF16;  // what products read: BF16 or the file's type
  std::vector<uint16_t> owned;   // [out, in] bf16 when converted at load (bf16 precision)
  const uint16_t* w = nullptr;   // [out, in] bf16: owned.data() or the mapped file (bf16 precision)
  std::vector<float> w32;        // [out, in] the same bf16 values widened (f32 precision)
  const uint8_t* panel_src = nullptr;  // [out] rows of row_bytes, mapped: read panel by panel
  size_t row_bytes = 0;
};

namespace {

// Rows of W per panel: about kPanelBytes of bf16, a multiple of 16 rows, at least 16 and at most
// 512. Measured at LLaDA-8B width (Zen 4, 2 threads, 256 rows): 256 KiB panels 1.31x the
// zero-copy BF16 time, 512 KiB 1.14x, 1-4 MiB 1.08x (with a dense C block, see PanelForward).
constexpr size_t kPanelBytes = 2 << 20;

size_t PanelRows(size_t in) {
  const size_t rows = kPanelBytes / (2 * in) / 16 * 16;
  return std::clamp<size_t>(rows, 16, 512);
}

// y[n, out] = x[n, in] * W^T with W read panel by panel from its stored rows: each thread takes
// whole panels, dequantizes them into its own buffer and runs a single-threaded oneDNN product
// for its columns of y (oneDNN runs sequentially inside an OpenMP region). The other arrangement
// (each panel dequantized by both threads, then one two-thread product) was 1.2-1.3x slower at 8B
// width. `xs` is x already rounded to bf16, `xf` the same values widened (f32 precision only).
void PanelForward(const Linear::Impl& w, const uint16_t* xs, const float* xf, size_t n, float* y);

}  // namespace

Linear::Linear() = default;
Linear::~Linear() = default;
Linear::Linear(Linear&&) noexcept = default;
Linear& Linear::operator=(Linear&&) noexcept = default;

size_t Linear::in() const {
  return impl_ ? impl_->in : 0;
}
size_t Linear::out() const {
  return impl_ ? impl_->out : 0;
}
format::TensorType Linear::storage_type() const {
  return impl_ ? impl_->type : format::TensorType::BF16;
}
size_t Linear::owned_bytes() const {
  return impl_ ? impl_->owned.size() * sizeof(uint16_t) + impl_->w32.size() * sizeof(float) : 0;
}

namespace {

void PanelForward(const Linear::Impl& w, const uint16_t* xs, const float* xf, size_t n, float* y) {
  const size_t panel = PanelRows(w.in);
  const long n_panels = static_cast<long>((w.out + panel - 1) / panel);
  const bool f32 = w.precision == MatmulPrecision::kF32;
  // A failure inside the parallel loop is kept and rethrown after it (exceptions must not leave
  // an OpenMP region).
  std::string error;
#pragma omp parallel
  {
    thread_local std::vector<uint16_t> wb;  // [panel, in] bf16
    thread_local std::vector<float> wf;     // [panel, in] the same widened (f32 precision)
    thread_local std::vector<float> cb;     // [n, panel] this panel's columns of y
    uint16_t* wp = GrowTo(wb, panel * w.in);
    float* wpf = f32 ? GrowTo(wf, panel * w.in) : nullptr;
#pragma omp for schedule(dynamic, 1)
    for (long p = 0; p < n_panels; ++p) {
      const size_t r0 = static_cast<size_t>(p) * panel, rows = std::min(panel, w.out - r0);
      try {
        for (size_t r = 0; r < rows; ++r) {
          DequantizeRowBf16(w.type, w.panel_src + (r0 + r) * w.row_bytes, wp + r * w.in, w.in);
        }
        // Into a dense [n, rows] block, then copied into y's columns: oneDNN's product with C
        // written at y's row stride ran ~25% slower (8B width, 256 rows, bf16 and Q4_K_M alike).
        float* c = GrowTo(cb, n * rows);
        if (f32) {
          Bf16ToF32(wp, wpf, rows * w.in);
          Multiply(xf, n, w.in, wpf, rows, /*b_transposed=*/true, c, DataType::f32, "linear panel");
        } else {
          Multiply(xs, n, w.in, wp, rows, /*b_transposed=*/true, c, DataType::bf16, "linear panel");
        }
        for (size_t i = 0; i < n; ++i)
          std::memcpy(y + i * w.out + r0, c + i * rows, rows * sizeof(float));
      } catch (const std::exception& e) {
#pragma omp critical(bicache_panel_error)
        if (error.empty()) error = e.what();
      }
    }
  }
  if (!error.empty()) throw Error(ErrorKind::kInternal, error);
}

}  // namespace

Linear Linear::FromF32(const float* w, size_t out, size_t in) {
  if (out == 0 || in == 0) {
    throw Error(ErrorKind::kInvalidArgument, "linear: zero-sized weight [" + std::to_string(out) +
                                                 ", " + std::to_string(in) + "]");
  }
  // An F32 tensor [out, in] takes FromTensor's conversion (to bf16, or the widened bf16 values).
  format::TensorInfo t;
  t.name = "linear";
  t.ne = {in, out};
  t.type = format::TensorType::F32;
  t.n_elements = out * in;
  t.n_bytes = out * in * sizeof(float);
  t.data = reinterpret_cast<const uint8_t*>(w);
  return FromTensor(t);
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
  uint64_t block_elems = 0, block_bytes = 0;
  if (!IsComputeType(t.type) || !format::TensorTypeLayout(t.type, &block_elems, &block_bytes)) {
    throw Error(ErrorKind::kUnsupported,
                "tensor '" + t.name + "' has type " + format::TensorTypeName(t.type) +
                    "; matrix weights must be one of " + ComputeTypeList());
  }
  if (in % block_elems != 0) {
    throw Error(ErrorKind::kModel, "tensor '" + t.name + "': row length " + std::to_string(in) +
                                       " is not a multiple of " + format::TensorTypeName(t.type) +
                                       "'s block of " + std::to_string(block_elems));
  }
  const size_t row_bytes = in / block_elems * block_bytes;
  if (t.n_bytes != 0 && t.n_bytes < row_bytes * out) {
    throw Error(ErrorKind::kModel, "tensor '" + t.name + "' holds " + std::to_string(t.n_bytes) +
                                       " bytes, expected " + std::to_string(row_bytes * out));
  }

  Linear l;
  l.impl_ = std::make_unique<Impl>();
  l.impl_->in = in;
  l.impl_->out = out;
  l.impl_->precision = ActiveMatmulPrecision();
  const bool f32 = l.impl_->precision == MatmulPrecision::kF32;
  if (t.type == TensorType::BF16 && !f32) {  // zero-copy: oneDNN reads the mapped rows directly
    l.impl_->w = reinterpret_cast<const uint16_t*>(t.data);
    return l;
  }
  if (IsBlockQuantized(t.type) || t.type == TensorType::BF16) {  // read panel by panel, in place
    l.impl_->type = t.type;
    l.impl_->panel_src = t.data;
    l.impl_->row_bytes = row_bytes;
    return l;
  }
  // Convert once at load, rows in parallel (an 8B model is ~7e9 elements to convert): to bf16,
  // and for the f32 path on to the widened bf16 values.
  auto& owned = l.impl_->owned;
  auto& w32 = l.impl_->w32;
  if (f32) {
    w32.resize(out * in);
  } else {
    owned.resize(out * in);
  }
  const long n_rows = static_cast<long>(out);
#pragma omp parallel
  {
    std::vector<float> row(in);
    std::vector<uint16_t> row_bf16(f32 ? in : 0);
#pragma omp for schedule(static)
    for (long r = 0; r < n_rows; ++r) {
      const size_t off = static_cast<size_t>(r) * in;
      DequantizeRow(t.type, t.data + static_cast<size_t>(r) * row_bytes, row.data(), in);
      if (f32) {
        F32ToBf16(row.data(), row_bf16.data(), in);
        Bf16ToF32(row_bf16.data(), w32.data() + off, in);
      } else {
        F32ToBf16(row.data(), owned.data() + off, in);
      }
    }
  }
  if (!f32) l.impl_->w = owned.data();
  return l;
}

void Linear::Forward(const float* x, size_t n, float* y) const {
  if (!impl_) throw Error(ErrorKind::kInternal, "linear: Forward on an empty Linear");
  if (n == 0) return;
  const LinearRoute route = ChooseLinearRoute(impl_->type, impl_->panel_src != nullptr, n,
                                              impl_->in, impl_->precision, ActiveIntIsa());
  if (route == LinearRoute::kFewRows && impl_->type != format::TensorType::BF16) {
    FewRowsForward(ActiveIntIsa(), impl_->type, x, n, impl_->in, impl_->panel_src, impl_->row_bytes,
                   impl_->out, y);
    return;
  }
  if (route == LinearRoute::kKQuantTile) {
    KQuantTileForward(ActiveIntIsa(), impl_->type, x, n, impl_->in, impl_->panel_src,
                      impl_->row_bytes, impl_->out, y);
    return;
  }
  if (route == LinearRoute::kInt8Tile) {
    Int8ForwardQ8_0(x, n, impl_->in, impl_->panel_src, impl_->row_bytes, impl_->out, y);
    return;
  }
  // x as bf16 [n, in] (and for the f32 path widened again: [n, in] f32). Per-thread and only
  // ever grown: at most n_max * max(in) * 2 (+ 4) bytes.
  thread_local std::vector<uint16_t> xb;
  uint16_t* xs = GrowTo(xb, n * impl_->in);
  F32ToBf16(x, xs, n * impl_->in);
  if (route == LinearRoute::kFewRows) {  // BF16 weights: the bf16 kernel, or AVX2 on widened x
    const IntIsa isa = FewRowsBf16Available(ActiveIntIsa()) ? ActiveIntIsa() : IntIsa::kAvx2;
    const uint16_t* w =
        impl_->w != nullptr ? impl_->w : reinterpret_cast<const uint16_t*>(impl_->panel_src);
    thread_local std::vector<float> xf;
    const float* xw = isa == IntIsa::kAvx2 ? Widened(xf, xs, n * impl_->in) : nullptr;
    FewRowsBf16Forward(isa, xs, xw, n, impl_->in, w, impl_->out, y);
    return;
  }
  if (impl_->precision == MatmulPrecision::kF32) {
    thread_local std::vector<float> xf;
    const float* xw = Widened(xf, xs, n * impl_->in);
    if (route == LinearRoute::kPanels) {
      PanelForward(*impl_, xs, xw, n, y);
      return;
    }
    Multiply(xw, n, impl_->in, impl_->w32.data(), impl_->out, /*b_transposed=*/true, y,
             DataType::f32, "linear");
    return;
  }
  if (route == LinearRoute::kPanels) {
    PanelForward(*impl_, xs, nullptr, n, y);
    return;
  }
  Multiply(xs, n, impl_->in, impl_->w, impl_->out, /*b_transposed=*/true, y, DataType::bf16,
           "linear");
}

void GemmBf16(const uint16_t* a, size_t m, size_t k, const uint16_t* b, size_t n, bool b_transposed,
              float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) throw Error(ErrorKind::kInvalidArgument, "gemm: inner dimension is zero");
  if (ActiveMatmulPrecision() == MatmulPrecision::kF32) {
    thread_local std::vector<float> af, bf;  // [m, k], B's k * n values in its own layout
    Multiply(Widened(af, a, m * k), m, k, Widened(bf, b, k * n), n, b_transposed, c, DataType::f32,
             "gemm");
    return;
  }
  Multiply(a, m, k, b, n, b_transposed, c, DataType::bf16, "gemm");
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
  const DataType dt = OperandType(ActiveMatmulPrecision());
  const void* ap = dt == DataType::bf16 ? static_cast<const void*>(a.data()) : af.data();
  const void* bp = dt == DataType::bf16 ? static_cast<const void*>(b.data()) : bf.data();
  std::vector<float> c(m * n);
  try {
    const auto g = GetPrim(m, k, n, /*b_transposed=*/false, dt);
    RunGemm(*g, m, ap, bp, c.data());  // warm-up: JIT, page faults, thread pool
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) RunGemm(*g, m, ap, bp, c.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return 2.0 * static_cast<double>(m) * n * k * iters / s * 1e-9;
  } catch (const dnnl::error& e) {
    Rethrow(e, "gemm yardstick");
  }
}

}  // namespace bicache::kernels
