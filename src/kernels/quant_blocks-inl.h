// ggml block decoders, one function per quantization type: `b` points at one block, `y` receives
// its elements as float32. Formulas and their float operation order follow ggml's
// dequantize_row_* (so results are bit-identical to it wherever the compiler does not fuse a
// multiply-add), with the block layouts written beside each function.
//
// Textually included twice: by reference.cpp (the scalar twin, compiled for the baseline ISA) and
// by dequant_hwy.cpp once per Highway target (where the compiler may vectorise the loops). No
// include guard on purpose; the including file provides QuantF16ToF32(uint16_t) in the enclosing
// namespace.
// NOLINT(build/header_guard)

inline float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return QuantF16ToF32(h);
}

// The 4-bit codebook of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl).
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// Q4_K / Q5_K: scale and min of sub-block j (0..7) from the 12 packed bytes (6 bits each).
inline void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One block of each type: `b` points at the block, `y` receives its elements. Formulas and their
// float operation order follow ggml's dequantize_row_* (so results are bit-identical to it).
void BlockQ4_0(const uint8_t* b, float* y) {  // f16 d | 16 B: element j low nibble, j+16 high
  const float d = HalfAt(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}
void BlockQ4_1(const uint8_t* b, float* y) {  // f16 d, f16 m | 16 B nibbles; x = q*d + m
  const float d = HalfAt(b), m = HalfAt(b + 2);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(b[4 + j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
  }
}
void BlockQ5_0(const uint8_t* b, float* y) {  // f16 d | u32 qh (bit j: 5th bit of element j) | 16 B
  const float d = HalfAt(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>(((b[6 + j] & 0x0F) | h0) - 16) * d;
    y[j + 16] = static_cast<float>(((b[6 + j] >> 4) | h1) - 16) * d;
  }
}
void BlockQ5_1(const uint8_t* b, float* y) {  // f16 d, f16 m | u32 qh | 16 B
  const float d = HalfAt(b), m = HalfAt(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int j = 0; j < 16; ++j) {
    const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
    y[j] = static_cast<float>((b[8 + j] & 0x0F) | h0) * d + m;
    y[j + 16] = static_cast<float>((b[8 + j] >> 4) | h1) * d + m;
  }
}
void BlockQ8_0(const uint8_t* b, float* y) {  // f16 d | 32 x int8
  const float d = HalfAt(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}
void BlockQ2_K(const uint8_t* b,
               float* y) {  // 16 B scales (lo: scale, hi: min) | 64 B qs | d | dmin
  const uint8_t* sc = b;
  const uint8_t* q = b + 16;
  const float d = HalfAt(b + 80), dmin = HalfAt(b + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d * static_cast<float>(sc[is] & 0x0F),
                    ml = dmin * static_cast<float>(sc[is] >> 4);
        ++is;
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
      }
    }
  }
}
void BlockQ3_K(const uint8_t* b, float* y) {  // 32 B hmask | 64 B qs | 12 B scales (6-bit) | d
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* s = b + 96;
  const float d_all = HalfAt(b + 108);
  int scales[16];  // 16 six-bit scales, low 4 bits from s[0..7], high 2 bits from s[8..11]
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? (s[j] & 0x0F) : (s[j - 8] >> 4);
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = (lo | (hi << 4)) - 32;
  }
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
      for (int part = 0; part < 2; ++part) {
        const float dl = d_all * static_cast<float>(scales[is++]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          *y++ = dl * static_cast<float>(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
      }
    }
  }
}
void BlockQ4_K(const uint8_t* b, float* y) {  // d | dmin | 12 B scales/mins | 128 B qs
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* q = b + 16;
  for (int j = 0; j < 8; j += 2, q += 32) {
    int sc, m;
    ScaleMinK4(j, b + 4, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    ScaleMinK4(j + 1, b + 4, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}
void BlockQ5_K(const uint8_t* b, float* y) {  // d | dmin | 12 B scales/mins | 32 B qh | 128 B qs
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 8; j += 2, q += 32, u1 <<= 2, u2 <<= 2) {
    int sc, m;
    ScaleMinK4(j, b + 4, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    ScaleMinK4(j + 1, b + 4, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      *y++ = d1 * static_cast<float>((q[l] & 0x0F) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l)
      *y++ = d2 * static_cast<float>((q[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
  }
}
void BlockQ6_K(const uint8_t* b, float* y) {  // 128 B ql | 64 B qh | 16 x int8 scales | d
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = HalfAt(b + 208);
  for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}
void BlockIq4Nl(const uint8_t* b, float* y) {  // f16 d | 16 B nibbles into the codebook
  const float d = HalfAt(b);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4Values[b[2 + j] & 0x0F]);
    y[j + 16] = d * static_cast<float>(kIq4Values[b[2 + j] >> 4]);
  }
}
void BlockIq4Xs(const uint8_t* b, float* y) {  // d | u16 scales_h | 4 B scales_l | 128 B nibbles
  const float d = HalfAt(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* q = b + 8;
  for (int ib = 0; ib < 8; ++ib, q += 16, y += 32) {
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
    const float dl = d * static_cast<float>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * static_cast<float>(kIq4Values[q[j] & 0x0F]);
      y[j + 16] = dl * static_cast<float>(kIq4Values[q[j] >> 4]);
    }
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn BlockDecoder(format::TensorType type) {
  using T = format::TensorType;
  switch (type) {
    case T::Q4_0:
      return BlockQ4_0;
    case T::Q4_1:
      return BlockQ4_1;
    case T::Q5_0:
      return BlockQ5_0;
    case T::Q5_1:
      return BlockQ5_1;
    case T::Q8_0:
      return BlockQ8_0;
    case T::Q2_K:
      return BlockQ2_K;
    case T::Q3_K:
      return BlockQ3_K;
    case T::Q4_K:
      return BlockQ4_K;
    case T::Q5_K:
      return BlockQ5_K;
    case T::Q6_K:
      return BlockQ6_K;
    case T::IQ4_NL:
      return BlockIq4Nl;
    case T::IQ4_XS:
      return BlockIq4Xs;
    default:
      return nullptr;
  }
}
