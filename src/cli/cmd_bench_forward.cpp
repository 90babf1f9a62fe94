// `bicache bench-forward [-m FILE] [--tokens 128,512,1024] [--repeats N] [-t N] [--json OUT]`:
// forward-pass throughput against the same run's oneDNN GEMM rate (bf16, or f32 on a CPU without a
// bf16 matmul: kernels::ActiveMatmulPrecision).
//
// For each token count n: one warm-up forward, then `repeats` timed forwards of one n-token
// sequence (full mode, logits for all rows or the last --logit-rows). Achieved GFLOP/s counts
// ForwardStats' matmul FLOPs (output head included) plus attention FLOPs, over the median time.
// The yardstick is kernels::MeasureGemmGflops(n, d_ff, d_model), the FFN-up shape, run `repeats`
// times right after the forwards so both see the same machine load; the table gives the ratio of
// medians and the ratio of bests (the latter is what a shared, busy machine reproduces best). A
// phase breakdown then times the model's own projections alone (oneDNN at the forward's shapes) and
// the attention kernel alone at n; the rest of the forward (norms, RoPE, SwiGLU, residuals,
// embedding, copies) is the remainder.
//
// The weights-read bound: no forward can take less than reading its matrices once
// (harness::ForwardWeightBytes: every matrix but the gathered token embedding) at the machine's
// read bandwidth, measured at start with the forwards' threads (harness::MeasureReadBandwidth);
// each row prints it and the forward's median time over it ("x bound").
//
// Without -m the model is synthetic (harness/synthetic_model.h): llada, d 1024, 16 heads x 64,
// d_ff 2816, 4 layers, vocab 2048, BF16 matrices, each adjustable with --synthetic-*;
// --synthetic-experts E --synthetic-experts-used K --synthetic-expert-ff F makes it a llada-moe
// model (E experts of width F, top K per token; --synthetic-ff is then ignored), whose FLOPs and
// GFLOP/s count the active parameters only, and whose breakdown times the experts' GEMMs under
// "matmul" as if routing were balanced.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/tokenize_input.h"
#include "harness/forward_bench.h"
#include "harness/forward_bench_report.h"
#include "harness/synthetic_model.h"
#include "model/weights.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

format::TensorType ParseMatrixType(const std::string& s) {
  if (s == "bf16") return format::TensorType::BF16;
  if (s == "f32") return format::TensorType::F32;
  if (s == "f16") return format::TensorType::F16;
  if (s == "q8_0") return format::TensorType::Q8_0;
  if (s == "q4_0") return format::TensorType::Q4_0;
  if (s == "q4_k") return format::TensorType::Q4_K;
  if (s == "q5_k") return format::TensorType::Q5_K;
  if (s == "q6_k") return format::TensorType::Q6_K;
  throw Error(ErrorKind::kInvalidArgument, "--synthetic-type: '" + s +
                                               "' is not one of bf16, f32, f16, q8_0, q4_0, "
                                               "q4_k, q5_k, q6_k");
}

}  // namespace

Runner AddBenchForward(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench-forward",
                                 "Forward-pass GFLOP/s against the same run's oneDNN GEMM rate");
  struct Opts {
    std::string model, tokens = "128,512,1024", json, type = "bf16";
    int repeats = 5, threads = 0, logit_rows = 0, gemm_iters = 10;
    bool no_breakdown = false;
    harness::SyntheticSpec spec;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model,
                  "GGUF model file (default: a synthetic random-weight llada model)");
  cmd->add_option("--tokens", o->tokens, "comma-separated sequence lengths")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "timed forwards per length (after one warm-up)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--logit-rows", o->logit_rows, "logits for the last N rows only (0 = every row)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--gemm-iters", o->gemm_iters, "iterations of the GEMM yardstick")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_flag("--no-breakdown", o->no_breakdown,
                "skip the per-phase breakdown (isolated matmul/attention timings)");
  cmd->add_option("--json", o->json, "also write the results as JSON here");
  AddThreadsFlag(cmd, &o->threads);
  cmd->add_option("--synthetic-d", o->spec.d_model, "synthetic model: d_model")
      ->capture_default_str();
  cmd->add_option("--synthetic-layers", o->spec.n_layer, "synthetic model: layers")
      ->capture_default_str();
  cmd->add_option("--synthetic-heads", o->spec.n_head, "synthetic model: attention heads")
      ->capture_default_str();
  cmd->add_option("--synthetic-kv-heads", o->spec.n_kv_head, "synthetic model: kv heads")
      ->capture_default_str();
  cmd->add_option("--synthetic-ff", o->spec.d_ff, "synthetic model: d_ff")->capture_default_str();
  cmd->add_option("--synthetic-experts", o->spec.n_expert,
                  "synthetic model: experts (0 = dense llada; > 0 = llada-moe)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  cmd->add_option("--synthetic-experts-used", o->spec.n_expert_used,
                  "synthetic model: experts per token (top k)")
      ->capture_default_str();
  cmd->add_option("--synthetic-expert-ff", o->spec.d_ff_exp, "synthetic model: expert width")
      ->capture_default_str();
  cmd->add_option("--synthetic-vocab", o->spec.n_vocab, "synthetic model: vocabulary size")
      ->capture_default_str();
  cmd->add_option("--synthetic-type", o->type,
                  "synthetic model: matrix type (bf16, f32, f16, q8_0, q4_0, q4_k, q5_k, q6_k)")
      ->capture_default_str();
  return [=]() {
    ApplyThreads(o->threads);
    std::vector<int> lengths;
    for (int32_t v : ParseTokenList(o->tokens)) {
      if (v <= 0) throw Error(ErrorKind::kInvalidArgument, "--tokens: lengths must be positive");
      lengths.push_back(v);
    }
    std::unique_ptr<model::Model> m;
    const auto t_load = Clock::now();
    if (o->model.empty()) {
      harness::SyntheticSpec spec = o->spec;
      spec.matrix_type = ParseMatrixType(o->type);
      spec.context_length =
          std::max(spec.context_length, *std::max_element(lengths.begin(), lengths.end()));
      m = harness::MakeSyntheticLlada(spec);
    } else {
      m = model::Model::Load(o->model);
    }
    ApplyModelThreads(o->threads, m->config());
    const harness::ForwardBenchSetup setup = harness::DescribeForwardBench(
        *m, o->model, Seconds(t_load), o->repeats, o->gemm_iters, !o->no_breakdown);
    harness::PrintForwardBenchHeader(setup);
    std::vector<harness::ForwardBenchRow> rows;
    for (int n : lengths) {
      rows.push_back(harness::MeasureForward(*m, n, o->logit_rows, o->repeats, o->gemm_iters,
                                             !o->no_breakdown));
      rows.back().bound_ms = setup.BoundMs();
      harness::PrintForwardBenchRow(rows.back());
    }
    harness::PrintForwardBenchSummary(setup, rows);
    if (!o->json.empty()) {
      std::ofstream f(o->json);
      f << harness::ForwardBenchJson(setup, rows).dump(2) << "\n";
      if (!f) throw Error(ErrorKind::kIo, "cannot write '" + o->json + "'");
    }
    return 0;
  };
}

static CommandRegistrar register_bench_forward(AddBenchForward, 90);

}  // namespace bicache::cli
