#include "harness/paired_stats.h"

#include <algorithm>
#include <cmath>

namespace bicache::harness {
namespace {

constexpr double kZ95 = 1.959963984540054;  // two-sided 95% normal quantile

// log C(m, i)
double LogChoose(int m, int i) {
  return std::lgamma(m + 1.0) - std::lgamma(i + 1.0) - std::lgamma(m - i + 1.0);
}

}  // namespace

Interval WilsonInterval(int successes, int n) {
  if (n <= 0) return {0.0, 1.0};
  const double p = static_cast<double>(successes) / n, z2 = kZ95 * kZ95;
  const double denom = 1.0 + z2 / n;
  const double center = (p + z2 / (2.0 * n)) / denom;
  const double half = kZ95 * std::sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom;
  // The exact ends at 0 and n (rounding would leave 1e-17 off).
  return {successes == 0 ? 0.0 : std::max(0.0, center - half),
          successes == n ? 1.0 : std::min(1.0, center + half)};
}

PairedCounts CountPairs(const std::vector<bool>& a, const std::vector<bool>& b,
                        const std::vector<size_t>& which) {
  PairedCounts c;
  for (size_t i : which) {
    if (a[i] && b[i])
      ++c.both;
    else if (b[i])
      ++c.b_only;
    else if (a[i])
      ++c.a_only;
    else
      ++c.neither;
  }
  return c;
}

PairedCounts CountPairs(const std::vector<bool>& a, const std::vector<bool>& b) {
  std::vector<size_t> all(std::min(a.size(), b.size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return CountPairs(a, b, all);
}

double McNemarExactP(int b_only, int a_only) {
  const int m = b_only + a_only, k = std::min(b_only, a_only);
  if (m <= 0) return 1.0;
  // 2 * P(X <= k), X ~ Binomial(m, 1/2), summed as exp(log terms - max) to stay finite.
  const double log_half_m = -m * std::log(2.0);
  double log_max = -INFINITY;
  for (int i = 0; i <= k; ++i) log_max = std::max(log_max, LogChoose(m, i));
  double sum = 0;
  for (int i = 0; i <= k; ++i) sum += std::exp(LogChoose(m, i) - log_max);
  return std::min(1.0, 2.0 * std::exp(log_max + std::log(sum) + log_half_m));
}

Interval NewcombePairedInterval(const PairedCounts& c) {
  const int n = c.n();
  if (n <= 0) return {-1.0, 1.0};
  // p1: B's accuracy, p2: A's (the reference), so the difference is p1 - p2.
  const int x1 = c.both + c.b_only, x2 = c.both + c.a_only;
  const double p1 = static_cast<double>(x1) / n, p2 = static_cast<double>(x2) / n;
  const Interval w1 = WilsonInterval(x1, n), w2 = WilsonInterval(x2, n);
  // Correlation of the pairs (phi of the 2x2 table) with Newcombe's correction: positive
  // association counts only beyond n/2; 0 when a margin is empty.
  const double margins = static_cast<double>(x1) * (n - x1) * x2 * (n - x2);
  double phi = 0;
  if (margins > 0) {
    const double ad_bc =
        static_cast<double>(c.both) * c.neither - static_cast<double>(c.b_only) * c.a_only;
    const double num = ad_bc > n / 2.0 ? ad_bc - n / 2.0 : (ad_bc < 0 ? ad_bc : 0.0);
    phi = std::clamp(num / std::sqrt(margins), -1.0, 1.0);
  }
  auto spread = [&](double x, double y) {
    return std::sqrt(std::max(0.0, x * x - 2.0 * phi * x * y + y * y));
  };
  const double d = p1 - p2;
  const double lo = d - spread(p1 - w1.lo, w2.hi - p2);
  const double hi = d + spread(p2 - w2.lo, w1.hi - p1);
  return {std::clamp(lo, -1.0, d), std::clamp(hi, d, 1.0)};
}

PairedComparison ComparePaired(const PairedCounts& c) {
  PairedComparison r;
  r.counts = c;
  r.n = c.n();
  if (r.n > 0) {
    r.accuracy_a = static_cast<double>(c.both + c.a_only) / r.n;
    r.accuracy_b = static_cast<double>(c.both + c.b_only) / r.n;
  }
  r.delta = r.accuracy_b - r.accuracy_a;
  r.ci95 = NewcombePairedInterval(c);
  r.mcnemar_p = McNemarExactP(c.b_only, c.a_only);
  return r;
}

}  // namespace bicache::harness
