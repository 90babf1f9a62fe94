// Rotary position embedding (ops.h Rope).
//
// cos/sin come from a per-thread table indexed [pos][i], filled with ref::RopeCosSin (double
// precision, then float), so a call costs one multiply-add pair per element instead of a
// pow+sin+cos per pair: at 512 tokens x 64 pairs that is ~30k transcendental calls saved per
// layer and per Q/K. The table is rebuilt when freq_base or head_dim changes and grown to the
// largest position seen; positions outside [0, kMaxTablePos) are computed directly.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/reference.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

constexpr int64_t kMaxTablePos = 1 << 18;  // 2^18 positions x 64 pairs x 8 B = 128 MiB cap

struct RopeTable {
  float base = 0;
  size_t head_dim = 0;
  size_t n_pos = 0;
  std::vector<float> cos, sin;  // [n_pos, head_dim/2]

  void Ensure(float freq_base, size_t hd, int64_t max_pos) {
    if (freq_base != base || hd != head_dim) {
      base = freq_base;
      head_dim = hd;
      n_pos = 0;
      cos.clear();
      sin.clear();
    }
    if (max_pos < static_cast<int64_t>(n_pos)) return;
    const size_t half = hd / 2;
    const size_t want = std::max<size_t>(static_cast<size_t>(max_pos) + 1,
                                         std::min<size_t>(2 * n_pos, kMaxTablePos));
    cos.resize(want * half);
    sin.resize(want * half);
    for (size_t p = n_pos; p < want; ++p) {
      for (size_t i = 0; i < half; ++i) {
        ref::RopeCosSin(static_cast<int64_t>(p), i, hd, base, &cos[p * half + i],
                        &sin[p * half + i]);
      }
    }
    n_pos = want;
  }
};

// Rotates one head vector v[head_dim] with per-pair cos/sin c[half], s[half].
void RotateHead(float* v, const float* c, const float* s, size_t half, RopeLayout layout) {
  if (layout == RopeLayout::kNeox) {
    float* x0 = v;
    float* x1 = v + half;
    for (size_t i = 0; i < half; ++i) {  // contiguous halves: the compiler vectorises this
      const float a = x0[i], b = x1[i];
      x0[i] = a * c[i] - b * s[i];
      x1[i] = a * s[i] + b * c[i];
    }
  } else {
    for (size_t i = 0; i < half; ++i) {
      const float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * c[i] - b * s[i];
      v[2 * i + 1] = a * s[i] + b * c[i];
    }
  }
}

}  // namespace

void Rope(float* x, size_t n_tok, size_t row_stride, size_t n_head, size_t head_dim,
          const int32_t* pos, float freq_base, RopeLayout layout) {
  if (head_dim == 0 || head_dim % 2 != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "rope: head_dim must be even and positive, got " + std::to_string(head_dim));
  }
  if (n_tok > 1 && row_stride < n_head * head_dim) {
    throw Error(ErrorKind::kInvalidArgument, "rope: row stride " + std::to_string(row_stride) +
                                                 " is smaller than n_head*head_dim");
  }
  if (n_tok == 0) return;
  thread_local RopeTable table;
  int64_t max_pos = -1;
  for (size_t t = 0; t < n_tok; ++t) {
    if (pos[t] >= 0 && pos[t] < kMaxTablePos) max_pos = std::max<int64_t>(max_pos, pos[t]);
  }
  if (max_pos >= 0) table.Ensure(freq_base, head_dim, max_pos);
  const size_t half = head_dim / 2;
  std::vector<float> direct_c, direct_s;  // only for positions outside the table
  for (size_t t = 0; t < n_tok; ++t) {
    const float* c;
    const float* s;
    if (pos[t] >= 0 && pos[t] < kMaxTablePos) {
      c = &table.cos[static_cast<size_t>(pos[t]) * half];
      s = &table.sin[static_cast<size_t>(pos[t]) * half];
    } else {
      direct_c.resize(half);
      direct_s.resize(half);
      for (size_t i = 0; i < half; ++i) {
        ref::RopeCosSin(pos[t], i, head_dim, freq_base, &direct_c[i], &direct_s[i]);
      }
      c = direct_c.data();
      s = direct_s.data();
    }
    for (size_t h = 0; h < n_head; ++h)
      RotateHead(x + t * row_stride + h * head_dim, c, s, half, layout);
  }
}

}  // namespace bicache::kernels
