#!/usr/bin/env bash
# Long fuzzing run: the libFuzzer harness of the C cost model (tests/fuzz/fuzz_cost.c, built with ASan + UBSan) and
# the Hypothesis property suite (tests/test_fuzz_properties.py) with many examples.
#
#   bench/fuzz.sh            full run: FUZZ_RUNS inputs (each evaluated under every cost kind, 42 evaluations per
#                            input: >= 10**7 evaluations) and ROOFLINE_FUZZ_EXAMPLES examples per property
#   bench/fuzz.sh --quick    a one-minute smoke run
#
# Environment: FUZZ_RUNS (default 1000000), FUZZ_MAX_SECONDS (default 1800), ROOFLINE_FUZZ_EXAMPLES (Hypothesis
# examples per property, default 10000; the suite has 10+ properties), FUZZ_WORKDIR (default: a new temporary
# directory; the corpus and any crash inputs are kept there), FUZZ_CC (default clang), PYTHON (default python3).
# Prints the executions, cost-model evaluations, time and crash count of the C fuzzer and the examples of the
# Hypothesis suite. Exits non-zero on any crash, sanitizer report, violated invariant or failing property.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
CC_FUZZ=${FUZZ_CC:-clang}
RUNS=${FUZZ_RUNS:-1000000}
MAX_SECONDS=${FUZZ_MAX_SECONDS:-1800}
EXAMPLES=${ROOFLINE_FUZZ_EXAMPLES:-10000}
if [[ "${1:-}" == "--quick" ]]; then
    RUNS=20000
    EXAMPLES=200
fi
WORK=${FUZZ_WORKDIR:-$(mktemp -d -t roofline-fuzz.XXXXXX)}
mkdir -p "$WORK/corpus" "$WORK/seeds" "$WORK/crashes"
status=0

echo "== C cost-model fuzzer (workdir $WORK)"
"$CC_FUZZ" -g -O1 -Wall -Wextra -Werror -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Icsrc \
    tests/fuzz/fuzz_cost.c csrc/cost.c -o "$WORK/fuzz_cost" || { echo "build of the fuzzer failed"; exit 2; }
PYTHONPATH=$ROOT "$PYTHON" bench/fuzz_seeds.py "$WORK/seeds" || { echo "seed generation failed"; exit 2; }
t0=$(date +%s.%N)
"$WORK/fuzz_cost" -runs="$RUNS" -max_total_time="$MAX_SECONDS" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$WORK/crashes/" "$WORK/corpus" "$WORK/seeds" >"$WORK/fuzz.log" 2>&1
rc=$?
t1=$(date +%s.%N)
execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$WORK/fuzz.log" | grep -o '[0-9]*$' || echo 0)
evals=$(grep -o 'cost-model evaluations: [0-9]*' "$WORK/fuzz.log" | grep -o '[0-9]*$' | tail -1 || echo 0)
crashes=$(find "$WORK/crashes" -type f | wc -l)
reports=$(grep -c -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|invariant violated' \
    "$WORK/fuzz.log")
printf 'C fuzzer: %s executions, %s cost-model evaluations, %.1f s, %s crash input(s), %s report(s), exit %s\n' \
    "${execs:-0}" "${evals:-0}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$crashes" "$reports" "$rc"
if [[ $rc -ne 0 || $crashes -ne 0 || $reports -ne 0 ]]; then
    grep -E -A30 'invariant violated|ERROR:|runtime error:' "$WORK/fuzz.log" | head -60
    ls "$WORK/crashes"
    status=1
fi

echo "== Hypothesis property suite ($EXAMPLES examples per property)"
t0=$(date +%s.%N)
ROOFLINE_FUZZ_EXAMPLES=$EXAMPLES PYTHONPATH=$ROOT "$PYTHON" -m pytest -q -p no:cacheprovider \
    --hypothesis-show-statistics tests/test_fuzz_properties.py >"$WORK/hypothesis.log" 2>&1
hrc=$?
t1=$(date +%s.%N)
examples=$(grep -o '[0-9]* passing, ' "$WORK/hypothesis.log" | awk '{s += $1} END {print s + 0}')
failing=$(grep -o '[0-9]* failing, ' "$WORK/hypothesis.log" | awk '{s += $1} END {print s + 0}')
tail -3 "$WORK/hypothesis.log"
printf 'Hypothesis: %s passing examples, %s failing, %.1f s, pytest exit %s\n' "$examples" "$failing" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$hrc"
if [[ $hrc -ne 0 ]]; then
    grep -E -B5 -A40 'Falsifying|Error' "$WORK/hypothesis.log" | head -120
    status=1
fi
if grep -q -E 'ERROR: AddressSanitizer|runtime error:' "$WORK/hypothesis.log"; then
    status=1
fi
echo "fuzz.sh: $([[ $status -eq 0 ]] && echo passed || echo FAILED) (logs in $WORK)"
exit $status
