// Statistics for accuracy figures: how sure a measured accuracy, or a difference between two
// modes' accuracies on the SAME requests, is. `bench` pairs every mode with `none` (and
// bicache+dual with `dual`) request by request; `eval` runs one mode and reports Wilson intervals.
//
// Paired outcomes: request i answered correctly under mode A (the reference) and/or mode B. Only
// the discordant requests (right under one, wrong under the other) carry information about the
// difference, so the exact McNemar test is the binomial test on them, and the interval for
// Δ = accuracy(B) − accuracy(A) is Newcombe's hybrid score interval for paired proportions
// (Newcombe 1998, method 10: Wilson intervals of each marginal, combined with the correlation of
// the pairs). Everything is a fraction (0.01 = one point), at 95% (z = 1.959964).
#pragma once

#include <cstddef>
#include <vector>

namespace bicache::harness {

struct Interval {
  double lo = 0, hi = 0;
};

// Wilson score 95% interval of a proportion `successes` / `n`; [0, 1] when n == 0.
Interval WilsonInterval(int successes, int n);

// The paired 2x2 table of correctness: A the reference, B the mode compared with it.
struct PairedCounts {
  int both = 0;     // right under A and B
  int b_only = 0;   // right under B only (B gains)
  int a_only = 0;   // right under A only (B loses)
  int neither = 0;  // wrong under both
  int n() const { return both + b_only + a_only + neither; }
};

// Counts over the requests in `which` (indices into both vectors; every index < a.size() ==
// b.size()), or over all of them without `which`.
PairedCounts CountPairs(const std::vector<bool>& a, const std::vector<bool>& b);
PairedCounts CountPairs(const std::vector<bool>& a, const std::vector<bool>& b,
                        const std::vector<size_t>& which);

// Two-sided exact McNemar p-value: P(a result as uneven as `b_only` : `a_only` | the discordant
// pairs split 50:50), computed in log space (stable for thousands of pairs); 1 with no discordant
// pairs.
double McNemarExactP(int b_only, int a_only);

// Newcombe's hybrid score 95% interval (method 10) for accuracy(B) − accuracy(A); [−1, 1] when
// the table is empty. Always contains the point estimate and stays within [−1, 1].
Interval NewcombePairedInterval(const PairedCounts& c);

struct PairedComparison {
  PairedCounts counts;
  int n = 0;
  double accuracy_a = 0, accuracy_b = 0;
  double delta = 0;  // accuracy_b − accuracy_a, a fraction
  Interval ci95;     // of delta
  double mcnemar_p = 1;
  // Met when the loss is at most `max_loss` and the interval's lower end at least `-max_lower`
  // (both fractions): the interval, not the point estimate alone, supports "B loses at most ...".
  bool WithinLoss(double max_loss, double max_lower) const {
    return n > 0 && delta >= -max_loss - 1e-12 && ci95.lo >= -max_lower - 1e-12;
  }
};

PairedComparison ComparePaired(const PairedCounts& c);

}  // namespace bicache::harness
