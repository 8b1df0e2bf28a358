"""CPU ceilings: the C benchmarks through roofline._core, roofline.ceilings (cache, fallbacks, JSON), the CLI.

Expected values are computed here from their definitions (the theoretical peak formula, sysfs and /proc read
directly), not taken from the code under test. One real quick measurement is shared by the module; cache tests
replace the measuring function with a stub that counts its calls.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import json
import os
import stat
import subprocess
import sys
import textwrap
import time
import types
import warnings

import numpy as np
import pytest

import roofline
from roofline import _core, cli
from roofline._hardware._ceilings import CeilingNotAvailable, Ceilings, ceilings

# The module itself, even where the package re-exports the function under the same name.
from _ceilings_modules import ceilings_mod  # noqa: E402  (the ceilings modules as one)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One real quick measurement (cache in a temporary directory) and the wall time it took."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ROOFLINE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "machine busy" warnings on a shared machine
            c = ceilings("cpu", refresh=True, quick=True)
        wall = time.perf_counter() - t
    finally:
        mp.undo()
    return c, wall


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def fake_measure(measured, monkeypatch):
    """Replace the CPU measurement by a stub returning the shared result (marked idle so it is cached)."""
    c, _ = measured
    calls = []

    def stub(quick, progress, info):
        calls.append(quick)
        return dataclasses.replace(c, info={**c.info, "busy": False}, quick=quick)

    monkeypatch.setattr(ceilings_mod, "_measure_cpu", stub)
    return calls


def _forbid_measuring(monkeypatch):
    def boom(**kwargs):
        raise AssertionError("the CPU was measured although cached ceilings exist")

    monkeypatch.setattr(ceilings_mod, "_measure_cpu", boom)


# ---------------------------------------------------------------------------------------------------------------
# Measured values
# ---------------------------------------------------------------------------------------------------------------


def test_peaks_positive_and_below_a_physical_bound(measured):
    # Ratios between measured figures (fp32/fp64 lanes, the cache plateaus, the duration) depend on what else runs on
    # the machine: bench/cpu_ceilings.py checks them. Here only what contention cannot change: a measured peak is a
    # positive finite rate, and no process can run faster than every core at 2x the nominal clock.
    c, _ = measured
    for dtype in ("float64", "float32"):
        p = c.peaks[("vector", dtype)]
        assert np.isfinite(p.measured) and p.measured > 0
        if p.datasheet:
            assert p.measured < 2.0 * p.datasheet


def _cpuinfo_mhz():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1])
    return None


def _read(path):
    with open(path) as f:
        return f.read().strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /sys")
def test_theoretical_peak_formula(measured):
    c, _ = measured
    cpufreq = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
    if os.path.exists(cpufreq):
        clock = float(_read(cpufreq)) * 1e3  # kHz
    else:
        mhz = _cpuinfo_mhz()
        if mhz is None:
            pytest.skip("no clock source on this machine")
        clock = mhz * 1e6
    cpus = sorted(os.sched_getaffinity(0))
    cores = len({_read(f"/sys/devices/system/cpu/cpu{i}/topology/core_cpus_list") for i in cpus})
    vector_bits = {"avx512": 512, "avx2": 256, "sse2": 128, "neon": 128, "scalar": 0}[c.info["simd"]]
    fma_units = {"avx512": 2, "avx2": 2, "neon": 2, "sse2": 1, "scalar": 1}[c.info["simd"]]
    for dtype, bits in (("float64", 64), ("float32", 32)):
        lanes = vector_bits // bits if vector_bits else 1
        # theoretical = cores x clock x lanes x FMA units x 2 FLOP per FMA
        expected = cores * clock * lanes * fma_units * 2
        assert c.peaks[("vector", dtype)].datasheet == pytest.approx(expected, rel=1e-9)
        assert c.peak("vector", dtype, source="datasheet") == pytest.approx(expected, rel=1e-9)


def test_fma_units_override(monkeypatch):
    monkeypatch.setenv("ROOFLINE_CPU_FMA_UNITS", "1")
    info = {"cpus": 4, "physical_cores": 4, "clock_hz": 2.0e9, "clock_source": "test"}
    t = ceilings_mod._theoretical(info, "avx2")
    # 4 cores x 2 GHz x 4 float64 lanes (256 / 64) x 1 FMA unit x 2 = 64 GFLOP/s
    assert t["peak"]["float64"] == 4 * 2.0e9 * 4 * 1 * 2
    assert t["fma_units_source"] == "ROOFLINE_CPU_FMA_UNITS"
    monkeypatch.setenv("ROOFLINE_CPU_FMA_UNITS", "zero")
    with pytest.raises(ValueError, match="ROOFLINE_CPU_FMA_UNITS"):
        ceilings_mod._theoretical(info, "avx2")


def test_bandwidth_plateaus_positive(measured):
    c, _ = measured
    levels = [lvl for lvl in ("L1", "L2", "L3", "DRAM") if lvl in c.bandwidths]
    assert "L1" in levels and "DRAM" in levels
    assert all(np.isfinite(c.bandwidth(lvl)) and c.bandwidth(lvl) > 0 for lvl in levels)


def test_sweep_arrays(measured):
    c, _ = measured
    sizes = c.sweep["sizes"]
    assert sizes.dtype == np.int64 and np.all(np.diff(sizes) > 0)
    assert sizes[0] == 16 << 10
    caches = c.info["caches"]
    llc = max(int(v["bytes"]) * int(v["instances"]) for v in caches.values())
    capped = any("DRAM working set" in n for n in c.notes)
    assert capped or sizes[-1] >= 4 * llc
    for k in ("read", "copy", "triad"):
        assert c.sweep[k].dtype == np.float64 and c.sweep[k].shape == sizes.shape
        assert np.all(c.sweep[k] > 0)


def test_quick_duration(measured):
    c, wall = measured
    print(f"quick CPU ceilings: duration_s = {c.duration_s:.2f} s, wall {wall:.2f} s, "
          f"cpu share {c.info['cpu_share']}")
    assert c.quick is True
    assert 0 < c.duration_s <= wall
    # The 3 s target on an idle machine is checked by bench/cpu_ceilings.py, not here (it depends on timing).
    assert c.version == roofline.__version__ and c.timestamp


# ---------------------------------------------------------------------------------------------------------------
# Cache
# ---------------------------------------------------------------------------------------------------------------


def test_cached_result_reloaded_without_measuring(cache, fake_measure, monkeypatch):
    first = ceilings("cpu")
    assert fake_measure == [True]
    files = glob.glob(str(cache / "*.json"))
    assert len(files) == 1
    assert not [p for p in os.listdir(cache) if p.endswith(".tmp")]  # atomic write left no temporary file
    _forbid_measuring(monkeypatch)
    again = ceilings("cpu")
    assert again == first


def test_refresh_remeasures(cache, fake_measure):
    ceilings("cpu")
    ceilings("cpu", refresh=True)
    assert fake_measure == [True, True]


def test_thorough_request_does_not_use_quick_cache(cache, fake_measure, monkeypatch):
    ceilings("cpu", quick=True)
    ceilings("cpu", quick=False)
    assert fake_measure == [True, False]
    _forbid_measuring(monkeypatch)
    assert ceilings("cpu", quick=True).quick is False  # a thorough result also answers a quick request


def _valid_text(cache):
    (path,) = glob.glob(str(cache / "*.json"))
    with open(path) as f:
        return path, f.read()


def _schema(text):
    d = json.loads(text)
    d["schema"] = "roofline.ceilings/999"
    return json.dumps(d)


def _stale(text):
    d = json.loads(text)
    d["version"] = "0.0.1"
    return json.dumps(d)


def _other_machine(text):
    d = json.loads(text)
    d["fingerprint"] = "0123456789abcdef"
    return json.dumps(d)


def _missing_field(text):
    d = json.loads(text)
    del d["peaks"]
    return json.dumps(d)


def _bad_value(text):
    d = json.loads(text)
    d["peaks"]["vector/float64"]["measured"] = "fast"
    return json.dumps(d)


def _edit(**changes):
    """A corruption that sets fields of the cached document (a callable value edits the old one)."""

    def corrupt(text):
        d = json.loads(text)
        for k, v in changes.items():
            d[k] = v(d[k]) if callable(v) else v
        return json.dumps(d)

    return corrupt


def _sweep_entry(key, value):
    return _edit(sweep=lambda s: {**s, key: [value] + s[key][1:]})


def _deep_inside(text):
    d = json.loads(text)
    d["info"]["extra"] = "DEEP"
    return json.dumps(d).replace('"DEEP"', "[" * 5000 + "0" + "]" * 5000)


_CORRUPTIONS = {
    "garbage": lambda t: b"\x00\xff\xfegarbage\x89PNG",
    "truncated": lambda t: t[: len(t) // 2],
    "empty": lambda t: "",
    "not-object": lambda t: "[1, 2, 3]",
    "schema": _schema,
    "stale-version": _stale,
    "other-machine": _other_machine,
    "missing-field": _missing_field,
    "bad-value": _bad_value,
    # each of these used to raise out of ceilings() (RecursionError, OverflowError, TypeError) or load silently
    "deep-nesting": lambda t: "[" * 100_000 + "]" * 100_000,
    "deep-inside": _deep_inside,
    "sizes-1e30": _sweep_entry("sizes", 1e30),
    "sizes-null": _sweep_entry("sizes", None),
    "sizes-fraction": _sweep_entry("sizes", 1.5),
    "sizes-bool": _sweep_entry("sizes", True),
    "sizes-2**70": _sweep_entry("sizes", 2**70),
    "rate-null": _sweep_entry("read", None),
    "rate-text": _sweep_entry("read", "fast"),
    "sweep-lengths": _edit(sweep=lambda s: {**s, "read": s["read"][:-1]}),
    "sweep-list": _edit(sweep=[1, 2]),
    "peak-NaN": lambda t: t.replace('"measured": ', '"measured": NaN, "x": ', 1),
    "peak-inf": lambda t: t.replace('"measured": ', '"measured": 1e999, "x": ', 1),
    "peak-negative": _edit(peaks=lambda p: {k: {**v, "measured": -1.0} for k, v in p.items()}),
    "peak-huge-int": _edit(peaks=lambda p: {k: {**v, "measured": 10**400} for k, v in p.items()}),
    "peaks-list": _edit(peaks=[]),
    "peak-entry-list": _edit(peaks=lambda p: {k: [1] for k in p}),
    "quick-text": _edit(quick="yes"),
    "info-list": _edit(info=[1, 2]),
    "info-native-lowp": _edit(info=lambda i: {**i, "native_lowp": ["avx512_bf16"]}),
    "notes-ints": _edit(notes=[1, 2]),
    "duration-text": _edit(duration_s="2 s"),
    "huge-integer": lambda t: t.replace('"duration_s": ', '"duration_s": ' + "9" * 5000 + ', "x": ', 1),
    "not-utf8": lambda t: t.encode()[:-2] + b"\xff\xfe}",
}


@pytest.mark.parametrize("corrupt", list(_CORRUPTIONS.values()), ids=list(_CORRUPTIONS))
def test_bad_cache_file_is_remeasured_with_warning(cache, fake_measure, corrupt):
    ceilings("cpu")
    path, text = _valid_text(cache)
    bad = corrupt(text)
    with open(path, "wb") as f:
        f.write(bad if isinstance(bad, bytes) else bad.encode())
    with pytest.warns(RuntimeWarning, match="ignoring the ceilings cache"):
        c = ceilings("cpu")
    assert fake_measure == [True, True]
    assert c.peak("vector", "float64") > 0
    # the bad file was replaced by a valid one
    _, fixed = _valid_text(cache)
    assert Ceilings.from_json(fixed) == c


def test_infinite_number_in_info_refused(measured):
    """A document that loads saves back: an infinite number in the free-form ``info`` (which strict JSON cannot
    write) is refused at load, naming where it is (hypothesis found ``info.model = inf`` loading, then failing
    in to_json)."""
    c, _ = measured
    doc = json.loads(c.to_json())
    doc["info"]["model"] = float("inf")
    doc["info"]["nested"] = {"x": [1.0, float("nan")]}
    with pytest.raises(ValueError, match=r"info\.model is inf, not a finite number"):
        Ceilings.from_json(json.dumps(doc))
    doc["info"]["model"] = "ok"
    with pytest.raises(ValueError, match=r"info\.nested\.x\[1\] is nan"):
        Ceilings.from_json(json.dumps(doc))


def test_corrupt_documents_raise_only_value_error(measured):
    """The reader behind the cache (and behind the ceilings saved in a report) has one failure mode."""
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    c, _ = measured
    doc = json.loads(c.to_json())
    from conftest import json_paths, json_values

    values = json_values(st, 2**80, text_size=4, max_leaves=6)
    all_paths = [p for p in json_paths(doc, 2) if p]

    @hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
    @hypothesis.given(st.sampled_from(all_paths), values)
    def check(path, value):
        d = json.loads(json.dumps(doc))
        parent = d
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = value
        try:
            back = Ceilings.from_json(json.dumps(d))
        except ValueError:
            return
        str(back)  # whatever loads can be shown and looked up
        try:
            back.peak("vector", "float32", "best")
        except CeilingNotAvailable:  # the documented answer for an entry with no figure
            pass
        back.to_json()

    check()


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="ownership and mode checks are POSIX")
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o722])
def test_cache_directory_writable_by_others_is_not_used(tmp_path, fake_measure, monkeypatch, mode):
    """A forged file in a directory others can write must not feed ceilings into reports, and nothing is written
    there."""
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(shared))
    ceilings("cpu")  # while the directory is private: cached
    (path,) = glob.glob(str(shared / "*.json"))
    forged = json.loads(open(path).read())
    forged["peaks"]["vector/float64"]["measured"] = 1e30
    with open(path, "w") as f:
        json.dump(forged, f)
    os.chmod(shared, mode)
    with pytest.warns(RuntimeWarning, match=r"cannot write the ceilings cache .*writable by its group or by others"):
        c = ceilings("cpu")
    assert fake_measure == [True, True]  # re-measured, the forged file not read
    assert c.peak("vector", "float64") < 1e30
    assert json.loads(open(path).read()) == forged  # and not overwritten either
    os.chmod(shared, 0o700)
    _forbid_measuring(monkeypatch)
    assert ceilings("cpu").peak("vector", "float64") == 1e30  # private again: the same file is used


def test_cache_directory_that_is_a_symlink_is_not_used(tmp_path, fake_measure):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    mp = pytest.MonkeyPatch()
    mp.setenv("ROOFLINE_CACHE_DIR", str(link))
    try:
        with pytest.warns(RuntimeWarning, match="symbolic link"):
            ceilings("cpu")
    finally:
        mp.undo()
    assert os.listdir(real) == []


def test_missing_cache_directory_is_created_private(tmp_path, fake_measure, monkeypatch):
    target = tmp_path / "a" / "b"
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(target))
    ceilings("cpu")
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700
    assert len(glob.glob(str(target / "*.json"))) == 1


def test_unwritable_cache_warns_and_still_returns(tmp_path, fake_measure, monkeypatch):
    target = tmp_path / "file-not-dir"
    target.write_text("x")
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(target / "sub"))
    with pytest.warns(RuntimeWarning, match="cannot write the ceilings cache"):
        c = ceilings("cpu")
    assert c.peak("vector", "float32") > 0


def test_failed_replace_leaves_no_partial_file(cache, fake_measure, monkeypatch):
    def failing_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(ceilings_mod.os, "replace", failing_replace)
    with pytest.warns(RuntimeWarning, match="disk full"):
        ceilings("cpu")
    assert os.listdir(cache) == []


def test_busy_result_not_cached(cache, measured, monkeypatch):
    c, _ = measured
    monkeypatch.setattr(
        ceilings_mod, "_measure_cpu", lambda quick, progress, info: dataclasses.replace(c, info={**c.info, "busy": True})
    )
    ceilings("cpu")
    assert glob.glob(str(cache / "*.json")) == []


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("ROOFLINE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ceilings_mod.cache_dir() == os.path.join(str(tmp_path), "roofline")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert ceilings_mod.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "roofline")
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path / "x"))
    assert ceilings_mod.cache_dir() == str(tmp_path / "x")


# ---------------------------------------------------------------------------------------------------------------
# JSON, fallbacks, display
# ---------------------------------------------------------------------------------------------------------------


def test_json_round_trip_exact(measured):
    c, _ = measured
    text = c.to_json()
    back = Ceilings.from_json(text)
    assert back == c
    assert back.to_json() == text
    for key, entry in c.peaks.items():
        assert back.peaks[key].measured == entry.measured  # bit-exact floats
    for k, v in c.sweep.items():
        assert back.sweep[k].dtype == v.dtype and np.array_equal(back.sweep[k], v)
    assert Ceilings.from_json(text.encode()) == c


def _cpuinfo_flags() -> set[str]:
    flags = set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":", 1)[0].strip() in ("flags", "Features"):
                    flags.update(line.split(":", 1)[1].split())
                    break
    return flags


def test_matrix_and_low_precision_fallbacks(measured):
    c, _ = measured
    f32 = c.peak("vector", "float32")
    assert c.peak("matrix", "float32") == f32
    assert c.peak("matrix", "float64") == c.peak("vector", "float64")
    # which native product peaks exist follows the CPU flags the kernel reports (read here independently)
    flags = _cpuinfo_flags()
    native = {"bfloat16": bool(flags & {"avx512_bf16", "amx_bf16"}), "float16": "avx512_fp16" in flags,
              "int8": bool(flags & {"avx512_vnni", "amx_int8"}), "tfloat32": False}
    for dtype in ("bfloat16", "float16", "tfloat32"):
        choice = c.resolve_peak("matrix", dtype)
        if native[dtype]:
            assert (choice.unit, choice.dtype, choice.note) == ("matrix", dtype, "")
            assert choice.value == c.peaks[("matrix", dtype)].measured > 0
            # element-wise work in that dtype still computes in float32
            vec = c.resolve_peak("vector", dtype)
            assert vec.value == f32 and f"measured as matrix/{dtype}" in vec.note
        else:
            assert choice.value == f32 and (choice.unit, choice.dtype) == ("vector", "float32")
            assert "float32" in choice.note
    direct = c.resolve_peak("vector", "float32")
    assert direct.note == "" and direct.source == "measured"
    if native["int8"]:
        assert c.peak("matrix", "int8") == c.peaks[("matrix", "int8")].measured > 0
    else:
        with pytest.raises(CeilingNotAvailable, match="int8"):
            c.peak("matrix", "int8")
    with pytest.raises(CeilingNotAvailable, match="L7"):
        c.bandwidth("L7")
    assert c.bandwidth() == c.bandwidth("DRAM") == c.bandwidths["DRAM"].measured


def test_lookup_argument_errors(measured):
    c, _ = measured
    with pytest.raises(ValueError, match="unit"):
        c.peak("tensor", "float32")
    with pytest.raises(ValueError, match="dtype"):
        c.peak("vector", "float128")
    with pytest.raises(ValueError, match="source"):
        c.peak("vector", "float32", source="guess")
    with pytest.raises(TypeError, match="level"):
        c.bandwidth(3)


def test_table_and_repr(measured):
    c, _ = measured
    text = c.table()
    assert "vector float64" in text and "GFLOP/s" in text and "GB/s" in text and "bandwidth DRAM" in text
    r = repr(c)
    assert r.startswith("Ceilings('cpu'") and "GFLOP/s" in r


class _Spec:
    """A stand-in for roofline.devices.DeviceSpec with H100 SXM datasheet figures."""

    name = "NVIDIA H100 80GB HBM3"
    # FP32 vector = 132 SMs x 128 lanes x 2 FLOP x 1.98 GHz = 66.9 TFLOP/s; BF16 dense tensor 989 TFLOP/s
    peaks = {("vector", "float32"): 132 * 128 * 2 * 1.98e9, ("matrix", "bfloat16"): 989e12}
    memory_bandwidth = 3.35e12
    l2_bytes = 50 << 20
    sm_count = 132
    boost_clock_hz = 1.98e9
    sources = {("vector", "float32"): "nvidia.com H100 datasheet", "memory_bandwidth": "nvidia.com H100 datasheet"}


def test_from_datasheet():
    c = Ceilings.from_datasheet(_Spec())
    assert c.name == _Spec.name
    assert c.peak("vector", "float32", source="datasheet") == pytest.approx(66.9e12, rel=1e-3)
    assert c.peak("matrix", "bfloat16", source="best") == 989e12
    with pytest.raises(CeilingNotAvailable):
        c.peak("matrix", "bfloat16")  # nothing measured
    assert c.bandwidth("DRAM", source="datasheet") == 3.35e12
    assert c.peaks[("vector", "float32")].datasheet_source == "nvidia.com H100 datasheet"
    assert Ceilings.from_json(c.to_json()) == c


# ---------------------------------------------------------------------------------------------------------------
# GPU path (no GPU here: a stand-in module checks the conversion; the real one must fail clearly)
# ---------------------------------------------------------------------------------------------------------------


def _cuda_present():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_cuda_present(), reason="a CUDA driver is installed")
def test_cuda_without_gpu_raises_clear_error(cache):
    with pytest.raises(RuntimeError) as info:
        ceilings("cuda")
    msg = str(info.value)
    assert "GPU" in msg or "CUDA" in msg or "cuda" in msg
    with pytest.raises(RuntimeError):
        ceilings("cuda:1")


def test_cuda_result_conversion_with_stand_in(cache, monkeypatch):
    gpu = types.ModuleType("roofline._hardware._gpu")

    class CudaUnavailableError(RuntimeError):
        pass

    def measure(index, quick=True, progress=None):
        assert index == 0
        return {
            "device": {"name": _Spec.name, "index": 0, "sm_count": 132, "compute_capability": [9, 0],
                       "clock_hz": 1.98e9, "memory_bandwidth_theoretical": 3.35e12, "fingerprint": "h100-test"},
            "peaks": {"vector/float32": 60e12, "matrix/bfloat16": 790e12},
            "bandwidth": {"DRAM": 3.0e12, "DRAM_read": 3.1e12, "L2": 9e12},
            "method": {"vector/float32": "FMA chains", "DRAM": "copy, 16-byte accesses"},
            "duration_s": 4.5,
        }

    gpu.measure = measure
    gpu.CudaUnavailableError = CudaUnavailableError
    devices = types.ModuleType("roofline.devices")
    devices.lookup = lambda name: _Spec() if name == _Spec.name else None
    monkeypatch.setattr(ceilings_mod, "_gpu", gpu)
    monkeypatch.setattr(ceilings_mod, "devices", devices)

    c = ceilings("cuda")
    assert c.device == "cuda:0" and c.fingerprint == "h100-test" and c.duration_s == 4.5
    bf16 = c.peaks[("matrix", "bfloat16")]
    assert bf16.measured == 790e12 and bf16.datasheet == 989e12
    assert bf16.ratio == pytest.approx(790 / 989)
    assert c.bandwidths["DRAM"].datasheet == 3.35e12 and c.bandwidths["L2"].datasheet is None
    assert c.peaks[("vector", "float32")].method == "FMA chains"
    # no tensor float32 peak on record: a matrix float32 op falls back to the vector float32 peak
    assert c.peak("matrix", "float32") == 60e12
    assert Ceilings.from_json(c.to_json()) == c

    devices.lookup = lambda name: None
    with pytest.warns(UserWarning, match="no datasheet entry"):
        unknown = ceilings("cuda:0", refresh=True)
    assert unknown.peaks[("matrix", "bfloat16")].datasheet is None


def test_cuda_unavailable_error_propagates(cache, monkeypatch):
    gpu = types.ModuleType("roofline._hardware._gpu")

    class CudaUnavailableError(RuntimeError):
        pass

    def measure(index, quick=True, progress=None):
        raise CudaUnavailableError("libcuda.so.1 not found: no NVIDIA driver")

    gpu.measure = measure
    gpu.CudaUnavailableError = CudaUnavailableError
    monkeypatch.setitem(sys.modules, "roofline._hardware._gpu", gpu)
    monkeypatch.setattr(roofline, "_gpu", gpu, raising=False)
    with pytest.raises(RuntimeError, match="libcuda"):
        ceilings("cuda")


def test_cpu_ceilings_when_cuda_libraries_fail_to_load(tmp_path):
    """With broken libcuda/libnvrtc first on the library path, roofline still imports and measures the CPU."""
    libs = tmp_path / "libs"
    libs.mkdir()
    for name in ("libcuda.so.1", "libcuda.so", "libnvrtc.so", "libnvrtc.so.12", "libnvrtc.so.13"):
        (libs / name).write_bytes(b"not an ELF file")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{libs}:{env.get('LD_LIBRARY_PATH', '')}"
    env["ROOFLINE_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONWARNINGS"] = "ignore::RuntimeWarning"
    code = textwrap.dedent(
        """
        import ctypes
        try:
            ctypes.CDLL("libcuda.so.1")
            raise SystemExit("the broken libcuda.so.1 loaded")
        except OSError:
            pass
        import roofline
        from roofline._hardware._ceilings import ceilings
        c = ceilings("cpu")
        assert c.peak("vector", "float32") > 0 and c.bandwidth("DRAM") > 0
        try:
            ceilings("cuda")
        except RuntimeError as e:
            print("cuda:", e)
        else:
            raise SystemExit("ceilings('cuda') should fail here")
        print("ok")
        """
    )
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.strip().endswith("ok")


# ---------------------------------------------------------------------------------------------------------------
# Benchmark registry
# ---------------------------------------------------------------------------------------------------------------


class _StubCore:
    """Stands in for roofline._core's CPU benchmarks with fixed results (the machine queries stay real)."""

    def __init__(self, share=0.99):
        self.share = share
        self.calls = []

    def cpu_fma_peak(self, dtype, seconds, threads, repeats):
        self.calls.append(("fma", dtype))
        return {"flops": {"float64": 100e9, "float32": 200e9}[dtype], "threads": threads, "pinned": True,
                "repeats": repeats, "lanes": {"float64": 4, "float32": 8}[dtype], "accumulators": 12, "fma": True,
                "cpu_share": self.share}

    def cpu_bandwidth_sweep(self, sizes, kernels, threads, repeats, **kwargs):
        self.calls.append(("sweep", tuple(kernels)))
        # kernel j: (j + 1) * 10 GB/s at every size
        rates = np.array([[(j + 1) * 10e9] * len(sizes) for j in range(len(kernels))])
        return rates, {"pinned": False, "cpu_share": self.share}

    def __getattr__(self, name):
        return getattr(_core, name)


_STUB_INFO = {"cpus": 2, "physical_cores": 2, "clock_hz": 2.0e9, "clock_source": "test", "simd": "avx2",
              "model": "stub CPU", "caches": {"L1": {"bytes": 32 << 10, "instances": 2},
                                               "L2": {"bytes": 1 << 20, "instances": 2}}}


def test_registry_matches_the_c_tables():
    c_kernels = _core.cpu_kernels()
    assert c_kernels["fma"][:2] == ("float64", "float32")
    assert [name for name, _ in c_kernels["bandwidth"]][:3] == ["read", "copy", "triad"]
    assert dict(c_kernels["bandwidth"])["triad"] == 3  # a = b + s*c: three arrays
    info = ceilings_mod._cpu_info()
    listed = ceilings_mod.cpu_benchmarks(info)
    assert [b["key"] for b in listed] == ["vector/float64", "vector/float32", "matrix/bfloat16", "matrix/float16",
                                          "matrix/int8", "bandwidth"]
    assert all(b["supported"] for b in listed if not b["key"].startswith("matrix/"))
    lowp = {k["name"]: k for k in _core.cpu_lowp_kernels()[0]}
    for bench in ceilings_mod._CPU_REGISTRY:
        if bench.runner is ceilings_mod._run_lowp:
            assert set(bench.param("kernels")) <= set(lowp)
            assert all(lowp[k]["dtype"] == bench.param("dtype") for k in bench.param("kernels"))
        elif bench.runner is ceilings_mod._run_fma:
            assert bench.param("dtype") in c_kernels["fma"]
            assert bench.param("elem_bytes") == {"float64": 8, "float32": 4}[bench.param("dtype")]
            assert info["lanes"][bench.param("dtype")] * bench.param("elem_bytes") in (8, 16, 32, 64)
        else:
            assert set(bench.param("kernels")) <= {name for name, _ in c_kernels["bandwidth"]}


def test_measure_runs_the_registry_in_order(monkeypatch):
    stub = _StubCore()
    monkeypatch.setattr(ceilings_mod, "_core", stub)
    lines = []
    c = ceilings_mod._measure_cpu(quick=True, progress=lines.append, info=dict(_STUB_INFO))
    # the registry in order, then the quick re-check of the float32 peak (contention test)
    assert stub.calls == [("fma", "float64"), ("fma", "float32"), ("sweep", ("read", "copy", "triad")),
                          ("fma", "float32")]
    assert lines[0] == "measuring the float64 FMA peak on 2 threads (1/3)"
    assert lines[1] == "measuring the float32 FMA peak on 2 threads (2/3)"
    assert lines[2].startswith("measuring bandwidth: read, copy, triad over ") and lines[2].endswith("(3/3)")
    assert c.peak("vector", "float64") == 100e9 and c.peak("vector", "float32") == 200e9
    # triad (the third kernel, 30 GB/s) is each level's figure; read and copy keep their own keys
    assert c.bandwidth("L1") == 30e9 and c.bandwidth("L1_read") == 10e9 and c.bandwidth("DRAM_copy") == 20e9
    assert c.bandwidths["L1"].method.startswith("triad a = b + s*c, 3*N*8 bytes per pass; ")
    assert c.bandwidths["L1_read"].method.startswith("read, N*8 bytes per pass; ")
    assert c.bandwidths["L1_copy"].method.startswith("copy, 2*N*8 bytes per pass; ")
    assert list(c.info["cpu_share"]) == ["fma_float64", "fma_float32", "bandwidth_sweep", "recheck_float32"]
    assert [r[0] for r in c.rows()][:5] == ["vector float64", "vector float32", "bandwidth L1", "bandwidth L1_read",
                                            "bandwidth L1_copy"]
    assert not c.info["busy"] and c.info["contention"] == []


def test_a_new_benchmark_is_one_registry_entry(monkeypatch):
    """A ceiling added to the registry is measured, counted in the progress lines, listed, and shown in its row;
    one whose supported() is false is neither run nor counted."""
    stub = _StubCore()
    monkeypatch.setattr(ceilings_mod, "_core", stub)

    def run_int8(run, bench):
        run.say(f"measuring the {bench.label}")
        run.peaks[("vector", "int8")] = ceilings_mod.Ceiling(measured=7e12, method="stub int8 dot products")
        run.shares["dot_int8"] = 0.5  # the threads got half their CPUs: the result is marked busy

    extra = ceilings_mod.CpuBenchmark("vector/int8", "int8 dot-product peak", lambda info: True, run_int8,
                                      ("vector/int8",))
    never = ceilings_mod.CpuBenchmark("vector/float16", "fp16 FMA", lambda info: False, run_int8,
                                      ("vector/float16",))
    monkeypatch.setattr(ceilings_mod, "_CPU_REGISTRY", (*ceilings_mod._CPU_REGISTRY, extra, never))
    lines = []
    with pytest.warns(RuntimeWarning, match="50% of their CPUs"):
        c = ceilings_mod._measure_cpu(quick=True, progress=lines.append, info=dict(_STUB_INFO))
    assert lines[0].endswith("(1/4)") and lines[-1] == "measuring the int8 dot-product peak (4/4)"
    assert c.peak("vector", "int8") == 7e12 and ("vector", "float16") not in c.peaks
    assert c.info["busy"] and c.info["cpu_share"]["dot_int8"] == 0.5
    labels = [r[0] for r in c.rows()]
    assert labels.index("vector int8") == labels.index("vector float32") + 1  # DTYPES order, before bandwidths
    listed = ceilings_mod.cpu_benchmarks(_STUB_INFO)
    assert [(b["key"], b["supported"]) for b in listed][-2:] == [("vector/int8", True), ("vector/float16", False)]


def test_registry_result_survives_the_cache_format(cache, monkeypatch):
    """What the registry measures round-trips through the cache file unchanged (schema roofline.ceilings/1)."""
    monkeypatch.setattr(ceilings_mod, "_core", _StubCore())
    c = ceilings_mod._measure_cpu(quick=True, progress=None, info=dict(_STUB_INFO))
    text = c.to_json()
    assert json.loads(text)["schema"] == "roofline.ceilings/1"
    assert Ceilings.from_json(text) == c


# ---------------------------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------------------------


def test_ceilings_argument_errors():
    with pytest.raises(ValueError, match="device"):
        ceilings("tpu")
    with pytest.raises(ValueError, match="device"):
        ceilings("cuda:x")
    with pytest.raises(TypeError, match="device"):
        ceilings(3)
    with pytest.raises(TypeError, match="quick"):
        ceilings("cpu", quick="yes")
    with pytest.raises(TypeError, match="refresh"):
        ceilings("cpu", refresh=1)


def test_core_argument_errors():
    with pytest.raises(ValueError, match="dtype"):
        _core.cpu_fma_peak("int8")
    with pytest.raises(ValueError, match="seconds"):
        _core.cpu_fma_peak("float32", -1.0)
    with pytest.raises(ValueError, match="threads"):
        _core.cpu_fma_peak("float32", 0.01, -2)
    with pytest.raises(ValueError, match="simd"):
        _core.cpu_fma_peak("float32", 0.01, simd="avx9000")
    with pytest.raises(ValueError, match="repeats"):
        _core.cpu_fma_peak("float32", 0.01, repeats=0)
    with pytest.raises(TypeError):
        _core.cpu_fma_peak(64)
    with pytest.raises(ValueError, match="sizes"):
        _core.cpu_bandwidth_sweep(np.array([100], dtype=np.int64), "read")
    with pytest.raises(ValueError, match="sizes"):
        _core.cpu_bandwidth_sweep(np.array([], dtype=np.int64), "read")
    with pytest.raises(ValueError, match="sizes"):
        _core.cpu_bandwidth_sweep([1 << 62], "read")
    with pytest.raises(TypeError, match="sizes"):
        _core.cpu_bandwidth_sweep("big", "read")
    with pytest.raises(ValueError, match="kernel"):
        _core.cpu_bandwidth_sweep([1 << 16], "write")
    with pytest.raises(TypeError, match="kernel"):
        _core.cpu_bandwidth_sweep([1 << 16], 3)
    with pytest.raises(ValueError, match="stat"):
        _core.cpu_bandwidth_sweep([1 << 16], "read", stat="mean")


def test_core_small_calls():
    info = _core.cpu_info()
    assert info["cpus"] == len(os.sched_getaffinity(0))
    if os.path.exists("/sys/devices/system/cpu/cpu0/cache/index0/size"):
        assert info["cache_source"] == "sysfs" and info["caches"]["L1"]["bytes"] > 0
    r = _core.cpu_fma_peak("float64", 0.02, 1, repeats=3, simd="scalar")
    assert r["threads"] == 1 and r["simd"] == "scalar" and r["lanes"] == 1 and r["flops"] > 0
    # one thread, one working set: a 1-D array; two kernels: one row each
    one = _core.cpu_bandwidth_sweep([64 << 10], "copy", 1, 1)
    two = _core.cpu_bandwidth_sweep([64 << 10, 128 << 10], ["read", "triad"], 1, 1, stat="max")
    assert one.shape == (1,) and two.shape == (2, 2) and np.all(two > 0)


# ---------------------------------------------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------------------------------------------


def test_cli_table_and_json(cache, fake_measure, capsys):
    assert cli.main(["ceilings"]) == 0
    out, err = capsys.readouterr()
    assert "GFLOP/s" in out and "measured" in out and "datasheet" in out
    assert "measuring" in err or "done" in err or "cached" in err
    # the bfloat16 product peak is a row where the CPU has native bfloat16 products; otherwise a note says why not
    if _cpuinfo_flags() & {"avx512_bf16", "amx_bf16"}:
        assert "matrix bfloat16" in out
    else:
        assert "note: bfloat16: " in out and "fall back to the float32 peak" in out
    assert cli.main(["ceilings", "--json"]) == 0
    out, err = capsys.readouterr()
    assert Ceilings.from_json(out).peak("vector", "float64") > 0
    assert "cached" in err
    assert cli.main(["ceilings", "--refresh", "--thorough"]) == 0
    assert fake_measure == [True, False]


def test_cli_errors(capsys):
    assert cli.main(["ceilings", "--device", "tpu"]) == 1
    assert "device" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2


def test_python_dash_m_help():
    p = subprocess.run([sys.executable, "-m", "roofline", "ceilings", "--help"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "--thorough" in p.stdout and "--json" in p.stdout


# ---------------------------------------------------------------------------------------------------------------
# Low-precision product peaks (AVX512-BF16, AVX512-FP16, AVX512-VNNI, AMX)
# ---------------------------------------------------------------------------------------------------------------

# Made-up machines for the detection logic (cpuid bit positions from the Intel SDM, vol. 2A, CPUID leaf 7).
_FULL = {"x86": 1, "leaf1_ecx": 1 << 27, "leaf7_ebx": 1 << 16, "leaf7_ecx": 1 << 11,
         "leaf7_edx": (1 << 22) | (1 << 23) | (1 << 24) | (1 << 25), "leaf7_1_eax": 1 << 5,
         "xcr0": 0xE7 | (3 << 17), "amx_perm": 0}
_ZEN4 = {**_FULL, "leaf7_edx": 0, "xcr0": 0xE7, "amx_perm": -1}  # AVX512-BF16 and VNNI, no AMX, no FP16


def _decide(features):
    return {k["name"]: (k["available"], k["reason"]) for k in _core.cpu_lowp_kernels(features)}


@pytest.mark.skipif(not _core.cpu_info()["simd"].startswith(("avx", "sse")), reason="x86 kernels")
def test_lowp_detection_on_made_up_machines():
    zen4 = _decide(_ZEN4)
    assert zen4["avx512_bf16"] == (True, "") and zen4["avx512_vnni"] == (True, "")
    assert not zen4["amx_bf16"][0] and "no AMX" in zen4["amx_bf16"][1]
    assert not zen4["avx512_fp16"][0]
    # Sapphire Rapids on a kernel that refuses the tile data state (older than 5.16: EINVAL = 22)
    refused = _decide({**_FULL, "amx_perm": 22})
    assert not refused["amx_bf16"][0] and "ARCH_REQ_XCOMP_PERM" in refused["amx_bf16"][1]
    assert refused["avx512_bf16"][0]
    # AMX advertised by cpuid but the OS has not enabled the tile state
    no_xcr0 = _decide({**_FULL, "xcr0": 0xE7})
    assert not no_xcr0["amx_int8"][0] and "XCR0" in no_xcr0["amx_int8"][1]
    # Zen 3: AVX2 only
    avx2 = _decide({**_FULL, "leaf7_ebx": 0, "leaf7_ecx": 0, "leaf7_edx": 0, "leaf7_1_eax": 0})
    assert not any(ok for ok, _ in avx2.values()) and all(why for _, why in avx2.values())
    # not x86
    arm = _decide({**_FULL, "x86": 0})
    assert all(not ok and "x86-64" in why for ok, why in arm.values())


def test_lowp_argument_errors():
    with pytest.raises(ValueError, match="kernel must be one of"):
        _core.cpu_lowp_peak("amx")
    with pytest.raises(ValueError, match="seconds"):
        _core.cpu_lowp_peak("avx512_bf16", 0.0)
    with pytest.raises(ValueError, match="repeats"):
        _core.cpu_lowp_peak("avx512_bf16", 0.01, repeats=0)
    with pytest.raises(ValueError, match="threads"):
        _core.cpu_lowp_peak("avx512_bf16", 0.01, -1)
    with pytest.raises(ValueError, match="stat"):
        _core.cpu_lowp_peak("avx512_bf16", 0.01, stat="mean")
    with pytest.raises(TypeError, match="features"):
        _core.cpu_lowp_kernels([1, 2])
    with pytest.raises(ValueError, match="lacks the key 'xcr0'"):
        _core.cpu_lowp_kernels({k: v for k, v in _FULL.items() if k != "xcr0"})
    with pytest.raises(TypeError, match=r"features\['x86'\] must be an int"):
        _core.cpu_lowp_kernels({**_FULL, "x86": True})
    with pytest.raises(ValueError, match="32 bits"):
        _core.cpu_lowp_kernels({**_FULL, "leaf7_edx": 1 << 32})
    with pytest.raises(ValueError, match="unsigned"):
        _core.cpu_lowp_kernels({**_FULL, "xcr0": -1})
    with pytest.raises(ValueError, match="amx_perm"):
        _core.cpu_lowp_kernels({**_FULL, "amx_perm": -2})
    # a kernel the machine cannot run is refused with the reason, before anything runs
    kernels, _ = _core.cpu_lowp_kernels()
    for k in kernels:
        if not k["available"]:
            with pytest.raises(ValueError, match="cannot run here: " + k["reason"].split(":")[0]):
                _core.cpu_lowp_peak(k["name"], 0.01)


def test_lowp_kernels_agree_with_the_cpu_flags():
    """The C detection (cpuid, XCR0) agrees with the flags the OS kernel reports in /proc/cpuinfo."""
    flags = _cpuinfo_flags()
    if not flags:
        pytest.skip("no /proc/cpuinfo flags")
    kernels, features = _core.cpu_lowp_kernels()
    got = {k["name"]: k["available"] for k in kernels}
    if not features["x86"]:
        assert not any(got.values())
        return
    for name, flag in (("avx512_bf16", "avx512_bf16"), ("avx512_fp16", "avx512_fp16"),
                       ("avx512_vnni", "avx512_vnni"), ("amx_bf16", "amx_bf16"), ("amx_int8", "amx_int8")):
        if got[name]:
            assert flag in flags, name
        elif flag in flags and not name.startswith("amx"):
            pytest.fail(f"{name}: the CPU reports {flag} but the kernel is not available: "
                        f"{[k['reason'] for k in kernels if k['name'] == name]}")


def test_lowp_peak_counts_whole_iterations():
    kernels, _ = _core.cpu_lowp_kernels()
    usable = [k for k in kernels if k["available"]]
    if not usable:
        pytest.skip("no low-precision kernel runs on this CPU")
    for k in usable:
        r = _core.cpu_lowp_peak(k["name"], 0.02, 1, repeats=2)
        assert r["flops"] > 0 and r["threads"] == 1 and r["dtype"] == k["dtype"]
        # operations per iteration, from the instruction's definition: lanes x products x 2
        per_instruction = {"avx512_bf16": 16 * 2 * 2, "avx512_fp16": 32 * 2, "avx512_vnni": 16 * 4 * 2,
                           "amx_bf16": 16 * 16 * 32 * 2, "amx_int8": 16 * 16 * 64 * 2,
                           "avx_vnni": 8 * 4 * 2}[k["name"]]
        assert r["flop_per_iteration"] == per_instruction * r["accumulators"]
        assert r["flop_per_repeat"] % r["flop_per_iteration"] == 0


class _LowpStub(_StubCore):
    def cpu_lowp_peak(self, kernel, seconds, threads, repeats):
        self.calls.append(("lowp", kernel))
        return {"flops": {"amx_bf16": 9e12, "avx512_bf16": 600e9, "avx512_vnni": 1.2e12}[kernel], "threads": threads,
                "pinned": True, "repeats": repeats, "accumulators": 4 if kernel.startswith("amx") else 12,
                "cpu_share": self.share}


def _lowp_info(**available):
    names = {"amx_bf16": "bfloat16", "avx512_bf16": "bfloat16", "avx512_fp16": "float16", "avx512_vnni": "int8",
             "amx_int8": "int8"}
    return {**_STUB_INFO, "lowp_kernels": {
        n: {"dtype": d, "instruction": "?", "available": bool(available.get(n)),
            "reason": "" if available.get(n) else f"{n}: not on this made-up CPU"} for n, d in names.items()}}


def test_registry_prefers_amx_and_states_what_it_skipped(monkeypatch):
    stub = _LowpStub()
    monkeypatch.setattr(ceilings_mod, "_core", stub)
    info = _lowp_info(amx_bf16=True, avx512_bf16=True, avx512_vnni=True)
    c = ceilings_mod._measure_cpu(quick=True, progress=None, info=info)
    assert ("lowp", "amx_bf16") in stub.calls and ("lowp", "avx512_bf16") not in stub.calls
    assert ("lowp", "avx512_vnni") in stub.calls
    assert ("matrix int8", 1200.0, 2 * 2.0 * 128 * 2, 1200e9 / (2 * 2.0e9 * 128 * 2), "GOP/s") in c.rows()
    assert c.peak("matrix", "bfloat16") == 9e12 and c.peak("matrix", "int8") == 1.2e12
    assert c.info["lowp_used"] == {"bfloat16": "amx_bf16", "int8": "avx512_vnni"}
    # theoretical AMX peak: 2 cores x 2 GHz x 1,024 bf16 FLOP per cycle
    assert c.peaks[("matrix", "bfloat16")].datasheet == 2 * 2.0e9 * 1024
    # theoretical VNNI peak: 2 cores x 2 GHz x 128 operations per instruction x 2 units (the avx2 assumption)
    assert c.peaks[("matrix", "int8")].datasheet == 2 * 2.0e9 * 128 * 2
    assert "not used: amx_int8: not on this made-up CPU" in c.peaks[("matrix", "int8")].method
    # float16 has no kernel here: the note says why and what replaces it
    assert any(n.startswith("float16: no native product kernel ran (avx512_fp16: not on this made-up CPU)")
               for n in c.notes)
    assert ("matrix", "float16") not in c.peaks and c.peak("matrix", "float16") == 200e9


def test_registry_falls_back_to_avx512_bf16_without_amx(monkeypatch):
    stub = _LowpStub()
    monkeypatch.setattr(ceilings_mod, "_core", stub)
    c = ceilings_mod._measure_cpu(quick=True, progress=None, info=_lowp_info(avx512_bf16=True))
    assert [x for x in stub.calls if x[0] == "lowp"] == [("lowp", "avx512_bf16")]
    assert c.peak("matrix", "bfloat16") == 600e9
    assert "not used: amx_bf16: not on this made-up CPU" in c.peaks[("matrix", "bfloat16")].method
    assert any(n.startswith("int8: no native int8 product kernel ran") for n in c.notes)


def test_bf16_matmul_is_judged_against_the_bf16_peak(monkeypatch):
    """A bfloat16 matrix record gets the matrix/bfloat16 peak; bfloat16 element-wise work the float32 one."""
    stub = _LowpStub()
    monkeypatch.setattr(ceilings_mod, "_core", stub)
    c = ceilings_mod._measure_cpu(quick=True, progress=None, info=_lowp_info(avx512_bf16=True))
    from roofline._analysis import _classification
    from roofline._datamodel._records import DTYPE_NAMES, RECORD_DTYPE

    code = {v: k for k, v in DTYPE_NAMES.items()}
    rec = np.zeros(3, dtype=RECORD_DTYPE)
    rec["dtype"] = [code["bfloat16"], code["bfloat16"], code["float32"]]
    rec["matrix_flops"] = [1000, 0, 1000]
    rec["vector_flops"] = [0, 10, 0]
    peak, _, notes = _classification.peaks(rec, c, "measured")
    assert peak.tolist() == [600e9, 200e9, 200e9]
    assert any("measured as matrix/bfloat16" in n for n in notes)


def test_lowp_features_out_of_range_are_value_errors():
    with pytest.raises(ValueError, match=r"features\['amx_perm'\] must be -1, 0 or an errno \(1..4095\), not 10{30}"):
        _core.cpu_lowp_kernels({**_FULL, "amx_perm": 10**30})
    with pytest.raises(ValueError, match="amx_perm.*4096"):
        _core.cpu_lowp_kernels({**_FULL, "amx_perm": 4096})
