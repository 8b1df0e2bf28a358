"""A subset of the model-zoo coverage sweep (bench/coverage.py), one model of each kind the sweep covers: every op
of an inference pass and of a training step (forward, backward, AdamW step) has a formula, no count fails, and
roofline's FlopCounterMode-compatible count equals FlopCounterMode's op by op. The whole zoo is a bench:
``python bench/coverage.py`` (its output is in docs/coverage.md).

Small models on the meta device (no arithmetic), one pass per mode counted by roofline and FlopCounterMode together;
the detection model and the mixture-of-experts models run on the CPU at their smallest (their routing and
proposals need values).
"""

import importlib.util
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "coverage.py")
_spec = importlib.util.spec_from_file_location("roofline_bench_coverage", _PATH)
coverage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(coverage)

SUBSET = [
    ("tv", "mobilenet_v3_small"), ("tv", "shufflenet_v2_x0_5"), ("tv", "squeezenet1_1"), ("tv", "vit_b_32"),
    ("tv-seg", "lraspp_mobilenet_v3_large"), ("tv-video", "r3d_18"),
    ("tv-det", "fasterrcnn_mobilenet_v3_large_320_fpn"),
    ("timm", "test_vit"), ("timm", "test_convnext"), ("timm", "test_efficientnet"), ("timm", "test_mambaout"),
    ("timm", "levit_128s"),
    ("hf", "llama"), ("hf", "mistral-sliding-window"), ("hf", "mixtral-moe"), ("hf", "deepseek-v3-mla-moe"),
    ("hf", "bert"), ("hf", "t5"), ("hf", "whisper-speech"), ("hf", "clip-vision-language"), ("hf", "mamba"),
]


def test_subset_spans_every_family():
    fams = {f for f, _ in SUBSET}
    assert fams == {"tv", "tv-seg", "tv-video", "tv-det", "timm", "hf"} and len(SUBSET) >= 20
    zoo = set(coverage.zoo())
    assert all(entry in zoo or entry[1].startswith("test_") for entry in SUBSET)  # timm's test models: small


@pytest.mark.parametrize("family, name", SUBSET, ids=[f"{f}/{n}" for f, n in SUBSET])
def test_model_fully_covered(family, name):
    pytest.importorskip("timm" if family == "timm" else "transformers" if family == "hf" else "torchvision")
    res = coverage.run_model(family, name, quick=True)
    assert "failed" not in res, res.get("failed")
    for mode in ("infer", "train"):
        d = res[mode]
        assert d["unknown"] == {} and d["errors"] == {}, (mode, d["unknown"], d["errors"])
        assert d["fcm_mismatch"] == {}, (mode, d["fcm_mismatch"])
        assert d["matrix_flops"] > 0
    assert res["covered"]
