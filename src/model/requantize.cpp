// Requantize (requantize.h). The K-quant recipes' rules, from llama-quant.cpp's
// llama_tensor_get_type, for the tensors our models have:
//   - output.weight (or token_embd.weight when there is no output.weight, i.e. tied) -> Q6_K
//     (Q8_0 if its rows are not a multiple of 256);
//   - attn_v (and attn_qkv): _M -> Q6_K in "more bits" layers (the first and last eighth and every
//     third in between: i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2); Q4_K_S -> Q5_K for the first
//     4;
//   - ffn_down: _M -> Q6_K in the same "more bits" layers; Q4_K_S -> Q5_K in the first eighth;
//   - token_embd.weight (untied) and everything else: the recipe's base type.
// Quantisable = at least 2 dimensions, name ending in "weight", not "_norm.weight" and not a MoE
// router ("ffn_gate_inp.weight": as in llama.cpp, it stays as it is, since a rounded router moves
// rows to other experts); everything else (norms, biases) is copied unchanged. Rows are converted
// with kernels::DequantizeRow and format::EncodeRow; the file is written by
// GgufWriter::WriteStreamed.
#include "model/requantize.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "format/quantize.h"
#include "kernels/matmul.h"
#include "model/arch.h"
#include "util/error.h"
#include "util/field_error.h"

namespace bicache::model {
namespace {

using format::TensorType;

struct Recipe {
  const char* name;
  TensorType base;
  bool pure;           // every quantisable matrix gets `base`
  uint32_t file_type;  // llama.cpp's llama_ftype (general.file_type)
};

// llama_ftype values: MOSTLY_Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q4_K_S 14, Q4_K_M 15,
// Q5_K_S 16, Q5_K_M 17, Q6_K 18. The pure K types are tagged with the "_S" ftype, which
// llama.cpp documents as "Q4_K (Q5_K) for all tensors".
constexpr Recipe kRecipes[] = {
    {"Q8_0", TensorType::Q8_0, true, 7},     {"Q4_0", TensorType::Q4_0, true, 2},
    {"Q4_1", TensorType::Q4_1, true, 3},     {"Q5_0", TensorType::Q5_0, true, 8},
    {"Q5_1", TensorType::Q5_1, true, 9},     {"Q4_K", TensorType::Q4_K, true, 14},
    {"Q5_K", TensorType::Q5_K, true, 16},    {"Q6_K", TensorType::Q6_K, true, 18},
    {"Q4_K_S", TensorType::Q4_K, false, 14}, {"Q4_K_M", TensorType::Q4_K, false, 15},
    {"Q5_K_S", TensorType::Q5_K, false, 16}, {"Q5_K_M", TensorType::Q5_K, false, 17},
};
constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION, as llama-quantize writes

const Recipe& FindRecipe(const std::string& type) {
  std::string upper = type;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Recipe& r : kRecipes) {
    if (upper == r.name) return r;
  }
  throw FieldError(ErrorKind::kInvalidArgument, "unknown quantization {type} '" + type +
                                                    "' (valid: " + QuantizeTypeNames() + ")");
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool Contains(const std::string& s, const char* part) {
  return s.find(part) != std::string::npos;
}

size_t NDims(const std::vector<uint64_t>& ne) {  // ggml_n_dims: trailing 1s do not count
  size_t n = ne.size();
  while (n > 1 && ne[n - 1] == 1) --n;
  return n;
}

// Whether `name` is tensor `id` (of any layer), by the name table (model/arch.h).
bool Is(const std::string& name, TensorId id) {
  const char* suffix = TensorSuffix(id);
  return name == suffix || EndsWith(name, std::string(".") + suffix);
}

bool Quantizable(const format::TensorInfo& t) {
  return NDims(t.ne) >= 2 && EndsWith(t.name, "weight") && !Contains(t.name, "_norm.weight") &&
         !Is(t.name, TensorId::kFfnGateInp);
}

bool IsValueProjection(const std::string& name) {
  return Is(name, TensorId::kAttnV) || Is(name, TensorId::kAttnQkv);
}
bool IsDownProjection(const std::string& name) {
  return Is(name, TensorId::kFfnDown) || Is(name, TensorId::kFfnDownExps) ||
         Is(name, TensorId::kFfnDownShexp);
}

uint64_t BlockElems(TensorType type) {
  uint64_t elems = 0;
  format::TensorTypeLayout(type, &elems, nullptr);
  return elems;
}

// llama.cpp's tensor_type_fallback for the types we write.
TensorType Fallback(TensorType t) {
  switch (t) {
    case TensorType::Q4_K:
      return TensorType::Q5_0;
    case TensorType::Q5_K:
      return TensorType::Q5_1;
    case TensorType::Q6_K:
      return TensorType::Q8_0;
    default:
      return TensorType::F16;
  }
}

struct Plan {
  TensorType type;
  bool fell_back = false;
  TensorType wanted = TensorType::F32;
};

std::vector<Plan> PlanTypes(const format::GgufFile& file, const Recipe& recipe) {
  const auto& tensors = file.tensors();
  const std::string output = TensorName(TensorId::kOutput);
  const std::string embd = TensorName(TensorId::kTokenEmbd);
  const bool tied = file.FindTensor(output) == nullptr;
  int n_wv = 0, n_down = 0;
  for (const auto& t : tensors) {
    if (!Quantizable(t)) continue;
    if (IsValueProjection(t.name)) ++n_wv;
    if (IsDownProjection(t.name)) ++n_down;
  }
  auto more_bits = [](int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; };
  const bool m_mix = EndsWith(recipe.name, "_M");
  const bool q4ks = std::string(recipe.name) == "Q4_K_S";
  int i_wv = 0, i_down = 0;
  std::vector<Plan> plans;
  for (const auto& t : tensors) {
    Plan p{t.type};
    if (!Quantizable(t)) {
      plans.push_back(p);
      continue;
    }
    TensorType type = recipe.base;
    if (!recipe.pure) {
      if (t.name == output || (tied && t.name == embd)) {
        type = t.ne[0] % BlockElems(recipe.base) != 0 ? TensorType::Q8_0 : TensorType::Q6_K;
      } else if (IsValueProjection(t.name)) {
        if (m_mix && more_bits(i_wv, n_wv))
          type = TensorType::Q6_K;
        else if (q4ks && i_wv < 4)
          type = TensorType::Q5_K;
        ++i_wv;
      } else if (IsDownProjection(t.name)) {
        if (m_mix && more_bits(i_down, n_down))
          type = TensorType::Q6_K;
        else if (q4ks && i_down < n_down / 8)
          type = TensorType::Q5_K;
        ++i_down;
      }
    }
    if (t.ne[0] % BlockElems(type) != 0) {
      p.fell_back = true;
      p.wanted = type;
      type = Fallback(type);
      if (t.ne[0] % BlockElems(type) != 0) type = TensorType::F16;
    }
    if (!kernels::IsComputeType(t.type) && type != t.type) {
      throw Error(ErrorKind::kUnsupported,
                  "tensor '" + t.name + "' has type " + format::TensorTypeName(t.type) +
                      ", which cannot be converted (readable: " + kernels::ComputeTypeList() + ")");
    }
    p.type = type;
    plans.push_back(p);
  }
  return plans;
}

std::vector<uint8_t> Convert(const format::TensorInfo& t, TensorType to) {
  if (to == t.type) return std::vector<uint8_t>(t.data, t.data + t.n_bytes);
  const uint64_t cols = t.ne[0];
  const uint64_t rows = t.n_elements / cols;
  const uint64_t in_row = t.n_bytes / rows;
  uint64_t be = 0, bb = 0;
  format::TensorTypeLayout(to, &be, &bb);
  const uint64_t out_row = cols / be * bb;
  std::vector<uint8_t> out(rows * out_row);
  std::exception_ptr error;
  std::mutex error_mu;
  std::atomic<bool> failed{false};
#pragma omp parallel
  {
    std::vector<float> buf(cols);
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < static_cast<int64_t>(rows); ++r) {
      if (failed.load(std::memory_order_relaxed)) continue;
      try {
        kernels::DequantizeRow(t.type, t.data + r * in_row, buf.data(), cols);
        format::EncodeRow(to, buf.data(), cols, out.data() + r * out_row);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

void CheckPaths(const std::string& in, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(in, ec))
    throw FieldError(ErrorKind::kIo, "cannot read {input} '" + in + "': no such file");
  bool same = fs::weakly_canonical(in, ec) == fs::weakly_canonical(out, ec);
  if (!same && fs::exists(out, ec)) same = fs::equivalent(in, out, ec);
  if (same) {
    throw FieldError(
        ErrorKind::kInvalidArgument,
        "{output} '" + out + "' is the {input} file; write the quantized model to a new path");
  }
}

[[noreturn]] void ThrowUnwritable(const std::string& out, int err) {
  throw FieldError(ErrorKind::kIo, "cannot write {output} '" + out + "': " + std::strerror(err));
}

// Probes the output location before the (long) conversion.
void ProbeWritable(const std::string& partial, const std::string& out) {
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (!f) ThrowUnwritable(out, errno);
  std::fclose(f);
}

format::GgufWriter WriterFor(const format::GgufFile& file, const Recipe& recipe) {
  format::GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.SetValue(key, value);
  writer.SetAlignment(file.alignment());
  writer.SetValue("general.file_type", format::Value::U32(recipe.file_type));
  writer.SetValue("general.quantization_version", format::Value::U32(kQuantizationVersion));
  return writer;
}

RequantizedTensor Describe(size_t i, const format::TensorInfo& t, const Plan& p) {
  RequantizedTensor r;
  r.index = i;
  r.name = t.name;
  r.ne = t.ne;
  r.from = t.type;
  r.to = p.type;
  r.fell_back = p.fell_back;
  r.wanted = p.fell_back ? p.wanted : p.type;
  r.wanted_block = BlockElems(r.wanted);
  r.bytes_in = t.n_bytes;
  return r;
}

}  // namespace

std::string QuantizeTypeNames() {
  std::string s;
  for (const Recipe& r : kRecipes) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

RequantizeReport Requantize(const RequantizeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const Recipe& recipe = FindRecipe(o.type);
  CheckPaths(o.input, o.output);
  format::GgufFile file = format::GgufFile::Open(o.input);
  const std::vector<Plan> plans = PlanTypes(file, recipe);
  const std::string partial = o.output + ".partial";
  ProbeWritable(partial, o.output);

  format::GgufWriter writer = WriterFor(file, recipe);
  const auto& tensors = file.tensors();
  std::vector<format::GgufWriter::StreamedTensor> decl;
  for (size_t i = 0; i < tensors.size(); ++i)
    decl.push_back({tensors[i].name, plans[i].type, tensors[i].ne});
  if (o.on_start) o.on_start({recipe.name, tensors.size(), omp_get_max_threads()});

  RequantizeReport report;
  report.recipe = recipe.name;
  report.file_type = recipe.file_type;
  try {
    writer.WriteStreamed(partial, decl, [&](size_t i) {
      std::vector<uint8_t> data = Convert(tensors[i], plans[i].type);
      RequantizedTensor r = Describe(i, tensors[i], plans[i]);
      r.bytes_out = data.size();
      report.bytes_in += r.bytes_in;
      report.bytes_out += r.bytes_out;
      if (o.on_tensor) o.on_tensor(r);
      report.tensors.push_back(std::move(r));
      return data;
    });
  } catch (...) {
    std::remove(partial.c_str());
    throw;
  }
  if (std::rename(partial.c_str(), o.output.c_str()) != 0) {
    const int e = errno;
    std::remove(partial.c_str());
    ThrowUnwritable(o.output, e);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace bicache::model
