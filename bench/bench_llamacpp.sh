#!/usr/bin/env bash
# bench_llamacpp: npubench's CPU engine against llama.cpp's llama-bench on the same model, shapes
# and thread count, in one run. llama.cpp is built outside the repository (never committed, never
# part of the default set-up) from the llama-cpp-python sdist's vendored copy.
#
# Usage: bench/bench_llamacpp.sh [--threads N] [--reps N] [--rounds N] [--model instruct|gemma3|PATH]
#                                [--build DIR] [--work DIR] [--jobs N] [--isa native|avx2]
# --model takes the CLI's preset words (instruct: SmolLM2-135M Q4_1, gemma3: Gemma 3 270M Q4_K_M)
# or a .gguf path. The quantized row runs the file as it is on both sides: npubench's native
# dtype (`native` where the CLI has it, else q4_1, which keeps every GGUF block type natively:
# Q4_K/Q5_0/Q6_K/Q8_0 for Gemma) against llama-bench on the same file; the bf16 row runs a BF16
# copy made by llama-quantize against npubench's bf16 dtype.
# Prints a markdown table: tokens/s for both (best and median of rounds x reps samples), the
# ratios, and decode GB/s against the read bandwidth measured in the same run, under a header
# with the host's ISA, both sides' kernel paths, the read bandwidth and npubench's compute peak.
# The two sides alternate per dtype, rounds times, so background load hits both alike; best-of
# filters it. Each cell (side, dtype, test) runs on its own: one that fails reads "failed" in the
# table and the rest still run. llama-bench runs with its default CPU weight repacking (its AMX
# and AVX-512 kernels) and, where that fails (it has crashed in ggml_backend_amx_mul_mat on Q4_1),
# again with --repack 0, marked in the table.
#
# --isa avx2 measures the AVX2-only host class on a host that has more: npubench runs under
# NPUBENCH_ISA=avx2 and llama.cpp is built a second time ($WORK/build-avx2) without GGML_NATIVE,
# with AVX2/FMA/F16C and every AVX-512, AVX-VNNI and AMX switch off; the header says so.
# Each cell's share: prefill of the compute peak (the model's layer linears, 2 FLOP per weight
# per token, read from the GGUF; the peak of npubench's path from bench_kernels), decode of the
# read bandwidth (weight bytes per token x tokens/s), for both sides.
#
# -e guards the set-up only: every cell runs as an `if` condition, where it cannot abort the run.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS=2
REPS=5
ROUNDS=3
MODEL=instruct
BUILD="$HERE/build"
WORK="${TMPDIR:-/tmp}/npubench-llamacpp"
JOBS=1
ISA=native
while [ $# -gt 0 ]; do
    case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --model) MODEL="$2"; shift 2 ;;
    --build) BUILD="$2"; shift 2 ;;
    --work) WORK="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    --isa) ISA="$2"; shift 2 ;;
    *) echo "usage: $0 [--threads N] [--reps N] [--rounds N] [--model instruct|gemma3|PATH] [--build DIR] [--work DIR] [--jobs N] [--isa native|avx2]" >&2
       exit 2 ;;
    esac
done
case "$ISA" in
native) LBUILD="$WORK/build"
        GGML_ISA=(-DGGML_NATIVE=ON) ;;
avx2) LBUILD="$WORK/build-avx2"
      GGML_ISA=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
                -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
                -DGGML_AMX_BF16=OFF)
      export NPUBENCH_ISA=avx2 ;;
*) echo "bench_llamacpp: --isa must be native or avx2, got '$ISA'" >&2; exit 2 ;;
esac
# The preset words, as engine/nb_deploy.c names their files ("base" is the instruct file too).
case "$MODEL" in
instruct | base) MODEL="$HERE/models/SmolLM2-135M-Instruct.Q4_1.gguf" ;;
gemma3) MODEL="$HERE/models/gemma-3-270m-q4_k_m.gguf" ;;
esac
[ -r "$MODEL" ] || { echo "bench_llamacpp: model $MODEL not found (make setup fetches it)" >&2; exit 2; }
case "$WORK" in "$HERE"/*) echo "bench_llamacpp: --work must be outside the repository" >&2; exit 2 ;; esac
mkdir -p "$WORK"
log() { echo "bench_llamacpp: $*" >&2; }

# ---- llama.cpp, built once into $WORK ----------------------------------------------
LB="$LBUILD/bin/llama-bench"
LQ="$LBUILD/bin/llama-quantize"
if [ ! -x "$LB" ] || [ ! -x "$LQ" ]; then
    PIP="python3 -m pip"
    [ -x "$HERE/.venv-hf/bin/pip" ] && PIP="$HERE/.venv-hf/bin/pip"
    if ! ls "$WORK"/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
        log "downloading the llama-cpp-python sdist (vendors llama.cpp)"
        # --no-binary names the one package we want as source: ":all:" extends the refusal of
        # wheels to whatever pip resolves while preparing the sdist, which has failed before.
        $PIP download --no-deps --no-binary llama-cpp-python llama-cpp-python -d "$WORK" >&2
    fi
    SDIST="$(ls "$WORK"/llama_cpp_python-*.tar.gz | tail -n 1)"
    SRC="$WORK/$(basename "$SDIST" .tar.gz)"
    [ -d "$SRC" ] || tar -xzf "$SDIST" -C "$WORK"
    log "building llama-bench and llama-quantize (nice, -j$JOBS: takes a while on 2 cores)"
    nice -n 10 cmake -S "$SRC/vendor/llama.cpp" -B "$LBUILD" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF "${GGML_ISA[@]}" >"$WORK/cmake.log" 2>&1
    nice -n 10 cmake --build "$LBUILD" -j"$JOBS" --target llama-bench llama-quantize \
        >"$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log" >&2; exit 1; }
fi
# awk reads to the end: a grep -m1 that quits early could kill llama-bench with SIGPIPE, and
# under pipefail the fallback then printed a second, bogus version line into the header.
LLAMA_VER="$("$LB" --version 2>&1 | awk '!v && /version: / {v = substr($0, index($0, "version: "))}
    END {print v ? v : "version: ?"}')"

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
# The ISA flags that decide either side's kernels, as the kernel reports them.
HOST_ISA="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' |
    grep -xE 'avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|amx_tile|amx_bf16|amx_int8' |
    tr '\n' ' ' | sed 's/ $//')"
bandwidth_and_peak() { # -> "bandwidth GB/s" and "peak PATH GFLOP/s" lines
    "$BUILD/bench/bench_kernels" --threads "$THREADS" --bandwidth | sed -n \
        -e "s/.*, $THREADS threads \([0-9.]*\) GB\/s.*/bandwidth \1/p" \
        -e 's/^compute peak: \([^ ]*\) \([0-9.]*\) GFLOP\/s.*/peak \1 \2/p'
}

# llama-bench configurations in the order tried: its default, then without repacking.
declare -A NO_DEFAULT # "dtype test" whose default configuration failed once: not retried
run_llama_cell() { # $1 = file, $2 = dtype, $3 = test (pp128, tg128, ...)
    local args cfg extra rc
    case "$3" in pp*) args=(-p "${3#pp}" -n 0) ;; *) args=(-p 0 -n "${3#tg}") ;; esac
    for cfg in default repack0; do
        extra=()
        if [ "$cfg" = default ]; then
            [ -n "${NO_DEFAULT["$2 $3"]:-}" ] && continue
        else
            extra=(--repack 0)
        fi
        local log_f="$WORK/llama-$2-$3-$cfg.log"
        if "$LB" -m "$1" -t "$THREADS" "${args[@]}" -r "$REPS" "${extra[@]}" -o jsonl \
            >"$WORK/cell.jsonl" 2>"$log_f" &&
            python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    test = "pp%d" % r["n_prompt"] if r["n_gen"] == 0 else "tg%d" % r["n_gen"]
    print("llama", sys.argv[1], test, ",".join("%.2f" % v for v in r["samples_ts"]),
          r["model_size"], sys.argv[2])
' "$2" "$cfg" <"$WORK/cell.jsonl" >"$WORK/cell.txt" && [ -s "$WORK/cell.txt" ]; then
            cat "$WORK/cell.txt" >>"$OUT"
            return 0
        else
            rc=$?
        fi
        log "llama-bench $2 $3 ($cfg) failed (exit $rc): $(tail -n 1 "$log_f" 2>/dev/null)"
        [ "$cfg" = default ] && NO_DEFAULT["$2 $3"]=1
    done
    echo "fail llama $2 $3" >>"$OUT"
    return 1
}

run_engine() { # $1 = dtype: its three cells in one process (one model setup)
    local log_f="$WORK/engine-$1.log"
    if "$BUILD/bench/bench_engine" --model "$MODEL" --dtype "$1" --threads "$THREADS" \
        --pp 128,512 --tg 128 --reps "$REPS" 2>"$log_f" >"$WORK/cell.txt"; then
        awk -v d="$1" '{print "engine", d, $3, $7, $8}' "$WORK/cell.txt" >>"$OUT"
    else
        log "bench_engine $1 failed (exit $?): $(tail -n 1 "$log_f" 2>/dev/null)"
        awk -v d="$1" '{print "engine", d, $3, $7, $8}' "$WORK/cell.txt" >>"$OUT" # what it finished
        # cells with samples (finished before the failure) still show them
        for t in pp128 pp512 tg128; do echo "fail engine $1 $t"; done >>"$OUT"
    fi
    sed -n 's/.*kernels \([^ ,]*\),.*/path engine \1/p' "$log_f" | head -n 1 >>"$OUT"
}

# npubench's dtype that runs the file's own block types: `native` once the CLI names it, else
# q4_1 (which already keeps every GGUF block type of the file as it is).
QD=q4_1
if [ -x "$BUILD/npubench" ] && "$BUILD/npubench" run --help 2>&1 | grep -qw native; then QD=native; fi
# The quantized row's label names the file's types, so a Gemma table cannot read as Q4_1.
GGUF_FACTS="$(python3 - "$MODEL" <<'PY'
import collections, struct, sys
# GGUF v2/v3 header walk: only the tensor infos' ggml types are wanted.
T = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K",
     11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 30: "BF16"}
f = open(sys.argv[1], "rb")
rd = lambda fmt: struct.unpack("<" + fmt, f.read(struct.calcsize(fmt)))[0]
def skip(t):
    if t == 8: f.seek(rd("Q"), 1)
    elif t == 9:
        et, n = rd("I"), rd("Q")
        for _ in range(n): skip(et)
    else: f.seek({0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t], 1)
try:
    assert f.read(4) == b"GGUF"; rd("I"); nt, nkv = rd("Q"), rd("Q")
    for _ in range(nkv):
        f.seek(rd("Q"), 1); skip(rd("I"))
    c, linear = collections.Counter(), 0
    for _ in range(nt):
        name = f.read(rd("Q")).decode(errors="replace"); nd = rd("I")
        dims = [rd("Q") for _ in range(nd)]; c[T.get(rd("I"), "?")] += 1; rd("Q")
        if name.startswith("blk.") and nd == 2: # a layer's linear: one multiply-add per weight
            linear += dims[0] * dims[1]
    print("/".join(k for k, _ in c.most_common() if k not in ("F32",)))
    print(2 * linear)
except Exception:
    print("file's types"); print(0)
PY
)"
QLABEL="$(echo "$GGUF_FACTS" | sed -n 1p)"
FLOP_TOKEN="$(echo "$GGUF_FACTS" | sed -n 2p)"
log "quantized row: npubench --dtype $QD against the file's $QLABEL"

for round in $(seq 1 "$ROUNDS"); do
    bandwidth_and_peak >>"$OUT" || log "bench_kernels --bandwidth failed: no bandwidth or peak"
    for d in bf16 "$QD"; do
        if [ "$d" = bf16 ]; then F="$BF16"; else F="$MODEL"; fi
        for t in pp128 pp512 tg128; do
            log "round $round/$ROUNDS: llama-bench $d $t"
            run_llama_cell "$F" "$d" "$t" || true
        done
        log "round $round/$ROUNDS: bench_engine $d"
        run_engine "$d"
    done
done

python3 - "$OUT" "$THREADS" "$LLAMA_VER" "$ROUNDS" "$REPS" "$HOST_ISA" "$QD" "$QLABEL" "$MODEL" \
    "$ISA" "$FLOP_TOKEN" <<'PY'
import os, statistics, sys
path, threads, ver, rounds, reps, host_isa, qd, qlabel, model, isa, flop_tok = sys.argv[1:12]
flop_tok = float(flop_tok or 0)
bws, peaks, samples, size, cfgs, paths, fails = [], [], {}, {}, {}, set(), set()
for line in open(path):
    f = line.split()
    if not f:
        continue
    if f[0] == "bandwidth":
        bws.append(float(f[1]))
    elif f[0] == "peak":
        peaks.append((f[1], float(f[2])))
    elif f[0] == "path":
        paths.add(f[2])
    elif f[0] == "fail":
        fails.add(tuple(f[1:4]))
    else:
        side, dtype, test, vals, nbytes = f[:5]
        samples.setdefault((side, dtype, test), []).extend(float(v) for v in vals.split(","))
        size[(side, dtype)] = int(nbytes)
        if side == "llama":
            cfgs.setdefault((dtype, test), set()).add(f[5])
bw = max(bws) if bws else None
peak = max(peaks, key=lambda p: p[1]) if peaks else None
flags = set(host_isa.split())
# llama.cpp is built with GGML_NATIVE: its CPU kernels are what this host's flags allow.
llama_path = "-march=native (" + ("AMX-INT8 (repacked quant types) + " if "amx_int8" in flags else "") + (
    "AVX512-BF16" if "avx512_bf16" in flags else "AVX-512" if "avx512f" in flags
    else "AVX2" if "avx2" in flags else "baseline") + ")"
if isa == "avx2":
    llama_path = "GGML_NATIVE=OFF, AVX2/FMA/F16C only (no AVX-512, AVX-VNNI or AMX)"
print(f"model {os.path.basename(model)}; quantized row: npubench --dtype {qd} vs llama-bench "
      f"on the file ({qlabel})")
print(f"llama.cpp {ver}; {threads} threads; {rounds} rounds x {reps} reps per side and test")
print(f"host ISA: {host_isa or 'unknown'}" + ("; measured as the AVX2-only host class (--isa avx2:"
      " npubench under NPUBENCH_ISA=avx2, llama.cpp built without AVX-512)" if isa == "avx2" else ""))
print(f"kernel paths: npubench {', '.join(sorted(paths)) or 'n/a'}; "
      f"llama.cpp ggml-cpu {llama_path}")
print("read bandwidth " + (f"{bw:.2f} GB/s (best of {len(bws)})" if bw else "n/a")
      + "; compute peak " + (f"{peak[1]:.0f} GFLOP/s ({peak[0]}, bench_kernels)" if peak else "n/a")
      + (f"; layer linears {flop_tok / 1e6:.1f} MFLOP per token" if flop_tok else ""))
print()
print("| dtype | test | llama.cpp t/s best (median) | npubench t/s best (median) | ratio best (median) "
      "| share at best: llama.cpp / npubench |")
print("|---|---|---:|---:|---:|---|")
norepack = False
for d in ("bf16", qd):
    for t in ("pp128", "pp512", "tg128"):
        l, o = samples.get(("llama", d, t)), samples.get(("engine", d, t))
        cells = []
        for side, v in (("llama", l), ("engine", o)):
            if v:
                cell = f"{max(v):.1f} ({statistics.median(v):.1f})"
                if side == "llama" and "repack0" in cfgs.get((d, t), ()):
                    cell += " --repack 0" + ("" if cfgs[(d, t)] == {"repack0"} else " in part")
                    norepack = True
            else:
                cell = "failed" if (side, d, t) in fails else "n/a"
            cells.append(cell)
        ratio = gbs = ""
        if l and o:
            lb, lm, ob, om = max(l), statistics.median(l), max(o), statistics.median(o)
            ratio = f"{ob / lb:.2f}x ({om / lm:.2f}x)"
            if t.startswith("tg"):
                lg, og = size[("llama", d)] * lb / 1e9, size[("engine", d)] * ob / 1e9
                gbs = f"{lg:.1f} / {og:.1f} GB/s" + (f": {lg / bw:.0%} / {og / bw:.0%} of read bw"
                                                      if bw else "")
            elif flop_tok and peak:
                gbs = (f"{flop_tok * lb / 1e9:.0f} / {flop_tok * ob / 1e9:.0f} GFLOP/s: "
                       f"{flop_tok * lb / 1e9 / peak[1]:.0%} / {flop_tok * ob / 1e9 / peak[1]:.0%}"
                       " of peak")
        label = d if d == "bf16" else f"{d} ({qlabel})"
        print(f"| {label} | {t} | {cells[0]} | {cells[1]} | {ratio} | {gbs} |")
if norepack:
    print()
    print("--repack 0: llama-bench's default (CPU weight repacking, its AMX/AVX-512 kernels) "
          "failed for that cell (logs in the work directory), so it ran without repacking.")
PY
