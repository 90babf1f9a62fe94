#!/usr/bin/env bash
# Real-width model benchmark (docs/benchmarks.md "Real-width models"): writes a random-weight llada
# GGUF at LLaDA-8B width (d 4096, ff 12288, 32 heads, vocab 126464; 4 layers unless LAYERS is set)
# in BF16, quantizes it with `bicache quantize` to each type, then runs one 256-token forward
# benchmark per file and matmul path (bf16, and f32 as AVX2-only CPUs run it) and prints
# file MB, peak RSS MB, ms per forward, GFLOP/s and the ratio to the BF16 file on the same path.
#
#   bash scripts/bench_real_width.sh [BICACHE] [DIR]     (defaults: build/bicache, /tmp/bicache-rw)
#   TYPES="Q8_0 Q4_K_M" PATHS="bf16" REPEATS=3 LAYERS=4 bash scripts/bench_real_width.sh
#
# Needs ~12 GB of disk in DIR for the default types and about 4 GB of RAM. Files already in DIR
# are reused. Not part of `make test` (minutes per file).
set -euo pipefail
BIN=${1:-build/bicache}
DIR=${2:-/tmp/bicache-rw}
TYPES=${TYPES:-"Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0"}
PATHS=${PATHS:-"bf16 f32"}
REPEATS=${REPEATS:-3}
LAYERS=${LAYERS:-4}
HERE=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DIR"
base="$DIR/llada8b-width-L$LAYERS-bf16.gguf"
if [[ ! -f $base ]]; then
  /usr/bin/python3 "$HERE/tools/gguf_py/make_random_model.py" "$base.tmp" --layers "$LAYERS"
  mv "$base.tmp" "$base"
fi
files=("$base")
for t in $TYPES; do
  f="$DIR/llada8b-width-L$LAYERS-$t.gguf"
  [[ -f $f ]] || "$BIN" quantize "$base" "$f" "$t" > "$DIR/quantize-$t.log"
  files+=("$f")
done
lscpu | sed -n 's/^Model name:[[:space:]]*/cpu: /p'
printf '%-6s %-8s %9s %9s %9s %9s %8s\n' path type file_MB peak_MB ms/fwd GFLOP/s vs_BF16
for p in $PATHS; do
  base_ms=""
  for f in "${files[@]}"; do
    t=$(basename "$f" .gguf); t=${t##*-}
    json="$DIR/bench-$p-$t.json"
    BICACHE_MATMUL=$p "$BIN" bench-forward -m "$f" --tokens 256 --repeats "$REPEATS" --no-breakdown --json "$json" > /dev/null
    read -r mb peak ms gf < <(/usr/bin/python3 -c "
import json,sys; j=json.load(open('$json')); r=j['results'][0]
print(j['file_bytes']/1e6, j['peak_rss_bytes']/1e6, r['ms_per_forward'], r['forward_gflops'])")
    [[ -z $base_ms ]] && base_ms=$ms
    printf '%-6s %-8s %9.0f %9.0f %9.0f %9.1f %8.2f\n' "$p" "$t" "$mb" "$peak" "$ms" "$gf" \
      "$(/usr/bin/python3 -c "print($base_ms / $ms)")"
  done
done
