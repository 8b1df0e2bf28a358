"""Build the branch-by-branch C tests of the cost model (tests/c/test_cost_branches.c) with AddressSanitizer +
UndefinedBehaviorSanitizer and -Werror (the shared `sanitized_cc` fixture), and run them: every formula of
csrc/cost.c against hand-derived counts."""

import pytest
from conftest import ROOT

pytestmark = pytest.mark.python_independent  # pure C: built and run without Python (tests/conftest.py)


def test_cost_model_branches_under_sanitizers(sanitized_cc, tmp_path):
    exe = sanitized_cc.build([ROOT / "tests" / "c" / "test_cost_branches.c", ROOT / "csrc" / "cost.c"],
                             tmp_path / "test_cost_branches")
    run = sanitized_cc.run(exe, timeout=60)
    assert "all C cost branch tests passed" in run.stdout
