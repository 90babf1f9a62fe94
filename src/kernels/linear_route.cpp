#include "kernels/linear_route.h"

#include <charconv>
#include <cstdlib>
#include <string>

#include "kernels/few_rows.h"
#include "kernels/kquant_tile.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

std::optional<size_t> FewRowsOverride() {
  static const std::optional<size_t> v = [] {
    const char* env = std::getenv("BICACHE_FEW_ROWS");
    return ParseFewRowsOverride(env == nullptr ? "" : env);
  }();
  return v;
}

}  // namespace

std::optional<size_t> ParseFewRowsOverride(std::string_view value) {
  if (value.empty() || value == "auto") return std::nullopt;
  size_t n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n > kFewRowsMax) {
    throw Error(ErrorKind::kInvalidArgument, "BICACHE_FEW_ROWS must be auto or a row count 0.." +
                                                 std::to_string(kFewRowsMax) + ", got '" +
                                                 std::string(value) + "'");
  }
  return n;
}

const char* LinearRouteName(LinearRoute r) {
  switch (r) {
    case LinearRoute::kGemm:
      return "gemm";
    case LinearRoute::kPanels:
      return "panels";
    case LinearRoute::kInt8Tile:
      return "int8-tile";
    case LinearRoute::kFewRows:
      return "few-rows";
    case LinearRoute::kKQuantTile:
      return "kquant-tile";
  }
  return "?";
}

size_t FewRowsCutover(format::TensorType type, IntIsa isa, MatmulPrecision precision) {
  if (type == format::TensorType::BF16) {
    if (isa == IntIsa::kNone) return 0;
    if (const auto n = FewRowsOverride()) return *n;
    return precision == MatmulPrecision::kF32 ? 16 : 0;  // oneDNN's bf16 GEMM is as fast
  }
  if (isa == IntIsa::kNone || !FewRowsSupports(type, 256)) return 0;
  if (const auto n = FewRowsOverride()) return *n;
  // The K-quants hand over to their integer tiles (kquant_tile.h), not to the panels: at 12 rows
  // on AVX512-VNNI, 16 with AVX2 on either path (the table in the header).
  if (KQuantTileSupports(type, 256)) return isa == IntIsa::kAvx512Vnni ? 12 : 16;
  if (precision == MatmulPrecision::kF32) return 32;
  if (type == format::TensorType::Q8_0 && isa == IntIsa::kAvx512Vnni) return 8;
  return 16;
}

LinearRoute ChooseLinearRoute(format::TensorType type, bool in_place, size_t rows, size_t in,
                              MatmulPrecision precision, IntIsa isa) {
  if (type == format::TensorType::BF16) {  // held as bf16 (bf16 path) or read in place (f32)
    const bool few = in % 32 == 0 && rows <= FewRowsCutover(type, isa, precision);
    if (few && (precision == MatmulPrecision::kBf16 || in_place)) return LinearRoute::kFewRows;
    return in_place ? LinearRoute::kPanels : LinearRoute::kGemm;
  }
  if (!in_place) return LinearRoute::kGemm;
  if (!IsBlockQuantized(type)) return LinearRoute::kPanels;
  if (FewRowsSupports(type, in) && rows <= FewRowsCutover(type, isa, precision))
    return LinearRoute::kFewRows;
  if (type == format::TensorType::Q8_0 && isa == IntIsa::kAvx512Vnni &&
      precision == MatmulPrecision::kBf16) {
    return LinearRoute::kInt8Tile;
  }
  if (isa != IntIsa::kNone && KQuantTileSupports(type, in)) return LinearRoute::kKQuantTile;
  return LinearRoute::kPanels;
}

}  // namespace bicache::kernels
