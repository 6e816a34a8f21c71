#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer harnesses (tests/fuzz, clang + ASan + UBSan, portable kernels)
# and runs each for FUZZ_SECONDS (30) on a scratch copy of its committed corpus. A crash stops
# with the input's path: add it to tests/fuzz/corpus/<harness>/ (the replay test) and fix it.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${FUZZ_SECONDS:-30}
BUILD=${FUZZ_BUILD:-build-fuzz}
ONLY=${FUZZ_ONLY:-}          # e.g. FUZZ_ONLY=fuzz_gguf runs one harness

if ! command -v clang >/dev/null; then
  echo "fuzz: installing clang (libFuzzer)"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang
fi
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNB_FUZZ=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)"

# Path-taking parsers get each input as a file: keep those writes in memory when possible.
if [ -z "${TMPDIR:-}" ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$BUILD/fuzz-work" "$BUILD/fuzz-crashes"
for bin in "$BUILD"/tests/fuzz/fuzz_*; do
  name=$(basename "$bin")
  [ -z "$ONLY" ] || [ "$name" = "$ONLY" ] || continue
  work="$BUILD/fuzz-work/$name"
  mkdir -p "$work"
  echo "fuzz: $name for ${SECS}s"
  # New inputs go to the scratch dir; the committed seeds are read only.
  "$bin" -max_total_time="$SECS" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
    -artifact_prefix="$BUILD/fuzz-crashes/$name-" -print_final_stats=1 \
    "$work" "tests/fuzz/corpus/$name" 2>"$BUILD/fuzz-work/$name.log" ||
    { tail -60 "$BUILD/fuzz-work/$name.log"; echo "fuzz: $name crashed (see $BUILD/fuzz-crashes/)"; exit 1; }
  grep -E '^stat::(number_of_executed_units|new_units_added)' "$BUILD/fuzz-work/$name.log" | tr '\n' ' '
  echo
done
echo "fuzz: every harness ran ${SECS}s without a crash"
