#!/usr/bin/env python3
"""Combine `bicache bench` JSON files of disjoint runs (e.g. one per ratio band, run on two cores at
once) into one table with the overall row, for a split too large for one process in the time at
hand (docs/benchmarks.md, "The whole large held-out split").

Usage: /usr/bin/python3 scripts/merge_bench_bands.py RUN.json [RUN.json ...] [--versus none]
                                                      [--json OUT]

For every mode compared with --versus (bench's `vs_none`, or `vs_dual` with --versus dual) it prints,
per band of every run and over all of them: n, accuracy of both modes, Δ in points with the paired
95% interval (Newcombe's hybrid score method 10, as src/harness/paired_stats.cpp), the exact
McNemar p, the discordant pairs (gained / lost), agreement, the speed-up (summed seconds of the
reference / of the mode) and the mean depth; then issue 34's targets (Δ >= -1 point with the
interval's lower end >= -2 overall and per band, agreement >= 0.97, >= 1.5x overall, >= 2.5x on the
long band; vs dual only the accuracy check). The paired 2x2 tables are rebuilt from each band's
counts and summed; every band's interval is recomputed and must equal the one bench wrote (a check
of both implementations; with one run, so is its overall row).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

Z95 = 1.959963984540054


def wilson(successes: int, n: int) -> tuple[float, float]:
    if n <= 0:
        return 0.0, 1.0
    p, z2 = successes / n, Z95 * Z95
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = Z95 * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    return (0.0 if successes == 0 else max(0.0, center - half),
            1.0 if successes == n else min(1.0, center + half))


def newcombe(both: int, b_only: int, a_only: int, neither: int) -> tuple[float, float]:
    """95% interval of accuracy(B) - accuracy(A); B the mode, A the reference."""
    n = both + b_only + a_only + neither
    if n <= 0:
        return -1.0, 1.0
    x1, x2 = both + b_only, both + a_only
    p1, p2 = x1 / n, x2 / n
    l1, u1 = wilson(x1, n)
    l2, u2 = wilson(x2, n)
    margins = float(x1) * (n - x1) * x2 * (n - x2)
    phi = 0.0
    if margins > 0:
        ad_bc = float(both) * neither - float(b_only) * a_only
        num = ad_bc - n / 2.0 if ad_bc > n / 2.0 else (ad_bc if ad_bc < 0 else 0.0)
        phi = min(1.0, max(-1.0, num / math.sqrt(margins)))

    def spread(x, y):
        return math.sqrt(max(0.0, x * x - 2.0 * phi * x * y + y * y))

    d = p1 - p2
    lo = d - spread(p1 - l1, u2 - p2)
    hi = d + spread(p2 - l2, u1 - p1)
    return min(d, max(-1.0, lo)), max(d, min(1.0, hi))


def mcnemar_p(b_only: int, a_only: int) -> float:
    m, k = b_only + a_only, min(b_only, a_only)
    if m <= 0:
        return 1.0
    logs = [math.lgamma(m + 1) - math.lgamma(i + 1) - math.lgamma(m - i + 1) for i in range(k + 1)]
    top = max(logs)
    total = sum(math.exp(x - top) for x in logs)
    return min(1.0, 2.0 * math.exp(top + math.log(total) - m * math.log(2.0)))


def band_cell(stats: dict, versus: str, seconds_ref: float) -> dict:
    """One band's (or one run's) counts for a mode: its paired table vs the reference."""
    v = stats["vs_" + versus]
    n = v["n"]
    x1, x2 = round(v["accuracy"] * n), round(v["accuracy_versus"] * n)
    b_only, a_only = v["discordant"]
    both = x1 - b_only
    cell = {"n": n, "both": both, "b_only": b_only, "a_only": a_only,
            "neither": n - both - b_only - a_only, "agree": round(v["agreement"] * n),
            "seconds": stats["seconds"], "seconds_ref": seconds_ref,
            "depth_sum": stats["mean_depth"] * n}
    lo, hi = newcombe(cell["both"], b_only, a_only, cell["neither"])
    if abs(lo - v["ci95"][0]) > 1e-9 or abs(hi - v["ci95"][1]) > 1e-9:
        sys.exit(f"interval mismatch: bench wrote {v['ci95']}, recomputed [{lo}, {hi}]")
    return cell


def summarize(cell: dict) -> dict:
    n = cell["n"]
    lo, hi = newcombe(cell["both"], cell["b_only"], cell["a_only"], cell["neither"])
    acc_b = (cell["both"] + cell["b_only"]) / n
    acc_a = (cell["both"] + cell["a_only"]) / n
    return {"n": n, "accuracy": acc_b, "accuracy_versus": acc_a, "delta": acc_b - acc_a,
            "ci95": [lo, hi], "mcnemar_p": mcnemar_p(cell["b_only"], cell["a_only"]),
            "discordant": [cell["b_only"], cell["a_only"]], "agreement": cell["agree"] / n,
            "speedup": cell["seconds_ref"] / cell["seconds"], "mean_depth": cell["depth_sum"] / n}


def add(a: dict | None, b: dict) -> dict:
    return dict(b) if a is None else {k: a[k] + b[k] for k in b}


def bands_of(run: dict, mode: str, versus: str):
    """(band, the mode's stats, the reference's stats) per band: a sweep run's `by_band`, or the
    run itself named by its --ratio-band (short, long or all)."""
    m, ref = run["modes"][mode], run["modes"][versus]
    if "by_band" in m:
        return [(band, stats, ref["by_band"][band]) for band, stats in m["by_band"].items()]
    band = run["settings"]["ratio_band"]
    return [(band if band != "all" else "run", m, ref)]


def merge(runs: list[dict], versus: str) -> dict:
    """{mode: {band: summary, ..., "all": summary}} over the runs' bands (a band may span runs)."""
    out = {}
    modes = [m for m in runs[0]["modes"] if "vs_" + versus in runs[0]["modes"][m]]
    for mode in modes:
        cells, total = {}, None
        for run in runs:
            for band, stats, ref in bands_of(run, mode, versus):
                cell = band_cell(stats, versus, ref["seconds"])
                cells[band] = add(cells.get(band), cell)
                total = add(total, cell)
        out[mode] = {band: summarize(c) for band, c in cells.items()}
        out[mode]["all"] = summarize(total)
    return out


def check_against_bench(merged: dict, run: dict, versus: str):
    """One run: the overall row rebuilt from its bands must be the one bench computed itself."""
    for mode, bands in merged.items():
        want, got = run["modes"][mode]["vs_" + versus], bands["all"]
        same = (want["n"] == got["n"] and want["discordant"] == got["discordant"]
                and abs(want["agreement"] - got["agreement"]) < 1e-9
                and all(abs(x - y) < 1e-9 for x, y in zip(want["ci95"], got["ci95"])))
        if not same:
            sys.exit(f"{mode}: overall row {got} differs from bench's {want}")


def targets(merged: dict, versus: str) -> list[str]:
    lines = []
    for mode, bands in merged.items():
        for scope, s in bands.items():
            ok = s["delta"] >= -0.01 - 1e-12 and s["ci95"][0] >= -0.02 - 1e-12
            lines.append(f"{mode} vs {versus} {scope}: accuracy {'met' if ok else 'NOT met'} "
                         f"({100 * s['delta']:+.1f} [{100 * s['ci95'][0]:+.1f}, "
                         f"{100 * s['ci95'][1]:+.1f}])")
            if versus != "none":
                continue
            lines.append(f"{mode} vs none {scope}: agreement {s['agreement']:.3f} "
                         f"{'met' if s['agreement'] >= 0.97 else 'NOT met'} (>= 0.97)")
            want = 1.5 if scope == "all" else (2.5 if scope == "long" else None)
            if want is not None:
                lines.append(f"{mode} vs none {scope}: speed {s['speedup']:.2f}x "
                             f"{'met' if s['speedup'] >= want else 'NOT met'} (>= {want}x)")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="bench --json files of disjoint requests")
    ap.add_argument("--versus", default="none", choices=["none", "dual"])
    ap.add_argument("--json", help="write the merged summaries here")
    a = ap.parse_args()
    runs = []
    for path in a.runs:
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as e:
            sys.exit(f"{path}: {e}")
        if a.versus not in runs[-1].get("modes", {}):
            sys.exit(f"{path}: no mode '{a.versus}' to compare with")
    merged = merge(runs, a.versus)
    if len(runs) == 1:
        check_against_bench(merged, runs[0], a.versus)
    print(f"{'mode':<22} {'scope':<6} {'n':>5} {'acc':>6} {'base':>6} "
          f"{'delta [95% interval]':<24} {'p':>7} {'discord':>8} {'agree':>6} {'speed':>6} depth")
    for mode, bands in merged.items():
        for scope, s in bands.items():
            iv = f"{100 * s['delta']:+.1f} [{100 * s['ci95'][0]:+.1f}, {100 * s['ci95'][1]:+.1f}]"
            print(f"{mode:<22} {scope:<6} {s['n']:>5} {s['accuracy']:>6.3f} "
                  f"{s['accuracy_versus']:>6.3f} {iv:<24} {s['mcnemar_p']:>7.3g} "
                  f"{'%d/%d' % tuple(s['discordant']):>8} {s['agreement']:>6.3f} "
                  f"{s['speedup']:>5.2f}x {s['mean_depth']:.2f}")
    for line in targets(merged, a.versus):
        print("target: " + line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(merged, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
