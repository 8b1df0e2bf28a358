"""A fixed sample of the OpInfo sweep (bench/opinfo.py, the whole of torch's op_db): OpInfos whose ops got formulas
from it, run through the same check (first sample, float32 and bfloat16, forward and backward) and fully counted: no
unknown op, no count error, nothing raised inside the block, FlopCounterMode's count where it has one."""

import importlib.util
import os

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest", reason="torch.testing._internal (the OpInfo database) needs expecttest")

SAMPLE = ["logaddexp", "nn.functional.glu", "nn.functional.pixel_shuffle", "nn.functional.grid_sample", "cdist",
          "cummax", "linalg.svd", "linalg.solve", "linalg.eigh", "special.bessel_j0", "nn.functional.ctc_loss",
          "bitwise_left_shift", "mm", "nn.functional.conv2d", "nn.functional.linear_cross_entropy.chunked",
          "_segment_reduce.lengths", "nn.functional.max_unpool2d", "logcumsumexp", "hypot", "trace"]


@pytest.fixture(scope="module")
def sweep():
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "opinfo.py")
    spec = importlib.util.spec_from_file_location("_opinfo_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, mod.op_database()


@pytest.mark.parametrize("name", SAMPLE)
def test_opinfo_fully_counted(sweep, name):
    mod, ops = sweep
    res = mod.check_op(ops[name], samples=1, dtypes=("float32", "bfloat16"))
    assert res["runs"] > 0, f"{name}: no runnable sample"
    assert res["unknown"] == {} and res["errors"] == {} and res["raised"] == [] and res["fcm"] == [], res
