"""A stable yardstick for MFU on a busy machine: when this run's CPU ceilings are measured under contention, a
report is judged against the last idle measurement of this machine, else the CPU's theoretical peak, and says which
(meta["ceilings_yardstick"], the summary and the HTML); ceilings="theoretical" and a saved file; `ceilings --save`;
the DRAM figure from the firmware's memory table; the progress bar of the measurement.

The benchmarks are stand-ins (fixed results, no time spent); expected figures are arithmetic written here."""

from __future__ import annotations

import io
import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import roofline
from roofline import cli
from roofline._hardware import _choose
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import OpInfo, Report
from roofline._util import _progress

from _ceilings_modules import ceilings_mod as C  # noqa: E402  (the ceilings modules as one)
G = 1e9
sys.path.insert(0, str(Path(__file__).parent))


class _Core:
    """roofline._core with fixed benchmark results: FMA peaks of ``scale`` x (100, 200) GFLOP/s and a flat 10 GB/s
    sweep (a plausible hierarchy); ``busy`` gives the benchmark threads 40% of their CPUs."""

    def __init__(self, scale=1.0, busy=False):
        self.scale, self.busy = scale, busy

    def cpu_fma_peak(self, dtype, seconds, threads, repeats):
        return {"flops": self.scale * {"float64": 100 * G, "float32": 200 * G}[dtype], "threads": threads,
                "pinned": True, "repeats": repeats, "lanes": 8, "accumulators": 12, "fma": True,
                "cpu_share": 0.4 if self.busy else 0.99}

    def cpu_bandwidth_sweep(self, sizes, kernels, threads, repeats, **kwargs):
        return np.full((len(kernels), len(sizes)), 10 * G * self.scale), {"pinned": True, "cpu_share": 0.99}

    def __getattr__(self, name):
        from roofline import _core

        return getattr(_core, name)


# 2 cores at 2 GHz with AVX2: 8 float32 lanes, 4 float64 lanes, and 2 FMA units per core (what the package assumes
# for AVX2 cores; docs/ceilings.md)
INFO = {"cpus": 2, "physical_cores": 2, "clock_hz": 2.0e9, "clock_source": "test", "simd": "avx2",
        "model": "stub CPU", "caches": {"L1": {"bytes": 32 << 10, "instances": 2},
                                         "L2": {"bytes": 1 << 20, "instances": 2}},
        "lowp_kernels": {}}
THEORY_F32 = 2 * 2.0e9 * 8 * 2 * 2   # cores x clock x lanes x FMA units x 2 FLOP = 128 GFLOP/s
THEORY_F64 = 2 * 2.0e9 * 4 * 2 * 2   # 64 GFLOP/s


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A stand-in CPU: set ``machine.core`` to choose what the benchmarks measure."""
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ROOFLINE_CPU_FMA_UNITS", raising=False)
    monkeypatch.setattr(C, "_cpu_info", lambda: dict(INFO))
    monkeypatch.setattr(C, "_BUSY_RESULTS", {})
    monkeypatch.setattr(C, "dram_theoretical", lambda table=None: None)

    class M:
        def use(self, core):
            monkeypatch.setattr(C, "_core", core)

    return M()


def _report(spec="measured"):
    """One float32 mm of 4 GFLOP (no bytes) timed at 0.1 s, and one add of 1 GFLOP, 8 GB, timed at 1 s."""
    rec = np.zeros(2, dtype=RECORD_DTYPE)
    rec["op"], rec["dtype"] = [0, 1], DTYPE_CODES["float32"]
    rec["matrix_flops"], rec["vector_flops"] = [4 * 10 ** 9, 0], [0, 10 ** 9]
    rec["bytes_read"] = [0, 8 * 10 ** 9]
    rec["t_start"], rec["t_end"] = [0.0, 0.1], [0.1, 1.1]
    ops = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    return Report(rec, ops, [("Global",)], wall_time=1.1, meta={"timing": "op", "devices": ["cpu"]}, ceilings=spec)


def _quiet(fn, *a, **k):
    with pytest.warns(RuntimeWarning, match="under contention"):
        return fn(*a, **k)


def test_an_idle_measurement_is_its_own_yardstick_and_is_kept(machine):
    machine.use(_Core())
    r = _report()
    assert r.ceilings.peak("vector", "float32") == 200 * G
    assert r.meta["ceilings_yardstick"] == {"kind": "measured"}
    assert "yardstick" not in str(r)
    assert Path(C.reference_path("cpu", C._cpu_fingerprint(INFO))).is_file()  # kept as the machine's yardstick


def test_a_contended_run_is_judged_against_the_last_idle_measurement(machine, monkeypatch):
    machine.use(_Core())
    roofline.ceilings(refresh=True)  # idle: 200 GFLOP/s, kept
    monkeypatch.setattr(C, "_load_cache", lambda *a, **k: None)  # the versioned cache is gone: a new release, say
    reports = []
    for scale in (0.3, 0.6):  # two busy runs, measuring 60 and 120 GFLOP/s
        machine.use(_Core(scale=scale, busy=True))
        C._BUSY_RESULTS.clear()
        r = _report()
        c = _quiet(lambda: r.ceilings)
        reports.append(r)
        assert c.peak("vector", "float32") == 200 * G  # the idle figure, not this run's
        y = r.meta["ceilings_yardstick"]
        assert y["kind"] == "idle" and "benchmark threads got 40%" in y["contention"][0]
        assert "ceilings_contention" not in r.meta  # the yardstick is not the contended measurement
    # the same MFU from both runs: 4 GFLOP of mm + 1 GFLOP of add in 1.1 s against the 200 GFLOP/s peak
    mfu = [r.totals()["mfu"] for r in reports]
    assert mfu[0] == mfu[1] == pytest.approx(5e9 / (1.1 * 200 * G))
    text = str(reports[0])
    assert "yardstick: the last idle measurement of this machine" in text and "under contention" in text
    assert "the last idle measurement of this machine" in reports[0].to_html()
    back = roofline.load(reports[0].to_json())
    assert back.meta["ceilings_yardstick"]["kind"] == "idle"


def test_without_an_idle_measurement_the_theoretical_peak_is_the_yardstick(machine):
    mfu = []
    for scale in (0.3, 0.6):
        machine.use(_Core(scale=scale, busy=True))
        C._BUSY_RESULTS.clear()
        r = _report()
        c = _quiet(lambda: r.ceilings)
        assert c.peak("vector", "float32", "best") == THEORY_F32
        assert c.peak("vector", "float64", "best") == THEORY_F64
        # no readable memory table: the DRAM figure is this run's measurement, and the notes say so
        assert c.bandwidth("DRAM", "best") == 10 * G * scale
        assert any("memory table is not readable" in n for n in c.notes)
        assert r.ceilings_source == "best" and r.meta["ceilings_yardstick"]["kind"] == "theoretical"
        mfu.append(r.totals()["mfu"])
    assert mfu[0] == mfu[1] == pytest.approx(5e9 / (1.1 * THEORY_F32))
    text = str(r)
    assert "yardstick: the CPU's theoretical peak (" in text and "2 cores x 2.00 GHz" in text
    assert "ceilings --save" in text


def test_ceilings_theoretical_and_a_saved_file(machine, tmp_path):
    machine.use(_Core())
    r = _report("theoretical")
    assert r.ceilings.peak("vector", "float32", "best") == THEORY_F32
    assert r.meta["ceilings_yardstick"]["kind"] == "theoretical"
    # a saved measurement, used wherever ceilings=PATH
    saved = roofline.ceilings(refresh=True)
    path = tmp_path / "idle.json"
    assert C.save_idle(saved, str(path)) == str(path)
    r = _report(str(path))
    assert r.ceilings.peak("vector", "float32") == 200 * G and r.meta["ceilings_yardstick"]["kind"] == "file"
    assert f"the saved ceilings {path}" in str(r)
    _choose.check_spec(str(path))
    with pytest.raises(FileNotFoundError, match="no saved ceilings file"):
        _choose.check_spec(str(tmp_path / "missing.json"))
    with pytest.raises(KeyError):
        _choose.check_spec("No Such GPU")
    with pytest.raises(TypeError, match="theoretical"):
        _choose.check_spec(3)


def test_ceilings_save_refuses_a_contended_measurement(machine, tmp_path, capsys):
    machine.use(_Core(busy=True))
    out = tmp_path / "mine.json"
    assert cli.main(["ceilings", "--save", str(out)]) == 1
    err = capsys.readouterr().err
    assert "roofline ceilings: error: these ceilings were measured under contention" in err and not out.exists()
    machine.use(_Core())
    assert cli.main(["ceilings", "--save", str(out)]) == 0
    assert "ceilings=" in capsys.readouterr().err
    assert json.loads(out.read_text())["peaks"]
    assert cli.main(["ceilings", "--save"]) == 0
    assert "saved as this machine's yardstick" in capsys.readouterr().err
    assert C.saved_idle("cpu").peak("vector", "float32") == 200 * G


def _smbios_memory_device(locator: str, bank: str, size_mb: int, width: int, speed: int, configured: int) -> bytes:
    """An SMBIOS type 17 structure (length 0x28) with its two strings."""
    body = bytearray(0x28)
    body[0], body[1] = 17, 0x28
    struct.pack_into("<H", body, 0x08, width)      # total width
    struct.pack_into("<H", body, 0x0A, width)      # data width
    struct.pack_into("<H", body, 0x0C, size_mb)
    body[0x10], body[0x11] = 1, 2                  # device locator, bank locator: strings 1 and 2
    struct.pack_into("<H", body, 0x15, speed)
    struct.pack_into("<H", body, 0x20, configured)
    return bytes(body) + locator.encode() + b"\0" + bank.encode() + b"\0\0"


def test_dram_from_the_memory_table():
    end = bytes([127, 4, 0, 0]) + b"\0\0"
    # two channels, two DIMMs each, DDR4-3200 configured at 2933 MT/s, 64-bit
    table = b"".join(_smbios_memory_device(f"DIMM {i}", f"P0 CHANNEL {ch}", 16384, 64, 3200, 2933)
                     for i, ch in enumerate("AABB")) + _smbios_memory_device("DIMM 9", "CHANNEL C", 0, 64, 0, 0) + end
    d = C.dram_theoretical(table)
    # 2 channels x 2933 MT/s x 8 bytes = 46.928 GB/s (the empty slot of channel C does not count)
    assert d["channels"] == 2 and d["mt_s"] == 2933 and d["bytes_per_s"] == 2 * 2933e6 * 8
    # locators without channel names: each populated device a channel, said to be an upper bound
    table = b"".join(_smbios_memory_device(f"DIMM{i}", "BANK", 8192, 64, 2400, 0) for i in range(3)) + end
    d = C.dram_theoretical(table)
    assert d["bytes_per_s"] == 3 * 2400e6 * 8 and "upper bound" in d["formula"]
    assert C.dram_theoretical(end) is None and C.dram_theoretical(b"\x11") is None


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_bar_on_a_terminal_and_nothing_otherwise(machine, monkeypatch):
    monkeypatch.delenv("ROOFLINE_PROGRESS", raising=False)
    assert _progress.auto("x", io.StringIO()) is None
    bar = _progress.auto("measuring", _Tty())
    bar("fma float64 (1/4)")
    bar("bandwidth sweep (3/4)")
    bar.close()
    frames = bar.stream.getvalue().split("\r")
    # 24 cells: 1/4 fills 6, 3/4 fills 18, the end all of them
    assert frames[1].startswith("measuring [" + "#" * 6 + "." * 18 + "] 1/4 fma float64, ")
    assert frames[2].startswith("measuring [" + "#" * 18 + "." * 6 + "] 3/4 bandwidth sweep, ")
    assert frames[3].startswith("measuring [" + "#" * 24 + "] done in ") and frames[3].endswith("\n")
    monkeypatch.setenv("ROOFLINE_PROGRESS", "0")
    assert _progress.auto("x", _Tty()) is None
    monkeypatch.setenv("ROOFLINE_PROGRESS", "1")
    assert _progress.auto("x", io.StringIO()) is not None
    # the measurement draws it on a terminal's stderr, and prints nothing on a pipe's
    monkeypatch.delenv("ROOFLINE_PROGRESS")
    machine.use(_Core())
    for stream, drawn in ((_Tty(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        roofline.ceilings(refresh=True)
        out = stream.getvalue()
        assert (out.count("\r") >= 3 and "[" + "#" * 24 + "] done" in out) if drawn else out == ""


def test_meta_names_the_yardstick_however_the_report_was_first_read(machine):
    machine.use(_Core(busy=True))
    r = _report()
    with pytest.warns(RuntimeWarning, match="under contention"):
        mfu = r.totals()["mfu"]  # the first read: no summary, no ceilings attribute
    assert r.meta["ceilings_yardstick"]["kind"] == "theoretical"
    assert mfu == pytest.approx(5e9 / (1.1 * THEORY_F32))
