"""Small concepts written once: the five count names, the atomic file writer, the int rule's validator and the
projection defaults each have one home, which the rest of the package reads (checked from the source, so that a
second copy fails here)."""

import pathlib
import re

import pytest

import roofline
from roofline._datamodel import _records

ROOT = pathlib.Path(roofline.__file__).resolve().parent


def _sources():
    for p in sorted(ROOT.rglob("*.py")):
        yield p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")


def test_the_five_count_names_are_listed_once():
    assert _records.COUNTS == ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written")
    assert _records.RECORD_DTYPE.names[:6] == _records.COUNTS_AND_FLOP_COUNTER  # the record layout is built from it
    # the five names written out one after another, in any quoting: only in the table itself
    five = re.compile(r"""["']matrix_flops["'],\s*["']vector_flops["'],\s*["']special_ops["'],\s*["']bytes_read["'],"""
                      r"""\s*["']bytes_written["']""")
    assert [name for name, text in _sources() if five.search(text)] == ["_datamodel/_records.py"]


def test_the_readers_of_the_count_names_hold_the_table_itself():
    pytest.importorskip("torch")  # the compiled collector among the readers imports torch
    from roofline._loops import _monitor, _steady
    from roofline._analysis import _rollup
    from roofline._counting import _resolve
    from roofline._compiled import _collector
    from roofline.render import _tables

    for table in (_rollup.SUMMED, _steady._COUNTS, _monitor._SUMMED, _resolve.COUNT_KEYS, _collector._FIELDS):
        assert table is _records.COUNTS
    assert _tables.COUNT_COLUMNS is _records.COUNTS_AND_FLOP_COUNTER


def test_files_are_replaced_by_one_writer():
    """Only roofline/_util/_output.py makes a temporary file and renames it over another."""
    writers = re.compile(r"\bos\.replace\(|\bos\.rename\(|\bmkstemp\(|NamedTemporaryFile\(")
    assert [name for name, text in _sources() if writers.search(text)] == ["_util/_output.py"]


def test_integers_are_checked_by_one_validator():
    """No module tests for an int and a bool side by side to refuse a count itself (the pattern of the four
    validators the int rule replaced); a module that needs a count calls roofline._util._ints.count."""
    own = re.compile(r"raise \w+Error\(f?[\"'][^\"']*must be (an int|a positive int)")
    found = sorted(name for name, text in _sources() if own.search(text))
    # what is left is listed so that a new one is a decision: values inside an op's
    # description (TensorSpec entries, an op's int arguments, a trace's recorded arguments); an environment variable;
    # two private helpers whose public callers (Report.plot / table / project) check the count first
    assert found == ["_analysis/_groups.py", "_analysis/_network.py", "_counting/_cost.py", "_hardware/_cpu_bench.py",
                     "_traces/_ops_dtypes_shapes.py"], found


def test_projection_defaults_have_one_home():
    from roofline import _profile_cmd, llm

    assert _profile_cmd.META_DEFAULTS is llm.PROJECTION_DEFAULTS
    assert llm.PROJECTION_DEFAULTS == {"dtype": "bfloat16", "attention": "flash"}
