#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 60), one after the other, from the seed
# corpora (the spec's examples and well-formed messages and filter sets).
#
#   fuzz/run_all.sh 60          # about 3 minutes: fuzz_sql, fuzz_filter_set, fuzz_message
#   FUZZ_SECONDS=60 fuzz/run_all.sh   # 60 seconds in all, split among the targets (CI)
#
# Uses atheris (coverage-guided libFuzzer) when it can be imported or pip-installed, else
# runs each target as a plain random loop over mutated seeds (FILTEX_FUZZ_PLAIN=1 forces
# that). Exits 1 if any target found an input that breaks an invariant or hangs (-timeout);
# the input is kept under $FUZZ_ARTIFACTS (default: a new temporary directory), named
# crash-<sha1> or timeout-<sha1>: reproduce with  python fuzz/fuzz_X.py FILE  (atheris) or
# by calling fuzz_X.test_one_input(open(FILE, "rb").read()).
set -uo pipefail

targets="fuzz_sql fuzz_filter_set fuzz_message"
if [ -n "${FUZZ_SECONDS:-}" ]; then
    seconds=$(( FUZZ_SECONDS / 3 ))
    [ "$seconds" -ge 1 ] || seconds=1
else
    seconds="${1:-60}"
fi
here="$(cd "$(dirname "$0")" && pwd)"
out="${FUZZ_ARTIFACTS:-$(mktemp -d "${TMPDIR:-/tmp}/filtex-fuzz.XXXXXX")}"
python="${PYTHON:-python3}"

if [ -z "${FILTEX_FUZZ_PLAIN:-}" ] && ! "$python" -c "import atheris" 2>/dev/null; then
    "$python" -m pip install --quiet atheris 2>/dev/null \
        || echo "atheris cannot be installed here: the targets run as plain random loops"
fi

status=0
for target in $targets; do
    dir="$out/$target"
    mkdir -p "$dir/corpus"
    echo "== $target: ${seconds}s, artifacts in $dir"
    # A target that outlives its time by far is hung (outside any one input): that fails too.
    timeout -k 10 $(( 2 * seconds + 60 )) \
        "$python" "$here/$target.py" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$dir/" -print_final_stats=1 "$dir/corpus" >"$dir/log" 2>&1
    code=$?
    grep -E "^(#[0-9]+ +DONE|Done [0-9]+ runs|stat::number_of_executed_units|==)" "$dir/log" || true
    if [ "$code" -ne 0 ] || ls "$dir"/crash-* "$dir"/timeout-* "$dir"/oom-* >/dev/null 2>&1; then
        echo "!! $target failed (exit $code); the last lines of its log:"
        tail -n 40 "$dir/log"
        status=1
    fi
done
exit "$status"
