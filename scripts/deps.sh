#!/usr/bin/env bash
# Installs every Debian package the build, tests and tooling need. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
# ocl-icd-opencl-dev: Debian's dnnl-config.cmake (built with the OpenCL GPU runtime) requires OpenCL
# at configure time; libdnnl-dev only recommends it, and --no-install-recommends skips it.
PKGS=(build-essential cmake pkg-config
      libdnnl-dev ocl-icd-opencl-dev libhwy-dev libpcre2-dev libboost1.74-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev
      clang libclang-rt-14-dev clang-format curl jq
      python3 python3-numpy python3-torch python3-regex libopenblas0-pthread
      nginx)  # nginx: tests/cli/nginx_affinity.sh (two replicas behind consistent hashing)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The server tests drive bicache through the official `openai` npm client (pinned in
# tests/server/package-lock.json). Node.js comes with the machine; without it or without the
# registry, those tests report SKIP rather than fail.
if command -v npm >/dev/null 2>&1 && [ -f tests/server/package-lock.json ] && [ ! -d tests/server/node_modules/openai ]; then
  npm ci --prefix tests/server --no-audit --no-fund >/dev/null 2>&1 || echo "note: npm ci for tests/server failed; the openai SDK test will be skipped" >&2
fi
