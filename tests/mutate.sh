#!/bin/sh
# mutate.sh [FILTER]: mutation testing. Applies each mutation of tests/mutations.txt (or
# NB_MUT_LIST; those whose line matches FILTER) to the source tree, one at a time; rebuilds
# incrementally in build-mutate/ (NB_MUT_BUILD); runs the tests the line names (never e2e,
# CI=true); restores the file; prints which mutations the suite killed and the kill rate.
# Exit 1 if one survived.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
bld=${NB_MUT_BUILD:-$src/build-mutate}
list=${NB_MUT_LIST:-$src/tests/mutations.txt}
filter=${1:-}
jobs=${NB_MUT_JOBS:-2}
log=$bld/mutate.log

build() { cmake --build "$bld" -j"$jobs" >>"$log" 2>&1; }
cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 2
: >"$log"
build || { echo "mutate: the unmutated tree does not build (see $log)"; exit 2; }

backup=
restore() {
    if [ -n "$backup" ]; then
        cp "$backup" "$src/$file" && touch "$src/$file" && rm -f "$backup"
        backup=
    fi
}
trap 'restore; exit 130' INT TERM HUP

# Every listed test must pass on the unmutated tree, or a "kill" means nothing.
all=$(grep -v '^#' "$list" | awk -F ' @@ ' 'NF == 5 {print $4}' | sort -u | paste -sd'|' -)
if ! (cd "$bld" && CI=true ctest -R "$all" -LE e2e -FA '.*' >>"$log" 2>&1); then
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
    if ! build && ! build; then # twice: a build killed from outside is not a verdict
        verdict="stillborn (does not build)"
        stillborn=$((stillborn + 1))
    elif (cd "$bld" && CI=true ctest -R "$tests" -LE e2e -FA '.*' --timeout 300 >>"$log" 2>&1); then
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
build || echo "mutate: the restored tree does not build (see $log)"
live=$((killed + survived))
[ $live -gt 0 ] || { echo "mutate: no mutation matched '$filter'"; exit 2; }
echo "killed $killed of $live mutations ($((100 * killed / live))%); $stillborn stillborn"
[ $survived -eq 0 ]
