#!/usr/bin/env bash
# setup.sh: installs what a fresh Debian machine needs to build and test npubench, then fetches the model.
# Idempotent and quick when everything is already there (no apt-get when all packages are installed).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake pkg-config git unzip python3 python3-pip
          libnng-dev libmbedtls-dev libprotobuf-c-dev protobuf-c-compiler libsqlite3-dev libcmocka-dev
          libxrt-dev libpcre2-dev libjson-c-dev
          libxml2-utils   # xmllint checks the JUnit files (tests/junit.xsd)
          chromium        # headless Chromium loads the dashboard's pages (tests/test_dashboard.c)
          zlib1g-dev)     # ... whose screenshots tests/png_read.h inflates

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The air backend's test adapter (tests/fixtures/llms/smollm2_numpy) runs SmolLM2 in numpy
# with weights read by the gguf package, in the python3 the tests start.
if ! python3 -c 'import numpy, gguf' 2>/dev/null; then
  echo "setup: pip installing numpy and gguf for python3"
  python3 -m pip install --quiet numpy gguf==0.19.0 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages numpy gguf==0.19.0
fi

scripts/fetch_model.sh
