// The many-row K-quant kernels (kquant_tile.h) for one instruction set. Textually included by
// kquant_tile.cpp twice, each time inside its own namespace under `#pragma GCC target`: with
// BICACHE_KTILE_VNNI 0 (AVX2, 256-bit vectors, 16 registers: tiles of 2 rows x 16 columns) and 1
// (AVX512-VNNI, 512-bit vectors, 32 registers: tiles of 6 rows x 32 columns). The including file
// provides Half(const uint8_t*) and KActs.
// NOLINT(build/header_guard)

#if BICACHE_KTILE_VNNI
using VI = __m512i;
constexpr size_t kLanes = 16;  // int32 lanes (= columns) per vector
constexpr size_t kTileRows = 6;
inline VI LoadI(const void* p) {
  return _mm512_loadu_si512(p);
}
inline VI Zero() {
  return _mm512_setzero_si512();
}
inline VI Set1(int32_t v) {
  return _mm512_set1_epi32(v);
}
inline VI DotWords(VI acc, VI a, VI b) {  // acc + int16 pair products summed to int32
  return _mm512_dpwssd_epi32(acc, a, b);
}
constexpr bool kVnni = true;
using VA = __m512;  // the superblock's accumulators
inline VA ZeroA() {
  return _mm512_setzero_ps();
}
inline VI AddProducts(VI acc, VI u, VI x) {  // acc + sums of 4 products u8 x s8, exact
  return _mm512_dpbusd_epi32(acc, u, x);
}
inline VA AddScaledSums(VA acc, VI dot, VI sc) {  // acc + dot * sc (sc: float bits per column)
  return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_castsi512_ps(sc), acc);
}
inline VI ScaleBits(VI sc) {
  return _mm512_castps_si512(_mm512_cvtepi32_ps(sc));
}

inline VI Gather(const uint8_t* base, VI idx) {  // the dwords at base + idx[lane]
  return _mm512_i32gather_epi32(idx, base, 1);
}
inline void StoreI(void* p, VI v) {
  _mm512_storeu_si512(p, v);
}
inline VI And(VI a, int32_t m) {
  return _mm512_and_si512(a, _mm512_set1_epi32(m));
}
inline VI Or(VI a, VI b) {
  return _mm512_or_si512(a, b);
}
inline VI Shr(VI a, int n) {  // logical, per dword
  return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n));
}
inline VI Shl(VI a, int n) {
  return _mm512_sll_epi32(a, _mm_cvtsi32_si128(n));
}
inline VI Sar(VI a, int n) {
  return _mm512_sra_epi32(a, _mm_cvtsi32_si128(n));
}
// out[0, 16) += dx (d isum - dm cvt(imin)) (isum: the superblock's scaled sums, float).
inline void AddScaled(float* out, VA isum, VI imin, const float* d, const float* dm, float dx) {
  const __m512 t = _mm512_fmsub_ps(_mm512_loadu_ps(d), isum,
                                   _mm512_mul_ps(_mm512_loadu_ps(dm), _mm512_cvtepi32_ps(imin)));
  _mm512_storeu_ps(out, _mm512_fmadd_ps(t, _mm512_set1_ps(dx), _mm512_loadu_ps(out)));
}
#else
using VI = __m256i;
constexpr size_t kLanes = 8;
constexpr size_t kTileRows = 2;
inline VI LoadI(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
inline VI Zero() {
  return _mm256_setzero_si256();
}
inline VI Set1(int32_t v) {
  return _mm256_set1_epi32(v);
}
inline VI DotWords(VI acc, VI a, VI b) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
constexpr bool kVnni = false;
using VA = __m256i;
inline VA ZeroA() {
  return _mm256_setzero_si256();
}
inline VI ScaleBits(VI sc) {
  return sc;
}
inline VI AddProducts(VI acc, VI u, VI x) {  // acc + int16 pair sums of u8 x s8 (kG bounds them)
  return _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, x));
}
inline VI AddScaledSums(VI acc, VI pairs, VI sc) {  // acc + both int16 of pairs times sc
  return DotWords(acc, pairs, sc);
}
inline VI Gather(const uint8_t* base, VI idx) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(base), idx, 1);
}
inline void StoreI(void* p, VI v) {
  _mm256_storeu_si256(static_cast<__m256i*>(p), v);
}
inline VI And(VI a, int32_t m) {
  return _mm256_and_si256(a, _mm256_set1_epi32(m));
}
inline VI Or(VI a, VI b) {
  return _mm256_or_si256(a, b);
}
inline VI Shr(VI a, int n) {
  return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n));
}
inline VI Shl(VI a, int n) {
  return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n));
}
inline VI Sar(VI a, int n) {
  return _mm256_sra_epi32(a, _mm_cvtsi32_si128(n));
}
inline void AddScaled(float* out, VI isum, VI imin, const float* d, const float* dm, float dx) {
  const __m256 t = _mm256_fmsub_ps(_mm256_loadu_ps(d), _mm256_cvtepi32_ps(isum),
                                   _mm256_mul_ps(_mm256_loadu_ps(dm), _mm256_cvtepi32_ps(imin)));
  _mm256_storeu_ps(out, _mm256_fmadd_ps(t, _mm256_set1_ps(dx), _mm256_loadu_ps(out)));
}
#endif
constexpr size_t kVecs = 2;                   // vectors per tile row
constexpr size_t kCols = kVecs * kLanes;      // output columns per panel (and tile)
constexpr size_t kGroupBytes = 4 * kCols;     // one group: [kCols][4] bytes of u
constexpr size_t kSuperU = 64 * kGroupBytes;  // one superblock of the panel: 64 groups

// ---- decoders: one superblock of one weight row -------------------------------------------
// u[256] in natural order, and per sub-block j of kSub values sc[j], mw[j] (int16) with
// w_i = *d sc[j] u_i - *dm mw[j] (kquant_tile.h).

inline __m256i Load32(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline void Store32(uint8_t* p, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
}
// Bits [shift, shift + log2(mask + 1)) of every byte of v (shift < 8).
inline __m256i ByteBits(__m256i v, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(mask));
}

// Q4_K, Q5_K and Q6_K are packed straight from the file, kLanes rows at a time: each gather
// fetches the same dword of one superblock from every row, and the unpacking (nibbles, high bits,
// scales) runs across the rows in the lanes, so a dword of quants yields two or four groups of the
// panel layout at once. At the end of a row only bytes of the superblock itself are read.
// Q2_K and Q3_K take the generic path: each row decoded in natural order (Decode), then gathered.

// Lane c's outputs for one superblock: the groups at u + i * kGroupBytes, sub-block j's scale pair
// at sc[j * kCols], min pair i at mw[i * kCols], d and dm (all offset to the lanes' first column).
struct LaneOut {
  uint8_t* u;
  int32_t* sc;
  int32_t* mw;
  float* d;
  float* dm;
};

inline VI Pair(VI lo, VI hi) {  // the low int16 of lo and of hi, as one int32 per lane
  return Or(And(lo, 0xFFFF), Shl(hi, 16));
}
// A sub-block scale as the panel holds it: the int32 for vpmulld (AVX512-VNNI), or the int16 in
// both halves for vpmaddwd (AVX2).
inline VI ScaleWords(VI sc) {
  return kVnni ? ScaleBits(sc) : Pair(sc, sc);
}
inline int32_t ScaleWord(int16_t sc) {
  if (kVnni) {
    const float f = sc;
    int32_t bits;
    std::memcpy(&bits, &f, 4);
    return bits;
  }
  return static_cast<int32_t>(static_cast<uint32_t>(sc & 0xFFFF) * 0x10001u);
}
// The f16 in bits [shift, shift + 16) of every lane, as floats.
inline void StoreHalves(VI v, int shift, float* out) {
  alignas(64) int32_t h[kLanes];
  StoreI(h, Shr(v, shift));
  for (size_t c = 0; c < kLanes; ++c) out[c] = QuantF16ToF32(static_cast<uint16_t>(h[c]));
}

// Q4_K / Q5_K's 12 bytes of 6-bit scales and mins at b + 4 (ScaleMinK4, across the lanes).
inline void ScalesMinsK4(const uint8_t* b, VI idx, const LaneOut& o) {
  const VI w0 = Gather(b + 4, idx), w1 = Gather(b + 8, idx), w2 = Gather(b + 12, idx);
  VI sc[8], m[8];
  for (int j = 0; j < 4; ++j) {
    sc[j] = And(Shr(w0, 8 * j), 63);
    m[j] = And(Shr(w1, 8 * j), 63);
    sc[j + 4] = Or(And(Shr(w2, 8 * j), 0x0F), Shl(And(Shr(w0, 8 * j + 6), 3), 4));
    m[j + 4] = Or(And(Shr(w2, 8 * j + 4), 0x0F), Shl(And(Shr(w1, 8 * j + 6), 3), 4));
  }
  for (int j = 0; j < 8; ++j) StoreI(o.sc + j * kCols, ScaleWords(sc[j]));
  for (int i = 0; i < 4; ++i) StoreI(o.mw + i * kCols, Pair(m[2 * i], m[2 * i + 1]));
  const VI dd = Gather(b, idx);
  StoreHalves(And(dd, 0xFFFF), 0, o.d);
  StoreHalves(dd, 16, o.dm);
}

struct TQ4K {  // d | dmin | 12 B scales and mins (6 bits) | 128 B nibbles
  static constexpr size_t kBytes = 144;
  static constexpr int kSub = 32, kG = 8;  // 8 groups x 2 x 15 x 127 < 2^15
  static constexpr bool kDirect = true;
  static void Pack(const uint8_t* b, VI idx, const LaneOut& o) {
    for (int p = 0; p < 4; ++p) {  // values 64 p + l: low nibbles of qs[32 p + l], then high
      for (int i = 0; i < 8; ++i) {
        const VI v = Gather(b + 16 + 32 * p + 4 * i, idx);
        StoreI(o.u + (16 * p + i) * kGroupBytes, And(v, 0x0F0F0F0F));
        StoreI(o.u + (16 * p + 8 + i) * kGroupBytes, And(Shr(v, 4), 0x0F0F0F0F));
      }
    }
    ScalesMinsK4(b, idx, o);
  }
};

struct TQ5K {  // d | dmin | 12 B scales and mins | 32 B fifth bits | 128 B nibbles
  static constexpr size_t kBytes = 176;
  static constexpr int kSub = 32, kG = 4;  // 4 x 2 x 31 x 127 < 2^15
  static constexpr bool kDirect = true;
  static void Pack(const uint8_t* b, VI idx, const LaneOut& o) {
    for (int i = 0; i < 8; ++i) {
      const VI qh = Gather(b + 16 + 4 * i, idx);  // bit 2p / 2p + 1: fifth bit of values 64 p + l
      for (int p = 0; p < 4; ++p) {
        const VI v = Gather(b + 48 + 32 * p + 4 * i, idx);
        StoreI(o.u + (16 * p + i) * kGroupBytes,
               Or(And(v, 0x0F0F0F0F), Shl(And(Shr(qh, 2 * p), 0x01010101), 4)));
        StoreI(o.u + (16 * p + 8 + i) * kGroupBytes,
               Or(And(Shr(v, 4), 0x0F0F0F0F), Shl(And(Shr(qh, 2 * p + 1), 0x01010101), 4)));
      }
    }
    ScalesMinsK4(b, idx, o);
  }
};

struct TQ6K {  // 128 B low nibbles | 64 B two high bits | 16 x int8 scales | d; w = d sc (u - 32)
  static constexpr size_t kBytes = 210;
  static constexpr int kSub = 16, kG = 2;  // 2 x 2 x 63 x 127 < 2^15
  static constexpr bool kDirect = true;
  static void Pack(const uint8_t* b, VI idx, const LaneOut& o) {
    for (int h = 0; h < 2; ++h) {  // values 128 h + 32 k + l
      for (int i = 0; i < 8; ++i) {
        const VI lo = Gather(b + 64 * h + 4 * i, idx), hi = Gather(b + 64 * h + 32 + 4 * i, idx),
                 qh = Gather(b + 128 + 32 * h + 4 * i, idx);
        uint8_t* u = o.u + (32 * h + i) * kGroupBytes;
        StoreI(u, Or(And(lo, 0x0F0F0F0F), Shl(And(qh, 0x03030303), 4)));
        StoreI(u + 8 * kGroupBytes, Or(And(hi, 0x0F0F0F0F), Shl(And(Shr(qh, 2), 0x03030303), 4)));
        StoreI(u + 16 * kGroupBytes,
               Or(And(Shr(lo, 4), 0x0F0F0F0F), Shl(And(Shr(qh, 4), 0x03030303), 4)));
        StoreI(u + 24 * kGroupBytes,
               Or(And(Shr(hi, 4), 0x0F0F0F0F), Shl(And(Shr(qh, 6), 0x03030303), 4)));
      }
    }
    VI sc[16];
    for (int q = 0; q < 4; ++q) {
      const VI v = Gather(b + 192 + 4 * q, idx);
      for (int j = 0; j < 4; ++j) sc[4 * q + j] = Sar(Shl(v, 24 - 8 * j), 24);
    }
    for (int j = 0; j < 16; ++j) StoreI(o.sc + j * kCols, ScaleWords(sc[j]));
    for (int i = 0; i < 8; ++i)
      StoreI(o.mw + i * kCols, Pair(Shl(sc[2 * i], 5), Shl(sc[2 * i + 1], 5)));
    StoreHalves(Gather(b + 206, idx), 16, o.d);  // bytes 206..209: the last scales, then d
    std::memcpy(o.dm, o.d, kLanes * sizeof(float));
  }
};

struct TQ3K {  // 32 B high bits | 64 B two low bits | 12 B 6-bit scales | d; w = d (sc-32) (u - 4)
  static constexpr size_t kBytes = 110;
  static constexpr int kSub = 16, kG = 4;  // 4 x 2 x 7 x 127 < 2^15
  static constexpr bool kDirect = false;
  static void Decode(const uint8_t* b, uint8_t* u, int16_t* sc, int16_t* mw, float* d, float* dm) {
    const __m256i hm = Load32(b);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + 32 + 32 * h);
      for (int k = 0; k < 4; ++k) {  // values 128 h + 32 k + l: bits 2k of q[l], bit 4h + k of hm
        const __m256i hb = _mm256_slli_epi16(ByteBits(hm, 4 * h + k, 1), 2);
        Store32(u + 128 * h + 32 * k, _mm256_or_si256(ByteBits(q, 2 * k, 3), hb));
      }
    }
    const uint8_t* s = b + 96;
    for (int j = 0; j < 16; ++j) {
      const int lo = j < 8 ? (s[j] & 0x0F) : (s[j - 8] >> 4);
      const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
      sc[j] = static_cast<int16_t>((lo | (hi << 4)) - 32);
      mw[j] = static_cast<int16_t>(4 * sc[j]);
    }
    *d = *dm = Half(b + 108);
  }
};

struct TQ2K {  // 16 B scales (low nibble) and mins (high) | 64 B two-bit quants | d | dmin
  static constexpr size_t kBytes = 84;
  static constexpr int kSub = 16, kG = 4;  // 4 x 2 x 3 x 127 < 2^15
  static constexpr bool kDirect = false;
  static void Decode(const uint8_t* b, uint8_t* u, int16_t* sc, int16_t* mw, float* d, float* dm) {
    for (int h = 0; h < 2; ++h) {
      const __m256i q = Load32(b + 16 + 32 * h);
      for (int k = 0; k < 4; ++k) Store32(u + 128 * h + 32 * k, ByteBits(q, 2 * k, 3));
    }
    for (int j = 0; j < 16; ++j) {
      sc[j] = static_cast<int16_t>(b[j] & 0x0F);
      mw[j] = static_cast<int16_t>(b[j] >> 4);
    }
    *d = Half(b + 80);
    *dm = Half(b + 82);
  }
};

// ---- one panel: kCols weight rows in the tile layout ----------------------------------------

// Per superblock sb: u [kSuperU] bytes, sc [256 / kSub][kCols] (ScaleWords: the scale as float
// bits, or in both int16 halves), mw [256 / kSub / 2][kCols] int32 (sub-blocks 2i and 2i + 1), d
// and dm [kCols].
struct Panel {
  uint8_t* u;
  int32_t* sc;
  int32_t* mw;
  float* d;
  float* dm;
};

template <class T>
Panel PanelBuffers(size_t n_super) {
  constexpr size_t kSubs = 256 / T::kSub;
  thread_local std::vector<uint8_t> ub;
  thread_local std::vector<int32_t> ib;
  thread_local std::vector<float> fb;
  Panel p;
  p.u = GrowTo(ub, n_super * kSuperU);
  p.sc = GrowTo(ib, n_super * (kSubs + kSubs / 2) * kCols);
  p.mw = p.sc + n_super * kSubs * kCols;
  p.d = GrowTo(fb, 2 * n_super * kCols);
  p.dm = p.d + n_super * kCols;
  return p;
}

// dst[i][c] = the dword i of row c of u (u: [kCols][256] bytes), i < 64: the panel layout.
inline void GatherGroups(const uint8_t* u, uint8_t* dst) {
#if BICACHE_KTILE_VNNI
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(256));
  for (int i = 0; i < 64; ++i) {
    for (size_t h = 0; h < kCols / kLanes; ++h) {
      _mm512_storeu_si512(dst + i * kGroupBytes + 64 * h,
                          _mm512_i32gather_epi32(idx, u + h * kLanes * 256 + 4 * i, 1));
    }
  }
#else
  const __m256i idx = _mm256_setr_epi32(0, 256, 512, 768, 1024, 1280, 1536, 1792);
  for (int i = 0; i < 64; ++i) {
    for (size_t h = 0; h < kCols / kLanes; ++h) {
      const auto* src = reinterpret_cast<const int*>(u + h * kLanes * 256 + 4 * i);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i * kGroupBytes + 32 * h),
                          _mm256_i32gather_epi32(src, idx, 1));
    }
  }
#endif
}

constexpr size_t kPackAhead = 4;

// PackPanel's two ways (below): T::Pack straight from the file, kLanes rows at a time ...
template <class T>
void PackDirect(const uint8_t* w, size_t row_bytes, size_t cols, size_t n_super, const Panel& p) {
  constexpr int kSubs = 256 / T::kSub;
  {
    for (size_t h = 0; h < kCols / kLanes; ++h) {
      alignas(64) int32_t off[kLanes];
      for (size_t c = 0; c < kLanes; ++c) {
        const size_t col = h * kLanes + c;
        off[c] = static_cast<int32_t>((col < cols ? col : 0) * row_bytes);
      }
      const VI idx = LoadI(off);
      for (size_t sb = 0; sb < n_super; ++sb) {
        // The gathers read kLanes rows at once, which the hardware prefetcher does not follow:
        // the superblocks kPackAhead ahead are requested in software.
        if (sb + kPackAhead < n_super) {
          for (size_t c = 0; c < kLanes; ++c) {
            const uint8_t* ahead = w + off[c] + (sb + kPackAhead) * T::kBytes;
            for (size_t b = 0; b < T::kBytes; b += 64)
              _mm_prefetch(reinterpret_cast<const char*>(ahead + b), _MM_HINT_T0);
          }
        }
        LaneOut o;
        o.u = p.u + sb * kSuperU + 4 * kLanes * h;
        o.sc = p.sc + sb * kSubs * kCols + kLanes * h;
        o.mw = p.mw + sb * (kSubs / 2) * kCols + kLanes * h;
        o.d = p.d + sb * kCols + kLanes * h;
        o.dm = p.dm + sb * kCols + kLanes * h;
        T::Pack(w + sb * T::kBytes, idx, o);
      }
    }
  }
}

// ... or per superblock every row decoded in natural order (T::Decode), then gathered.
template <class T>
void PackDecoded(const uint8_t* w, size_t row_bytes, size_t cols, size_t n_super, const Panel& p) {
  constexpr int kSubs = 256 / T::kSub;
  alignas(64) uint8_t u[kCols * 256];
  int16_t sc[16], mw[16];
  for (size_t sb = 0; sb < n_super; ++sb) {
    int32_t* s = p.sc + sb * kSubs * kCols;
    int32_t* m = p.mw + sb * (kSubs / 2) * kCols;
    for (size_t c = 0; c < kCols; ++c) {
      const uint8_t* row = w + (c < cols ? c : 0) * row_bytes;
      T::Decode(row + sb * T::kBytes, u + c * 256, sc, mw, p.d + sb * kCols + c,
                p.dm + sb * kCols + c);
      for (int j = 0; j < kSubs; ++j) s[j * kCols + c] = ScaleWord(sc[j]);
      for (int j = 0; j < kSubs / 2; ++j) {
        m[j * kCols + c] =
            static_cast<int32_t>(static_cast<uint32_t>(mw[2 * j] & 0xFFFF) |
                                 static_cast<uint32_t>(mw[2 * j + 1] & 0xFFFF) << 16);
      }
    }
    GatherGroups(u, p.u + sb * kSuperU);
  }
}

// Rows [c0, c0 + cols) of W (cols <= kCols; missing columns repeat row c0, their outputs dropped)
// into the panel layout.
template <class T>
void PackPanel(const uint8_t* w, size_t row_bytes, size_t cols, size_t n_super, const Panel& p) {
  if constexpr (T::kDirect) {
    PackDirect<T>(w, row_bytes, cols, n_super, p);
  } else {
    PackDecoded<T>(w, row_bytes, cols, n_super, p);
  }
}

// ---- the tile: kTileRows activation rows x kCols columns -------------------------------------

// t[r] += the products of group i (values 4i .. 4i + 3 of superblock sb) for rows r0 + r.
template <size_t kRows>
inline void AddGroup(const KActs& x, size_t r0, const uint8_t* u, size_t sb, int i,
                     VI (*t)[kVecs]) {
  const VI w0 = LoadI(u + i * kGroupBytes), w1 = LoadI(u + i * kGroupBytes + 4 * kLanes);
#pragma GCC unroll 6
  for (size_t r = 0; r < kRows; ++r) {
    int32_t four;
    std::memcpy(&four, x.q + (r0 + r) * x.k + sb * 256 + 4 * i, 4);
    const VI xb = Set1(four);
    t[r][0] = AddProducts(t[r][0], w0, xb);
    t[r][1] = AddProducts(t[r][1], w1, xb);
  }
}

// Sub-block j of superblock sb into isum for kRows rows from r0. AVX512-VNNI: the sub-block's
// exact int32 dot products (vpdpbusd: u8 weights x s8 activations), converted and multiplied by
// its scale in float. AVX2: the int16 pair sums of vpmaddubsw over kG groups at a time, each
// batch multiplied by the scale pairs in int32 (vpmaddwd). (The AVX512 form of the AVX2
// arithmetic, vpmaddubsw + vpaddw + vpdpwssd, ran 1.3x slower on Zen 4; vpmulld in place of the
// float scale about 1.05x.)
template <class T, size_t kRows>
inline void SubBlock(const KActs& x, size_t r0, const uint8_t* u, const int32_t* sc, size_t sb,
                     int j, VA (*isum)[kVecs]) {
  constexpr int kGroups = T::kSub / 4;
  constexpr int kBatch = kVnni ? kGroups : T::kG;
  const VI s0 = LoadI(sc + j * kCols), s1 = LoadI(sc + j * kCols + kLanes);
  for (int ch = 0; ch < kGroups / kBatch; ++ch) {
    VI t[kRows][kVecs];
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) t[r][0] = t[r][1] = Zero();
    const int i0 = j * kGroups + ch * kBatch;
    // AVX512-VNNI unrolled whole (as int8_gemm.cpp's tile): partly unrolled, GCC copied the
    // accumulators between registers on every pass. AVX2 by 2: unrolled whole, GCC hoisted the
    // products of later groups and spilled (16 registers).
    if constexpr (kVnni) {
#pragma GCC unroll 8
      for (int g = 0; g < kBatch; ++g) AddGroup<kRows>(x, r0, u, sb, i0 + g, t);
    } else {
#pragma GCC unroll 2
      for (int g = 0; g < kBatch; ++g) AddGroup<kRows>(x, r0, u, sb, i0 + g, t);
    }
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) {
      isum[r][0] = AddScaledSums(isum[r][0], t[r][0], s0);
      isum[r][1] = AddScaledSums(isum[r][1], t[r][1], s1);
    }
  }
}

// out[kRows][kCols] = rows [r0, r0 + kRows) of x times the packed panel.
template <class T, size_t kRows>
void Tile(const KActs& x, size_t r0, const Panel& p, float* out) {
  constexpr int kSubs = 256 / T::kSub;
  const size_t n_super = x.k / 256, n_pairs = x.k / T::kSub / 2;
  std::memset(out, 0, kRows * kCols * sizeof(float));
  for (size_t sb = 0; sb < n_super; ++sb) {
    VA isum[kRows][kVecs];
#pragma GCC unroll 6
    for (size_t r = 0; r < kRows; ++r) isum[r][0] = isum[r][1] = ZeroA();
    const uint8_t* u = p.u + sb * kSuperU;
    const int32_t* sc = p.sc + sb * kSubs * kCols;
    for (int j = 0; j < kSubs; ++j) SubBlock<T, kRows>(x, r0, u, sc, sb, j, isum);
    const int32_t* mw = p.mw + sb * (kSubs / 2) * kCols;
    for (size_t r = 0; r < kRows; ++r) {  // the mins (or offsets) through the activation sums
      const int32_t* sp = x.spair + (r0 + r) * n_pairs + sb * (kSubs / 2);
      VI m0 = Zero(), m1 = Zero();
      for (int i = 0; i < kSubs / 2; ++i) {
        const VI s = Set1(sp[i]);
        m0 = DotWords(m0, LoadI(mw + i * kCols), s);
        m1 = DotWords(m1, LoadI(mw + i * kCols + kLanes), s);
      }
      const float dx = x.dx[(r0 + r) * n_super + sb];
      float* o = out + r * kCols;
      AddScaled(o, isum[r][0], m0, p.d + sb * kCols, p.dm + sb * kCols, dx);
      AddScaled(o + kLanes, isum[r][1], m1, p.d + sb * kCols + kLanes, p.dm + sb * kCols + kLanes,
                dx);
    }
  }
}

// Rows [r0, r0 + rows) of x (rows <= kTileRows, even) times the panel: the full tile, or on
// AVX512-VNNI a smaller one for the last rows.
template <class T>
void AnyTile(const KActs& x, size_t r0, size_t rows, const Panel& p, float* out) {
  if constexpr (kTileRows > 2) {
    if (rows <= 2) return Tile<T, 2>(x, r0, p, out);
    if (rows <= 4) return Tile<T, 4>(x, r0, p, out);
  }
  Tile<T, kTileRows>(x, r0, p, out);
}

// y[n, out] for activations x (x.n rows: n padded with zero rows to an even count), panels of
// kCols output columns shared out to the threads.
template <class T>
void Product(const KActs& x, size_t n, const uint8_t* w, size_t row_bytes, size_t out, float* y) {
  const size_t n_super = x.k / 256;
  const long n_panels = static_cast<long>((out + kCols - 1) / kCols);
#pragma omp parallel
  {
    const Panel p = PanelBuffers<T>(n_super);
    alignas(64) float tile[kTileRows * kCols];
#pragma omp for schedule(dynamic, 1)
    for (long i = 0; i < n_panels; ++i) {
      const size_t c0 = static_cast<size_t>(i) * kCols, cols = std::min(kCols, out - c0);
      PackPanel<T>(w + c0 * row_bytes, row_bytes, cols, n_super, p);
      for (size_t r0 = 0; r0 < x.n; r0 += kTileRows) {
        AnyTile<T>(x, r0, std::min(kTileRows, x.n - r0), p, tile);
        const size_t valid = std::min(kTileRows, n - std::min(n, r0));
        for (size_t r = 0; r < valid; ++r)
          std::memcpy(y + (r0 + r) * out + c0, tile + r * kCols, cols * sizeof(float));
      }
    }
  }
}

using ProductFn = void (*)(const KActs&, size_t, const uint8_t*, size_t, size_t, float*);

// The product for `type` and the sub-block size its activation sums are taken over (0: none).
inline ProductFn ProductFor(format::TensorType type, int* sub) {
  using TT = format::TensorType;
  switch (type) {
    case TT::Q2_K:
      *sub = TQ2K::kSub;
      return Product<TQ2K>;
    case TT::Q3_K:
      *sub = TQ3K::kSub;
      return Product<TQ3K>;
    case TT::Q4_K:
      *sub = TQ4K::kSub;
      return Product<TQ4K>;
    case TT::Q5_K:
      *sub = TQ5K::kSub;
      return Product<TQ5K>;
    case TT::Q6_K:
      *sub = TQ6K::kSub;
      return Product<TQ6K>;
    default:
      *sub = 0;
      return nullptr;
  }
}

inline size_t TileRows() {
  return kTileRows;
}
