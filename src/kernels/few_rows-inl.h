// The few-row kernels (few_rows.h) for one instruction set. Textually included by few_rows.cpp
// twice, each time inside its own namespace under `#pragma GCC target`: once with
// BICACHE_FEW_ROWS_VNNI 0 (AVX2) and once with 1 (AVX512-VNNI with AVX512VL: the same 256-bit
// code with vpdpbusd for the integer dot products). The including file provides Half(const
// uint8_t*), ScaleMinK4, kIq4Values, kLane16 and QuantRows.
// NOLINT(build/header_guard)

constexpr bool kVnni = BICACHE_FEW_ROWS_VNNI != 0;

// One superblock of 256 weights of one row, unpacked: q[c] holds values 32c .. 32c + 31 as bytes
// (u in [0, 64) for unsigned types; the signed quants of Q8_0 / IQ4 before Prepare), a/b the
// scale and offset per sub-block (natural order for sub-blocks of 32; kLane16's order for 16).
struct Super {
  __m256i q[8];
  __m256i sign[8];  // AVX2, signed types: the quants whose signs the activations take
  alignas(32) float a[16];
  alignas(32) float b[16];
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

// ---- decoders: one superblock of each type -------------------------------------------------

struct DecQ4_K {
  static constexpr size_t kBytes = 144;
  static constexpr int kSub = 32;
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    const float d = Half(b), dmin = Half(b + 2);
    for (int p = 0; p < 4; ++p) {
      const __m256i v = Load32(b + 16 + 32 * p);
      s->q[2 * p] = Low4(v);
      s->q[2 * p + 1] = High4(v);
    }
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      ScaleMinK4(j, b + 4, &sc, &m);
      s->a[j] = d * static_cast<float>(sc);
      s->b[j] = dmin * static_cast<float>(m);
    }
  }
};

struct DecQ5_K {
  static constexpr size_t kBytes = 176;
  static constexpr int kSub = 32;
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    const float d = Half(b), dmin = Half(b + 2);
    const __m256i qh = Load32(b + 16);
    for (int p = 0; p < 4; ++p) {
      const __m256i v = Load32(b + 48 + 32 * p);
      s->q[2 * p] = _mm256_or_si256(Low4(v), _mm256_slli_epi16(BitsAt(qh, 2 * p, 1), 4));
      s->q[2 * p + 1] = _mm256_or_si256(High4(v), _mm256_slli_epi16(BitsAt(qh, 2 * p + 1, 1), 4));
    }
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      ScaleMinK4(j, b + 4, &sc, &m);
      s->a[j] = d * static_cast<float>(sc);
      s->b[j] = dmin * static_cast<float>(m);
    }
  }
};

struct DecQ6_K {  // u = q + 32 in [0, 64), w = d sc (u - 32): B = 32 A; scales per 16
  static constexpr size_t kBytes = 210;
  static constexpr int kSub = 16;
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    const float d = Half(b + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = Load32(b + 64 * h), hi = Load32(b + 64 * h + 32),
                    qh = Load32(b + 128 + 32 * h);
      s->q[4 * h] = _mm256_or_si256(Low4(lo), _mm256_slli_epi16(BitsAt(qh, 0, 3), 4));
      s->q[4 * h + 1] = _mm256_or_si256(Low4(hi), _mm256_slli_epi16(BitsAt(qh, 2, 3), 4));
      s->q[4 * h + 2] = _mm256_or_si256(High4(lo), _mm256_slli_epi16(BitsAt(qh, 4, 3), 4));
      s->q[4 * h + 3] = _mm256_or_si256(High4(hi), _mm256_slli_epi16(BitsAt(qh, 6, 3), 4));
    }
    for (int l = 0; l < 16; ++l) {
      s->a[l] = d * static_cast<float>(sc[kLane16[l]]);
      s->b[l] = 32.0f * s->a[l];
    }
  }
};

struct DecQ3_K {  // u = q2 + 4 hbit in [0, 8), w = d s (u - 4); scales per 16
  static constexpr size_t kBytes = 110;
  static constexpr int kSub = 16;
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    const __m256i hm = Load32(b);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + 32 + 32 * h);
      for (int k = 0; k < 4; ++k) {  // values 128 h + 32 k + l: bits 2k of q[l], bit 4h + k of hm
        const __m256i hb = _mm256_slli_epi16(BitsAt(hm, 4 * h + k, 1), 2);
        s->q[4 * h + k] = _mm256_or_si256(BitsAt(q, 2 * k, 3), hb);
      }
    }
    const float d = Half(b + 108);
    const uint8_t* sb = b + 96;
    for (int l = 0; l < 16; ++l) {
      const int j = kLane16[l];
      const int lo = j < 8 ? (sb[j] & 0x0F) : (sb[j - 8] >> 4);
      const int hi = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
      s->a[l] = d * static_cast<float>((lo | (hi << 4)) - 32);
      s->b[l] = 4.0f * s->a[l];
    }
  }
};

struct DecQ2_K {  // u in [0, 4), w = d sc u - dmin m; scales and mins per 16
  static constexpr size_t kBytes = 84;
  static constexpr int kSub = 16;
  static constexpr bool kSigned = false;
  static void Decode(const uint8_t* b, Super* s) {
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + 16 + 32 * h);
      for (int k = 0; k < 4; ++k) s->q[4 * h + k] = BitsAt(q, 2 * k, 3);
    }
    const float d = Half(b + 80), dmin = Half(b + 82);
    for (int l = 0; l < 16; ++l) {
      const int sc = b[kLane16[l]];
      s->a[l] = d * static_cast<float>(sc & 0x0F);
      s->b[l] = dmin * static_cast<float>(sc >> 4);
    }
  }
};

// 32-value block types: a superblock is 8 consecutive blocks of kBlock bytes.
template <size_t kBlock>
struct Blocks8 {
  static constexpr size_t kBytes = 8 * kBlock;
  static constexpr int kSub = 32;
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
  static constexpr int kSub = 32;
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

// d[c]: the partial sums of values 32c .. 32c + 31. h[0], h[1]: the 16 sums of 16 values, in
// kLane16's order (hadd pairs lanes within each 128-bit half).
inline void Sums16(const __m256i* d, __m256i* h) {
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    const __m256i* e = d + 4 * i;
    h[i] = _mm256_hadd_epi32(_mm256_hadd_epi32(e[0], e[1]), _mm256_hadd_epi32(e[2], e[3]));
  }
}
// The 8 sums of 32 values, in order.
inline __m256i Sums32(const __m256i* d) {
  __m256i h[2];
  Sums16(d, h);
  return _mm256_add_epi32(_mm256_permute2x128_si256(h[0], h[1], 0x20),
                          _mm256_permute2x128_si256(h[0], h[1], 0x31));
}

inline float HorizontalSum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// One superblock (index sb) applied to every row: acc[r] (8 floats) += its share of y[r].
template <class T>
inline void ApplySuper(const Super& s, const QuantRows& x, size_t sb, float* acc) {
  const size_t k32 = x.k / 32, k16 = x.k / 16;
  for (size_t r = 0; r < x.n; ++r) {
    const int8_t* xq = x.q + r * x.k + sb * 256;
    __m256i d[8];
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c)
      d[c] = Dot<T::kSigned>(s, c, Load32(reinterpret_cast<const uint8_t*>(xq) + 32 * c));
    __m256 v = _mm256_load_ps(acc + 8 * r);
    if constexpr (T::kSub == 32) {
      const float* dx = x.dx + r * k32 + sb * 8;
      const float* px = x.px + r * k32 + sb * 8;
      const __m256 scale = _mm256_mul_ps(_mm256_load_ps(s.a), _mm256_loadu_ps(dx));
      v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(Sums32(d)), scale, v);
      v = _mm256_fnmadd_ps(_mm256_load_ps(s.b), _mm256_loadu_ps(px), v);
    } else {
      const float* dx = x.dx16 + r * k16 + sb * 16;
      const float* px = x.px16 + r * k16 + sb * 16;
      __m256i h[2];
      Sums16(d, h);
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        const __m256 scale =
            _mm256_mul_ps(_mm256_load_ps(s.a + 8 * i), _mm256_loadu_ps(dx + 8 * i));
        v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h[i]), scale, v);
        v = _mm256_fnmadd_ps(_mm256_load_ps(s.b + 8 * i), _mm256_loadu_ps(px + 8 * i), v);
      }
    }
    _mm256_store_ps(acc + 8 * r, v);
  }
}

// Output columns [o0, o1) of y for every row of x.
template <class T>
void ProductRange(const uint8_t* w, size_t row_bytes, size_t o0, size_t o1, const QuantRows& x,
                  size_t out, float* y) {
  alignas(32) float acc[kFewRowsMax * 8];
  Super s;
  const size_t n_super = x.k / 256;
  for (size_t o = o0; o < o1; ++o) {
    std::memset(acc, 0, x.n * 8 * sizeof(float));
    const uint8_t* row = w + o * row_bytes;
    for (size_t sb = 0; sb < n_super; ++sb) {
      T::Decode(row + sb * T::kBytes, &s);
      Prepare<T::kSigned>(&s);
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
      return ProductRange<DecQ4_0>;
    case TT::Q4_1:
      return ProductRange<DecQ4_1>;
    case TT::Q5_0:
      return ProductRange<DecQ5_0>;
    case TT::Q5_1:
      return ProductRange<DecQ5_1>;
    case TT::Q8_0:
      return ProductRange<DecQ8_0>;
    case TT::Q2_K:
      return ProductRange<DecQ2_K>;
    case TT::Q3_K:
      return ProductRange<DecQ3_K>;
    case TT::Q4_K:
      return ProductRange<DecQ4_K>;
    case TT::Q5_K:
      return ProductRange<DecQ5_K>;
    case TT::Q6_K:
      return ProductRange<DecQ6_K>;
    case TT::IQ4_NL:
      return ProductRange<DecIq4Nl>;
    case TT::IQ4_XS:
      return ProductRange<DecIq4Xs>;
    default:
      return nullptr;
  }
}
