#!/usr/bin/env bash
# coverage.sh: line and branch coverage of the non-e2e suite (make coverage). Builds build-cov
# with --coverage, runs ctest -LE e2e there, then prints gcovr's per-directory totals.
# NB_COV_REPORT_ONLY=1 reports on the counters of the last run without building or running.
# gcovr comes from the pinned venv .venv-cov (created on first use; Debian's gcovr also works:
# GCOVR=gcovr).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${NB_COV_BUILD:-$ROOT/build-cov}"
VENV="$ROOT/.venv-cov"
GCOVR="${GCOVR:-}"
if [ -z "$GCOVR" ]; then
    if ! "$VENV/bin/gcovr" --version >/dev/null 2>&1; then
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q "gcovr==8.8"
    fi
    GCOVR="$VENV/bin/gcovr"
fi
# Report-only never rebuilds: a recompiled file's new notes no longer match its counters,
# and gcovr would silently leave that file out of the totals.
if [ -z "${NB_COV_REPORT_ONLY:-}" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DNB_WERROR=ON \
        -DCMAKE_C_FLAGS="--coverage -O0 -fprofile-update=atomic" \
        -DCMAKE_EXE_LINKER_FLAGS="--coverage" >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" >/dev/null
    find "$BUILD" -name '*.gcda' -delete
    (cd "$BUILD" && ctest -LE e2e "$@") || echo "coverage: some tests failed; the numbers cover what ran"
fi
"$GCOVR" --root "$ROOT" --object-directory "$BUILD" --filter "$ROOT/" \
    --exclude "$ROOT/tests/" --exclude "$BUILD/" --exclude '.*\.pb-c\.[ch]$' \
    --gcov-ignore-errors=no_working_dir_found \
    --gcov-ignore-parse-errors=negative_hits.warn_once_per_file \
    --gcov-ignore-parse-errors=suspicious_hits.warn_once_per_file --json-summary "$BUILD/coverage.json" \
    --print-summary >/dev/null
python3 - "$BUILD/coverage.json" <<'PY'
import json, sys, collections
doc = json.load(open(sys.argv[1]))
tot = collections.defaultdict(lambda: [0, 0, 0, 0])
for f in doc["files"]:
    d = f["filename"].split("/")[0] if "/" in f["filename"] else "."
    t = tot[d]
    t[0] += f["line_covered"]; t[1] += f["line_total"]
    t[2] += f["branch_covered"]; t[3] += f["branch_total"]
pct = lambda a, b: 100.0 * a / b if b else 100.0
print("%-12s %8s %8s %8s %8s" % ("directory", "lines", "line%", "branches", "branch%"))
for d in sorted(tot):
    t = tot[d]
    print("%-12s %8d %7.1f%% %8d %7.1f%%" % (d, t[1], pct(t[0], t[1]), t[3], pct(t[2], t[3])))
print("%-12s %8d %7.1f%% %8d %7.1f%%" % ("total", doc["line_total"], doc["line_percent"],
                                          doc["branch_total"], doc["branch_percent"]))
PY
