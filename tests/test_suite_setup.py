"""What tests/conftest.py sets up for the processes of README's test command (pytest-xdist workers)."""

import os

import pytest


@pytest.mark.skipif(not os.environ.get("PYTEST_XDIST_WORKER"), reason="only under pytest-xdist (README's test command)")
def test_a_worker_runs_torch_on_the_threads_conftest_set():
    # conftest sets OMP_NUM_THREADS (1, unless it was set before the suite started) when the worker starts; it only
    # takes effect if nothing imported torch before: torch's thread count says whether it did
    torch = pytest.importorskip("torch")
    assert torch.get_num_threads() == int(os.environ["OMP_NUM_THREADS"])
