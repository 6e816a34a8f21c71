#!/bin/sh
# suite_check.sh setup|cleanup: ctest's fixture around the whole suite. Finds the processes
# this build's tests started (NB_TESTRUN=<build dir> in their environment, which everything
# they start inherits; a process of someone else's is never touched) and the device locks held under XDG_RUNTIME_DIR/npubench; setup reports
# and ends leftovers of an earlier run, cleanup fails on any. setup also refuses raw skip().
set -u
phase=${1:?setup or cleanup}
# Again without the mark, so that this script and what it runs are not taken for leftovers.
if [ -n "${NB_TESTRUN:-}" ]; then
    exec env -u NB_TESTRUN NB_TAG="$NB_TESTRUN" sh "$0" "$@"
fi
: "${NB_TAG:?run by ctest}" "${NB_SRC:?}" "${XDG_RUNTIME_DIR:?}"
bad=0
tag=$NB_TAG

ours() {
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = $$ ] && continue
        state=$(awk '{print $3}' 2>/dev/null "$p/stat") || continue
        [ "$state" = Z ] && continue
        if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "NB_TESTRUN=$tag"; then
            echo "$pid"
        fi
    done
}

# A process already on its way out (a test's child reaped a moment after the test ended)
# gets a few seconds to go before it counts.
left=$(ours)
for _ in 1 2 3 4 5 6 7 8 9 10; do
    [ -z "$left" ] && break
    sleep 0.5
    left=$(ours)
done
for pid in $left; do
    kill -0 "$pid" 2>/dev/null || continue
    echo "leftover: pid $pid: $(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")"
    kill -9 "$pid" 2>/dev/null
    bad=1
done

for lock in "$XDG_RUNTIME_DIR"/npubench/device-*.lock; do
    [ -e "$lock" ] || continue
    if ! flock -n "$lock" true; then
        echo "device lock held: $lock (pid $(cat "$lock" 2>/dev/null))"
        bad=1
    fi
done

if [ "$phase" = setup ]; then
    # Every skip goes through testutil.h (reason printed, fails under CI, ctest "Skipped").
    raw=$(grep -nE '(^|[^_a-z])skip\(\)|cmocka_run_group_tests\(' "$NB_SRC"/tests/test_*.c)
    if [ -n "$raw" ]; then
        echo "use tu_skip/tu_require and tu_run_group (tests/testutil.h), not:"
        echo "$raw"
        exit 1
    fi
    [ $bad = 0 ] || echo "(an earlier run left these; ended now)"
    exit 0
fi
[ $bad = 0 ] && echo "no leftover process, no device lock held"
exit $bad
