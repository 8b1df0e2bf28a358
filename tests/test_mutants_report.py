"""Report.module_path at the edges of its range: the ids of ``records["module"]`` run from 0 to
len(module_sets) - 1, and the first id past the end is refused with a ValueError naming the bound (not an
IndexError from the list underneath)."""

import numpy as np
import pytest

from roofline._datamodel._records import RECORD_DTYPE
from roofline.report import OpInfo, Report

# the innermost module of each set: the name with the most dots, the greater name among equally deep ones
SETS = [("Global",), ("Global", "Net"), ("Global", "Net", "Net.b", "Net.a"), ("Global", "Net", "Net.a", "Net.a.fc")]
INNERMOST = ["Global", "Net", "Net.b", "Net.a.fc"]


def _report():
    return Report(np.zeros(0, dtype=RECORD_DTYPE), [OpInfo("aten.mm.default", "aten.mm", "mm")], SETS)


def test_module_path_of_every_id_up_to_the_last():
    r = _report()
    assert [r.module_path(i) for i in range(4)] == INNERMOST
    assert r.module_path(np.int64(3)) == "Net.a.fc"


@pytest.mark.parametrize("module_id", [4, np.int64(4), 5])
def test_module_path_refuses_an_id_past_the_last_set(module_id):
    # 4 == len(SETS): one past the last valid id, the boundary itself
    with pytest.raises(ValueError, match=r"module_path: module_id must be below 4 \(the report's module sets\), "
                                         r"got (np\.int64\()?[45]"):
        _report().module_path(module_id)
