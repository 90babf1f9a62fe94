#!/usr/bin/env bash
# The layering is enforced by the build (CMakeLists.txt, bicache_add_layer): each library of src/
# compiles against its own include root, build/layers/<folder>/, which holds only its folder and
# the ones below it. This checks that the roots really block upward includes: from every layer,
# an include of each folder outside its root fails (the preprocessor finds no such file) ("engine/engine.h" from kernels/,
# say), while one of its own folder compiles; that kernels cannot see engine/ nor server/ the
# harness; and that no library `serve` needs (server and below) refers to a harness symbol.
set -euo pipefail
BIN="$1"
SRC="$2"
BUILD="$(dirname "$BIN")"
LAYERS="$BUILD/layers"
CXX=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
[ -d "$LAYERS" ] || { echo "no include roots under $LAYERS" >&2; exit 1; }

# A header of each folder, to include in the probes.
header_of() { (cd "$SRC/src" && ls "$1"/*.h | head -n 1); }

checked=0
for root in "$LAYERS"/*/; do
  lib=$(basename "$root")
  for dir in "$SRC"/src/*/; do
    folder=$(basename "$dir")
    printf '#include "%s"\n' "$(header_of "$folder")" >"$TMP/probe.cpp"
    if [ -e "$root/$folder" ]; then
      [ "$folder" = "$lib" ] || continue
      "$CXX" -std=c++20 -E -o /dev/null -I "$root" "$TMP/probe.cpp" ||
        { echo "$lib cannot include its own $(header_of "$folder")" >&2; exit 1; }
    else
      if "$CXX" -std=c++20 -E -o /dev/null -I "$root" "$TMP/probe.cpp" 2>"$TMP/err"; then
        echo "$lib can include $(header_of "$folder") though $folder is not below it" >&2
        exit 1
      fi
      # gcc says "No such file or directory", clang "file not found" (the sanitizer builds use clang).
      grep -Eq 'No such file|file not found' "$TMP/err" || { cat "$TMP/err" >&2; exit 1; }
    fi
    checked=$((checked + 1))
  done
done
echo "ok   $checked probes: every layer reaches its own headers and no folder outside its root"

for pair in kernels:engine kernels:model format:kernels util:format server:harness engine:server \
            model:engine cache:model diffusion:model tokenizer:kernels harness:cli; do
  lib=${pair%%:*}
  above=${pair##*:}
  [ -d "$LAYERS/$lib" ] || { echo "no include root for $lib" >&2; exit 1; }
  [ ! -e "$LAYERS/$lib/$above" ] || { echo "$lib's include root holds $above/" >&2; exit 1; }
done
echo "ok   kernels cannot include engine/, server cannot include harness/ (and the like)"

for lib in util format kernels tokenizer diffusion cache model engine server; do
  a="$BUILD/libbicache_$lib.a"
  [ -f "$a" ] || { echo "missing $a" >&2; exit 1; }
  if nm -C "$a" | grep -q 'bicache::harness::'; then
    echo "$a refers to the harness" >&2
    exit 1
  fi
done
echo "ok   server and the layers below it hold no harness symbol"
