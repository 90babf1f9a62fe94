#!/usr/bin/env bash
# Installs every Debian package the build, tests and tooling need. Idempotent.
set -euo pipefail
PKGS=(build-essential cmake pkg-config
      libdnnl-dev libhwy-dev libpcre2-dev libcpp-httplib-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev googletest libbenchmark-dev
      python3 python3-numpy python3-torch python3-regex libopenblas0-pthread)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
