#!/bin/sh
# mutate.sh [FILTER]: mutation testing. Applies each mutation of tests/mutations.txt (or
# NB_MUT_LIST; those whose line matches FILTER) to the source tree, one at a time; rebuilds
# incrementally in build-mutate/ (NB_MUT_BUILD); runs the tests the line names with CI=true (e2e
# ones too: a line names test_cross_model where only it can see the mutation); restores the
# file; prints which mutations the suite killed and the kill rate. A line whose tests match no
# test is an error, never a survivor.
# Exit 1 if one survived.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
bld=${NB_MUT_BUILD:-$src/build-mutate}
list=${NB_MUT_LIST:-$src/tests/mutations.txt}
filter=${1:-}
jobs=${NB_MUT_JOBS:-2}
log=$bld/mutate.log

# NB_MUT_TARGETS=named: each mutation rebuilds only npubench and the executables of the tests
# its line names (what ctest runs for them), not the whole tree: minutes less per line where a
# library every binary links changes. Default: everything.
targets_for() {
    (cd "$bld" && ctest -N -V -R "$1") | sed -n 's/^.*Test command: \([^ ]*\).*$/\1/p' |
        while IFS= read -r exe; do basename "$exe"; done | grep -v '^sh$' | sort -u
}
build() {
    if [ "${NB_MUT_TARGETS:-}" = named ] && [ -n "${1:-}" ]; then
        # shellcheck disable=SC2046
        cmake --build "$bld" -j"$jobs" --target npubench $(targets_for "$1") >>"$log" 2>&1
    else
        cmake --build "$bld" -j"$jobs" >>"$log" 2>&1
    fi
}
cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 2
: >"$log"
# every line's tests (filtered), or everything
build_initial() {
    if [ "${NB_MUT_TARGETS:-}" = named ]; then
        t=$(grep -v '^#' "$list" | { [ -n "$filter" ] && grep -- "$filter" || cat; } |
            awk -F ' @@ ' 'NF == 5 {print $4}' | sort -u | while IFS= read -r re; do
                targets_for "$re"
            done | sort -u)
        # shellcheck disable=SC2046,SC2086
        cmake --build "$bld" -j"$jobs" --target npubench $t >>"$log" 2>&1
    else
        build
    fi
}
build_initial || { echo "mutate: the unmutated tree does not build (see $log)"; exit 2; }

backup=
restore() {
    if [ -n "$backup" ]; then
        cp "$backup" "$src/$file" && touch "$src/$file" && rm -f "$backup"
        backup=
    fi
}
trap 'restore; exit 130' INT TERM HUP

# Every test a (filtered) line names must pass on the unmutated tree, or a "kill" means
# nothing. The names are spelled out: CMake's regex engine refuses one alternation of all the
# lines' patterns (too many groups), and a ctest that finds no test exits 0.
names=$(grep -v '^#' "$list" | { [ -n "$filter" ] && grep -- "$filter" || cat; } |
    awk -F ' @@ ' 'NF == 5 {print $4}' | sort -u | while IFS= read -r re; do
        (cd "$bld" && ctest -N -R "$re") | sed -n 's/^ *Test *#[0-9]*: //p'
    done | sort -u)
[ -n "$names" ] || { echo "mutate: the lines name no test of $bld"; exit 2; }
all=$(printf '%s\n' "$names" | sed 's/.*/^&$/' | paste -sd'|' -)
if ! (cd "$bld" && CI=true ctest -R "$all" --no-tests=error -FA '.*' >>"$log" 2>&1); then
    echo "mutate: the unmutated tree fails its tests (see $log)"
    exit 2
fi

killed=0 survived=0 total=0 stillborn=0
while IFS= read -r line; do
    case $line in '#'* | '') continue ;; esac
    [ -n "$filter" ] && ! printf '%s\n' "$line" | grep -q -- "$filter" && continue
    file=$(printf '%s\n' "$line" | awk -F ' @@ ' '{print $1}')
    tests=$(printf '%s\n' "$line" | awk -F ' @@ ' '{print $4}')
    what=$(printf '%s\n' "$line" | awk -F ' @@ ' '{print $5}')
    n=$(cd "$bld" && ctest -N -R "$tests" | sed -n 's/^Total Tests: //p')
    if [ "${n:-0}" -eq 0 ]; then
        echo "mutate: no test matches '$tests': $line"
        exit 2
    fi
    total=$((total + 1))
    backup=$(mktemp)
    cp "$src/$file" "$backup"
    if ! MUT_LINE=$line python3 - "$src/$file" <<'PY'
import os, sys
f = os.environ["MUT_LINE"].split(" @@ ")
old, new = (x.replace("\\n", "\n") for x in f[1:3])
path = sys.argv[1]
text = open(path).read()
if text.count(old) != 1:
    sys.exit("mutate: %s: %r found %d times, want once" % (path, old, text.count(old)))
open(path, "w").write(text.replace(old, new))
PY
    then
        restore
        echo "mutate: bad mutation line: $line"
        exit 2
    fi
    t0=$(date +%s)
    if ! build "$tests" && ! build "$tests"; then # twice: a build killed from outside is not a verdict
        verdict="stillborn (does not build)"
        stillborn=$((stillborn + 1))
    elif (cd "$bld" && CI=true ctest -R "$tests" --no-tests=error -FA '.*' --timeout 600 >>"$log" 2>&1); then
        verdict=SURVIVED
        survived=$((survived + 1))
    else
        verdict=killed
        killed=$((killed + 1))
    fi
    restore
    secs=$(($(date +%s) - t0))
    printf '%-9s %4ss  %-30s %s\n' "$verdict" "$secs" "$file" "$what"
done <"$list"
build_initial || echo "mutate: the restored tree does not build (see $log)"
live=$((killed + survived))
[ $live -gt 0 ] || { echo "mutate: no mutation matched '$filter'"; exit 2; }
echo "killed $killed of $live mutations ($((100 * killed / live))%); $stillborn stillborn"
[ $survived -eq 0 ]
