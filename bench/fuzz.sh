#!/usr/bin/env bash
# Long fuzzing run: the libFuzzer harness of the C cost model (tests/fuzz/fuzz_cost.c, built with ASan + UBSan),
# the Hypothesis property suite (tests/test_fuzz_properties.py) with many examples, and the document property and
# hostile-document corpus of tests/test_documents.py (mutations of real report documents either refused with a
# ValueError naming the field, or loaded into a report every public method works on; ~1 MB hostile documents
# read in under 2 s each, the slowest printed). The suite runs the same three briefly: tests/test_fuzz_c.py fuzzes
# for 5 s (ROOFLINE_FUZZ_C_SECONDS) after replaying the seeds and the wrong-model checks, the properties with their
# default examples.
#
#   bench/fuzz.sh            full run: FUZZ_RUNS inputs (each evaluated twice under every cost kind and two unknown
#                            ones, 2 x (kinds + 2) = 44 evaluations per input with 20 kinds) and ROOFLINE_FUZZ_EXAMPLES
#                            examples per property; it fails unless the C fuzzer made >= 10**7 cost-model evaluations,
#                            the Hypothesis suite ran >= 10**5 examples and the document property >= 10**4
#   bench/fuzz.sh --quick    a smoke run of a minute or two (no minimum counts)
#
# Environment: FUZZ_RUNS (default 1000000), FUZZ_MAX_SECONDS (default 1800), ROOFLINE_FUZZ_EXAMPLES (Hypothesis
# examples per property, default 10000; the suite has 20+ properties), FUZZ_WORKDIR (default: a new temporary
# directory; the corpus and any crash inputs are kept there), FUZZ_CC (default clang), PYTHON (default python3).
# Prints the executions, cost-model evaluations (and per kind, how many ended with each status), time and crash
# count of the C fuzzer, and the examples (test cases Hypothesis ran, summed over its phases) of the property suite.
# Exits non-zero on any crash, sanitizer report, violated invariant or failing property.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
CC_FUZZ=${FUZZ_CC:-clang}
RUNS=${FUZZ_RUNS:-1000000}
MAX_SECONDS=${FUZZ_MAX_SECONDS:-1800}
EXAMPLES=${ROOFLINE_FUZZ_EXAMPLES:-10000}
MIN_EVALS=10000000
MIN_EXAMPLES=100000
MIN_DOC_EXAMPLES=10000
if [[ "${1:-}" == "--quick" ]]; then
    RUNS=20000
    EXAMPLES=200
    MIN_EVALS=0
    MIN_EXAMPLES=0
    MIN_DOC_EXAMPLES=0
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
reports=$(grep -c -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: UndefinedBehavior|invariant violated' \
    "$WORK/fuzz.log")
grep -E '^kind ' "$WORK/fuzz.log" | tail -n 40
printf 'C fuzzer: %s executions, %s cost-model evaluations, %.1f s, %s crash input(s), %s report(s), exit %s\n' \
    "${execs:-0}" "${evals:-0}" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$crashes" "$reports" "$rc"
if [[ $rc -ne 0 || $crashes -ne 0 || $reports -ne 0 ]]; then
    grep -E -A30 'invariant violated|ERROR:|runtime error:' "$WORK/fuzz.log" | head -60
    ls "$WORK/crashes"
    status=1
fi
if [[ ${evals:-0} -lt $MIN_EVALS ]]; then
    echo "C fuzzer: fewer than $MIN_EVALS cost-model evaluations (raise FUZZ_RUNS or FUZZ_MAX_SECONDS)"
    status=1
fi

echo "== Hypothesis property suite ($EXAMPLES examples per property)"
t0=$(date +%s.%N)
ROOFLINE_FUZZ_EXAMPLES=$EXAMPLES PYTHONPATH=$ROOT "$PYTHON" -m pytest -q -p no:cacheprovider \
    --hypothesis-show-statistics tests/test_fuzz_properties.py >"$WORK/hypothesis.log" 2>&1
hrc=$?
t1=$(date +%s.%N)
# --hypothesis-show-statistics prints, per property and phase, "- N passing, M failing, and K invalid test cases"
# (older Hypothesis: "N passing examples, M failing examples, K invalid examples"): sum N and M over every line.
count() { grep -o -E "[0-9]+ $1( examples)?," "$WORK/hypothesis.log" | awk '{s += $1} END {print s + 0}'; }
examples=$(count passing)
failing=$(count failing)
properties=$(grep -c -E '^tests/test_fuzz_properties\.py::' "$WORK/hypothesis.log")
summary=$(tail -n 1 "$WORK/hypothesis.log")
printf 'Hypothesis: %s passing examples over %s properties, %s failing, %.1f s, pytest: %s (exit %s)\n' \
    "$examples" "$properties" "$failing" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$summary" "$hrc"
if [[ $hrc -ne 0 ]]; then
    grep -E -B5 -A40 'Falsifying|Error' "$WORK/hypothesis.log" | head -120
    status=1
fi
if [[ $examples -lt $MIN_EXAMPLES || ( $examples -eq 0 && $hrc -eq 0 ) ]]; then
    echo "Hypothesis: fewer than $MIN_EXAMPLES examples counted (raise ROOFLINE_FUZZ_EXAMPLES, or check the parsing)"
    status=1
fi
if grep -q -E 'ERROR: AddressSanitizer|runtime error:' "$WORK/hypothesis.log"; then
    status=1
fi

echo "== document schema: fuzzed documents ($EXAMPLES examples) and ~1 MB hostile documents"
t0=$(date +%s.%N)
ROOFLINE_FUZZ_EXAMPLES=$EXAMPLES PYTHONPATH=$ROOT "$PYTHON" -m pytest -q -p no:cacheprovider \
    --hypothesis-show-statistics tests/test_documents.py -k fuzzed_documents >"$WORK/documents.log" 2>&1
drc=$?
t1=$(date +%s.%N)
# the corpus in a process of its own: its times are those of a reader, not of a heap 10,000 examples left behind
# (bench/hostile_docs.py: every read's time, failing when one takes 1 s or more)
PYTHONPATH=$ROOT "$PYTHON" "$ROOT/bench/hostile_docs.py" >"$WORK/hostile.log" 2>&1
hrc2=$?
doc_examples=$(grep -o -E "[0-9]+ passing( examples)?," "$WORK/documents.log" | awk '{s += $1} END {print s + 0}')
grep -E '^ *\* .*%, (loaded|refused)$' "$WORK/documents.log" | head -2
grep -E '^[0-9]+ reads; worst' "$WORK/hostile.log" || echo "hostile documents: no timing line (the script did not run)"
printf 'documents: %s passing examples, %.1f s, pytest: %s (exit %s); hostile documents: %s (exit %s)\n' \
    "$doc_examples" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" "$(tail -n 1 "$WORK/documents.log")" \
    "$drc" "$(tail -n 1 "$WORK/hostile.log")" "$hrc2"
if [[ $drc -ne 0 ]]; then
    grep -E -B5 -A40 'Falsifying|Failing test case|Error' "$WORK/documents.log" | head -120
    status=1
fi
if [[ $hrc2 -ne 0 ]]; then
    grep -E -B5 -A20 'Error' "$WORK/hostile.log" | head -60
    status=1
fi
if [[ $doc_examples -lt $MIN_DOC_EXAMPLES || ( $doc_examples -eq 0 && $drc -eq 0 ) ]]; then
    echo "documents: fewer than $MIN_DOC_EXAMPLES examples counted (raise ROOFLINE_FUZZ_EXAMPLES, or check the parsing)"
    status=1
fi
echo "fuzz.sh: $([[ $status -eq 0 ]] && echo passed || echo FAILED) (logs in $WORK)"
exit $status
