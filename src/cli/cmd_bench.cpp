// `bicache bench`: the paper's comparison side by side -- every cache mode on the same request
// stream, in one process, on the same depth table.
//
// Fairness: each mode has its own Engine (own prefix store, same depth table) and the modes run
// interleaved request by request (request i under mode A, then B, ...), so machine noise and
// the background load hit every mode alike. One untimed warm-up request pays oneDNN's JIT first.
//
// Definitions (also in docs/benchmarks.md):
//   tokens/s        = requests x gen_length canvas tokens / summed wall seconds of Engine::Run
//                     (prefix builds on misses included). Every position of the canvas is
//                     denoised whatever the stop token, so this is the work-normalised rate the
//                     paper reports (generated tokens / wall time).
//   answer tokens/s = answer tokens (before the first stop token) / the same seconds.
//   agreement       = share of requests whose answer is token-for-token the `none` answer.
//   hit rate        = prefix-store hits / lookups (Engine::cache_stats); the first request of each
//                     prefix misses and builds, so M requests per prefix cap it at (M-1)/M.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "harness/bench_workload.h"
#include "harness/suite.h"
#include "kernels/matmul.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

using nlohmann::json;

struct Mode {
  std::string name;
  engine::CacheMode cache;
  std::unique_ptr<engine::Engine> engine;
  std::vector<engine::RequestResult> results;  // per workload request
  std::vector<bool> correct;
};

// Aggregates of one mode over a subset of the workload's requests.
struct Summary {
  int requests = 0;
  double seconds = 0, canvas_tokens = 0, answer_tokens = 0, forwards = 0, token_layers = 0,
         flops = 0;
  double depth = 0, ratio = 0, agree = 0, correct = 0, hits = 0;
  double start_s = 0, forward_s = 0, sample_s = 0;    // phases of `seconds` (RequestResult)
  std::map<std::string, std::pair<int, int>> family;  // family -> (correct, total)

  double Rate(double x) const { return seconds > 0 ? x / seconds : 0; }
  double Mean(double x) const { return requests > 0 ? x / requests : 0; }
  json ToJson(const std::vector<std::string>& families) const {
    json fam = json::object();
    for (const auto& f : families) {
      auto it = family.find(f);
      if (it != family.end() && it->second.second > 0)
        fam[f] = static_cast<double>(it->second.first) / it->second.second;
    }
    return {{"requests", requests},
            {"seconds", seconds},
            {"tokens_per_s", Rate(canvas_tokens)},
            {"answer_tokens_per_s", Rate(answer_tokens)},
            {"requests_per_s", Rate(requests)},
            {"forwards_per_request", Mean(forwards)},
            {"token_layers_per_request", Mean(token_layers)},
            {"accuracy", Mean(correct)},
            {"accuracy_by_family", fam},
            {"agreement", Mean(agree)},
            {"mean_depth", Mean(depth)},
            {"mean_prefix_ratio", Mean(ratio)},
            {"request_hit_rate", Mean(hits)},
            {"achieved_gflops", Rate(flops) / 1e9},
            {"phases", PhasesJson()}};
  }
  // Where the time went, in seconds per request: prefix lookup/build (`start`), forwards, sampling,
  // and the rest (planning).
  json PhasesJson() const {
    return {{"start_s_per_request", Mean(start_s)},
            {"forward_s_per_request", Mean(forward_s)},
            {"sample_s_per_request", Mean(sample_s)},
            {"other_s_per_request", Mean(std::max(0.0, seconds - start_s - forward_s - sample_s))}};
  }
};

Summary Summarize(const Mode& m, const Mode& ref, const harness::Workload& w,
                  const std::vector<harness::SuiteSample>& suite,
                  const std::vector<size_t>& which) {
  Summary s;
  for (size_t i : which) {
    const engine::RequestResult& r = m.results[i];
    ++s.requests;
    s.seconds += r.seconds;
    s.start_s += r.start_seconds;
    s.forward_s += r.forward_seconds;
    s.sample_s += r.sample_seconds;
    s.canvas_tokens += r.canvas.size();
    s.answer_tokens += r.answer.size();
    s.forwards += r.forwards;
    s.token_layers += static_cast<double>(r.token_layers);
    s.flops += r.flops;
    s.depth += r.depth;
    s.ratio += r.prefix_ratio;
    s.hits += r.prefix_hit;
    s.agree += r.answer == ref.results[i].answer;
    s.correct += m.correct[i];
    auto& f = s.family[suite[w.requests[i].sample].family];
    f.first += m.correct[i];
    f.second += 1;
  }
  return s;
}

// ---- SVG ------------------------------------------------------------------------------------

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                          "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

std::string Num(double v, int prec = 3) {
  std::ostringstream o;
  o.precision(prec);
  o << v;
  return o.str();
}

std::string Esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// 1, 2 or 5 x 10^k, giving about `n` ticks over `range`.
double NiceStep(double range, int n) {
  if (!(range > 0)) return 1;
  const double raw = range / n, mag = std::pow(10.0, std::floor(std::log10(raw))), f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

// One plot area: maps data to pixels and draws the frame, ticks and axis titles.
struct Panel {
  double x0, y0, w, h;  // pixel box of the plot area
  double xmin, xmax, ymin, ymax;
  double X(double v) const { return x0 + (v - xmin) / (xmax - xmin) * w; }
  double Y(double v) const { return y0 + h - (v - ymin) / (ymax - ymin) * h; }
  void Frame(std::ostream& o, const std::string& title, const std::string& xlabel,
             const std::string& ylabel) const {
    o << "<rect x='" << x0 << "' y='" << y0 << "' width='" << w << "' height='" << h
      << "' fill='none' stroke='#333'/>\n";
    o << "<text x='" << x0 + w / 2 << "' y='" << y0 - 12
      << "' text-anchor='middle' font-size='15' font-weight='bold'>" << Esc(title) << "</text>\n";
    o << "<text x='" << x0 + w / 2 << "' y='" << y0 + h + 40
      << "' text-anchor='middle' font-size='13'>" << Esc(xlabel) << "</text>\n";
    o << "<text transform='translate(" << x0 - 48 << "," << y0 + h / 2
      << ") rotate(-90)' text-anchor='middle' "
      << "font-size='13'>" << Esc(ylabel) << "</text>\n";
    const double xs = NiceStep(xmax - xmin, 6), ys = NiceStep(ymax - ymin, 5);
    for (double v = std::ceil(xmin / xs - 1e-9) * xs; v <= xmax + 1e-9 * xs; v += xs) {
      o << "<line x1='" << X(v) << "' y1='" << y0 + h << "' x2='" << X(v) << "' y2='" << y0 + h + 5
        << "' stroke='#333'/><text x='" << X(v) << "' y='" << y0 + h + 19
        << "' text-anchor='middle' font-size='11'>" << Num(v) << "</text>\n";
    }
    for (double v = std::ceil(ymin / ys - 1e-9) * ys; v <= ymax + 1e-9 * ys; v += ys) {
      o << "<line x1='" << x0 << "' y1='" << Y(v) << "' x2='" << x0 + w << "' y2='" << Y(v)
        << "' stroke='#ddd'/><text x='" << x0 - 6 << "' y='" << Y(v) + 4
        << "' text-anchor='end' font-size='11'>" << Num(v) << "</text>\n";
    }
  }
};

struct Point {
  std::string label;
  double x, y;
};

void WriteSvg(const std::string& path, const std::vector<Point>& points,
              const engine::DepthTable& table, const std::string& caption) {
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='1000' height='460' "
       "font-family='sans-serif'>\n"
    << "<rect width='1000' height='460' fill='white'/>\n";
  o << "<text x='500' y='450' text-anchor='middle' font-size='11' fill='#555'>" << Esc(caption)
    << "</text>\n";

  // Left: throughput vs accuracy, one labelled point per mode.
  double xmax = 0;
  for (const auto& p : points) xmax = std::max(xmax, p.x);
  Panel a{80, 50, 380, 320, 0, xmax > 0 ? xmax * 1.15 : 1, 0, 1.05};
  a.Frame(o, "Throughput vs accuracy", "canvas tokens / s", "accuracy");
  for (size_t i = 0; i < points.size(); ++i) {
    const char* c = kPalette[i % std::size(kPalette)];
    const double px = a.X(points[i].x), py = a.Y(std::clamp(points[i].y, 0.0, 1.05));
    o << "<circle cx='" << px << "' cy='" << py << "' r='5' fill='" << c << "'/>\n"
      << "<text x='" << px + 7 << "' y='" << py - 6 - 11.0 * (i % 2) << "' font-size='12' fill='"
      << c << "'>" << Esc(points[i].label) << "</text>\n";
  }

  // Right: calibration curves (mean prefix K/V similarity by layer, one line per ratio bin).
  const auto& bins = table.bins();
  int layers = table.n_layer();
  double ymin = table.threshold();
  for (const auto& b : bins) {
    layers = std::max(layers, static_cast<int>(b.similarity.size()));
    for (double v : b.similarity) ymin = std::min(ymin, v);
  }
  ymin = std::max(-1.0, std::floor((ymin - 0.01) * 100) / 100);
  Panel b{560, 50, 380, 320, 0, std::max(1, layers - 1) * 1.0, ymin, 1.0};
  b.Frame(o, "Calibration: prefix K/V similarity", "layer", "cosine similarity");
  if (bins.empty()) {
    o << "<text x='" << b.x0 + b.w / 2 << "' y='" << b.y0 + b.h / 2
      << "' text-anchor='middle' font-size='13' fill='#888'>no calibration bins (run bicache "
         "calibrate)</text>\n";
  }
  for (size_t i = 0; i < bins.size(); ++i) {
    // Colour runs blue (short prefix) to red (long prefix).
    const double t = bins[i].ratio_pct / 100.0;
    const int r = static_cast<int>(40 + 200 * t), bl = static_cast<int>(220 - 180 * t);
    char colour[16];
    std::snprintf(colour, sizeof colour, "#%02x50%02x", r, bl);
    o << "<polyline fill='none' stroke='" << colour << "' stroke-width='1.5' points='";
    for (size_t l = 0; l < bins[i].similarity.size(); ++l) {
      o << b.X(static_cast<double>(l)) << "," << b.Y(std::max(ymin, bins[i].similarity[l])) << " ";
    }
    o << "'/>\n";
    // Label a handful of bins at the line's end so the legend stays readable.
    const size_t every = std::max<size_t>(1, bins.size() / 6);
    if ((i % every == 0 || i + 1 == bins.size()) && !bins[i].similarity.empty()) {
      o << "<text x='" << b.x0 + b.w + 4 << "' y='"
        << b.Y(std::max(ymin, bins[i].similarity.back())) + 4 << "' font-size='10' fill='" << colour
        << "'>r=" << bins[i].ratio_pct << "%</text>\n";
    }
  }
  o << "<line x1='" << b.x0 << "' y1='" << b.Y(table.threshold()) << "' x2='" << b.x0 + b.w
    << "' y2='" << b.Y(table.threshold()) << "' stroke='black' stroke-dasharray='6,4'/>\n"
    << "<text x='" << b.x0 + 6 << "' y='" << b.Y(table.threshold()) - 5
    << "' font-size='11'>threshold " << Num(table.threshold()) << "</text>\n";
  o << "</svg>\n";

  std::ofstream f(path);
  f << o.str();
  if (!f) throw Error(ErrorKind::kIo, "--svg: cannot write '" + path + "'");
}

// Mean prefix ratio of the workload's groups in one band (the same for every mode).
double BandRatio(const harness::Workload& w, const std::string& band) {
  double sum = 0;
  int n = 0;
  for (const auto& g : w.groups) {
    if (g.band == band) sum += g.ratio, ++n;
  }
  return n > 0 ? sum / n : 0;
}

std::vector<std::string> SplitModes(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',') {
      if (cur.empty())
        throw Error(ErrorKind::kInvalidArgument, "--modes '" + text + "': empty mode name");
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

}  // namespace

Runner AddBench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Compare cache modes side by side on the task suite (throughput, accuracy)");
  struct Opts {
    std::string model, suite, modes = "none,llm,dual,bicache,bicache+dual", json, svg;
    std::string order = "interleaved", band = "all";
    int prefixes = 0, per_prefix = 4, threads = 0;
    SamplingFlags s;
  };
  auto o = std::make_shared<Opts>();
  o->suite = harness::DefaultSuitePath();
  AddModelFlag(cmd, &o->model);
  cmd->add_option("--suite", o->suite, "task suite JSONL (default: the held-out suite)");
  cmd->add_option("--prefixes", o->prefixes,
                  "distinct shared prefixes P (per band with --ratio-band sweep); "
                  "default 0 = every prefix group of the suite with M usable requests");
  cmd->add_option("--per-prefix", o->per_prefix, "requests M per prefix");
  cmd->add_option("--modes", o->modes,
                  "comma-separated cache modes to compare (default: "
                  "none,llm,dual,bicache,bicache+dual); with a "
                  "dual mode and no --block-length every mode uses block length gen-length/4");
  cmd->add_option("--order", o->order,
                  "interleaved (A1 B1 .. A2 B2 ..) or grouped (A1 A2 .. B1 B2 ..)");
  cmd->add_option("--ratio-band", o->band,
                  "prefixes by prefix ratio: all, short, long, or sweep (P of each)");
  cmd->add_option("--json", o->json, "write the results as JSON to this file");
  cmd->add_option("--svg", o->svg,
                  "write a throughput/accuracy + calibration plot (SVG) to this file");
  AddThreadsFlag(cmd, &o->threads);
  o->s.gen_length = 32;
  o->s.Register(cmd);
  return [=]() {
    if (cmd->count("--cache") > 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  "bench compares the modes given by --modes; --cache is not used here");
    }
    ApplyThreads(o->threads);
    // Modes (validated before the model loads).
    std::vector<Mode> modes;
    bool any_dual = false;
    for (const std::string& name : SplitModes(o->modes)) {
      Mode m;
      try {
        m.cache = engine::ParseCacheMode(name);
      } catch (const Error& e) {
        throw Error(e.kind(), std::string("--modes: ") + e.what());
      }
      m.name = m.cache.ToString();
      for (const auto& prev : modes) {
        if (prev.name == m.name)
          throw Error(ErrorKind::kInvalidArgument, "--modes: '" + m.name + "' given twice");
      }
      any_dual |= m.cache.dual;
      modes.push_back(std::move(m));
    }
    // Same settings for every mode. With a dual mode and no --block-length, blocks of gen/4 so the
    // dual cache has block starts to rebuild at (one block = no reuse between blocks).
    SamplingFlags sf = o->s;
    if (sf.block_length == 0 && any_dual && sf.gen_length % 4 == 0 && sf.gen_length >= 4) {
      sf.block_length = sf.gen_length / 4;
    }
    engine::RequestOptions base;
    base.sampler = sf.Sampler();
    base.refresh_interval = sf.refresh;
    const harness::WorkloadOptions wo{o->prefixes, o->per_prefix,
                                      harness::ParseRequestOrder(o->order),
                                      harness::ParseRatioBand(o->band)};

    auto lm = engine::LoadedModel::Load(o->model);
    ApplyModelThreads(o->threads, lm->model().config());
    const auto& cfg = lm->model().config();
    base.sampler.stop_ids = lm->stop_ids();
    const std::vector<harness::SuiteSample> suite = harness::LoadSuite(o->suite);
    const std::vector<std::string> families = harness::Families(suite);

    // Prompts and prefix ratios (r = prefix / (prompt + canvas), the depth table's definition).
    std::vector<engine::Prompt> prompts;
    std::vector<double> ratios;
    for (const auto& s : suite) {
      prompts.push_back(harness::SamplePrompt(*lm, s));
      const int n = static_cast<int>(prompts.back().tokens.size()) + base.sampler.gen_length;
      const int p = prompts.back().prefix_len;
      ratios.push_back(p > 0 && n <= cfg.context_length ? static_cast<double>(p) / n : -1.0);
    }
    const harness::Workload w = harness::BuildWorkload(suite, ratios, wo);

    const engine::DepthTable table = lm->LoadDepthTable();
    if (table.empty()) WarnNoDepthTable(lm->depth_table_path());
    for (auto& m : modes) {
      engine::EngineOptions eo;
      eo.cache_budget_bytes = static_cast<size_t>(sf.cache_budget_mb * 1024 * 1024);
      eo.depth_table = table;
      m.engine = std::make_unique<engine::Engine>(lm->model(), std::move(eo));
    }
    auto request_for = [&](size_t i, const engine::CacheMode& mode) {
      engine::RequestOptions r = base;
      const engine::Prompt& p = prompts[w.requests[i].sample];
      r.prompt = p.tokens;
      r.prefix_len = p.prefix_len;
      r.cache = mode;
      return r;
    };

    const size_t N = w.requests.size();
    std::fprintf(stderr,
                 "bench: %zu prefixes x %d requests, %zu modes, gen %d, steps %d, block %d\n",
                 w.groups.size(), o->per_prefix, modes.size(), base.sampler.gen_length,
                 base.sampler.steps, base.sampler.block_length);
    {  // Untimed warm-up: oneDNN JIT and page-in would otherwise be charged to the first mode.
      engine::Engine warm(lm->model(), {});
      warm.Run(request_for(0, engine::CacheMode{}));
    }
    const auto t_start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < N; ++i) {
      const harness::SuiteSample& sample = suite[w.requests[i].sample];
      std::fprintf(stderr, "[%zu/%zu] %s (prefix %s, r=%.2f)", i + 1, N, sample.id.c_str(),
                   w.groups[w.requests[i].group].key.c_str(), ratios[w.requests[i].sample]);
      for (auto& m : modes) {
        engine::RequestResult r = m.engine->Run(request_for(i, m.cache));
        m.correct.push_back(harness::IsCorrect(sample, lm->Detokenize(r.answer)));
        std::fprintf(stderr, "  %s %.2fs", m.name.c_str(), r.seconds);
        m.results.push_back(std::move(r));
      }
      std::fprintf(stderr, "\n");
    }
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();

    // ---- summaries ----
    auto find = [&](const std::string& name) -> const Mode* {
      for (const auto& m : modes)
        if (m.name == name) return &m;
      return nullptr;
    };
    const Mode* none = find("none");
    const Mode* dual = find("dual");
    const Mode& ref = none ? *none : modes.front();  // agreement reference
    std::vector<size_t> every(N);
    for (size_t i = 0; i < N; ++i) every[i] = i;

    json jmodes = json::object(), vs_none = json::object(), vs_dual = json::object();
    std::map<std::string, Summary> sums;
    for (const auto& m : modes) sums[m.name] = Summarize(m, ref, w, suite, every);
    for (const auto& m : modes) {
      const Summary& s = sums[m.name];
      const engine::EngineCacheStats cs = m.engine->cache_stats();
      json j = s.ToJson(families);
      j["hit_rate"] =
          cs.total.queries > 0 ? static_cast<double>(cs.total.hits) / cs.total.queries : 0.0;
      j["lookups"] = cs.total.queries;
      j["prefix_builds"] = cs.prefix_builds;
      j["cache_bytes"] = cs.total.bytes_used;
      j["cache_entries"] = cs.total.entries;
      if (wo.band == harness::RatioBand::kSweep) {
        json bands = json::object();
        for (const char* band : {"short", "long"}) {
          std::vector<size_t> idx;
          for (size_t i = 0; i < N; ++i)
            if (w.groups[w.requests[i].group].band == band) idx.push_back(i);
          const Summary bs = Summarize(m, ref, w, suite, idx);
          bands[band] = bs.ToJson(families);
          bands[band]["workload_ratio"] = BandRatio(w, band);
          if (none) {
            const Summary ns = Summarize(*none, ref, w, suite, idx);
            const double base_tps = ns.Rate(ns.canvas_tokens);
            bands[band]["speedup_vs_none"] =
                base_tps > 0 ? bs.Rate(bs.canvas_tokens) / base_tps : 0.0;
          }
        }
        j["by_band"] = bands;
      }
      jmodes[m.name] = j;
      const double tps = s.Rate(s.canvas_tokens);
      if (none) {
        const double b = sums[none->name].Rate(sums[none->name].canvas_tokens);
        vs_none[m.name] = b > 0 ? tps / b : 0.0;
      }
      if (dual) {
        const double b = sums[dual->name].Rate(sums[dual->name].canvas_tokens);
        vs_dual[m.name] = b > 0 ? tps / b : 0.0;
      }
    }

    // The project's targets (issue 6): bicache >= 1.5x none, bicache+dual >= 1.3x dual, each within
    // 1 accuracy point of none. Reported with the shortfall, so a run that misses says by how much.
    json targets = json::array();
    auto add_target = [&](const std::string& mode, const std::string& base, double want) {
      const json& ratios = base == "none" ? vs_none : vs_dual;  // tok/s ratios computed above
      if (!jmodes.contains(mode) || !ratios.contains(mode) || !none) return;
      const double got = ratios[mode].get<double>();
      const double acc_diff = 100.0 * (jmodes[mode]["accuracy"].get<double>() -
                                       jmodes["none"]["accuracy"].get<double>());
      targets.push_back({{"mode", mode},
                         {"versus", base},
                         {"speedup", got},
                         {"speedup_target", want},
                         {"speedup_met", got >= want},
                         {"speedup_shortfall", std::max(0.0, want - got)},
                         {"accuracy_points_vs_none", acc_diff},
                         {"accuracy_within_1_point", std::abs(acc_diff) <= 1.0 + 1e-9}});
    };
    add_target("bicache", "none", 1.5);
    add_target("bicache+dual", "dual", 1.3);

    // Efficiency: achieved GFLOP/s of the reference mode's forwards against a plain GEMM (the
    // engine's matmul precision, kernels::ActiveMatmulPrecision) of
    // the model's FFN shape at the mean sequence length, measured now (same load, same threads).
    const Summary& rs = sums[ref.name];
    double mean_tokens = 0;
    for (size_t i = 0; i < N; ++i)
      mean_tokens += prompts[w.requests[i].sample].tokens.size() + base.sampler.gen_length;
    mean_tokens /= std::max<size_t>(N, 1);
    const size_t gm = std::max<size_t>(1, static_cast<size_t>(mean_tokens + 0.5));
    const size_t gn = cfg.d_ff, gk = cfg.d_model;
    const double gemm_flop = 2.0 * gm * gn * gk;
    const int iters = static_cast<int>(std::clamp(4e9 / gemm_flop, 3.0, 500.0));
    const double gemm = kernels::MeasureGemmGflops(gm, gn, gk, iters);
    const double achieved = rs.Rate(rs.flops) / 1e9;
    json eff = {
        {"mode", ref.name},
        {"achieved_gflops", achieved},
        {"gemm_gflops", gemm},
        {"fraction_of_gemm", gemm > 0 ? achieved / gemm : 0.0},
        {"gemm_shape", {{"m", gm}, {"n", gn}, {"k", gk}}},
        {"matmul_precision", kernels::MatmulPrecisionName(kernels::ActiveMatmulPrecision())},
        {"note",
         "achieved = model::ForwardStats flops (matmul + attention) / Engine::Run seconds, "
         "sampling "
         "included; gemm = kernels::MeasureGemmGflops at the FFN up-projection shape"}};

    json jt = {{"path", lm->depth_table_path()}, {"present", !table.empty()},
               {"threshold", table.threshold()}, {"n_layer", table.n_layer()},
               {"max_depth", table.max_depth()}, {"points", json::array()},
               {"bins", json::array()}};
    for (const auto& p : table.points())
      jt["points"].push_back({{"ratio_pct", p.ratio_pct}, {"depth", p.depth}});
    for (const auto& b : table.bins()) {
      jt["bins"].push_back(
          {{"ratio_pct", b.ratio_pct}, {"samples", b.samples}, {"similarity", b.similarity}});
    }
    json groups = json::array();
    for (const auto& g : w.groups) {
      groups.push_back(
          {{"prefix", g.key}, {"family", g.family}, {"band", g.band}, {"ratio", g.ratio}});
    }
    json settings = {{"model", lm->path()},
                     {"suite", o->suite},
                     {"prefixes", o->prefixes},
                     {"per_prefix", o->per_prefix},
                     {"requests", N},
                     {"order", harness::RequestOrderName(wo.order)},
                     {"ratio_band", harness::RatioBandName(wo.band)},
                     {"gen_length", base.sampler.gen_length},
                     {"steps", base.sampler.steps},
                     {"block_length", base.sampler.block_length},
                     {"algorithm", diffusion::AlgorithmName(base.sampler.algorithm)},
                     {"threshold", base.sampler.threshold},
                     {"refresh", base.refresh_interval},
                     {"threads", o->threads},
                     {"agreement_reference", ref.name},
                     {"wall_seconds", wall},
                     {"groups", groups}};

    // ---- stdout table ----
    std::printf("%zu requests (%zu prefixes x %d), gen %d, steps %d, block %d, %s; model %s\n", N,
                w.groups.size(), o->per_prefix, base.sampler.gen_length, base.sampler.steps,
                base.sampler.block_length, harness::RequestOrderName(wo.order), lm->path().c_str());
    std::printf("%-14s %9s %7s %7s %7s %8s %10s %6s %6s %5s %9s %5s", "mode", "tok/s", "x none",
                "x dual", "req/s", "fwd/req", "Ktok-lay", "acc", "agree", "hit", "cache MB",
                "depth");
    for (const auto& f : families) std::printf(" %8.8s", f.c_str());
    std::printf("\n");
    for (const auto& m : modes) {
      const json& j = jmodes[m.name];
      auto ratio = [&](const json& t) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2fx", t.contains(m.name) ? t[m.name].get<double>() : 0.0);
        return t.contains(m.name) ? std::string(buf) : std::string("-");
      };
      std::printf(
          "%-14s %9.1f %7s %7s %7.2f %8.1f %10.2f %6.3f %6.3f %5.2f %9.1f %5.2f", m.name.c_str(),
          j["tokens_per_s"].get<double>(), ratio(vs_none).c_str(), ratio(vs_dual).c_str(),
          j["requests_per_s"].get<double>(), j["forwards_per_request"].get<double>(),
          j["token_layers_per_request"].get<double>() / 1e3, j["accuracy"].get<double>(),
          j["agreement"].get<double>(), j["hit_rate"].get<double>(),
          j["cache_bytes"].get<double>() / (1024.0 * 1024.0), j["mean_depth"].get<double>());
      for (const auto& f : families) {
        const auto& af = j["accuracy_by_family"];
        if (af.contains(f))
          std::printf(" %8.3f", af[f].get<double>());
        else
          std::printf(" %8s", "-");
      }
      std::printf("\n");
    }
    if (wo.band == harness::RatioBand::kSweep) {
      std::printf("ratio sweep: tok/s, x none, mean depth per band (short r=%.2f, long r=%.2f)\n",
                  BandRatio(w, "short"), BandRatio(w, "long"));
      for (const auto& m : modes) {
        std::printf("  %-14s", m.name.c_str());
        for (const char* band : {"short", "long"}) {
          const json& bj = jmodes[m.name]["by_band"][band];
          std::printf("  %-5s %8.1f %6.2fx %4.2f", band, bj["tokens_per_s"].get<double>(),
                      bj.value("speedup_vs_none", 0.0), bj["mean_depth"].get<double>());
        }
        std::printf("\n");
      }
    }
    std::printf(
        "where the time goes (ms per request): prefix lookup+build, forwards, sampling, other\n");
    for (const auto& m : modes) {
      const json& ph = jmodes[m.name]["phases"];
      const double st = ph["start_s_per_request"].get<double>(),
                   fw = ph["forward_s_per_request"].get<double>(),
                   sa = ph["sample_s_per_request"].get<double>(),
                   ot = ph["other_s_per_request"].get<double>();
      const double tot = std::max(1e-12, st + fw + sa + ot);
      std::printf(
          "  %-14s %8.1f %8.1f %8.1f %8.1f   (forward %2.0f%%, prefix %2.0f%%, sampling %2.0f%%)\n",
          m.name.c_str(), 1e3 * st, 1e3 * fw, 1e3 * sa, 1e3 * ot, 100 * fw / tot, 100 * st / tot,
          100 * sa / tot);
    }
    for (const auto& t : targets) {
      std::printf(
          "target: %s %.2fx %s (>= %.1fx: %s), accuracy %+.1f points vs none (within 1: %s)\n",
          t["mode"].get<std::string>().c_str(), t["speedup"].get<double>(),
          t["versus"].get<std::string>().c_str(), t["speedup_target"].get<double>(),
          t["speedup_met"].get<bool>()
              ? "met"
              : ("short by " + Num(t["speedup_shortfall"].get<double>(), 2) + "x").c_str(),
          t["accuracy_points_vs_none"].get<double>(),
          t["accuracy_within_1_point"].get<bool>() ? "yes" : "no");
    }
    std::printf(
        "efficiency (%s): %.2f GFLOP/s achieved vs %.2f GFLOP/s oneDNN %s GEMM %zux%zux%zu "
        "(%.0f%%)\n",
        ref.name.c_str(), achieved, gemm,
        kernels::MatmulPrecisionName(kernels::ActiveMatmulPrecision()), gm, gn, gk,
        gemm > 0 ? 100 * achieved / gemm : 0.0);
    std::printf("depth table: %s (max depth %d of %d layers, threshold %.3g)\n",
                table.empty() ? "none" : lm->depth_table_path().c_str(), table.max_depth(),
                cfg.n_layer, table.threshold());

    if (!o->json.empty()) {
      json out = {
          {"modes", jmodes},      {"speedup_vs_none", vs_none}, {"speedup_vs_dual", vs_dual},
          {"settings", settings}, {"depth_table", jt},          {"efficiency", eff},
          {"targets", targets}};
      std::ofstream f(o->json);
      f << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
      if (!f) throw Error(ErrorKind::kIo, "--json: cannot write '" + o->json + "'");
    }
    if (!o->svg.empty()) {
      std::vector<Point> pts;
      for (const auto& m : modes) {
        pts.push_back({m.name, jmodes[m.name]["tokens_per_s"].get<double>(),
                       jmodes[m.name]["accuracy"].get<double>()});
      }
      WriteSvg(o->svg, pts, table,
               cfg.name + ": " + std::to_string(N) + " requests, gen " +
                   std::to_string(base.sampler.gen_length) + ", block " +
                   std::to_string(base.sampler.block_length));
    }
    return 0;
  };
}

static CommandRegistrar register_bench(AddBench, 80);

}  // namespace bicache::cli
