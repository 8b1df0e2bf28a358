"""The coverage sweep's new families (bench/coverage.py: speech, detection, sparse, qat, rnn), a training step each on
the CPU: every op counted (no unknown op, no count error) and roofline's FlopCounterMode-compatible count equal to
FlopCounterMode's. The whole families run in ``python bench/coverage.py --only speech,detection,sparse,qat,rnn``."""

import importlib.util
import os
import warnings

import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")  # bench/coverage.py lists the torchvision zoo beside these


@pytest.fixture(scope="module")
def coverage():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "coverage.py")
    spec = importlib.util.spec_from_file_location("_coverage_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("family,name", [
    ("speech", "ctc-conv-frontend"), ("detection", "flow-grid-sample"),
    ("sparse", "gcn-sparse-adjacency"), ("sparse", "recsys-sparse-adam"), ("qat", "qat-fake-quant"),
    ("qat", "qat-learnable-per-channel"), ("rnn", "packed-bigru")])
def test_family_model_fully_covered(coverage, family, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = coverage.run_model(family, name, quick=True, devices=("cpu",))
    assert "failed" not in res, res.get("failed")
    for mode in ("infer", "train"):
        d = res[mode]
        assert d["unknown"] == {} and d["errors"] == {}, (mode, d)
        assert d["fcm_mismatch"] == {}, (mode, d["fcm_mismatch"])
    assert res["covered"]
