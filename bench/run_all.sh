#!/usr/bin/env bash
# run_all.sh (`make bench`): every benchmark program built from bench/*.c, run once at a short
# size, its whole output kept in OUT/<bench>.txt; then its ratio lines, the comparisons it was
# written to make (rpc vs plain nng, share of the compute peak, localization vs verify, 1 vs 2
# workers), or its headline numbers where it compares nothing. A quick look in about a minute:
# the figures docs/performance.md quotes come from each bench's own defaults, run on its own.
#
# Usage: bench/run_all.sh [--dry-run] [BUILD]      BUILD: the build directory (default build)
#   THREADS  threads for the engine and kernel benches (default 2)
#   MODEL    the model the engine, tokenizer, localize and sched benches use
#            (default models/SmolLM2-135M-Instruct.Q4_1.gguf; without it they are skipped)
#   OUT      where the outputs go (default BUILD/bench/results)
# --dry-run prints the command of each bench and runs none.
# Exit 0 when every bench that ran exited 0; 1 when one failed, or when bench/ holds a program
# this script has no short size for (named: add it to sizes() below); 2 on a usage error.
# The comparisons against other projects (bench_llamacpp.sh, bench_vs_hf.sh,
# bench_tokenizer_vs_hf.sh) need llama.cpp or the HF venv and are run on their own.
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=0
if [ "${1:-}" = "--dry-run" ]; then
    DRY=1
    shift
fi
case "${1:-}" in -*) echo "usage: bench/run_all.sh [--dry-run] [BUILD]" >&2; exit 2 ;; esac
BUILD=${1:-build}
THREADS=${THREADS:-2}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
OUT=${OUT:-$BUILD/bench/results}

# sizes NAME: sets ARGS (the short run), LINES (an extended regex: the lines to show) and
# NEEDS_MODEL; returns 1 for a bench it does not know.
sizes() {
    NEEDS_MODEL=0
    case $1 in
    bench_air_pipe)
        ARGS="--calls 1000" LINES='^bench_air_pipe|^pipe overhead|^share of' ;;
    bench_engine)
        ARGS="--model $MODEL --dtype q4_1 --pp 32 --tg 8 --reps 2 --threads $THREADS"
        LINES='^engine ' NEEDS_MODEL=1 ;;
    bench_history)
        ARGS="20000" LINES='^bench_history|us/run|ms/query' ;;
    bench_kernels)
        ARGS="--threads $THREADS --quick" LINES='^read bandwidth|^compute peak|%$' ;;
    bench_localize)
        ARGS="--prompts 1 --n-tokens 8 --threads $THREADS" LINES='^total ' NEEDS_MODEL=1 ;;
    bench_rpc)
        ARGS="" LINES='ratio|[0-9]x( |$)' ;;
    bench_sched)
        ARGS="--quick --verify-tokens 1 --verify-prompts 2" LINES='jobs/s|submits/s|speed-up' NEEDS_MODEL=1 ;;
    bench_tokenizer)
        ARGS="$MODEL tests/data/tokenizer_texts.json" LINES='encode_ms' NEEDS_MODEL=1 ;;
    *)
        return 1 ;;
    esac
}

[ "$DRY" = 1 ] || mkdir -p "$OUT" || exit 2
failed=0
for src in bench/*.c; do
    name=$(basename "$src" .c)
    bin=$BUILD/bench/$name
    if ! sizes "$name"; then
        echo "== $name: no short size known, not run (add it to sizes() in bench/run_all.sh)"
        failed=1
        continue
    fi
    if [ "$DRY" = 1 ]; then
        echo "\$ $bin $ARGS"
        continue
    fi
    if [ ! -x "$bin" ]; then
        echo "== $name: not built ($bin); build first: make build"
        failed=1
        continue
    fi
    if [ "$NEEDS_MODEL" = 1 ] && [ ! -r "$MODEL" ]; then
        echo "== $name: skipped, no model at $MODEL (scripts/fetch_model.sh)"
        continue
    fi
    t0=$(date +%s.%N)
    # ARGS is split into words on purpose: the sizes above hold no quoted words
    # shellcheck disable=SC2086
    "$bin" $ARGS >"$OUT/$name.txt" 2>&1
    rc=$?
    secs=$(echo "$t0 $(date +%s.%N)" | awk '{printf "%.1f", $2 - $1}')
    echo "== $name ($secs s, exit $rc; $OUT/$name.txt)"
    if [ "$rc" != 0 ]; then
        failed=1
        tail -n 5 "$OUT/$name.txt"
        continue
    fi
    grep -E -- "$LINES" "$OUT/$name.txt" || echo "(no summary line: see $OUT/$name.txt)"
done
exit "$failed"
