// `bicache info -m FILE`: metadata, tensors, parameter count and type histogram of a GGUF file,
// then the model configuration the engine derives from it (or the reason it cannot run it).
#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "format/gguf.h"
#include "kernels/matmul.h"
#include "model/weights.h"

namespace bicache::cli {
namespace {

std::string Render(const format::Value& v, int depth = 0) {
  using VT = format::ValueType;
  switch (v.type) {
    case VT::STRING: {
      std::string s = v.s.size() > 80 ? v.s.substr(0, 77) + "..." : v.s;
      for (char& ch : s)
        if (ch == '\n') ch = ' ';
      return "\"" + s + "\"";
    }
    case VT::BOOL:
      return v.u ? "true" : "false";
    case VT::FLOAT32:
    case VT::FLOAT64: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", v.f);
      return buf;
    }
    case VT::ARRAY: {
      std::string s =
          "[" + format::ValueTypeName(v.elem_type) + " x " + std::to_string(v.elems.size()) + "]";
      if (depth == 0 && !v.elems.empty()) {
        s += " ";
        for (size_t i = 0; i < v.elems.size() && i < 4; ++i)
          s += (i ? ", " : "") + Render(v.elems[i], 1);
        if (v.elems.size() > 4) s += ", ...";
      }
      return s;
    }
    default:
      return v.is_integer() && (v.type == VT::INT8 || v.type == VT::INT16 || v.type == VT::INT32 ||
                                v.type == VT::INT64)
                 ? std::to_string(v.i)
                 : std::to_string(v.u);
  }
}

}  // namespace

Runner AddInfo(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("info", "Show a GGUF file's metadata, tensors and model configuration");
  auto path = std::make_shared<std::string>();
  auto show_tensors = std::make_shared<bool>(false);
  AddModelFlag(cmd, path.get());
  cmd->add_flag("--tensors", *show_tensors, "list every tensor (default: the first 12)");
  return [=]() {
    format::GgufFile file = format::GgufFile::Open(*path);
    std::printf("file: %s (%llu bytes, GGUF v%u, alignment %llu)\n", path->c_str(),
                (unsigned long long)file.file_size(), file.version(),
                (unsigned long long)file.alignment());
    std::printf("metadata (%zu keys):\n", file.metadata().size());
    for (const auto& [key, value] : file.metadata())
      std::printf("  %-44s %s\n", key.c_str(), Render(value).c_str());
    std::map<std::string, std::pair<uint64_t, uint64_t>> hist;  // type -> (tensors, elements)
    uint64_t params = 0;
    std::printf("tensors (%zu):\n", file.tensors().size());
    size_t shown = 0;
    for (const auto& t : file.tensors()) {
      auto& h = hist[format::TensorTypeName(t.type)];
      h.first++;
      h.second += t.n_elements;
      params += t.n_elements;
      if (*show_tensors || shown < 12) {
        std::printf("  %-32s %-6s %s\n", t.name.c_str(), format::TensorTypeName(t.type).c_str(),
                    format::ShapeTimes(t.ne).c_str());
        ++shown;
      }
    }
    if (shown < file.tensors().size())
      std::printf("  ... %zu more (--tensors lists all)\n", file.tensors().size() - shown);
    std::printf("parameters: %llu (%.2fM)\n", (unsigned long long)params, params / 1e6);
    std::printf("types:");
    for (const auto& [name, h] : hist)
      std::printf(" %s: %llu tensors / %.2fM", name.c_str(), (unsigned long long)h.first,
                  h.second / 1e6);
    std::printf("\n");
    auto model = model::Model::FromFile(std::move(file));
    const model::ModelConfig& c = model->config();
    std::printf(
        "model: %s '%s': %d layers, d_model %d, %d heads (%d kv) x %d, d_ff %d, vocab %d, context "
        "%d, rope %s base %g, eps %g, mask id %d, logits %s\n",
        model::ArchName(c.arch), c.name.c_str(), c.n_layer, c.d_model, c.n_head, c.n_kv_head,
        c.head_dim, c.d_ff, c.n_vocab, c.context_length,
        c.rope_layout == kernels::RopeLayout::kNormal ? "normal" : "neox", c.rope_base, c.rms_eps,
        c.mask_token_id, c.shift_logits ? "shifted" : "unshifted");
    if (c.block_causal()) {
      std::printf("attention: block-causal, block length %d", c.block_length);
      if (c.sub_block_length > 0) std::printf(", sub-block length %d", c.sub_block_length);
      std::printf(", q/k norm %s, qkv bias %s\n", c.qk_norm ? "per head" : "none",
                  c.qkv_bias ? "yes" : "no");
    }
    if (c.is_moe()) {
      std::printf(
          "experts: %d per layer, top-%d per token (softmax router, chosen weights %s), expert "
          "d_ff %d, q/k norm %s\n",
          c.n_expert, c.n_expert_used, c.expert_weights_norm ? "renormalised" : "as routed",
          c.d_ff_exp, c.qk_norm ? "per head" : "none");
    }
    const auto precision = kernels::ActiveMatmulPrecision();
    std::printf("matmul: oneDNN %s%s\n", kernels::MatmulPrecisionName(precision),
                kernels::Bf16MatmulAvailable()
                    ? ""
                    : " (this CPU has no oneDNN bf16 matmul kernel: weights widened to f32 "
                      "at load, twice the memory)");
    return 0;
  };
}

static CommandRegistrar register_info(AddInfo, 10);

}  // namespace bicache::cli
