"""Build the C unit tests of the recorder's capture (csrc/capture.c: call signatures, dataflow rows) with
AddressSanitizer + UndefinedBehaviorSanitizer and -Werror, and run them."""

import pytest
from conftest import ROOT

pytestmark = pytest.mark.python_independent  # pure C: built and run without Python (tests/conftest.py)


def test_capture_c_units_under_sanitizers(sanitized_cc, tmp_path):
    exe = sanitized_cc.build([ROOT / "tests" / "c" / "test_capture.c", ROOT / "csrc" / "capture.c",
                              ROOT / "csrc" / "cost.c"], tmp_path / "test_capture")
    run = sanitized_cc.run(exe, timeout=60)
    assert "all C capture tests passed" in run.stdout
