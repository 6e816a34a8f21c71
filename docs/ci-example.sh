#!/bin/sh
# ci-example.sh: an example CI job against an npubench lab — submit a verify and a profile, wait
# for both, keep the JUnit file and the HTML report as artifacts, and exit by the outcome.
#
#   NPUBENCH_COORDINATOR=tcp://lab-host:7600 NPUBENCH_SECRET="$(cat client.key)" \
#       docs/ci-example.sh
#
# Environment (all optional but the coordinator and, on a keyed lab, the secret):
#   MODEL      the model to gate and measure [instruct]
#   SELECT     extra selector flags for both jobs, e.g. "--tag strix" or "--board strix-01"
#   TIMEOUT    seconds to wait for both jobs [3600]
#   OUT        artifact directory [ci-artifacts]: junit.xml, report/index.html, jobs.json
#   NPUBENCH   the npubench binary [npubench]
# Exit: the highest outcome code of the two jobs (0 pass, 1 gate FAIL or regression, 2 error,
# 3 unavailable, 4 cancelled, 5 expired / still pending at TIMEOUT); a refused submit's code
# (3: no registered worker serves MODEL); 2 when the report could not be written although the
# jobs passed. tests/test_dashboard.c runs this file.
set -u

NPUBENCH=${NPUBENCH:-npubench}
MODEL=${MODEL:-instruct}
SELECT=${SELECT:-}
TIMEOUT=${TIMEOUT:-3600}
OUT=${OUT:-ci-artifacts}
mkdir -p "$OUT" || exit 2

# The first id of submit's JSON ("job_ids": [12, ...], pretty-printed) is the job to wait on;
# jq -r '.job_ids[0]' does the same where jq is installed.
submit() {
    # shellcheck disable=SC2086 # SELECT is a list of flags
    doc=$("$NPUBENCH" submit "$1" --model "$MODEL" $SELECT --json) || return $?
    printf '%s\n' "$doc" | tr -d ' \t\n' | sed -n 's/.*"job_ids":\[\([0-9][0-9]*\).*/\1/p'
}

# A refused submit exits by submit's own code: 3 when no registered worker serves the model.
verify_id=$(submit verify) || { rc=$?; echo "ci: submit verify failed" >&2; exit "$rc"; }
profile_id=$(submit profile) || { rc=$?; echo "ci: submit profile failed" >&2; exit "$rc"; }
if [ -z "$verify_id" ] || [ -z "$profile_id" ]; then
    echo "ci: submit printed no job id" >&2
    exit 2
fi
echo "ci: verify job $verify_id, profile job $profile_id"

# One deadline for both; the JUnit file holds one testcase per prompt and per regression check.
"$NPUBENCH" wait "$verify_id" "$profile_id" --timeout "$TIMEOUT" --junit "$OUT/junit.xml" \
    --json >"$OUT/jobs.json"
rc=$?
echo "ci: jobs finished with exit code $rc"

# The report is written whatever the outcome: a failed gate is when people look at it.
if ! "$NPUBENCH" report --html "$OUT/report"; then
    echo "ci: the HTML report could not be written" >&2
    [ "$rc" -eq 0 ] && rc=2
fi
exit "$rc"
