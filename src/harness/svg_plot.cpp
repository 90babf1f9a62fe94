#include "harness/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

#include "util/error.h"
#include "util/field_error.h"

namespace bicache::harness {
namespace {

const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                          "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

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

// The series a table's bins carry: K/V similarity by layer (criterion kv_similarity) or agreement
// with `none` by reuse depth 0..n_layer (criteria answers and accuracy).
const std::vector<double>& Curve(const engine::DepthTable& table, const engine::CalibrationBin& b) {
  return table.criterion() == engine::DepthCriterion::kKvSimilarity ? b.similarity : b.agreement;
}

// One panel of calibration curves (one line per ratio bin, blue = short prefix, red = long) and
// the table's threshold, in a 380 x 320 box at (x0, y0).
void DrawCalibration(std::ostream& o, double x0, double y0, const engine::DepthTable& table) {
  const bool answers = table.criterion() != engine::DepthCriterion::kKvSimilarity;
  // An accuracy table's threshold is in points of accuracy, not on this axis: no threshold line.
  const bool line = table.criterion() != engine::DepthCriterion::kAccuracy;
  const auto& bins = table.bins();
  int points = answers ? table.n_layer() + 1 : table.n_layer();
  double ymin = line ? table.threshold() : 1.0;
  for (const auto& bin : bins) {
    points = std::max(points, static_cast<int>(Curve(table, bin).size()));
    for (double v : Curve(table, bin)) ymin = std::min(ymin, v);
  }
  ymin = std::max(answers ? 0.0 : -1.0, std::floor((ymin - 0.01) * 100) / 100);
  Panel b{x0, y0, 380, 320, 0, std::max(1, points - 1) * 1.0, ymin, 1.0};
  if (answers) {
    b.Frame(o, "Calibration: answers agreeing with none", "reuse depth (layers)",
            "agreement with none");
  } else {
    b.Frame(o, "Calibration: prefix K/V similarity", "layer", "cosine similarity");
  }
  if (bins.empty()) {
    o << "<text x='" << b.x0 + b.w / 2 << "' y='" << b.y0 + b.h / 2
      << "' text-anchor='middle' font-size='13' fill='#888'>no calibration bins (run bicache "
         "calibrate)</text>\n";
  }
  for (size_t i = 0; i < bins.size(); ++i) {
    const std::vector<double>& curve = Curve(table, bins[i]);
    const double t = bins[i].ratio_pct / 100.0;
    const int r = static_cast<int>(40 + 200 * t), bl = static_cast<int>(220 - 180 * t);
    char colour[16];
    std::snprintf(colour, sizeof colour, "#%02x50%02x", r, bl);
    o << "<polyline fill='none' stroke='" << colour << "' stroke-width='1.5' points='";
    for (size_t l = 0; l < curve.size(); ++l)
      o << b.X(static_cast<double>(l)) << "," << b.Y(std::max(ymin, curve[l])) << " ";
    o << "'/>\n";
    // Label a handful of bins at the line's end so the legend stays readable.
    const size_t every = std::max<size_t>(1, bins.size() / 6);
    if ((i % every == 0 || i + 1 == bins.size()) && !curve.empty()) {
      o << "<text x='" << b.x0 + b.w + 4 << "' y='" << b.Y(std::max(ymin, curve.back())) + 4
        << "' font-size='10' fill='" << colour << "'>r=" << bins[i].ratio_pct << "%</text>\n";
    }
  }
  if (!line) return;
  o << "<line x1='" << b.x0 << "' y1='" << b.Y(table.threshold()) << "' x2='" << b.x0 + b.w
    << "' y2='" << b.Y(table.threshold()) << "' stroke='black' stroke-dasharray='6,4'/>\n"
    << "<text x='" << b.x0 + 6 << "' y='" << b.Y(table.threshold()) - 5
    << "' font-size='11'>threshold " << Num(table.threshold()) << "</text>\n";
}

// A band's marker: colour and shape (all: dark circle, short: blue square, long: red triangle,
// as the calibration curves colour short and long prefixes), filled when the point keeps accuracy.
const char* BandColour(const std::string& band) {
  return band == "short" ? "#1f77b4" : band == "long" ? "#d62728" : "#333";
}

void Marker(std::ostream& o, const std::string& band, double x, double y, bool filled) {
  const char* c = BandColour(band);
  const std::string paint =
      std::string("fill='") + (filled ? c : "white") + "' stroke='" + c + "' stroke-width='1.5'";
  if (band == "short") {
    o << "<rect x='" << x - 4.5 << "' y='" << y - 4.5 << "' width='9' height='9' " << paint
      << "/>\n";
  } else if (band == "long") {
    o << "<polygon points='" << x << "," << y - 6 << " " << x - 5.5 << "," << y + 4 << " "
      << x + 5.5 << "," << y + 4 << "' " << paint << "/>\n";
  } else {
    o << "<circle cx='" << x << "' cy='" << y << "' r='5' " << paint << "/>\n";
  }
}

// The trade-off panel in a 380 x 320 box at (x0, y0): x = speed-up over none, y = delta accuracy
// in points with its 95% interval as an error bar, one marker per mode and band, the targets'
// -1 point line dashed. Mode names label the "all" markers (or the first band's).
void DrawTradeoff(std::ostream& o, double x0, double y0, const std::vector<TradeoffPoint>& pts) {
  double xlo = 1, xhi = 1, ylo = -2, yhi = 1;
  for (const auto& p : pts) {
    xlo = std::min(xlo, p.speedup), xhi = std::max(xhi, p.speedup);
    ylo = std::min(ylo, p.lo), yhi = std::max(yhi, p.hi);
  }
  const double xpad = 0.12 * (xhi - xlo) + 0.05, ypad = 0.05 * (yhi - ylo);
  Panel a{x0, y0, 380, 320, std::max(0.0, xlo - xpad), xhi + xpad, ylo - ypad, yhi + ypad};
  o << "<g id='tradeoff'>\n";
  a.Frame(o, "Trade-off vs none (paired)", "speed-up over none (canvas tokens / s)",
          "\u0394 accuracy vs none (points, 95% interval)");
  o << "<line x1='" << a.x0 << "' y1='" << a.Y(0) << "' x2='" << a.x0 + a.w << "' y2='" << a.Y(0)
    << "' stroke='#999'/>\n<line x1='" << a.X(1) << "' y1='" << a.y0 << "' x2='" << a.X(1)
    << "' y2='" << a.y0 + a.h << "' stroke='#bbb'/>\n"
    << "<line x1='" << a.x0 << "' y1='" << a.Y(-1) << "' x2='" << a.x0 + a.w << "' y2='" << a.Y(-1)
    << "' stroke='black' stroke-dasharray='6,4'/>\n<text x='" << a.x0 + a.w - 6 << "' y='"
    << a.Y(-1) + 14 << "' text-anchor='end' font-size='11'>target: -1 point</text>\n";
  std::vector<std::string> labelled;
  for (const auto& p : pts) {
    const double dx = p.band == "short" ? -4 : p.band == "long" ? 4 : 0;
    const double px = a.X(p.speedup) + dx, py = a.Y(p.delta);
    o << "<line class='errbar' x1='" << px << "' y1='" << a.Y(p.hi) << "' x2='" << px << "' y2='"
      << a.Y(p.lo) << "' stroke='" << BandColour(p.band) << "' stroke-opacity='0.55'/>\n";
    for (double v : {p.lo, p.hi}) {
      o << "<line x1='" << px - 3 << "' y1='" << a.Y(v) << "' x2='" << px + 3 << "' y2='" << a.Y(v)
        << "' stroke='" << BandColour(p.band) << "' stroke-opacity='0.55'/>\n";
    }
    Marker(o, p.band, px, py, p.keeps);
    if (std::find(labelled.begin(), labelled.end(), p.label) == labelled.end()) {
      const double ly = py - 8 - 11.0 * (labelled.size() % 2);
      labelled.push_back(p.label);
      o << "<text x='" << px + 7 << "' y='" << ly << "' font-size='11'>" << Esc(p.label)
        << "</text>\n";
    }
  }
  // Legend: the bands that appear, and what a filled marker means.
  double ly = a.y0 + 14;
  for (const char* band : {"all", "short", "long"}) {
    if (std::none_of(pts.begin(), pts.end(),
                     [&](const TradeoffPoint& p) { return p.band == band; }))
      continue;
    Marker(o, band, a.x0 + 12, ly - 4, true);
    o << "<text x='" << a.x0 + 22 << "' y='" << ly << "' font-size='11'>" << band << "</text>\n";
    ly += 15;
  }
  o << "<text x='" << a.x0 + 8 << "' y='" << ly << "' font-size='10' fill='#555'>hollow: fails "
    << "-1 point / interval -2</text>\n</g>\n";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) throw FieldError(ErrorKind::kIo, "{svg}: cannot write '" + path + "'");
}

}  // namespace

std::string Num(double v, int prec) {
  std::ostringstream o;
  o.precision(prec);
  o << v;
  return o.str();
}

void WriteBenchSvg(const std::string& path, const std::vector<PlotPoint>& points,
                   const std::vector<TradeoffPoint>& tradeoff, const engine::DepthTable& table,
                   const std::string& caption) {
  const int width = tradeoff.empty() ? 1000 : 1480;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width
    << "' height='460' font-family='sans-serif'>\n"
    << "<rect width='" << width << "' height='460' fill='white'/>\n";
  o << "<text x='" << width / 2 << "' y='450' text-anchor='middle' font-size='11' fill='#555'>"
    << Esc(caption) << "</text>\n";

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

  // Middle (when none ran): the trade-off. Right: the depth table's calibration curves.
  if (!tradeoff.empty()) DrawTradeoff(o, 560, 50, tradeoff);
  DrawCalibration(o, tradeoff.empty() ? 560 : 1040, 50, table);
  o << "</svg>\n";
  WriteFile(path, o.str());
}

void WriteCalibrationSvg(const std::string& path, const engine::DepthTable& table,
                         const std::string& caption) {
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='520' height='460' "
       "font-family='sans-serif'>\n"
    << "<rect width='520' height='460' fill='white'/>\n";
  o << "<text x='260' y='450' text-anchor='middle' font-size='11' fill='#555'>" << Esc(caption)
    << "</text>\n";
  DrawCalibration(o, 80, 50, table);
  o << "</svg>\n";
  WriteFile(path, o.str());
}

}  // namespace bicache::harness
