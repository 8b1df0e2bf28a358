"""The text views of the render floor, checked against text written out here: the summary lines of a projection's
assumptions (render/_assumptions.py), the datasheet table of docs/devices.md (render/_devices_table.py), the ceilings
table, rows and repr (render/_ceilings_table.py) and the table of save formats (render/_formats.py).

Every expected value is literal text or arithmetic written in the test; nothing measures or runs a model.
"""

from __future__ import annotations

import pathlib

import pytest

from roofline._hardware import _devices as devices
from roofline._hardware._ceilings_model import Ceiling, Ceilings
from roofline.render import _assumptions, _ceilings_table, _devices_table, _formats


# ---- render/_assumptions.py ----

def test_assumptions_line_names_the_matrix_dtypes_or_none():
    assert _assumptions.line({"attention": "math", "matrix_dtypes": {"bfloat16": 0.75, "float32": 0.25}}, "H100") == [
        "  assumed: attention math; matrix FLOPs in bfloat16 75%, float32 25%"]
    # no matrix dtype at all: "none", not an empty list of dtypes
    assert _assumptions.line({}, "H100") == ["  assumed: attention ?; matrix FLOPs in none"]
    assert _assumptions.line({"matrix_dtypes": {}, "no_peak": {"aten.mm (int64)": "1 call"},
                              "vector_fallback": {"bf16": "fp32 vector"}}, "T4") == [
        "  assumed: attention ?; matrix FLOPs in none",
        "  no peak of their dtype on T4: aten.mm (int64) 1 call",
        "  element-wise work in bf16 fp32 vector"]


# ---- render/_devices_table.py ----

def _spec(name, **kw):
    return devices.DeviceSpec(name=name, vendor="ACME", **kw)


@pytest.fixture
def two_devices(monkeypatch):
    """Two made-up devices: one with every column, one with none but its name."""
    full = _spec(
        "Full", sm_count=100, boost_clock_hz=1.5e9, l2_bytes=50 * (1 << 20), memory_bytes=80 * (1 << 30),
        memory_bandwidth=2e12,
        peaks={("vector", "float64"): 30e12, ("matrix", "float64"): 60e12, ("vector", "float32"): 70e12,
               ("matrix", "float32"): 75e12, ("matrix", "tfloat32"): 400e12, ("matrix", "bfloat16"): 800e12,
               ("matrix", "float16"): 900e12, ("matrix", "float8_e4m3fnuz"): 1600e12, ("matrix", "int8"): 2000e12},
        sources={"sm_count": "Doc A", "boost_clock_hz": "Doc A", "l2_bytes": "Doc B", "memory_bytes": "Doc B",
                 "memory_bandwidth": "Doc B", "peaks.vector.float64": "Doc A", "peaks.matrix.float64": "Doc A",
                 "peaks.vector.float32": "Doc A", "peaks.matrix.float32": "Doc A", "peaks.matrix.tfloat32": "Doc A",
                 "peaks.matrix.bfloat16": "Doc A", "peaks.matrix.float16": "Doc A",
                 "peaks.matrix.float8_e4m3fnuz": "Doc A", "peaks.matrix.int8": "Doc A"})
    bare = _spec("Bare", peaks={("matrix", "float8_e4m3fn"): 5e12}, sources={"peaks.matrix.float8_e4m3fn": "Doc B"})
    monkeypatch.setattr(devices, "_ALL", (full, bare))


HEADER = ("| Device | Vendor | SMs/CUs | Clock MHz | L2 MiB | Memory GiB | DRAM TB/s | FP64 vec | FP64 mat | "
          "FP32 vec | FP32 mat | TF32 | BF16 | FP16 | FP8 | INT8 | Ridge BF16 |")


def test_devices_table_is_the_markdown_of_docs_devices(two_devices):
    # 17 columns: a separator cell each; clock 1.5e9 Hz = 1500 MHz; 50 MiB; 80 GiB; 2e12 B/s = 2 TB/s; peaks in
    # TFLOP/s; the fnuz FP8 figure starred; ridge 800e12 / 2e12 = 400 FLOP/B
    assert _devices_table.table() == (
        HEADER + "\n"
        + "|" + "---|" * 17 + "\n"
        + "| Full | ACME | 100 | 1500 | 50 | 80 | 2 | 30 | 60 | 70 | 75 | 400 | 800 | 900 | 1600* | 2000 | 400 |\n"
        + "| Bare | ACME | - | - | - | - | - | - | - | - | - | - | - | - | 5 | - | - |\n")


def test_devices_sources_group_figures_by_document(two_devices):
    assert _devices_table.sources() == (
        "- Doc A\n  (Full: sm_count, boost_clock_hz, vector float64, matrix float64, vector float32, matrix float32, "
        "matrix tfloat32, matrix bfloat16, matrix float16, matrix float8_e4m3fnuz, matrix int8)\n"
        "- Doc B\n  (Full: l2_bytes, memory_bytes, memory_bandwidth; Bare: matrix float8_e4m3fn)\n")


# ---- render/_ceilings_table.py ----

def _ceilings(**kw):
    base = dict(device="cpu", name="Test CPU", fingerprint="x")
    base.update(kw)
    return Ceilings(**base)


@pytest.fixture(scope="module")
def rich():
    """Peaks in a scrambled order, an integer dtype, bandwidths of several levels and kernels; timed, quick."""
    return _ceilings(
        peaks={("matrix", "int8"): Ceiling(4e12, 8e12, "vnni", "sheet I"),
               ("vector", "float32"): Ceiling(2e9, None, "fma loop"),
               ("matrix", "bfloat16"): Ceiling(None, 5e11, "", "sheet B"),
               ("vector", "float64"): Ceiling(1e9, 4e9, "fma loop", "sheet D")},
        bandwidths={"DRAM": Ceiling(2e10, 4e10, "stream", "sheet M"), "L2_copy": Ceiling(3e11),
                    "L1": Ceiling(5e11), "L2": Ceiling(4e11), "L2_read": Ceiling(4.5e11)},
        duration_s=1.234, timestamp="2026-01-02T03:04:05", quick=True, notes=["first note", "second note"])


def test_ceilings_rows_are_in_giga_units_in_display_order(rich):
    # vector before matrix, float64 before float32 before bfloat16 before int8; L1, then L2 (plain, read, copy), DRAM
    assert rich.rows() == [
        ("vector float64", 1.0, 4.0, 0.25, "GFLOP/s"),
        ("vector float32", 2.0, None, None, "GFLOP/s"),
        ("matrix bfloat16", None, 500.0, None, "GFLOP/s"),
        ("matrix int8", 4000.0, 8000.0, 0.5, "GOP/s"),
        ("bandwidth L1", 500.0, None, None, "GB/s"),
        ("bandwidth L2", 400.0, None, None, "GB/s"),
        ("bandwidth L2_read", 450.0, None, None, "GB/s"),
        ("bandwidth L2_copy", 300.0, None, None, "GB/s"),
        ("bandwidth DRAM", 20.0, 40.0, 0.5, "GB/s"),
    ]


def test_ceilings_unknown_dtypes_and_levels_come_last_by_name():
    c = _ceilings(peaks={("vector", "zzfloat"): Ceiling(1e9), ("vector", "aafloat"): Ceiling(1e9),
                         ("vector", "int8"): Ceiling(1e9)},
                  bandwidths={"HBM": Ceiling(1e9), "DRAM_weird": Ceiling(1e9), "DRAM_triad": Ceiling(1e9),
                              "AAA": Ceiling(1e9)})
    assert [r[0] for r in _ceilings_table.rows(c)] == [
        "vector int8", "vector aafloat", "vector zzfloat",
        "bandwidth DRAM_triad", "bandwidth DRAM_weird", "bandwidth AAA", "bandwidth HBM"]


def _table_lines():
    """The table's rows as a user reads them: first column left-aligned, the others right-aligned, to the widest
    cell of each column, two spaces apart."""
    body = [("vector float64", "1.00 GFLOP/s", "4.00 GFLOP/s", "25%"),
            ("vector float32", "2.00 GFLOP/s", "-", "-"),
            ("matrix bfloat16", "-", "500.00 GFLOP/s", "-"),
            ("matrix int8", "4.00 TOP/s", "8.00 TOP/s", "50%"),
            ("bandwidth L1", "500.00 GB/s", "-", "-"),
            ("bandwidth L2", "400.00 GB/s", "-", "-"),
            ("bandwidth L2_read", "450.00 GB/s", "-", "-"),
            ("bandwidth L2_copy", "300.00 GB/s", "-", "-"),
            ("bandwidth DRAM", "20.00 GB/s", "40.00 GB/s", "50%")]
    # widest cells: "bandwidth L2_read" 17, "1.00 GFLOP/s" 12, "500.00 GFLOP/s" 14, "meas/data" 9
    w = (17, 12, 14, 9)
    header = ("ceiling", "measured", "datasheet", "meas/data")
    fmt = lambda r: "  ".join([r[0].ljust(w[0])] + [r[i].rjust(w[i]) for i in (1, 2, 3)])  # noqa: E731
    return [fmt(header), "-" * 17 + "  " + "-" * 12 + "  " + "-" * 14 + "  " + "-" * 9] + [fmt(r) for r in body]


def test_ceilings_table_text(rich):
    assert str(rich) == "\n".join(["Test CPU (cpu)", "measured 2026-01-02T03:04:05 in 1.23 s (quick)",
                                   *_table_lines(), "", "note: first note", "note: second note"])
    # the first column padded to 17, the numbers right-aligned
    assert "vector float64     1.00 GFLOP/s    4.00 GFLOP/s        25%" in str(rich).splitlines()
    assert rich.table() == str(rich)  # no method lines unless asked
    assert _ceilings_table.table(rich) == str(rich)  # the view's own default: no method lines either


def test_ceilings_table_methods(rich):
    lines = rich.table(methods=True).splitlines()
    start = len(_table_lines()) + 2
    assert lines[start:] == [
        "", "matrix int8: vnni", "  datasheet: sheet I", "vector float32: fma loop", "matrix bfloat16: ",
        "  datasheet: sheet B", "vector float64: fma loop", "  datasheet: sheet D",
        "bandwidth DRAM: stream", "  datasheet: sheet M", "bandwidth L2_copy: ", "bandwidth L1: ", "bandwidth L2: ",
        "bandwidth L2_read: ", "", "note: first note", "note: second note"]


def test_ceilings_table_untimed_thorough_and_bare():
    c = _ceilings(peaks={("vector", "float32"): Ceiling(1e9)}, duration_s=0.5, quick=False)
    assert c.table().splitlines()[:2] == ["Test CPU (cpu)", "in 0.50 s (thorough)"]
    c = _ceilings(peaks={("vector", "float32"): Ceiling(1e9)}, timestamp="t0")
    assert c.table().splitlines()[:2] == ["Test CPU (cpu)", "measured t0"]
    c = _ceilings(peaks={("vector", "float32"): Ceiling(999.0)})
    # nothing timed: the header follows the title; 999 FLOP/s is below a thousand, written plain (10 wide)
    assert c.table() == ("Test CPU (cpu)\n"
                         "ceiling           measured  datasheet  meas/data\n"
                         "--------------  ----------  ---------  ---------\n"
                         "vector float32  999 FLOP/s          -          -")


def test_ceilings_repr_prefers_measured_and_skips_empty(rich):
    # float64: measured 1e9 (not the datasheet 4e9); float32: measured only; bfloat16: datasheet only 5e11;
    # DRAM measured 2e10 (not 4e10)
    assert repr(rich) == ("Ceilings('cpu', 'Test CPU', vector/float64=1.0 GFLOP/s, vector/float32=2.0 GFLOP/s, "
                          "matrix/bfloat16=500.0 GFLOP/s, DRAM=20.0 GB/s, measured in 1.23 s)")
    empty = _ceilings(peaks={("vector", "float64"): Ceiling(None, None)}, bandwidths={"DRAM": Ceiling(None, None)})
    assert repr(empty) == "Ceilings('cpu', 'Test CPU', )"
    none = _ceilings()
    assert repr(none) == "Ceilings('cpu', 'Test CPU', )"
    ds = _ceilings(bandwidths={"DRAM": Ceiling(None, 3e10)})
    assert repr(ds) == "Ceilings('cpu', 'Test CPU', DRAM=30.0 GB/s)"


# ---- render/_formats.py ----

class _Rep:
    def __init__(self):
        self.calls = []

    def to_json(self, path):
        self.calls.append(("to_json", path))

    def to_chrome_trace(self, path):
        self.calls.append(("to_chrome_trace", path))


@pytest.fixture
def scratch_format():
    made = []

    def reg(*a, **kw):
        f = _formats.register(*a, **kw)
        made.append(f.name)
        return f

    yield reg
    for n in made:
        _formats.unregister(n)


def test_register_refuses_bad_names_writers_and_suffixes(scratch_format):
    w = lambda report, path: None  # noqa: E731
    for bad in ("", None, 3):
        with pytest.raises(TypeError, match="name must be a non-empty str"):
            _formats.register(bad, (".zz1",), w)
    with pytest.raises(TypeError, match="write must be callable, got NoneType"):
        _formats.register("zz1", (".zz1",), None)
    for bad in ((), ("zz1",), (".",), (5,)):
        with pytest.raises(ValueError, match="must be strings such as"):
            _formats.register("zz1", bad, w)
    # ".q" (a dot and one character) is a suffix; mixed case is stored lower case
    f = scratch_format("zz1", (".Z1", ".q"), w, "doc")
    assert (f.name, f.suffixes, f.write, f.doc) == ("zz1", (".z1", ".q"), w, "doc")
    assert _formats.formats()["zz1"] is f
    with pytest.raises(ValueError, match="'zz1' exists already"):
        _formats.register("zz1", (".zz9",), w)
    with pytest.raises(ValueError, match=r"^register: \.q is the suffix of the format 'zz1' already$"):
        _formats.register("zz2", (".Q", ".zz2"), w)
    assert "zz2" not in _formats.formats()
    # a suffix no other format has: registered
    scratch_format("zz3", (".zz3",), w)
    assert _formats.choose("a.ZZ3").name == "zz3"


def test_formats_loads_every_render_module_once(monkeypatch):
    import importlib
    import pkgutil
    import types

    import roofline.render

    imported = []

    def record(name):
        imported.append(name)
        return importlib.import_module(name)  # loaded already: nothing runs again

    monkeypatch.setattr(_formats, "importlib", types.SimpleNamespace(import_module=record))
    monkeypatch.setattr(_formats, "_LOADED", [False])
    assert "json" in _formats.formats()
    every = {f"roofline.render.{m.name}" for m in pkgutil.iter_modules(roofline.render.__path__)}
    assert "roofline.render._devices_table" in every and set(imported) == every | {"roofline.render"}
    assert _formats._LOADED == [True]
    imported.clear()
    _formats.formats()
    assert imported == []  # loaded once: the second call imports nothing


def test_choose_by_name_or_longest_suffix():
    assert _formats.choose("run.trace.json").name == "chrome-trace"  # ".trace.json" (11) over ".json" (5)
    assert _formats.choose(pathlib.Path("RUN.JSON")).name == "json"
    assert _formats.choose(b"a.htm").name == "html"
    assert _formats.choose("x.trace.json", format="json").name == "json"
    with pytest.raises(TypeError, match="format must be a str or None, got int"):
        _formats.choose("a.json", format=3)
    with pytest.raises(ValueError, match="unknown format 'nope'; the formats are json"):
        _formats.choose("a.json", format="nope")
    with pytest.raises(ValueError, match="cannot tell the format of 'a.txt'"):
        _formats.choose("a.txt")


def test_save_calls_the_writer_and_refuses_bad_paths(tmp_path):
    r = _Rep()
    assert _formats.save(r, "run.trace.json") == "chrome-trace"
    assert _formats.save(r, pathlib.Path("r.json")) == "json"
    assert r.calls == [("to_chrome_trace", "run.trace.json"), ("to_json", pathlib.Path("r.json"))]
    for bad in (None, 3, True, 2.5):
        with pytest.raises(TypeError, match="path must be a file name"):
            _formats.save(r, bad)
    assert len(r.calls) == 2


def test_save_as_a_format_the_report_lacks_names_the_ones_it_has():
    r = _Rep()
    with pytest.raises(TypeError, match=r"a _Rep cannot be saved as html; its formats are json, chrome-trace$"):
        _formats.save(r, "a.html")


def test_an_attribute_error_inside_a_writer_is_not_hidden(scratch_format):
    def broken(report, path):
        raise AttributeError("deep inside")

    scratch_format("zz4", (".zz4",), broken)
    with pytest.raises(AttributeError, match="deep inside"):
        _formats.save(_Rep(), "a.zz4")



def test_devices_table_divides_by_exactly_a_million_and_a_tera(monkeypatch):
    # the table prints 6 significant digits: 1234565001 Hz / 1e6 = 1234.565001 MHz -> "1234.57", 1234564999 Hz ->
    # "1234.56"; 1234565000000.05 B/s / 1e12 = 1.23456500000005 TB/s -> "1.23457" (5e-14 above the rounding
    # boundary; a divisor 0.1 larger, 1e-13 relative, would take it 1.2e-13 down, below the boundary) and 1234564999999.95 B/s -> "1.23456"
    monkeypatch.setattr(devices, "_ALL", (
        _spec("Up", boost_clock_hz=1234565001, memory_bandwidth=1234565000000.05,
              sources={"boost_clock_hz": "D", "memory_bandwidth": "D"}),
        _spec("Down", boost_clock_hz=1234564999, memory_bandwidth=1234564999999.95,
              sources={"boost_clock_hz": "D", "memory_bandwidth": "D"})))
    rows = [line.split(" | ") for line in _devices_table.table().splitlines()[2:]]
    assert [(r[3], r[6]) for r in rows] == [("1234.57", "1.23457"), ("1234.56", "1.23456")]
