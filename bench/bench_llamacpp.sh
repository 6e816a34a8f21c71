#!/usr/bin/env bash
# bench_llamacpp: npubench's CPU engine against llama.cpp's llama-bench on the same model, shapes
# and thread count, in one run. llama.cpp is built outside the repository (never committed, never
# part of the default set-up) from the llama-cpp-python sdist's vendored copy.
#
# Usage: bench/bench_llamacpp.sh [--threads N] [--reps N] [--rounds N] [--model PATH]
#                                [--build DIR] [--work DIR] [--jobs N]
# Prints a markdown table: tokens/s for both (best and median of rounds x reps samples), the
# ratios, and decode GB/s against the read bandwidth measured in the same run. The two sides
# alternate per dtype, rounds times, so background load hits both alike; best-of filters it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS=2
REPS=5
ROUNDS=3
MODEL="$HERE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD="$HERE/build"
WORK="${TMPDIR:-/tmp}/npubench-llamacpp"
JOBS=1
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--reps N] [--rounds N] [--model PATH] [--build DIR] [--work DIR] [--jobs N]" >&2
       exit 2 ;;
    esac
done
[ -r "$MODEL" ] || { echo "bench_llamacpp: model $MODEL not found (make setup fetches it)" >&2; exit 2; }
case "$WORK" in "$HERE"/*) echo "bench_llamacpp: --work must be outside the repository" >&2; exit 2 ;; esac
mkdir -p "$WORK"
log() { echo "bench_llamacpp: $*" >&2; }

# ---- llama.cpp, built once into $WORK ----------------------------------------------
LB="$WORK/build/bin/llama-bench"
LQ="$WORK/build/bin/llama-quantize"
if [ ! -x "$LB" ] || [ ! -x "$LQ" ]; then
    PIP="python3 -m pip"
    [ -x "$HERE/.venv-hf/bin/pip" ] && PIP="$HERE/.venv-hf/bin/pip"
    if ! ls "$WORK"/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
        log "downloading the llama-cpp-python sdist (vendors llama.cpp)"
        $PIP download --no-deps --no-binary :all: llama-cpp-python -d "$WORK" >&2
    fi
    SDIST="$(ls "$WORK"/llama_cpp_python-*.tar.gz | tail -n 1)"
    SRC="$WORK/$(basename "$SDIST" .tar.gz)"
    [ -d "$SRC" ] || tar -xzf "$SDIST" -C "$WORK"
    log "building llama-bench and llama-quantize (nice, -j$JOBS: takes a while on 2 cores)"
    nice -n 10 cmake -S "$SRC/vendor/llama.cpp" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON >"$WORK/cmake.log" 2>&1
    nice -n 10 cmake --build "$WORK/build" -j"$JOBS" --target llama-bench llama-quantize \
        >"$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log" >&2; exit 1; }
fi
LLAMA_VER="$("$LB" --version 2>&1 | grep -m1 -o 'version: .*' || echo 'version: ?')"

# BF16 copy of the model for llama.cpp (the engine's bf16 dtype rounds the same weights the same
# way: Q4_1/Q8_0 dequantized to fp32, then round-to-nearest-even to bf16).
BF16="$WORK/$(basename "$MODEL" .gguf).BF16.gguf"
if [ ! -s "$BF16" ]; then
    log "converting to BF16 with llama-quantize --allow-requantize"
    "$LQ" --allow-requantize "$MODEL" "$BF16" BF16 >"$WORK/quantize.log" 2>&1 ||
        { tail -n 20 "$WORK/quantize.log" >&2; exit 1; }
fi

# ---- npubench's benchmarks ------------------------------------------------------------
if [ ! -x "$BUILD/bench/bench_engine" ] || [ ! -x "$BUILD/bench/bench_kernels" ]; then
    log "building bench_engine and bench_kernels in $BUILD"
    cmake -S "$HERE" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$BUILD" -j2 --target bench_engine bench_kernels >&2
fi

OUT="$WORK/results.txt"
: >"$OUT"
bandwidth() {
    "$BUILD/bench/bench_kernels" --threads "$THREADS" --bandwidth |
        sed -n "s/.*, $THREADS threads \([0-9.]*\) GB\/s.*/\1/p"
}

run_llama() { # $1 = file, $2 = dtype label
    "$LB" -m "$1" -t "$THREADS" -p 128,512 -n 128 -r "$REPS" -o jsonl 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    test = "pp%d" % r["n_prompt"] if r["n_gen"] == 0 else "tg%d" % r["n_gen"]
    print("llama", sys.argv[1], test, ",".join("%.2f" % v for v in r["samples_ts"]),
          r["model_size"])
' "$2" >>"$OUT"
}

for round in $(seq 1 "$ROUNDS"); do
    echo "bandwidth $(bandwidth)" >>"$OUT"
    for d in bf16 q4_1; do
        if [ "$d" = bf16 ]; then F="$BF16"; else F="$MODEL"; fi
        log "round $round/$ROUNDS: llama-bench $d"
        run_llama "$F" "$d"
        log "round $round/$ROUNDS: bench_engine $d"
        "$BUILD/bench/bench_engine" --model "$MODEL" --dtype "$d" --threads "$THREADS" \
            --pp 128,512 --tg 128 --reps "$REPS" 2>/dev/null |
            awk '{print "engine", $2, $3, $7, $8}' >>"$OUT"
    done
done

python3 - "$OUT" "$THREADS" "$LLAMA_VER" "$ROUNDS" "$REPS" <<'PY'
import statistics, sys
path, threads, ver, rounds, reps = sys.argv[1:6]
bws, samples, size = [], {}, {}
for line in open(path):
    f = line.split()
    if f[0] == "bandwidth":
        if len(f) > 1:
            bws.append(float(f[1]))
        continue
    side, dtype, test, vals, nbytes = f
    samples.setdefault((side, dtype, test), []).extend(float(v) for v in vals.split(","))
    size[(side, dtype)] = int(nbytes)
bw = max(bws) if bws else None
print(f"llama.cpp {ver}; {threads} threads; {rounds} rounds x {reps} reps per side and test; "
      + (f"read bandwidth {bw:.2f} GB/s (best of {len(bws)})" if bw else "read bandwidth n/a"))
print()
print("| dtype | test | llama.cpp t/s best (median) | npubench t/s best (median) | ratio best (median) "
      "| decode GB/s at best: llama.cpp / npubench |")
print("|---|---|---:|---:|---:|---|")
for d in ("bf16", "q4_1"):
    for t in ("pp128", "pp512", "tg128"):
        l, o = samples.get(("llama", d, t)), samples.get(("engine", d, t))
        if not l or not o:
            continue
        lb, lm, ob, om = max(l), statistics.median(l), max(o), statistics.median(o)
        gbs = ""
        if t.startswith("tg"):
            lg, og = size[("llama", d)] * lb / 1e9, size[("engine", d)] * ob / 1e9
            gbs = f"{lg:.1f} / {og:.1f}" + (f" ({og / bw:.0%} of read bw)" if bw else "")
        print(f"| {d} | {t} | {lb:.1f} ({lm:.1f}) | {ob:.1f} ({om:.1f}) | "
              f"{ob / lb:.2f}x ({om / lm:.2f}x) | {gbs} |")
PY
