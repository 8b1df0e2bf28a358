"""report.save(path, format=): one door for every file a report is written as, chosen by name or by the path's
suffix (the longest that matches), each format written by the report's own writer; a new format is a module of
roofline/render/ that registers itself."""

from __future__ import annotations

import json

import numpy as np
import pytest

import roofline
from roofline.render import _formats

from _reports import two_op_report


@pytest.fixture(scope="module")
def report():
    r = two_op_report()
    # per-op times (the Chrome trace needs them): the mm 4 s, the add 2 s, back to back
    r.records["t_start"], r.records["t_end"] = [0.0, 4.0], [4.0, 6.0]
    return r


@pytest.mark.parametrize("name, method", [("r.json", "to_json"), ("r.html", "to_html"), ("r.htm", "to_html"),
                                          ("r.csv", "to_csv"), ("r.trace.json", "to_chrome_trace")])
def test_the_suffix_chooses_the_writer(report, tmp_path, name, method):
    path = tmp_path / name
    fmt = report.save(path)
    assert fmt == {"to_json": "json", "to_html": "html", "to_csv": "csv", "to_chrome_trace": "chrome-trace"}[method]
    with open(path, newline="") as f:  # what the writer itself returns, byte for byte (the CSV's \r\n too)
        assert f.read() == getattr(report, method)()


def test_a_saved_document_loads_back(report, tmp_path):
    report.save(tmp_path / "r.JSON")  # suffixes match in any case
    back = roofline.load(tmp_path / "r.JSON")
    assert type(back) is roofline.Report and np.array_equal(back.records, report.records)


def test_the_trace_suffix_wins_over_json(report, tmp_path):
    """``.trace.json`` ends in ``.json`` too: the longer suffix decides."""
    report.save(tmp_path / "t.trace.json")
    events = json.loads((tmp_path / "t.trace.json").read_text())
    assert "traceEvents" in events and "records" not in events


def test_format_overrides_the_suffix(report, tmp_path):
    assert report.save(tmp_path / "page.txt", format="html") == "html"
    assert (tmp_path / "page.txt").read_text().startswith("<!DOCTYPE html>")


def test_the_charts(report, tmp_path):
    assert report.save(tmp_path / "c.svg") == "svg"
    assert (tmp_path / "c.svg").read_text().lstrip().startswith("<svg")
    pytest.importorskip("matplotlib")
    assert report.save(tmp_path / "c.png") == "png"
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_paths_and_names_are_refused_before_writing(report, tmp_path):
    with pytest.raises(ValueError, match=r"cannot tell the format of .*r\.xyz.*json \(\.json\)"):
        report.save(tmp_path / "r.xyz")
    with pytest.raises(ValueError, match="unknown format 'parquet'"):
        report.save(tmp_path / "r.json", format="parquet")
    with pytest.raises(TypeError, match="format must be a str"):
        report.save(tmp_path / "r.json", format=1)
    with pytest.raises(TypeError, match="path must be a file name"):
        report.save(3)
    assert not list(tmp_path.iterdir())


def test_a_report_class_without_the_writer_says_which_formats_it_has(tmp_path):
    class Bare(roofline.report.BaseReport):
        def to_json(self, path=None, indent=None):
            return "{}"

    with pytest.raises(TypeError, match="a Bare cannot be saved as csv; its formats are json"):
        Bare().save(tmp_path / "b.csv")


def test_a_registered_format_is_one_function(report, tmp_path, monkeypatch):
    """What a new module of roofline/render/ does: register a name, its suffix and a writer."""
    monkeypatch.setattr(_formats, "_FORMATS", dict(_formats._FORMATS))

    def ops_txt(r, path):
        with open(path, "w") as f:
            f.write("\n".join(r.op_names))

    _formats.register("ops", (".ops",), ops_txt, "the op names")
    assert report.save(tmp_path / "r.ops") == "ops"
    assert (tmp_path / "r.ops").read_text() == "aten.mm.default\naten.add.Tensor"
    with pytest.raises(ValueError, match="exists already"):
        _formats.register("ops", (".other",), ops_txt)
    with pytest.raises(ValueError, match=r"\.csv is the suffix of the format 'csv'"):
        _formats.register("csv2", (".csv",), ops_txt)
    with pytest.raises(ValueError, match="must be strings such as"):
        _formats.register("x", ("x",), ops_txt)
    with pytest.raises(TypeError, match="write must be callable"):
        _formats.register("y", (".y",), None)


def test_every_module_of_render_is_loaded_before_choosing():
    """So a format module needs no import anywhere else: the table lists what every render module registered."""
    import pkgutil
    import sys

    import roofline.render

    _formats.formats()
    assert all(f"roofline.render.{m.name}" in sys.modules for m in pkgutil.iter_modules(roofline.render.__path__))


def test_a_merged_report_saves_what_it_has(tmp_path):
    import roofline.distributed as rd

    ranks = []
    for i in range(2):
        r = two_op_report()
        r.meta["distributed"] = {"rank": i, "world_size": 2, "backend": "gloo"}
        ranks.append(r)
    m = rd.MergedReport(ranks)
    assert m.save(tmp_path / "m.json") == "json"
    assert type(roofline.load(tmp_path / "m.json")) is rd.MergedReport
    assert m.save(tmp_path / "m.html") == "html"
    with pytest.raises(TypeError, match="a MergedReport cannot be saved as csv; its formats are json, html, png, pdf"):
        m.save(tmp_path / "m.csv")
    assert not (tmp_path / "m.csv").exists()
