"""Build the pure-C unit tests with AddressSanitizer + UndefinedBehaviorSanitizer and -Werror, and run them."""

import pytest
from conftest import ROOT

pytestmark = pytest.mark.python_independent  # pure C: built and run without Python (tests/conftest.py)


def test_cost_model_c_units_under_sanitizers(sanitized_cc, tmp_path):
    exe = sanitized_cc.build([ROOT / "tests" / "c" / "test_cost.c", ROOT / "csrc" / "cost.c"], tmp_path / "test_cost")
    run = sanitized_cc.run(exe, timeout=60)
    assert "all C cost tests passed" in run.stdout


def test_backward_link_table_c_units_under_sanitizers(sanitized_cc, tmp_path):
    exe = sanitized_cc.build([ROOT / "tests" / "c" / "test_link.c", ROOT / "csrc" / "link.c"], tmp_path / "test_link")
    run = sanitized_cc.run(exe, timeout=60)
    assert "all C link tests passed" in run.stdout


def test_attribution_rules_c_units_under_sanitizers(sanitized_cc, tmp_path):
    exe = sanitized_cc.build([ROOT / "tests" / "c" / "test_attribution.c", ROOT / "csrc" / "attribution.c",
                              ROOT / "csrc" / "link.c"], tmp_path / "test_attribution")
    run = sanitized_cc.run(exe, timeout=60)
    assert "all C attribution tests passed" in run.stdout
