// `bicache quantize IN OUT TYPE`: rewrites a GGUF file with its matrices quantised
// (model::Requantize: TYPE is a single ggml type or a K-quant recipe such as Q4_K_M). Prints one
// line per tensor as it is written, the tensors that fell back to another type, and the sizes.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "model/requantize.h"
#include "util/error.h"
#include "util/field_error.h"

namespace bicache::cli {
namespace {

void PrintTensor(const model::RequantizedTensor& t, size_t n_tensors) {
  std::string note;
  if (t.fell_back) {
    note = " (fallback: " + format::TensorTypeName(t.wanted) + " needs rows of " +
           std::to_string(t.wanted_block) + ")";
  }
  std::printf("[%3zu/%zu] %-32s %-16s %6s -> %-6s%s\n", t.index + 1, n_tensors, t.name.c_str(),
              format::ShapeTimes(t.ne).c_str(), format::TensorTypeName(t.from).c_str(),
              format::TensorTypeName(t.to).c_str(), note.c_str());
  std::fflush(stdout);
}

void PrintSummary(const model::RequantizeReport& r, const std::string& out) {
  std::vector<std::string> fallbacks;
  for (const model::RequantizedTensor& t : r.tensors) {
    if (t.fell_back) {
      fallbacks.push_back(t.name + " (" + format::TensorTypeName(t.wanted) + " -> " +
                          format::TensorTypeName(t.to) + ")");
    }
  }
  if (!fallbacks.empty()) {
    std::printf("%zu tensors fell back (row length not a multiple of the block size):",
                fallbacks.size());
    for (const auto& f : fallbacks) std::printf(" %s", f.c_str());
    std::printf("\n");
  }
  std::printf(
      "tensor data: %.2f MB -> %.2f MB (%.2fx smaller); wrote %s (general.file_type %u) in %.1f "
      "s\n",
      r.bytes_in / 1e6, r.bytes_out / 1e6,
      r.bytes_out ? double(r.bytes_in) / double(r.bytes_out) : 0.0, out.c_str(), r.file_type,
      r.seconds);
}

}  // namespace

Runner AddQuantize(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "quantize",
      "Quantize a GGUF model's matrices (llama.cpp block formats and Q4_K_M/Q5_K_M recipes)");
  struct Opts {
    model::RequantizeOptions req;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("input", o->req.input, "source GGUF (F32, F16, BF16 or quantized)")->required();
  cmd->add_option("output", o->req.output, "GGUF file to write")->required();
  cmd->add_option("type", o->req.type, "target: " + model::QuantizeTypeNames())->required();
  AddThreadsFlag(cmd, &o->threads, "worker threads (default: all cores)");
  return [o]() {
    ApplyThreads(o->threads);
    model::RequantizeOptions req = o->req;
    size_t n_tensors = 0;
    req.on_start = [&](const model::RequantizeStart& s) {
      n_tensors = s.n_tensors;
      std::printf("quantize %s -> %s as %s (%zu tensors, %d threads)\n", req.input.c_str(),
                  req.output.c_str(), s.recipe.c_str(), s.n_tensors, s.threads);
    };
    req.on_tensor = [&](const model::RequantizedTensor& t) { PrintTensor(t, n_tensors); };
    try {
      PrintSummary(model::Requantize(req), req.output);
    } catch (const FieldError& e) {
      // This command's fields are its positional arguments, which the usage line names by their
      // bare words (input, output, type) rather than as --flags.
      throw Error(e.kind(), e.what());
    }
    return 0;
  };
}

static CommandRegistrar register_quantize(AddQuantize, 15);

}  // namespace bicache::cli
