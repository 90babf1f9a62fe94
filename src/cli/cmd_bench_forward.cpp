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
// Without -m the model is synthetic (harness/synthetic_model.h): llada, d 1024, 16 heads x 64,
// d_ff 2816, 4 layers, vocab 2048, BF16 matrices, each adjustable with --synthetic-*.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/tokenize_input.h"
#include "harness/synthetic_model.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "model/weights.h"
#include "util/error.h"
#include "util/proc_stats.h"

namespace bicache::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

format::TensorType ParseMatrixType(const std::string& s) {
  if (s == "bf16") return format::TensorType::BF16;
  if (s == "f32") return format::TensorType::F32;
  if (s == "f16") return format::TensorType::F16;
  if (s == "q8_0") return format::TensorType::Q8_0;
  if (s == "q4_0") return format::TensorType::Q4_0;
  throw Error(ErrorKind::kInvalidArgument,
              "--synthetic-type: '" + s + "' is not one of bf16, f32, f16, q8_0, q4_0");
}

double Mb(uint64_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

// "Q4_K x 14, Q6_K x 3, F32 x 9": the storage types of the model's tensors, most frequent first.
std::string TypeSummary(const format::GgufFile& f) {
  std::map<std::string, int> count;
  for (const auto& t : f.tensors()) ++count[format::TensorTypeName(t.type)];
  std::vector<std::pair<int, std::string>> v;
  for (const auto& [name, n] : count) v.emplace_back(-n, name);
  std::sort(v.begin(), v.end());
  std::string s;
  for (const auto& [n, name] : v) s += (s.empty() ? "" : ", ") + name + " x " + std::to_string(-n);
  return s;
}

struct Row {
  int tokens = 0, logit_rows = 0;
  double ms_median = 0, ms_best = 0;
  double matmul_gflop = 0, attention_gflop = 0;
  double fwd_gflops = 0, gemm_gflops = 0;  // median forward, median yardstick run
  double fwd_gflops_best = 0,
         gemm_gflops_best = 0;  // best of each: less sensitive to a busy machine
  // breakdown (ms per forward, estimated from isolated runs at the forward's shapes)
  double ms_matmul = 0, ms_attention = 0, ms_other = 0;
  uint64_t peak_rss = 0;  // VmHWM after this length's forwards (load and earlier lengths included)
};

// Times every projection of one layer (plus the output head once) at n rows, scaled to the model's
// depth: the forward's matmul time if nothing else ran. Median of `repeats`.
double IsolatedMatmulMs(const model::Model& m, int n, int logit_rows, int repeats) {
  const auto& c = m.config();
  const auto& w = m.layers()[0];
  // x: [n, widest input]; y: [n, widest output] (the vocabulary for the head).
  const size_t widest_in =
      std::max<size_t>({static_cast<size_t>(c.d_model), static_cast<size_t>(c.d_ff),
                        static_cast<size_t>(c.q_dim())});
  const size_t widest_out = std::max<size_t>(
      {widest_in, static_cast<size_t>(c.q_dim() + 2 * c.kv_dim()), static_cast<size_t>(c.n_vocab)});
  std::vector<float> x(static_cast<size_t>(n) * widest_in, 0.01f),
      y(static_cast<size_t>(n) * widest_out);
  std::vector<const kernels::Linear*> layer;
  for (const kernels::Linear* l :
       {&w.wq, &w.wk, &w.wv, &w.wqkv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
    if (l->in() > 0) layer.push_back(l);
  }
  auto once = [&] {
    const auto t0 = Clock::now();
    for (const kernels::Linear* l : layer) l->Forward(x.data(), n, y.data());
    const double layer_s = Seconds(t0);
    const auto t1 = Clock::now();
    if (logit_rows > 0) m.output().Forward(x.data(), logit_rows, y.data());
    return layer_s * c.n_layer + Seconds(t1);
  };
  once();  // primitive creation for these shapes
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(once());
  return Median(t) * 1e3;
}

// Times kernels::Attention alone on n tokens with the model's head layout, times n_layer.
double IsolatedAttentionMs(const model::Model& m, int n, int repeats) {
  const auto& c = m.config();
  std::vector<float> q(static_cast<size_t>(n) * c.q_dim()), kv(static_cast<size_t>(n) * c.kv_dim());
  std::vector<float> out(q.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 17) * 0.05f - 0.4f;
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<float>(i % 13) * 0.05f - 0.3f;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  auto once = [&] {
    const auto t0 = Clock::now();
    kernels::Attention(q.data(), n, c.q_dim(), kv.data(), kv.data(), n, c.kv_dim(), c.n_head,
                       c.n_kv_head, c.head_dim, scale, out.data(), c.q_dim());
    return Seconds(t0) * c.n_layer;
  };
  once();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(once());
  return Median(t) * 1e3;
}

Row BenchOne(const model::Model& m, int n, int logit_rows_flag, int repeats, int gemm_iters,
             bool breakdown) {
  const auto& c = m.config();
  if (n > c.context_length) {
    throw Error(ErrorKind::kInvalidArgument, "--tokens: " + std::to_string(n) +
                                                 " exceeds the model's context length " +
                                                 std::to_string(c.context_length));
  }
  Row r;
  r.tokens = n;
  r.logit_rows = logit_rows_flag <= 0 ? n : std::min(logit_rows_flag, n);
  std::vector<int32_t> toks(n);
  for (int i = 0; i < n; ++i)
    toks[i] = static_cast<int32_t>((i * 7919u + 13u) % static_cast<unsigned>(c.n_vocab));
  std::vector<float> logits(static_cast<size_t>(r.logit_rows) * c.n_vocab);
  model::SeqPlan plan;
  plan.tokens = toks;
  plan.logits_begin = n - r.logit_rows;
  plan.logits_end = n;
  plan.logits = logits.data();

  model::Forward(m, {&plan, 1});  // warm-up: oneDNN primitives for these shapes, page faults
  std::vector<double> secs;
  model::ForwardStats st;
  for (int i = 0; i < repeats; ++i) {
    st = {};
    const auto t0 = Clock::now();
    model::Forward(m, {&plan, 1}, &st);
    secs.push_back(Seconds(t0));
  }
  r.peak_rss =
      PeakRssBytes().value_or(0);  // load + forwards so far, before the yardstick's own buffers
  const double med = Median(secs);
  r.ms_median = med * 1e3;
  r.ms_best = *std::min_element(secs.begin(), secs.end()) * 1e3;
  r.matmul_gflop = st.matmul_flops * 1e-9;
  r.attention_gflop = st.attention_flops * 1e-9;
  r.fwd_gflops = (st.matmul_flops + st.attention_flops) / med * 1e-9;
  r.fwd_gflops_best = (st.matmul_flops + st.attention_flops) / (r.ms_best * 1e-3) * 1e-9;
  // The yardstick runs as often as the forward so both get a median over comparable spans.
  std::vector<double> gemm;
  for (int i = 0; i < repeats; ++i)
    gemm.push_back(kernels::MeasureGemmGflops(n, c.d_ff, c.d_model, gemm_iters));
  r.gemm_gflops = Median(gemm);
  r.gemm_gflops_best = *std::max_element(gemm.begin(), gemm.end());
  if (breakdown) {
    r.ms_matmul = IsolatedMatmulMs(m, n, r.logit_rows, repeats);
    r.ms_attention = IsolatedAttentionMs(m, n, repeats);
    r.ms_other = std::max(0.0, r.ms_median - r.ms_matmul - r.ms_attention);
  }
  return r;
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
  cmd->add_option("--synthetic-vocab", o->spec.n_vocab, "synthetic model: vocabulary size")
      ->capture_default_str();
  cmd->add_option("--synthetic-type", o->type,
                  "synthetic model: matrix type (bf16, f32, f16, q8_0, q4_0)")
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
    const auto& c = m->config();
    ApplyModelThreads(o->threads, c);
    const int threads = omp_get_max_threads();
    std::printf(
        "model %s: %s, %d layers, d %d, %d heads x %d (%d kv), d_ff %d, vocab %d; built/loaded in "
        "%.1f s\n",
        o->model.empty() ? "(synthetic)" : o->model.c_str(), model::ArchName(c.arch), c.n_layer,
        c.d_model, c.n_head, c.head_dim, c.n_kv_head, c.d_ff, c.n_vocab, Seconds(t_load));
    std::printf("tensor types: %s; file %.1f MB, resident after load %.1f MB\n",
                TypeSummary(m->file()).c_str(), Mb(m->file().file_size()),
                Mb(CurrentRssBytes().value_or(0)));
    std::printf(
        "threads %d, repeats %d (median; best ratio = best forward / best GEMM run), GEMM "
        "yardstick: oneDNN "
        "%s [n x %d] * [%d x %d], %d iters per run\n\n",
        threads, o->repeats, kernels::MatmulPrecisionName(kernels::ActiveMatmulPrecision()),
        c.d_model, c.d_model, c.d_ff, o->gemm_iters);

    std::vector<Row> rows;
    std::printf("%7s %7s %9s %9s %9s %9s %9s %9s %6s %10s\n", "tokens", "logits", "ms/fwd",
                "best ms", "mm GFLOP", "att GFLOP", "fwd GF/s", "GEMM GF/s", "ratio", "best ratio");
    for (int n : lengths) {
      Row r = BenchOne(*m, n, o->logit_rows, o->repeats, o->gemm_iters, !o->no_breakdown);
      std::printf("%7d %7d %9.1f %9.1f %9.2f %9.2f %9.1f %9.1f %6.2f %10.2f\n", r.tokens,
                  r.logit_rows, r.ms_median, r.ms_best, r.matmul_gflop, r.attention_gflop,
                  r.fwd_gflops, r.gemm_gflops, r.fwd_gflops / r.gemm_gflops,
                  r.fwd_gflops_best / r.gemm_gflops_best);
      std::fflush(stdout);
      rows.push_back(r);
    }
    // Peak RSS is read right after each length's forwards, before the GEMM yardstick allocates
    // its own operands: what loading the model and running these forwards took.
    uint64_t peak_rss = 0;
    for (const Row& r : rows) peak_rss = std::max(peak_rss, r.peak_rss);
    std::printf(
        "\npeak resident memory (VmHWM, load + the forwards above): %.1f MB = %.2f x the file's "
        "%.1f MB\n",
        Mb(peak_rss), static_cast<double>(peak_rss) / static_cast<double>(m->file().file_size()),
        Mb(m->file().file_size()));
    if (!o->no_breakdown) {
      std::printf(
          "\nwhere the time goes (ms per forward; matmul and attention timed alone at the same "
          "shapes)\n");
      std::printf("%7s %10s %10s %10s %10s %12s\n", "tokens", "forward", "matmul", "attention",
                  "other", "matmul GF/s");
      for (const Row& r : rows) {
        std::printf("%7d %10.1f %10.1f %10.1f %10.1f %12.1f\n", r.tokens, r.ms_median, r.ms_matmul,
                    r.ms_attention, r.ms_other, r.matmul_gflop / r.ms_matmul * 1e3);
      }
    }
    if (!o->json.empty()) {
      nlohmann::json j;
      j["model"] = {{"file", o->model.empty() ? "synthetic" : o->model},
                    {"arch", model::ArchName(c.arch)},
                    {"n_layer", c.n_layer},
                    {"d_model", c.d_model},
                    {"n_head", c.n_head},
                    {"n_kv_head", c.n_kv_head},
                    {"head_dim", c.head_dim},
                    {"d_ff", c.d_ff},
                    {"n_vocab", c.n_vocab}};
      j["threads"] = threads;
      j["tensor_types"] = TypeSummary(m->file());
      j["file_bytes"] = m->file().file_size();
      j["peak_rss_bytes"] = peak_rss;
      j["repeats"] = o->repeats;
      j["gemm_iters"] = o->gemm_iters;
      j["matmul_precision"] = kernels::MatmulPrecisionName(kernels::ActiveMatmulPrecision());
      for (const Row& r : rows) {
        nlohmann::json e = {{"tokens", r.tokens},
                            {"logit_rows", r.logit_rows},
                            {"ms_per_forward", r.ms_median},
                            {"ms_best", r.ms_best},
                            {"matmul_gflop", r.matmul_gflop},
                            {"attention_gflop", r.attention_gflop},
                            {"forward_gflops", r.fwd_gflops},
                            {"gemm_gflops", r.gemm_gflops},
                            {"ratio", r.fwd_gflops / r.gemm_gflops},
                            {"forward_gflops_best", r.fwd_gflops_best},
                            {"gemm_gflops_best", r.gemm_gflops_best},
                            {"ratio_best", r.fwd_gflops_best / r.gemm_gflops_best}};
        if (!o->no_breakdown) {
          e["breakdown_ms"] = {
              {"matmul", r.ms_matmul}, {"attention", r.ms_attention}, {"other", r.ms_other}};
        }
        j["results"].push_back(e);
      }
      std::ofstream f(o->json);
      f << j.dump(2) << "\n";
      if (!f) throw Error(ErrorKind::kIo, "cannot write '" + o->json + "'");
    }
    return 0;
  };
}

static CommandRegistrar register_bench_forward(AddBenchForward, 90);

}  // namespace bicache::cli
