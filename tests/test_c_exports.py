"""What the C core exports once for the Python side: the phase names, the bound codes (the interconnect included),
the record and access-row layouts field by field, and the attention pair count that the Python formulas and
roofline.llm use (issue: one definition of each concept)."""

import itertools

import numpy as np
import pytest

from roofline import _core
from roofline._datamodel import _records


def test_phases_come_from_c_and_recompute_is_appended():
    assert _core.PHASES == ("forward", "backward", "optimizer", "recompute")
    assert _records.PHASES is _core.PHASES
    assert (_records.FORWARD, _records.BACKWARD, _records.OPTIMIZER, _records.RECOMPUTE) == (0, 1, 2, 3)


def test_bound_codes_come_from_c():
    assert _records.BOUND_INTERCONNECT == _core.BOUND_INTERCONNECT == 4
    assert set(_records.BOUNDS) == {_core.BOUND_NONE, _core.BOUND_MEMORY, _core.BOUND_COMPUTE,
                                    _core.BOUND_BANDWIDTH, _core.BOUND_INTERCONNECT}


@pytest.mark.parametrize("dtype, fields", [(_records.RECORD_DTYPE, _core.RECORD_FIELDS),
                                           (_records.ACCESS_RAW_DTYPE, _core.ACCESS_FIELDS)])
def test_layouts_match_c_field_by_field(dtype, fields):
    assert [f[0] for f in fields] == list(dtype.names)
    for name, offset, size, kind in fields:
        ft, off = dtype.fields[name][:2]
        assert (off, ft.itemsize, ft.kind) == (offset, size, kind), name


def test_a_layout_that_differs_from_c_is_refused_at_import():
    moved = np.dtype({"names": ["storage", "nbytes", "record", "write"], "formats": ["<u8", "<u8", "<u4", "u1"],
                      "offsets": [0, 8, 16, 21], "itemsize": 24})
    with pytest.raises(ImportError, match="'write': offset 20, 1 bytes"):
        _records._check_layout(moved, _core.ACCESS_FIELDS, "access row")
    with pytest.raises(ImportError, match="'write' is not in the NumPy layout"):
        _records._check_layout(np.dtype([("storage", "<u8"), ("nbytes", "<u8"), ("record", "<u4")]),
                               _core.ACCESS_FIELDS, "access row")
    extra = np.dtype({"names": ["storage", "nbytes", "record", "write", "more"],
                      "formats": ["<u8", "<u8", "<u4", "u1", "u1"], "offsets": [0, 8, 16, 20, 21], "itemsize": 24})
    with pytest.raises(ImportError, match="has 4 fields, the NumPy layout 5"):
        _records._check_layout(extra, _core.ACCESS_FIELDS, "access row")


def _pairs_by_enumeration(sq, sk, mask):
    n = 0
    for i, j in itertools.product(range(sq), range(sk)):
        if mask == 0 or (mask == 1 and j <= i) or (mask == 2 and j <= i + sk - sq):
            n += 1
    return n


def test_attention_pairs_enumerated():
    for sq, sk, mask in itertools.product(range(7), range(7), range(3)):
        assert _core.attention_pairs(sq, sk, mask) == _pairs_by_enumeration(sq, sk, mask), (sq, sk, mask)


def test_attention_pairs_past_32_bits_that_fit_64():
    """Causal counts whose S (S + 1) overflows 64 bits although S (S + 1) / 2 fits (it overflowed before halving)."""
    s = 2**32
    assert _core.attention_pairs(s, s, 1) == s * (s + 1) // 2 == 2**63 + 2**31
    assert _core.attention_pairs(s, s, 2) == s * (s + 1) // 2
    assert _core.attention_pairs(s + 1, s + 1, 1) == (s + 1) * (s + 2) // 2
    assert _core.attention_pairs(s + 3, s, 1) == s * (s + 1) // 2 + 3 * s  # rows past the keys see all of them
    assert _core.attention_pairs(s, s + 3, 2) == s * 4 + s * (s - 1) // 2  # bottom-right: each row 3 keys more
    with pytest.raises(OverflowError, match="does not fit 64 bits"):
        _core.attention_pairs(2**33, 2**33, 1)


def test_attention_pairs_bad_arguments():
    with pytest.raises(ValueError, match="mask must be 0"):
        _core.attention_pairs(3, 3, 3)
    with pytest.raises(TypeError, match="sq must be an int"):
        _core.attention_pairs(3.0, 3, 0)
    with pytest.raises(ValueError, match="sk must be an int in"):
        _core.attention_pairs(3, -1, 0)
    with pytest.raises(OverflowError, match="does not fit 64 bits"):
        _core.attention_pairs(2**40, 2**40, 0)


def test_python_formulas_and_llm_use_the_c_count(monkeypatch):
    """Both call roofline._core.attention_pairs: replaced, their results follow it."""
    pytest.importorskip("torch")
    from roofline import llm
    from roofline._counting import _formulas_nn

    calls = []

    def spy(sq, sk, mask):
        calls.append((sq, sk, mask))
        return 7

    monkeypatch.setattr(_core, "attention_pairs", spy)
    assert _formulas_nn._pairs(5, 5, 1) == 7 and llm._pairs(5, "causal") == 7 and llm._pairs(4, "full") == 7
    assert calls == [(5, 5, 1), (5, 5, 1), (4, 4, 0)]


def test_the_type_stub_declares_exactly_the_public_names():
    import ast
    from pathlib import Path

    stub = Path(_core.__file__).resolve().parent / "_core.pyi"
    tree = ast.parse(stub.read_text())
    declared = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            declared.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            declared.add(node.target.id)
    public = {n for n in dir(_core) if not n.startswith("_")}
    assert declared == public, (sorted(public - declared), sorted(declared - public))
    for cls in ("Recorder", "ModuleTracker", "Dispatch"):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
        methods = ({n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                   | {n.target.id for n in node.body if isinstance(n, ast.AnnAssign)})
        real = {m for m in vars(getattr(_core, cls)) if not m.startswith("__")}
        assert real <= methods, (cls, sorted(real - methods))


def test_peak_units_and_dtypes_have_one_table():
    from roofline import devices
    from roofline._hardware import _ceilings_model as _ceilings
    from roofline._datamodel import _units

    assert devices.UNITS is _ceilings.UNITS is _units.UNITS
    assert devices.DTYPES is _ceilings.DTYPES is _units.PEAK_DTYPES
