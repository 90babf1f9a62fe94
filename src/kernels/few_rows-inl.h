// The few-row kernels (few_rows.h) for one instruction set. Textually included by few_rows.cpp
// twice, each time inside its own namespace under `#pragma GCC target`: once with
// BICACHE_FEW_ROWS_VNNI 0 (AVX2) and once with 1 (AVX512-VNNI with AVX512VL: the same 256-bit
// code with vpdpbusd / vpdpwssd for the integer products). The including file provides Half(const
// uint8_t*), kIq4Values and QuantRows.
// NOLINT(build/header_guard)

constexpr bool kVnni = BICACHE_FEW_ROWS_VNNI != 0;

// One superblock of 256 weights of a 32-value block type (or IQ4_XS) of one row, unpacked: q[c]
// holds values 32c .. 32c + 31 as bytes (u in [0, 32) for unsigned types; the signed quants of
// Q8_0 / IQ4 before Prepare), a/b the scale and offset per block of 32.
struct Super {
  __m256i q[8];
  __m256i sign[8];  // AVX2, signed types: the quants whose signs the activations take
  alignas(32) float a[8];
  alignas(32) float b[8];
};

inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m256i Low4(__m256i v) {
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}
inline __m256i High4(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}
// Bits `shift` .. of every byte of v, masked with `mask` (shift < 8).
inline __m256i BitsAt(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(mask));
}
// 16 packed bytes -> 32 bytes: the low nibbles (values 0..15), then the high ones (16..31).
inline __m256i Nibbles32(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}
// The same through the IQ4 codebook (signed values).
inline __m256i Iq4Values32(const uint8_t* p) {
  const __m256i idx = Nibbles32(p);
  const __m256i table =
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values)));
  return _mm256_shuffle_epi8(table, idx);
}
// 32 bits of qh -> byte i = 0x10 where bit i is set (Q5_0 / Q5_1's fifth bit).
inline __m256i FifthBits(const uint8_t* p) {
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(qh)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// ---- decoders: one superblock of each 32-value block type (and IQ4_XS) ------------------

// 32-value block types: a superblock is 8 consecutive blocks of kBlock bytes.
template <size_t kBlock>
struct Blocks8 {
  static constexpr size_t kBytes = 8 * kBlock;
};

struct DecQ8_0 : Blocks8<34> {
  static constexpr bool kSigned = true;
  static void Decode(const uint8_t* b, Super* s) {
    for (int c = 0; c < 8; ++c, b += 34) {
      s->q[c] = Load32(b + 2);
      s->a[c] = Half(b);
      s->b[c] = 0.0f;
    }
  }
};

struct DecQ4_0 : Blocks8<18> {
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    for (int c = 0; c < 8; ++c, b += 18) {
      s->q[c] = Nibbles32(b + 2);
      s->a[c] = Half(b);
      s->b[c] = 8.0f * s->a[c];
    }
  }
};

struct DecQ4_1 : Blocks8<20> {
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    for (int c = 0; c < 8; ++c, b += 20) {
      s->q[c] = Nibbles32(b + 4);
      s->a[c] = Half(b);
      s->b[c] = -Half(b + 2);
    }
  }
};

struct DecQ5_0 : Blocks8<22> {
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    for (int c = 0; c < 8; ++c, b += 22) {
      s->q[c] = _mm256_or_si256(Nibbles32(b + 6), FifthBits(b + 2));
      s->a[c] = Half(b);
      s->b[c] = 16.0f * s->a[c];
    }
  }
};

struct DecQ5_1 : Blocks8<24> {
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    for (int c = 0; c < 8; ++c, b += 24) {
      s->q[c] = _mm256_or_si256(Nibbles32(b + 8), FifthBits(b + 4));
      s->a[c] = Half(b);
      s->b[c] = -Half(b + 2);
    }
  }
};

struct DecIq4Nl : Blocks8<18> {
  static constexpr bool kSigned = true;
  static void Decode(const uint8_t* b, Super* s) {
    for (int c = 0; c < 8; ++c, b += 18) {
      s->q[c] = Iq4Values32(b + 2);
      s->a[c] = Half(b);
      s->b[c] = 0.0f;
    }
  }
};

struct DecIq4Xs {
  static constexpr size_t kBytes = 136;
  static constexpr bool kSigned = true;
  static void Decode(const uint8_t* b, Super* s) {
    const float d = Half(b);
    uint16_t scales_h;
    std::memcpy(&scales_h, b + 2, 2);
    for (int ib = 0; ib < 8; ++ib) {
      s->q[ib] = Iq4Values32(b + 8 + 16 * ib);
      const int ls =
          ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
      s->a[ib] = d * static_cast<float>(ls - 32);
      s->b[ib] = 0.0f;
    }
  }
};

// ---- the product ---------------------------------------------------------------------------

// Signed quants: VNNI multiplies u8 by s8, so they become u = w + 128 and B gains 128 A; AVX2
// multiplies |w| by the activation with w's sign (vpmaddubsw's pair sums stay below 2^15).
template <bool kSigned>
inline void Prepare(Super* s) {
  if constexpr (kSigned) {
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      if constexpr (kVnni) {
        s->q[c] = _mm256_xor_si256(s->q[c], _mm256_set1_epi8(static_cast<char>(0x80)));
      } else {
        s->sign[c] = s->q[c];
        s->q[c] = _mm256_abs_epi8(s->q[c]);
      }
    }
    if constexpr (kVnni) {
      for (int c = 0; c < 8; ++c) s->b[c] += 128.0f * s->a[c];
    }
  }
}

// Eight int32 partial sums of u[0, 32) * x[0, 32) (4 consecutive products per lane).
template <bool kSigned>
inline __m256i Dot(const Super& s, int c, __m256i x) {
  if constexpr (kVnni) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), s.q[c], x);
  } else {
    if constexpr (kSigned) x = _mm256_sign_epi8(x, s.sign[c]);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(s.q[c], x), _mm256_set1_epi16(1));
  }
}

// d[c]: the partial sums of values 32c .. 32c + 31 -> the 8 sums of 32 values, in order (hadd
// pairs lanes within each 128-bit half).
inline __m256i Sums32(const __m256i* d) {
  __m256i h[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    const __m256i* e = d + 4 * i;
    h[i] = _mm256_hadd_epi32(_mm256_hadd_epi32(e[0], e[1]), _mm256_hadd_epi32(e[2], e[3]));
  }
  return _mm256_add_epi32(_mm256_permute2x128_si256(h[0], h[1], 0x20),
                          _mm256_permute2x128_si256(h[0], h[1], 0x31));
}

inline float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// One superblock (index sb) of a 32-value block type applied to every row (activations per 32):
// acc[r] (8 floats) += its share of y[r].
template <class T>
inline void ApplySuper(const Super& s, const QuantRows& x, size_t sb, float* acc) {
  const size_t k32 = x.k / 32;
  for (size_t r = 0; r < x.n; ++r) {
    const int8_t* xq = x.q + r * x.k + sb * 256;
    __m256i d[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c)
      d[c] = Dot<T::kSigned>(s, c, Load32(reinterpret_cast<const uint8_t*>(xq) + 32 * c));
    const float* dx = x.dx + r * k32 + sb * 8;
    const float* px = x.px + r * k32 + sb * 8;
    __m256 v = _mm256_load_ps(acc + 8 * r);
    const __m256 scale = _mm256_mul_ps(_mm256_load_ps(s.a), _mm256_loadu_ps(dx));
    v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Sums32(d)), scale, v);
    v = _mm256_fnmadd_ps(_mm256_load_ps(s.b), _mm256_loadu_ps(px), v);
    _mm256_store_ps(acc + 8 * r, v);
  }
}

// ---- K-quants: integer sub-block scales, activations per 256 -------------------------------

// One K-quant superblock of one row: q[c] the unsigned u of values 32c .. 32c + 31, sc[c] the
// int16 scale of each of vpmaddubsw's 16 pair sums of q[c], and w = d sc u - b per sub-block
// (b per 32 values for kMin == 32, else per 16; natural order).
struct SuperK {
  __m256i q[8];
  __m256i sc[8];
  alignas(32) float b[16];
  float d;
};

// sc[c] from the 8 int16 scales of sub-blocks of 32 (s: 8 words).
inline void Scales32(__m128i s, __m256i* sc) {
  const __m256i all = _mm256_broadcastsi128_si256(s);
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c)
    sc[c] = _mm256_shuffle_epi8(all, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * c)));
}
// sc[c] from the 16 int16 scales of sub-blocks of 16 (natural order): the pair sums of values
// 32c .. 32c + 15 take scale 2c, the rest 2c + 1.
inline void Scales16(__m256i s, __m256i* sc) {
  const __m256i half[2] = {_mm256_permute2x128_si256(s, s, 0x00),
                           _mm256_permute2x128_si256(s, s, 0x11)};
#pragma GCC unroll 8
  for (int c = 0; c < 8; ++c) {
    const int j = 2 * (c % 4);
    const __m256i idx =
        _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (j + 1))),
                         _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
    sc[c] = _mm256_shuffle_epi8(half[c / 4], idx);
  }
}

// Q4_K / Q5_K's 12 bytes of 6-bit scales and mins -> sc[c], b[j] = dmin m[j].
inline void ScalesMinsK4(const uint8_t* p, float dmin, SuperK* s) {
  uint32_t w[3];
  std::memcpy(w, p, 12);
  const uint32_t sc[2] = {w[0] & 0x3F3F3F3Fu, (w[2] & 0x0F0F0F0Fu) | ((w[0] >> 2) & 0x30303030u)};
  const uint32_t m[2] = {w[1] & 0x3F3F3F3Fu,
                         ((w[2] >> 4) & 0x0F0F0F0Fu) | ((w[1] >> 2) & 0x30303030u)};
  uint64_t sc8, m8;
  std::memcpy(&sc8, sc, 8);
  std::memcpy(&m8, m, 8);
  Scales32(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))), s->sc);
  const __m256 mf =
      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(m8))));
  _mm256_store_ps(s->b, _mm256_mul_ps(mf, _mm256_set1_ps(dmin)));
}

struct KQ4 {  // u in [0, 16), w = d sc u - dmin m; scales per 32
  static constexpr size_t kBytes = 144;
  static constexpr int kMin = 32;
  static void Decode(const uint8_t* b, SuperK* s) {
    for (int p = 0; p < 4; ++p) {
      const __m256i v = Load32(b + 16 + 32 * p);
      s->q[2 * p] = Low4(v);
      s->q[2 * p + 1] = High4(v);
    }
    s->d = Half(b);
    ScalesMinsK4(b + 4, Half(b + 2), s);
  }
};

struct KQ5 {  // u in [0, 32), w = d sc u - dmin m; scales per 32
  static constexpr size_t kBytes = 176;
  static constexpr int kMin = 32;
  static void Decode(const uint8_t* b, SuperK* s) {
    const __m256i qh = Load32(b + 16);
    for (int p = 0; p < 4; ++p) {
      const __m256i v = Load32(b + 48 + 32 * p);
      s->q[2 * p] = _mm256_or_si256(Low4(v), _mm256_slli_epi16(BitsAt(qh, 2 * p, 1), 4));
      s->q[2 * p + 1] = _mm256_or_si256(High4(v), _mm256_slli_epi16(BitsAt(qh, 2 * p + 1, 1), 4));
    }
    s->d = Half(b);
    ScalesMinsK4(b + 4, Half(b + 2), s);
  }
};

struct KQ6 {  // u = q + 32 in [0, 64), w = d sc (u - 32); scales per 16
  static constexpr size_t kBytes = 210;
  static constexpr int kMin = 16;
  static void Decode(const uint8_t* b, SuperK* s) {
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = Load32(b + 64 * h), hi = Load32(b + 64 * h + 32),
                    qh = Load32(b + 128 + 32 * h);
      s->q[4 * h] = _mm256_or_si256(Low4(lo), _mm256_slli_epi16(BitsAt(qh, 0, 3), 4));
      s->q[4 * h + 1] = _mm256_or_si256(Low4(hi), _mm256_slli_epi16(BitsAt(qh, 2, 3), 4));
      s->q[4 * h + 2] = _mm256_or_si256(High4(lo), _mm256_slli_epi16(BitsAt(qh, 4, 3), 4));
      s->q[4 * h + 3] = _mm256_or_si256(High4(hi), _mm256_slli_epi16(BitsAt(qh, 6, 3), 4));
    }
    s->d = Half(b + 208);
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192));
    Scales16(_mm256_cvtepi8_epi16(sc8), s->sc);
    const __m256 b32 = _mm256_set1_ps(32.0f * s->d);
    _mm256_store_ps(s->b, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)), b32));
    _mm256_store_ps(
        s->b + 8,
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8))), b32));
  }
};

struct KQ3 {  // u = q2 + 4 hbit in [0, 8), w = d sc (u - 4); scales per 16
  static constexpr size_t kBytes = 110;
  static constexpr int kMin = 16;
  static void Decode(const uint8_t* b, SuperK* s) {
    const __m256i hm = Load32(b);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + 32 + 32 * h);
      for (int k = 0; k < 4; ++k) {  // values 128 h + 32 k + l: bits 2k of q[l], bit 4h + k of hm
        const __m256i hb = _mm256_slli_epi16(BitsAt(hm, 4 * h + k, 1), 2);
        s->q[4 * h + k] = _mm256_or_si256(BitsAt(q, 2 * k, 3), hb);
      }
    }
    s->d = Half(b + 108);
    const uint8_t* sb = b + 96;
    alignas(32) int16_t sc[16];
    for (int j = 0; j < 16; ++j) {
      const int lo = j < 8 ? (sb[j] & 0x0F) : (sb[j - 8] >> 4);
      const int hi = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
      sc[j] = static_cast<int16_t>((lo | (hi << 4)) - 32);
      s->b[j] = 4.0f * s->d * static_cast<float>(sc[j]);
    }
    Scales16(_mm256_load_si256(reinterpret_cast<const __m256i*>(sc)), s->sc);
  }
};

struct KQ2 {  // u in [0, 4), w = d sc u - dmin m; scales and mins per 16
  static constexpr size_t kBytes = 84;
  static constexpr int kMin = 16;
  static void Decode(const uint8_t* b, SuperK* s) {
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + 16 + 32 * h);
      for (int k = 0; k < 4; ++k) s->q[4 * h + k] = BitsAt(q, 2 * k, 3);
    }
    s->d = Half(b + 80);
    const float dmin = Half(b + 82);
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F));
    Scales16(_mm256_cvtepu8_epi16(lo), s->sc);
    const __m256 mf = _mm256_set1_ps(dmin);
    _mm256_store_ps(s->b, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), mf));
    _mm256_store_ps(
        s->b + 8,
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), mf));
  }
};

// acc + sum over 4 consecutive values of sc u x per lane: vpmaddubsw (pair sums < 2^15: u < 64,
// |x| <= 127), then the scales' multiply-add (vpdpwssd on VNNI, vpmaddwd + vpaddd on AVX2).
inline __m256i DotScaled(__m256i u, __m256i x, __m256i sc, __m256i acc) {
  const __m256i p = _mm256_maddubs_epi16(u, x);
  if constexpr (kVnni) {
    return _mm256_dpwssd_epi32(acc, p, sc);
  } else {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, sc));
  }
}

// One K-quant superblock (index sb) applied to every row: the scaled dot products add up in
// int32 over the superblock (|sum| < 256 * 63 * 127 * 128 < 2^31), then acc[r] += d dx (that
// sum) - b px, lane by lane; lanes are summed once per output column.
template <class T>
inline void ApplySuper(const SuperK& s, const QuantRows& x, size_t sb, float* acc) {
  const size_t k256 = x.k / 256, k32 = x.k / 32, k16 = x.k / 16;
  for (size_t r = 0; r < x.n; ++r) {
    const auto* xq = reinterpret_cast<const uint8_t*>(x.q + r * x.k + sb * 256);
    __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 8; c += 2) {
      i0 = DotScaled(s.q[c], Load32(xq + 32 * c), s.sc[c], i0);
      i1 = DotScaled(s.q[c + 1], Load32(xq + 32 * c + 32), s.sc[c + 1], i1);
    }
    __m256 v = _mm256_load_ps(acc + 8 * r);
    const __m256 scale = _mm256_set1_ps(s.d * x.dx[r * k256 + sb]);
    v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0, i1)), scale, v);
    if constexpr (T::kMin == 32) {
      v = _mm256_fnmadd_ps(_mm256_load_ps(s.b), _mm256_loadu_ps(x.px + r * k32 + sb * 8), v);
    } else {
      const float* px = x.px16 + r * k16 + sb * 16;
      v = _mm256_fnmadd_ps(_mm256_load_ps(s.b), _mm256_loadu_ps(px), v);
      v = _mm256_fnmadd_ps(_mm256_load_ps(s.b + 8), _mm256_loadu_ps(px + 8), v);
    }
    _mm256_store_ps(acc + 8 * r, v);
  }
}

// Output columns [o0, o1) of y for every row of x. The weights stream from memory (rows are
// contiguous), but at a few rows each superblock keeps the core busy long enough for the hardware
// prefetcher to fall behind: the superblocks kPrefetch bytes ahead are requested in software
// (Q4_K at 8-16 rows: 1.2-1.4x faster).
constexpr size_t kPrefetch = 1024;

template <class T, class Unpacked>
void ProductRange(const uint8_t* w, size_t row_bytes, size_t o0, size_t o1, const QuantRows& x,
                  size_t out, float* y) {
  alignas(32) float acc[kFewRowsMax * 8];
  Unpacked s;
  const size_t n_super = x.k / 256;
  for (size_t o = o0; o < o1; ++o) {
    std::memset(acc, 0, x.n * 8 * sizeof(float));
    const uint8_t* row = w + o * row_bytes;
    for (size_t sb = 0; sb < n_super; ++sb) {
      const uint8_t* b = row + sb * T::kBytes;
      for (size_t off = 0; off < T::kBytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetch + off), _MM_HINT_T0);
      T::Decode(b, &s);
      if constexpr (std::is_same_v<Unpacked, Super>) Prepare<T::kSigned>(&s);
      ApplySuper<T>(s, x, sb, acc);
    }
    for (size_t r = 0; r < x.n; ++r) y[r * out + o] = HorizontalSum(_mm256_load_ps(acc + 8 * r));
  }
}

using RangeFn = void (*)(const uint8_t*, size_t, size_t, size_t, const QuantRows&, size_t, float*);

RangeFn RangeFor(format::TensorType type) {
  using TT = format::TensorType;
  switch (type) {
    case TT::Q4_0:
      return ProductRange<DecQ4_0, Super>;
    case TT::Q4_1:
      return ProductRange<DecQ4_1, Super>;
    case TT::Q5_0:
      return ProductRange<DecQ5_0, Super>;
    case TT::Q5_1:
      return ProductRange<DecQ5_1, Super>;
    case TT::Q8_0:
      return ProductRange<DecQ8_0, Super>;
    case TT::IQ4_NL:
      return ProductRange<DecIq4Nl, Super>;
    case TT::IQ4_XS:
      return ProductRange<DecIq4Xs, Super>;
    case TT::Q2_K:
      return ProductRange<KQ2, SuperK>;
    case TT::Q3_K:
      return ProductRange<KQ3, SuperK>;
    case TT::Q4_K:
      return ProductRange<KQ4, SuperK>;
    case TT::Q5_K:
      return ProductRange<KQ5, SuperK>;
    case TT::Q6_K:
      return ProductRange<KQ6, SuperK>;
    default:
      return nullptr;
  }
}
