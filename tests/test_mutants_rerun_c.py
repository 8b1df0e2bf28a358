"""The step-time wording of the summary and the notebook facts (profile(step_time=...)), written out letter for
letter, on the hand-worked report of tests/test_mutants_render.py (wall time 20 s)."""

import pytest

from roofline.render._render import facts
from test_mutants_render import timed


def _step(kind, **extra):
    return timed(meta={"steady": {"step_time": dict(kind=kind, **extra)}})


def _step_facts(r):
    return [text for label, text in facts(r) if label == "step time"]


@pytest.mark.parametrize("kind, head", [("min", "20.00 s least wall"), ("unwaited", "20.00 s unwaited step time"),
                                        ("unwaited_min", "20.00 s least unwaited step time"),
                                        ("median", "20.00 s wall"), (None, "20.00 s wall")])
def test_summary_head_names_the_step_time(kind, head):
    assert _step(kind).summary().split("\n")[0] == "roofline report: 3 op calls, " + head


def test_summary_head_without_steady_meta_or_wall_time():
    assert timed().summary().split("\n")[0] == "roofline report: 3 op calls, 20.00 s wall"
    assert timed(wall=None).summary().split("\n")[0] == "roofline report: 3 op calls"


@pytest.mark.parametrize("kind, text", [
    ("min", "20.00 s: the least wall time of the measured steps"),
    ("unwaited", "20.00 s: UNWAITED (the threads' waits for a CPU taken out)"),
    ("unwaited_min", "20.00 s: the least UNWAITED time of the measured steps (the threads' waits for a CPU taken out)"),
])
def test_facts_step_time_line(kind, text):
    assert _step_facts(_step(kind)) == [text]
    assert _step_facts(_step(kind, wall_median=25.0)) == [text + "; median wall time 25.00 s"]
    assert _step_facts(_step(kind, wall_median=3)) == [text + "; median wall time 3.00 s"]
    assert _step_facts(_step(kind, wall_median="25")) == [text]  # not a number: no median
    assert _step_facts(_step(kind, spin="2 threads spin")) == [text + "; SPIN: 2 threads spin"]
    assert _step_facts(_step(kind, spin="")) == [text]


def test_facts_step_time_line_only_for_a_measured_chosen_step_time():
    assert _step_facts(_step("median")) == []          # the plain wall time: no line
    assert _step_facts(timed()) == []                  # no steady meta
    assert _step_facts(timed(meta={"steady": {"step_time": "min"}})) == []  # not a dict
    r = _step("min")
    r.wall_time = None
    assert _step_facts(r) == []                        # untimed
    r = _step("min")
    r.wall_time = 0.0
    assert _step_facts(r) == []                        # no time to divide by
    r = timed(meta={"steady": {"step_time": {"kind": "min"}}, "projected_to": "h100"})
    assert _step_facts(r) == []                        # a projection's time is not a measured step


# ---- the report document's accesses block (roofline/_io/_export.py) ------------------------------------------------
# an access row is 4 (record, u4) + 8 (storage, u8) + 8 (nbytes, u8) + 1 (write, u1) = 21 bytes
ROW = (0).to_bytes(4, "little") + (7).to_bytes(8, "little") + (64).to_bytes(8, "little") + bytes([1])


def _doc(block: bytes, n):
    import base64
    d = timed().to_dict()
    d["accesses"] = base64.b64encode(block).decode()
    d["n_accesses"] = n
    return d


def test_one_access_row_reads_back():
    from roofline.report import Report
    a = Report.from_dict(_doc(ROW, 1)).accesses
    assert len(a) == 1 and int(a["record"][0]) == 0 and int(a["storage"][0]) == 7 and int(a["nbytes"][0]) == 64
    assert int(a["write"][0]) == 1


@pytest.mark.parametrize("block, n, shown", [
    (b"", 1, "is 1: the block holds 0 bytes of 21-byte rows"),            # a count the block does not hold
    (ROW, 2, "is 2: the block holds 21 bytes of 21-byte rows"),
    (ROW, "1", "is '1': the block holds 21 bytes of 21-byte rows"),       # not an int
    (ROW, True, "is True: the block holds 21 bytes of 21-byte rows"),     # a bool is not a count
    (b"", -1, "is -1: the block holds 0 bytes of 21-byte rows"),          # negative
])
def test_a_wrong_access_count_is_refused(block, n, shown):
    from roofline.report import Report
    with pytest.raises(ValueError) as e:
        Report.from_dict(_doc(block, n))
    assert str(e.value) == "corrupt roofline report: n_accesses " + shown


# ---- roofline.load: which reader, and path or text (roofline/report.py) ----------------------------------------------
def _json(**extra):
    import json
    d = timed().to_dict()
    d.update(extra)
    return json.dumps(d)


def test_load_hands_a_registered_format_to_its_reader(monkeypatch):
    import roofline
    from roofline import report
    monkeypatch.setitem(report._READERS, "test-format", lambda d: ("read by the test reader", d["format"]))
    assert roofline.load(_json(format="test-format")) == ("read by the test reader", "test-format")


@pytest.mark.parametrize("fmt", ["no such format", ["a", "list"], 3])
def test_load_reads_an_unregistered_or_odd_format_as_a_report(fmt):
    import roofline
    r = roofline.load(_json(format=fmt))
    assert type(r).__name__ == "Report" and len(r.records) == 3


@pytest.mark.parametrize("name", ["{x}.json", "[rank0].json", "x.json}", "{x", "}x}", "{x["])
def test_load_reads_a_bracketed_file_name_as_a_path(name, tmp_path, monkeypatch):
    import roofline
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(_json())
    assert len(roofline.load(name).records) == 3
    assert len(roofline.load(name.encode()).records) == 3


def test_load_takes_a_bracketed_array_as_text_not_as_a_file_name(tmp_path, monkeypatch):
    import roofline
    monkeypatch.chdir(tmp_path)  # no file named "[1, 2]" here: read as a path, it would be a FileNotFoundError
    for text in ("[1, 2]", b"[1, 2]", "  [1, 2]\n"):
        with pytest.raises(ValueError):
            roofline.load(text)


def test_register_reader_once_per_format(monkeypatch):
    from roofline import report
    monkeypatch.setattr(report, "_READERS", dict(report._READERS))  # the registry as it was, after the test

    def first(d):
        return "first"

    report.register_reader("test-format", first)
    report.register_reader("test-format", first)  # the same reader again: nothing to say
    assert report._READERS["test-format"] is first
    with pytest.raises(ValueError) as e:
        report.register_reader("test-format", lambda d: "second")
    assert str(e.value) == "register_reader: documents of format 'test-format' already have a reader"
    assert report._READERS["test-format"] is first
