#!/usr/bin/env bash
# The suite's breadth tests: what the suite checks on a representative sample, on every model and at full size
# (tests marked `breadth`: the compiled models in both modes, GPT-2 with all of its layers, the ViT, LLM-decoding and LLM-training
# notebooks, the CUDA kernels compiled for every architecture). The suite skips them,
# saying so; run this after changing counting, compiled-graph reading or attribution.
#
#     bash bench/breadth.sh            # about four minutes on two cores
set -euo pipefail
cd "$(dirname "$0")/.."
export ROOFLINE_BREADTH=1
python -m pytest -q -n 2 --dist loadfile tests/test_compiled_models.py tests/test_models.py tests/test_notebooks.py tests/test_gpu.py "$@"
