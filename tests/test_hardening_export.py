"""The report document's writer and reader (roofline/io/_export.py) under hostile use: what ``to_json`` writes
loads back, what it cannot write is refused when written, and the loader's messages name the field and its type
(killers of the mutants bench/mutate_py.py made of _export.py)."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402

_R = []


def _report():
    """One small block (one add of two 2-element tensors), with datasheet ceilings (built once)."""
    if not _R:
        with roofline.measure(timing=None, ceilings="datasheet") as r:
            torch.ones(2) + 1
        _R.append(r)
    return _R[0]


def test_an_int_path_to_to_json_hints_at_indent_and_only_there():
    r = _report()
    with pytest.raises(TypeError, match=r"not int 2 \(for indented text: indent=2\)$"):
        r.to_json(2)
    with pytest.raises(TypeError) as e:  # a bool is no indent either
        r.to_json(True)
    assert str(e.value) == "Report.to_json: path must be a file name (str or os.PathLike), not bool True"
    with pytest.raises(TypeError) as e:  # to_csv has no indent
        r.to_csv(2)
    assert str(e.value) == "Report.to_csv: path must be a file name (str or os.PathLike), not int 2"


def test_nan_in_a_free_form_meta_key_round_trips():
    """The document is JSON with NaN allowed (a key of meta that no schema entry covers is kept as it is)."""
    r = _report()
    r.meta["note"] = math.nan
    try:
        text = r.to_json()
    finally:
        del r.meta["note"]
    assert "NaN" in text and math.isnan(roofline.load(text).meta["note"])


@pytest.mark.parametrize("value, kind", [(None, "null"), (5, "int"), ("x", "str"), ({}, "dict")])
def test_the_loader_names_the_wrong_type(value, kind):
    d = json.loads(_report().to_json())
    d["ops"] = value
    with pytest.raises(ValueError) as e:
        roofline.load(json.dumps(d))
    assert str(e.value) == f"corrupt roofline report: ops must be a list, not {kind}"


def test_an_empty_report_round_trips():
    with roofline.measure(timing=None, ceilings="datasheet") as r:
        pass
    back = roofline.load(r.to_json())
    assert len(back.records) == 0 and back.module_sets == r.module_sets and back.meta["version"] == r.meta["version"]


def test_records_that_are_not_strict_base64_are_refused():
    d = json.loads(_report().to_json())
    d["records"] = "!" + d["records"]  # a character outside the alphabet (a lenient decoder would drop it)
    with pytest.raises(ValueError, match=r"^corrupt roofline report: records is not base64"):
        roofline.load(json.dumps(d))


def test_attribution_module_ids_must_name_a_module_set():
    d = json.loads(_report().to_json())
    n = len(d["module_sets"])
    d["meta"]["attribution"] = {"method": "autograd", "flop_counter_rows": [0], "flop_counter_modules": [n],
                                "unlinked_rows": []}
    with pytest.raises(ValueError) as e:
        roofline.load(json.dumps(d))
    assert str(e.value) == (f"corrupt roofline report: meta.attribution.flop_counter_modules[0] is {n}, not a "
                            f"module set (0 to {n - 1})")
    d["meta"]["attribution"]["flop_counter_modules"] = [n - 1]  # the last set: fine
    assert roofline.load(json.dumps(d)).meta["attribution"]["flop_counter_modules"] == [n - 1]
