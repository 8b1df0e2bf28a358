#!/usr/bin/env bash
# GPU check: build the package, run the GPU tests, measure the ceilings and compare them with the datasheet and
# with PyTorch. Written for a machine with one NVIDIA GPU and no network (python3 with torch, numpy and pytest
# installed); run it from anywhere: it works in the repository root.
#
#   OUT=/some/dir bench/gpu_check.sh        (default OUT: /tmp/roofline-gpu-check)
#
# Everything printed also goes to $OUT/gpu_check.log; the measured numbers go to $OUT/gpu_ceilings.json (with
# the SM clock each figure was measured at), the GPU tests' report to $OUT/pytest_gpu.xml, the device's clocks
# and throttle reasons before and after to $OUT/nvidia_smi_*.csv, and a one-line-per-step summary to
# $OUT/summary.txt. Every step runs under `timeout` inside an overall budget
# (GPU_CHECK_BUDGET_S, default 420 s), and a failing step does not stop the later ones, so partial results are
# always written. Exit status: 0 if every step passed, 1 otherwise.
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 1
OUT="${OUT:-/tmp/roofline-gpu-check}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
BUDGET="${GPU_CHECK_BUDGET_S:-420}"
START=$(date +%s)
export PYTHONUNBUFFERED=1
export ROOFLINE_CACHE_DIR="${ROOFLINE_CACHE_DIR:-/tmp/roofline-cache}"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
TEE_PID=$!
FAILED=0

# step NAME LIMIT_S CMD...: run CMD under timeout (the smaller of LIMIT_S and what is left of the budget).
step() {
    local name=$1 limit=$2
    shift 2
    local left=$((BUDGET - ($(date +%s) - START)))
    if ((left < 15)); then
        echo "=== $name: SKIPPED (budget of ${BUDGET}s used up)"
        echo "$name: skipped (budget)" >>"$SUMMARY"
        FAILED=1
        return 1
    fi
    ((limit > left)) && limit=$left
    echo
    echo "=== $name (limit ${limit}s) $(date -u +%H:%M:%S)"
    local t0 rc
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@"
    rc=$?
    local verdict=ok
    ((rc == 124 || rc == 137)) && verdict="TIMED OUT"
    ((rc != 0 && rc != 124 && rc != 137)) && verdict="FAILED (rc=$rc)"
    echo "=== $name: $verdict in $(($(date +%s) - t0))s"
    echo "$name: $verdict ($(($(date +%s) - t0))s)" >>"$SUMMARY"
    ((rc != 0)) && FAILED=1
    return $rc
}

SMI_QUERY=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active
step "environment" 60 bash -c "
    nvidia-smi --query-gpu=$SMI_QUERY --format=csv >'$OUT/nvidia_smi_before.csv' 2>&1 || true
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
        --format=csv || nvidia-smi || true
    $PY -c 'import sys; print(sys.version)'
    $PY -c 'import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.is_available())' || true
    $PY -c 'import numpy; print(\"numpy\", numpy.__version__)'
    command -v nvcc && nvcc --version | tail -2 || echo 'nvcc: not found'
    git log --oneline -1 2>/dev/null || true
"

if ! step "build" 180 env ROOFLINE_WERROR=1 "$PY" -m pip install --no-build-isolation --no-deps --no-index -e .; then
    # Fall back to an in-place build that needs no pip metadata step.
    step "build (in place)" 120 env ROOFLINE_WERROR=1 "$PY" setup.py build_ext --inplace &&
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi

step "import and device" 60 "$PY" -c "
import json, roofline
from roofline import _gpu
print(json.dumps(_gpu.device_info(0), indent=1, default=str))
print(_gpu.nvrtc_info())
"

# The Hopper wgmma kernels are the newest code path: launch them once in their own process first, so that a
# fault there cannot take the rest of the run down with it. If they fail, the later steps skip them.
if ! step "wgmma smoke test" 90 "$PY" bench/gpu_ceilings.py --wgmma-smoke; then
    echo "wgmma kernels failed: the remaining steps run with ROOFLINE_GPU_WGMMA=0"
    export ROOFLINE_GPU_WGMMA=0
fi

# The compile-only checks (every architecture through NVRTC and nvcc, the SASS inspection) ran on the CPU side
# already; on the device the GPU tests and the simulated-device tests run.
step "GPU tests" 200 "$PY" -m pytest tests/test_gpu.py -q -rs -p no:cacheprovider -s \
    -k "not nvcc_compiles and not sass_work and not nvrtc_compiles_every_kernel and not every_launch_matches" \
    --junitxml="$OUT/pytest_gpu.xml"

step "ceilings vs datasheet and PyTorch" 200 "$PY" bench/gpu_ceilings.py --full --json "$OUT/gpu_ceilings.json"

step "measure on CUDA" 120 "$PY" bench/gpu_measure.py

step "clocks after" 30 bash -c "nvidia-smi --query-gpu=$SMI_QUERY --format=csv | tee '$OUT/nvidia_smi_after.csv' || true"

# pytest exits 5 when it collects nothing: not a failure here.
step "other tests" 90 bash -c "$PY -m pytest tests -q -x -p no:cacheprovider --ignore=tests/test_gpu.py; rc=\$?; exit \$((rc == 5 ? 0 : rc))"

echo
echo "=== summary (total $(($(date +%s) - START))s)"
cat "$SUMMARY"
# Let tee write the last lines before the script ends.
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit $FAILED
