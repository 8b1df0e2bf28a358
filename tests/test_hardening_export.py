"""The report document's writer and reader (roofline/_io/_export.py) under hostile use: what ``to_json`` writes
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


def _doc_with(**fields):
    """The small report's document with record 1's ``fields`` set (the record block re-encoded)."""
    import base64

    import numpy as np

    from roofline._datamodel._records import RECORD_DTYPE

    d = json.loads(_report().to_json())
    rec = np.frombuffer(base64.b64decode(d["records"]), dtype=RECORD_DTYPE).copy()
    assert len(rec) == 2  # torch.ones, then the add
    for k, v in fields.items():
        rec[k][1] = v
    d["records"] = base64.b64encode(rec.tobytes()).decode("ascii")
    return d


def _refused(d, message):
    with pytest.raises(ValueError) as e:
        roofline.load(json.dumps(d))
    assert str(e.value) == "corrupt roofline report: " + message


def test_record_references_one_past_their_tables_are_refused():
    d = json.loads(_report().to_json())
    n_ops, n_sets, n_sigs = len(d["ops"]), len(d["module_sets"]), len(d["signatures"])
    _refused(_doc_with(op=n_ops), f"records[1].op is {n_ops}, but the report lists {n_ops} ops")
    _refused(_doc_with(module=n_sets), f"records[1].module is {n_sets}, but the report lists {n_sets} module sets")
    from roofline._datamodel._records import PHASES

    _refused(_doc_with(phase=len(PHASES)), f"records[1].phase is {len(PHASES)}, not a phase ("
             + ", ".join(f"{i} {p}" for i, p in enumerate(PHASES)) + ")")
    _refused(_doc_with(sig=n_sigs), f"records[1].sig is {n_sigs}, but the report lists {n_sigs} signatures")
    # the last entry of each table is fine
    back = roofline.load(json.dumps(_doc_with(op=n_ops - 1, module=n_sets - 1, phase=len(PHASES) - 1,
                                               sig=n_sigs - 1)))
    assert int(back.records["op"][1]) == n_ops - 1


def test_a_signature_index_without_signatures_is_refused():
    d = _doc_with(sig=1)
    d["signatures"] = []
    import base64

    import numpy as np

    from roofline._datamodel._records import RECORD_DTYPE

    rec = np.frombuffer(base64.b64decode(d["records"]), dtype=RECORD_DTYPE).copy()
    rec["sig"][0] = 0  # only record 1 refers to a signature
    d["records"] = base64.b64encode(rec.tobytes()).decode("ascii")
    _refused(d, "records[1].sig is 1, but the report lists no signatures")


def test_clock_readings_up_to_the_limit_load():
    from roofline._datamodel import _document

    t = _document.MAX_SECONDS
    back = roofline.load(json.dumps(_doc_with(t_start=t, t_end=t)))
    assert back.records["t_start"][1] == t
    _refused(_doc_with(t_start=t * 1.5, t_end=t * 1.5),
             f"records[1].t_start is {t * 1.5}, not a clock reading in seconds (at most {t:g} in magnitude)")


def _accesses(d, record=None, write=None, text=None):
    import base64

    import numpy as np

    from roofline._datamodel._records import ACCESS_DTYPE

    acc = np.frombuffer(base64.b64decode(d["accesses"]), dtype=ACCESS_DTYPE).copy()
    assert len(acc) >= 2
    if record is not None:
        acc["record"][1] = record
    if write is not None:
        acc["write"][1] = write
    d["accesses"] = text if text is not None else base64.b64encode(acc.tobytes()).decode("ascii")
    return d


def test_access_rows_out_of_range_are_refused():
    d = json.loads(_report().to_json())
    n = d["n_records"]
    for kw in ({"record": n}, {"write": 2}):
        with pytest.raises(ValueError, match=r"^corrupt roofline report: accesses\[1\] is .*: its record is not one "
                                             rf"of the {n} records or its write flag is not 0 or 1$"):
            roofline.load(json.dumps(_accesses(json.loads(_report().to_json()), **kw)))
    back = roofline.load(json.dumps(_accesses(d, record=n - 1, write=1)))
    assert int(back.accesses["record"][1]) == n - 1 and int(back.accesses["write"][1]) == 1


def test_accesses_that_are_not_strict_base64_are_refused():
    d = json.loads(_report().to_json())
    d["accesses"] = "!" + d["accesses"]
    with pytest.raises(ValueError, match=r"^corrupt roofline report: accesses is not base64"):
        roofline.load(json.dumps(d))


def test_status_codes_outside_the_table_are_refused():
    # 1 (a count that overflows 64 bits) and 7 (values that cannot be read) are statuses a record can carry; 8 is none
    for st in (1, 7):
        assert int(roofline.load(json.dumps(_doc_with(status=st))).records["status"][1]) == st
    _refused(_doc_with(status=8), "records[1].status is 8, not a status code")
    _refused(_doc_with(status=255), "records[1].status is 255, not a status code")
