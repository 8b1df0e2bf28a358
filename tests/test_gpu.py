"""Tests of the GPU ceilings: kernel compilation (NVRTC and nvcc), the cubin cache, error reporting, the benchmark
registry and measure()'s contract. They run on a machine without a GPU; the tests at the end need a CUDA device
and skip cleanly without one."""

import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import roofline
from roofline import _core
from roofline._hardware import _gpu, _gpu_bench, _gpu_compile, _gpu_libs

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(_gpu.kernel_sources())


def _nvrtc_or_skip():
    try:
        return _gpu.nvrtc_info()
    except _gpu.CudaUnavailableError as exc:
        pytest.skip(f"no NVRTC found, kernels cannot be compiled here: {exc}")


def _gpu_present():
    try:
        return _gpu.device_count() > 0
    except _gpu.GpuError:
        return False


HAS_GPU = _gpu_present()
requires_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA device (libcuda and a GPU)")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFLINE_CACHE_DIR", str(tmp_path))
    return tmp_path / "cubin"


# ---- the sources and the registry ----------------------------------------------------------------------------


def test_every_registered_kernel_has_a_source():
    assert set(SOURCES) == {"bandwidth", "fma", "mma", "wgmma"}
    for entry in _gpu.kernels():
        assert entry["source"] in SOURCES, entry
        text = (ROOT / "cuda" / f"{entry['source']}.cu").read_text()
        assert entry["kernel"] in text, entry


def test_registry_covers_every_result_key():
    keys = {e["key"] for e in _gpu.kernels()}
    assert {f"bandwidth/{k}" for k in _gpu.BANDWIDTH_KEYS if k != "DRAM"} <= keys
    assert set(_gpu.PEAK_KEYS) <= keys


@pytest.mark.parametrize(
    "cc, supported, unsupported",
    [
        # A100: everything but fp8 and wgmma.
        ((8, 0), {"rl_mma_bf16", "rl_mma_tf32", "rl_mma_s8", "rl_fma_bf16x2"}, {"rl_mma_e4m3", "rl_wgmma_bf16"}),
        # L4 / RTX 4090: native fp8 mma.sync (QMMA), no wgmma.
        ((8, 9), {"rl_mma_e4m3"}, {"rl_wgmma_e4m3"}),
        # H100 / H200: wgmma; fp8 mma.sync is only emulated there, so it is not used.
        ((9, 0), {"rl_wgmma_bf16", "rl_wgmma_e4m3", "rl_mma_bf16"}, {"rl_mma_e4m3"}),
        # B200: no wgmma, fp8 mma.sync emulated.
        ((10, 0), {"rl_mma_bf16"}, {"rl_wgmma_bf16", "rl_mma_e4m3"}),
        # RTX PRO 6000 Blackwell: native fp8 mma.sync.
        ((12, 0), {"rl_mma_e4m3"}, {"rl_wgmma_bf16"}),
        # Turing: only bandwidth and fp32/fp64 FMA.
        ((7, 5), {"rl_bw_copy", "rl_fma_f32", "rl_fma_f64"}, {"rl_mma_f16", "rl_fma_f16x2"}),
    ],
)
def test_supported_filters(cc, supported, unsupported):
    table = {e["kernel"]: e["supported"] for e in _gpu.kernels(cc)}
    assert all(table[k] for k in supported), table
    assert not any(table[k] for k in unsupported), table


def test_arch_normalization():
    assert _gpu_compile._normalize_arch("sm_90") == "sm_90"
    assert _gpu_compile._normalize_arch("sm_90a") == "sm_90a"
    assert _gpu_compile._normalize_arch(90) == "sm_90"
    assert _gpu_compile._normalize_arch((12, 0)) == "sm_120"
    assert _gpu_compile._normalize_arch("compute_80") == "sm_80"
    with pytest.raises(ValueError):
        _gpu_compile._normalize_arch("hopper")


# ---- NVRTC ---------------------------------------------------------------------------------------------------


# Every architecture the kernels target: Turing (vector only), Ampere, Ada (native fp8 mma.sync), Hopper with and
# without wgmma, Blackwell datacenter and consumer parts.
ARCHS = ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"]
# the suite compiles for one architecture of each generation the kernels branch on (Ampere, Hopper with wgmma,
# Blackwell); bench/breadth.sh compiles for every one of ARCHS
SUITE_ARCHS = ("sm_80", "sm_90a", "sm_120")


def _nvrtc_archs():
    """sm_80 and sm_90 must be supported; the others are skipped where NVRTC does not know them."""
    return ARCHS


@pytest.fixture(scope="module")
def cubins():
    """(source, arch) -> the cubin test_nvrtc_compiles_every_kernel compiled (each in an empty cubin cache), for the
    tests that read the machine code: each kernel is compiled once in this module."""
    return {}


def _cubin(cubins, source, arch):
    """The cubin of ``source`` for ``arch``: test_nvrtc_compiles_every_kernel's, or compiled now."""
    if (source, arch) not in cubins:
        cubins[source, arch] = _gpu.compile(source, arch)
    return cubins[source, arch]


@pytest.mark.parametrize("arch", _nvrtc_archs())
@pytest.mark.parametrize("source", SOURCES)
def test_nvrtc_compiles_every_kernel(source, arch, cache, cubins):
    info = _nvrtc_or_skip()
    number = int(arch[3:].rstrip("a"))
    if info["archs"] and number not in info["archs"]:
        if arch in ("sm_80", "sm_90"):
            pytest.fail(f"NVRTC {info['version']} does not support {arch}")
        pytest.skip(f"NVRTC {info['version']} does not know {arch} (supports {info['archs']})")
    cubin = _gpu.compile(source, arch)
    assert cubin[:4] == b"\x7fELF"
    # Every kernel the registry launches from this source is in the cubin under its extern "C" name.
    for entry in _gpu.kernels():
        if entry["source"] == source:
            assert entry["kernel"].encode() in cubin, (entry["kernel"], arch)
    cubins[source, arch] = cubin


def test_cache_key_changes_with_every_input():
    base = ("src", ["-arch=sm_90", "-std=c++17"], (13, 0), "sm_90")
    key = _gpu_compile._cache_key(*base)
    assert key == _gpu_compile._cache_key(*base)
    assert key != _gpu_compile._cache_key("src ", *base[1:])
    assert key != _gpu_compile._cache_key(base[0], ["-arch=sm_90", "-std=c++17", "-DX=1"], *base[2:])
    assert key != _gpu_compile._cache_key(base[0], base[1], (13, 1), base[3])
    assert key != _gpu_compile._cache_key(base[0], base[1], base[2], "sm_90a")
    # headers: their text and their names count, their order does not
    with_h = _gpu_compile._cache_key(*base, {"a.cuh": "x", "b.cuh": "y"})
    assert with_h != key
    assert with_h == _gpu_compile._cache_key(*base, {"b.cuh": "y", "a.cuh": "x"})
    assert with_h != _gpu_compile._cache_key(*base, {"a.cuh": "x ", "b.cuh": "y"})
    assert with_h != _gpu_compile._cache_key(*base, {"c.cuh": "x", "b.cuh": "y"})


def test_shared_helpers_live_in_one_header():
    """Every kernel source includes cuda/rl_device.cuh and none defines what it holds again."""
    headers = _gpu.kernel_headers()
    assert set(headers) == {"rl_device.cuh"}
    for name in ("rl_clock64", "rl_globaltimer", "rl_hash", "rl_bits_f16", "RL_CLOCK_BEGIN", "RL_ONE_F16"):
        assert name in headers["rl_device.cuh"]
    for source in SOURCES:
        text = (ROOT / "cuda" / f"{source}.cu").read_text()
        assert '#include "rl_device.cuh"' in text, source
        for definition in ("rl_clock64(void) {", "rl_hash(unsigned x) {", "#define RL_CLOCK_BEGIN",
                           "#define RL_ONE_F16", "__device__ unsigned long long rl_clock[2]"):
            assert definition not in text, (source, definition)


def test_cached_cubin_is_reused(cache, monkeypatch):
    _nvrtc_or_skip()
    first = _gpu.compile("bandwidth", "sm_80")
    files = list(cache.glob("bandwidth-sm_80-*.cubin"))
    assert len(files) == 1 and files[0].read_bytes() == first

    def no_compiler(*args, **kwargs):
        raise AssertionError("NVRTC was called although the cubin is cached")

    monkeypatch.setattr(_core, "gpu_compile", no_compiler)
    assert _gpu.compile("bandwidth", "sm_80") == first
    # Another architecture or other options miss the cache.
    with pytest.raises(AssertionError):
        _gpu.compile("bandwidth", "sm_90")
    with pytest.raises(AssertionError):
        _gpu.compile_source((ROOT / "cuda" / "bandwidth.cu").read_text(), "bandwidth.cu", "sm_80", ["-DRL_BW_UNROLL=2"])
    # So does an edited header.
    edited = {k: v + "\n// edited\n" for k, v in _gpu.kernel_headers().items()}
    monkeypatch.setattr(_gpu_compile, "kernel_headers", lambda: edited)
    with pytest.raises(AssertionError):
        _gpu.compile("bandwidth", "sm_80")


def test_headers_reach_nvrtc_by_name(cache):
    _nvrtc_or_skip()
    source = '#include "two.cuh"\nextern "C" __global__ void rl_two(int *p) { p[0] = RL_TWO; }\n'
    cubin, _log = _core.gpu_compile(source, "two.cu", ["-arch=sm_80"], {"two.cuh": "#define RL_TWO 2\n"})
    assert cubin[:4] == b"\x7fELF" and b"rl_two" in cubin
    # without the header NVRTC cannot open it: it reads no files
    with pytest.raises(_gpu.NvrtcError) as info:
        _core.gpu_compile(source, "two.cu", ["-arch=sm_80"])
    assert "two.cuh" in info.value.log
    with pytest.raises(ValueError, match="headers must be a dict"):
        _core.gpu_compile(source, "two.cu", ["-arch=sm_80"], [("two.cuh", "")])
    with pytest.raises(ValueError, match="header texts.*NUL"):
        _core.gpu_compile(source, "two.cu", ["-arch=sm_80"], {"two.cuh": "#define RL_TWO 2\0"})
    with pytest.raises(ValueError, match="header names.*str"):
        _core.gpu_compile(source, "two.cu", ["-arch=sm_80"], {b"two.cuh": ""})
    with pytest.raises(ValueError, match="options.*NUL"):
        _core.gpu_compile(source, "two.cu", ["-arch=sm_80\0-G"])


def test_corrupt_cache_entry_is_recompiled(cache):
    _nvrtc_or_skip()
    good = _gpu.compile("fma", "sm_80")
    (path,) = cache.glob("fma-sm_80-*.cubin")
    path.write_bytes(b"truncated")
    assert _gpu.compile("fma", "sm_80") == good
    assert path.read_bytes() == good


def test_broken_kernel_raises_with_the_compile_log(cache):
    _nvrtc_or_skip()
    broken = 'extern "C" __global__ void rl_broken(int *p) { p[0] = undeclared_name; }\n'
    with pytest.raises(_gpu.NvrtcError) as info:
        _gpu.compile_source(broken, "broken.cu", "sm_80")
    exc = info.value
    assert isinstance(exc, RuntimeError)
    assert exc.call == "nvrtcCompileProgram"
    assert "undeclared_name" in exc.log and "broken.cu" in exc.log
    assert "undeclared_name" in str(exc)  # the log is part of the message too
    assert not list(cache.glob("broken-*"))


def test_virtual_architecture_is_rejected(cache):
    _nvrtc_or_skip()
    with pytest.raises(_gpu.NvrtcError, match="real architecture"):
        _core.gpu_compile('extern "C" __global__ void k() {}', "k.cu", ["-arch=compute_80"])


def test_cubin_check_accepts_real_cubins_and_rejects_damaged_ones(cache):
    _nvrtc_or_skip()
    good = _gpu.compile("fma", "sm_80")
    assert _core.gpu_check_cubin(good) is None and _gpu_compile._is_cubin(good)
    # Every truncation is refused (the section header table sits at the end of a cubin, the sections before it).
    for length in (0, 10, 63, 64, len(good) // 2, len(good) - 64, len(good) - 1):
        with pytest.raises(ValueError, match="shorter than an ELF header|truncated"):
            _core.gpu_check_cubin(good[:length])
    damaged = bytearray(good)
    damaged[18:20] = (62).to_bytes(2, "little")  # e_machine: x86-64 instead of CUDA (190)
    with pytest.raises(ValueError, match="machine 62, not CUDA"):
        _core.gpu_check_cubin(bytes(damaged))
    damaged = bytearray(good)
    damaged[4] = 1  # 32-bit class
    with pytest.raises(ValueError, match="64-bit"):
        _core.gpu_check_cubin(bytes(damaged))
    with pytest.raises(ValueError, match="ELF magic"):
        _core.gpu_check_cubin(b"\0" * 4096)
    # A section whose offset points past the end (a corrupt header, same length) is refused too.
    shoff = int.from_bytes(good[40:48], "little")
    damaged = bytearray(good)
    first_section = shoff + 64  # section 0 is the null section
    damaged[first_section + 24:first_section + 32] = (len(good) - 8).to_bytes(8, "little")
    with pytest.raises(ValueError, match="section 1 .* ends past"):
        _core.gpu_check_cubin(bytes(damaged))
    with pytest.raises(TypeError):
        _core.gpu_check_cubin("not bytes")


def test_truncated_cubin_never_reaches_the_driver(cache):
    """gpu_bench checks the image before anything else, so a truncated cubin is a ValueError even without a driver
    (the driver would read past the end of the buffer)."""
    _nvrtc_or_skip()
    good = _gpu.compile("fma", "sm_80")
    with pytest.raises(ValueError, match="refusing to load rl_fma_f32's cubin: the cubin is truncated"):
        _core.gpu_bench(0, good[: len(good) // 2], "rl_fma_f32", 0, 256, 0, [(256, 0)],
                        [("buffer", 0), ("i32", 1), ("f32", 1.0), ("f32", 0.0), ("f32", 0.0)], 0, 1)


def test_truncated_cache_entry_is_recompiled(cache):
    _nvrtc_or_skip()
    good = _gpu.compile("bandwidth", "sm_80")
    (path,) = cache.glob("bandwidth-sm_80-*.cubin")
    path.write_bytes(good[: len(good) - 100])  # still starts with the ELF magic and is long
    assert _gpu.compile("bandwidth", "sm_80") == good
    assert path.read_bytes() == good


def test_cache_directory_must_be_private(cache):
    """A cubin cache directory that others can write to is not used: a planted cubin would run on the GPU."""
    _nvrtc_or_skip()
    good = _gpu.compile("bandwidth", "sm_80")
    (path,) = cache.glob("bandwidth-sm_80-*.cubin")
    assert (cache.stat().st_mode & 0o777) == 0o700  # created private
    planted = _gpu.compile("fma", "sm_80")
    path.write_bytes(planted)
    os.chmod(cache, 0o777)
    _gpu_compile._warned_cache.clear()
    with pytest.warns(RuntimeWarning, match="not using the cubin cache: .* writable by its group or by others"):
        assert _gpu.compile("bandwidth", "sm_80") == good  # compiled afresh, the planted file ignored
    assert path.read_bytes() == planted  # and nothing written there
    os.chmod(cache, 0o700)
    assert _gpu.compile("bandwidth", "sm_80") == planted  # a private directory is trusted again


# A stand-in for libcuda, built by the tests below: enough of the driver API for rl_gpu_bench, with device
# pointers that are host pointers, a clock that advances 1 ms per launch, and a record of the call sequence.
# FAKE_PARAM_SIZES (env) lists the kernel's parameter sizes for cuFuncGetParamInfo; -DFAKE_NO_PARAM_INFO builds a
# driver without that entry point (before CUDA 12.4) and -DFAKE_NO_LAUNCH one that lacks cuLaunchKernel.
FAKE_LIBCUDA = r"""
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
typedef int CUresult;
static char calls[1 << 16];
static size_t ncalls;
static double now_ms;
static unsigned long long clock_counters[2];
static void note(char c) { if (ncalls + 1 < sizeof calls) { calls[ncalls++] = c; calls[ncalls] = 0; } }
const char *fake_calls(void) { return calls; }
CUresult cuInit(unsigned f) { (void)f; return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
CUresult cuGetErrorString(CUresult r, const char **s) { (void)r; *s = "fake error"; return 0; }
CUresult cuGetErrorName(CUresult r, const char **s) { (void)r; *s = "CUDA_ERROR_FAKE"; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return 0; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return 0; }
CUresult cuDeviceGetName(char *name, int len, int d) { (void)d; strncpy(name, "Fake GPU", (size_t)len); return 0; }
CUresult cuDeviceGetAttribute(int *v, int attr, int d) {
    (void)d;
    switch (attr) {
    case 16: *v = 4; return 0;      /* multiprocessors */
    case 75: *v = 9; return 0;      /* compute capability */
    case 76: *v = 0; return 0;
    default: *v = 1; return 0;
    }
}
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = (size_t)1 << 30; return 0; }
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)&now_ms; return 0; }
CUresult cuCtxPushCurrent_v2(void *c) { (void)c; return 0; }
CUresult cuCtxPopCurrent_v2(void **c) { *c = (void *)&now_ms; return 0; }
CUresult cuCtxSynchronize(void) { return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = (size_t)1 << 30; return 0; }
CUresult cuModuleLoadData(void **m, const void *image) { (void)image; *m = (void *)&ncalls; note('M'); return 0; }
CUresult cuModuleUnload(void *m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void **f, void *m, const char *name) { (void)m; (void)name; *f = (void *)&ncalls; return 0; }
CUresult cuModuleGetGlobal_v2(unsigned long long *p, size_t *bytes, void *m, const char *name) {
    (void)m;
    if (strcmp(name, "rl_clock") != 0) return 500;
    *p = (unsigned long long)(uintptr_t)clock_counters; *bytes = sizeof clock_counters; return 0;
}
#ifndef FAKE_NO_PARAM_INFO
CUresult cuFuncGetParamInfo(void *f, size_t index, size_t *offset, size_t *size) {
    const char *spec = getenv("FAKE_PARAM_SIZES");
    size_t i = 0, off = 0;
    (void)f;
    while (spec != NULL && *spec) {
        size_t s = (size_t)strtoul(spec, (char **)&spec, 10);
        off = (off + s - 1) / s * s;
        if (i == index) { *offset = off; *size = s; return 0; }
        off += s; i++;
        if (*spec == ',') spec++;
    }
    return 1; /* CUDA_ERROR_INVALID_VALUE: no such parameter */
}
#endif
CUresult cuFuncGetAttribute(int *v, int a, void *f) { (void)a; (void)f; *v = 0; return 0; }
CUresult cuFuncSetAttribute(void *f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, void *f, int b, size_t s) {
    (void)f; (void)b; (void)s; *n = 2; return 0;
}
#ifndef FAKE_NO_LAUNCH
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned sh, void *st, void **params, void **extra) {
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)st; (void)params;
    (void)extra;
    now_ms += 1.0;
    clock_counters[0] += 1755000; /* what the kernel's block 0 adds: 1 ms at 1.755 GHz */
    clock_counters[1] += 1000000;
    note('L');
    return 0;
}
#endif
CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) { *p = (unsigned long long)(uintptr_t)calloc(1, n); return 0; }
CUresult cuMemFree_v2(unsigned long long p) { free((void *)(uintptr_t)p); return 0; }
CUresult cuMemsetD32_v2(unsigned long long p, unsigned v, size_t n) {
    uint32_t *w = (uint32_t *)(uintptr_t)p; size_t i; for (i = 0; i < n; i++) w[i] = v; return 0;
}
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n) { memcpy(dst, (void *)(uintptr_t)src, n); return 0; }
CUresult cuEventCreate(double **e, unsigned f) { (void)f; *e = calloc(1, sizeof(double)); return 0; }
CUresult cuEventDestroy_v2(double *e) { free(e); return 0; }
CUresult cuEventRecord(double *e, void *s) { (void)s; *e = now_ms; note('E'); return 0; }
CUresult cuEventSynchronize(double *e) { (void)e; return 0; }
CUresult cuEventElapsedTime(float *ms, double *a, double *b) { *ms = (float)(*b - *a); return 0; }
"""


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory):
    """Paths of fake driver libraries: {'full', 'no_param_info', 'no_launch'}."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the fake driver library")
    directory = tmp_path_factory.mktemp("fake_libcuda")
    source = directory / "fake_libcuda.c"
    source.write_text(FAKE_LIBCUDA)
    built = {}
    for name, flags in (("full", []), ("no_param_info", ["-DFAKE_NO_PARAM_INFO"]), ("no_launch", ["-DFAKE_NO_LAUNCH"])):
        out = directory / f"libcuda_{name}.so"
        subprocess.run([cc, "-shared", "-fPIC", "-O1", *flags, "-o", str(out), str(source)], check=True,
                       capture_output=True, timeout=120)
        built[name] = str(out)
    return built


def _run_with_fake(parts, fake_libcuda, **env):
    """Run the code pieces (each dedented on its own) in a fresh interpreter with FAKE naming the fake drivers."""
    preamble = f"""
        import ctypes, json
        from roofline import _core
        from roofline._hardware import _gpu
        FAKE = {fake_libcuda!r}
    """
    parts = [parts] if isinstance(parts, str) else parts
    return _run_python("".join(textwrap.dedent(p) for p in [preamble, *parts]), **env)


def test_loader_skips_a_libcuda_that_lacks_a_symbol(fake_libcuda):
    proc = _run_with_fake("""
        path = _core.gpu_load_driver([FAKE["no_launch"], FAKE["full"]])
        print("LOADED", path == FAKE["full"])
    """, fake_libcuda)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED True" in proc.stdout
    proc = _run_with_fake("""
        try:
            _core.gpu_load_driver(["/nonexistent/libcuda.so.1", FAKE["no_launch"]])
        except _gpu.CudaUnavailableError as exc:
            print("RAISED", exc)
        print("STILL UNLOADED", _core.gpu_loaded()["driver"] is None)
    """, fake_libcuda)
    assert proc.returncode == 0, proc.stderr
    assert "lacks the symbol cuLaunchKernel" in proc.stdout and "/nonexistent/libcuda.so.1 (" in proc.stdout
    assert "STILL UNLOADED True" in proc.stdout


def test_error_classes_come_from_the_module_state(fake_libcuda):
    """The extension raises the classes it created, kept in its module state: rebinding or deleting the module's
    attributes does not change what is raised, and a failed call keeps `call` and `code`."""
    proc = _run_with_fake("""
        classes = {n: getattr(_core, n) for n in ("GpuError", "CudaUnavailableError", "CudaError", "NvrtcError")}
        print("ALIASES", all(getattr(_gpu, n) is c for n, c in classes.items()))
        print("BASES", all(issubclass(c, classes["GpuError"]) for c in classes.values()),
              issubclass(classes["GpuError"], RuntimeError))
        del _core.CudaUnavailableError
        _core.GpuError = KeyError
        try:
            _core.gpu_load_driver(["/nonexistent/libcuda.so.1"])
        except BaseException as exc:
            print("RAISED", type(exc) is classes["CudaUnavailableError"], exc.call, exc.code)
    """, fake_libcuda)
    assert proc.returncode == 0, proc.stderr
    assert "ALIASES True" in proc.stdout and "BASES True True" in proc.stdout
    assert "RAISED True dlopen 0" in proc.stdout


BENCH_WITH_FAKE = """
    cubin = _gpu.compile("fma", "sm_90")
    _core.gpu_load_driver([FAKE[{which!r}]])
    args = [("buffer", 0), ("i32", 8), ("f32", 0.999), ("f32", 0.001), ("f32", float("nan"))]
    def run(args, **kw):
        try:
            r = _core.gpu_bench(0, cubin, "rl_fma_f32", 0, 256, 0, [(256, 0)], args, 2, 3, None, 0, **kw)
        except ValueError as exc:
            return "ValueError: " + str(exc)
        r.pop("readback")
        return r
    lib = ctypes.CDLL(FAKE[{which!r}])
    lib.fake_calls.restype = ctypes.c_char_p
"""


def test_kernel_arguments_are_checked_against_the_parameters(fake_libcuda, cache):
    _nvrtc_or_skip()
    proc = _run_with_fake([BENCH_WITH_FAKE.format(which="full"), """
        print(json.dumps({
            "ok": run(args),
            "short": run(args[:4]),
            "long": run(args + [("i32", 0)]),
            "wide": run(args[:2] + [("f64", 0.999)] + args[3:]),
        }))
    """], fake_libcuda, FAKE_PARAM_SIZES="8,4,4,4,4", ROOFLINE_CACHE_DIR=str(cache.parent))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["ok"]["params_checked"] is True
    assert out["short"] == "ValueError: rl_fma_f32 takes 5 parameters, but 4 arguments were given"
    assert out["long"] == "ValueError: rl_fma_f32 takes 5 parameters, but 6 arguments were given"
    assert out["wide"] == "ValueError: parameter 2 of rl_fma_f32 is 4 bytes, but argument 2 is a f64 (8 bytes)"


def test_without_param_info_the_check_is_skipped_and_said_so(fake_libcuda, cache):
    _nvrtc_or_skip()
    proc = _run_with_fake([BENCH_WITH_FAKE.format(which="no_param_info"), """
        print(json.dumps(run(args[:4])))
    """], fake_libcuda, ROOFLINE_CACHE_DIR=str(cache.parent))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["params_checked"] is False


def test_batched_launches_and_the_clock_counters(fake_libcuda, cache):
    """launches_per_rep launches run between one pair of events and the time is divided back per launch; the
    kernel's clock counters are zeroed after the warm-up and read after the timed launches."""
    _nvrtc_or_skip()
    proc = _run_with_fake([BENCH_WITH_FAKE.format(which="full"), """
        r = run(args, launches_per_rep=4)
        print(json.dumps({"result": r, "calls": lib.fake_calls().decode()}))
    """], fake_libcuda, FAKE_PARAM_SIZES="8,4,4,4,4", ROOFLINE_CACHE_DIR=str(cache.parent))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    # Module load, 2 warm-up launches, then 3 x (event, 4 launches, event).
    assert out["calls"] == "M" + "LL" + "ELLLLE" * 3
    r = out["result"]
    assert r["times_s"] == [pytest.approx(1e-3)] * 3 and r["launches_per_rep"] == 4
    # 12 timed launches, each counted by the fake as 1,755,000 cycles in 1,000,000 ns; the warm-up not at all.
    assert (r["clock_cycles"], r["clock_ns"]) == (12 * 1755000, 12 * 1000000)
    assert _gpu_bench._clock_hz(r) == pytest.approx(1.755e9)


def test_measure_end_to_end_through_the_c_layer(fake_libcuda, cache):
    """measure() with the real extension and a fake driver (kernels do nothing, every launch takes 1 ms, the
    clock counters say 1.755 GHz, no cuFuncGetParamInfo): the whole flow runs, the arithmetic holds, the
    tensor-core kernels fail their result check (nothing was computed) and are not reported."""
    _nvrtc_or_skip()
    proc = _run_with_fake("""
        import warnings
        warnings.simplefilter("ignore")
        r = _gpu.measure(0)
        print(json.dumps(r))
    """, fake_libcuda, ROOFLINE_LIBCUDA_PATH=fake_libcuda["no_param_info"], ROOFLINE_CACHE_DIR=str(cache.parent))
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.splitlines()[-1])
    # The fake has 4 SMs and allows 2 blocks of 256 threads per SM; fp32 calibrates to 16 x 4 ms / 1 ms = 64 loops.
    assert r["peaks"]["vector/float32"] == pytest.approx(2 * (4 * 2 * 256) * 64 * 64 * 8 / 1e-3)
    assert r["sm_clock_hz"]["vector/float32"] == pytest.approx(1.755e9)
    assert "4 back-to-back launches per CUDA event pair" in r["method"]["DRAM_copy"]
    assert r["notes"] == ["kernel arguments were not checked against the kernels' parameter lists: the driver has "
                          "no cuFuncGetParamInfo (CUDA 12.4 and later)"]
    for key in ("matrix/bfloat16", "matrix/int8", "matrix/float8_e4m3fn"):
        assert r["peaks"][key] is None and "computed wrong results" in r["method"][key], key


# ---- nvcc ----------------------------------------------------------------------------------------------------


def _find_nvcc():
    for candidate in (
        shutil.which("nvcc"),
        os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "nvcc") if os.environ.get("CUDA_HOME") else None,
        "/usr/local/cuda/bin/nvcc",
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


NVCC = _find_nvcc()


def _nvcc_archs():
    if NVCC is None:
        return set()
    out = subprocess.run([NVCC, "--list-gpu-arch"], capture_output=True, text=True, timeout=60).stdout
    return {line.strip().replace("compute_", "sm_") for line in out.splitlines()}


NVCC_ARCHS = _nvcc_archs()


@pytest.mark.python_independent  # nvcc / the cubins' machine code (tests/conftest.py)
@pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
@pytest.mark.parametrize("arch", [a if a in SUITE_ARCHS else pytest.param(a, marks=pytest.mark.breadth)
                                  for a in ARCHS])
@pytest.mark.parametrize("source", SOURCES)
def test_nvcc_compiles_without_warnings(source, arch, tmp_path):
    if arch.rstrip("a") not in NVCC_ARCHS:
        pytest.skip(f"this nvcc does not know {arch}")
    if arch.endswith("a"):
        target = [f"-gencode=arch=compute_{arch[3:]},code={arch}"]
    else:
        target = [f"-arch={arch}"]
    flags = [f"-D{k}={v}" for k, v in sorted(_gpu_compile._DEFINES[source].items())]
    cmd = [NVCC, "-cubin", *target, "-std=c++17", "-Werror", "all-warnings", *flags,
           "-o", str(tmp_path / "k.cubin"), str(ROOT / "cuda" / f"{source}.cu")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@functools.lru_cache(maxsize=None)
def _ptx_params(source, arch):
    """{kernel: [parameter sizes in bytes]} of every entry in cuda/<source>.cu, from nvcc's PTX (a second reading
    of the kernels' signatures, independent of roofline's own code); each (source, arch) read once."""
    import re

    flags = [f"-D{k}={v}" for k, v in sorted(_gpu_compile._DEFINES[source].items())]
    target = [f"-gencode=arch=compute_{arch[3:]},code={arch}"] if arch.endswith("a") else [f"-arch={arch}"]
    proc = subprocess.run([NVCC, "-ptx", *target, "-std=c++17", *flags, "-o", "-", str(ROOT / "cuda" / f"{source}.cu")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = {}
    for name, params in re.findall(r"\.entry\s+(\w+)\s*\(([^)]*)\)", proc.stdout):
        out[name] = [int(t) // 8 for t in re.findall(r"\.param\s+\.[a-z](\d+)", params)]
    return out


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
@pytest.mark.parametrize("cc", [(9, 0), (8, 9)])
def test_every_launch_matches_the_kernel_parameters(monkeypatch, cc):
    """Each launch measure() makes passes as many arguments as the kernel has parameters, each of its size (the
    driver reads the parameter values through the argument array, so a mismatch reads past it)."""
    fake = _FakeDevice()
    fake.install(monkeypatch)
    props = _core.gpu_device_props(0)
    props.update(compute_capability=cc)
    monkeypatch.setattr(_core, "gpu_device_props", lambda index: dict(props))
    _gpu.measure(0)
    arch = "sm_%d%d" % cc
    signatures = {}
    for source in SOURCES:
        signatures.update(_ptx_params(source, "sm_90a" if source == "wgmma" else arch))
    size = {"buffer": 8, "i64": 8, "u64": 8, "f64": 8, "i32": 4, "u32": 4, "f32": 4}
    launched = set()
    for kernel, _grid, _block, _buffers, args, *_ in fake.launches:
        assert [size[kind] for kind, _value in args] == signatures[kernel], (kernel, args)
        launched.add(kernel)
    expected = {e["kernel"] for e in _gpu.kernels(cc) if e["supported"]}
    assert launched == expected


def _cuobjdump():
    found = shutil.which("cuobjdump")
    if found:
        return found
    import importlib.util

    spec = importlib.util.find_spec("triton")  # triton wheels bundle cuobjdump
    if spec and spec.origin:
        candidate = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if candidate.is_file():
            return str(candidate)
    return None


CUOBJDUMP = _cuobjdump()


def _sass(cubin, tmp_path):
    """{kernel: [(address, instruction text)]} of every function in `cubin` (one cuobjdump run)."""
    import re

    path = tmp_path / f"{len(list(tmp_path.glob('*.cubin')))}.cubin"
    path.write_bytes(cubin)
    proc = subprocess.run([CUOBJDUMP, "-sass", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    parts = re.split(r"^\s*Function : (\w+)\s*$", proc.stdout, flags=re.M)
    assert len(parts) > 1, proc.stdout[:2000]
    return {name: [(int(a, 16), text.strip()) for a, text in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", body)]
            for name, body in zip(parts[1::2], parts[2::2])}


def _loops(sass):
    """Bodies of every loop: from the target of each backward branch to that branch, last loop first."""
    import re

    bodies = []
    for address, text in reversed(sass):
        match = re.search(r"\bBRA(?:\.U)?\s+(?:!?U?P[T\d]+,\s*)?0x([0-9a-f]+)", text)
        if match and int(match.group(1), 16) < address:
            target = int(match.group(1), 16)
            bodies.append([t for a, t in sass if target <= a <= address])
    assert bodies, "no loop found"
    return bodies


def _loop_body(sass):
    """Instructions of the timed loop: the last loop of the kernel."""
    return _loops(sass)[0]


def _opcodes(body, name):
    import re

    return [t for t in body if re.match(rf"(@!?U?P\d+\s+)?{name}\b", t)]


@pytest.mark.python_independent  # nvcc / the cubins' machine code (tests/conftest.py)
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump not found (CUDA toolkit or the triton wheel)")
@pytest.mark.parametrize("arch", [a if a in SUITE_ARCHS else pytest.param(a, marks=pytest.mark.breadth)
                                  for a in ("sm_80", "sm_89", "sm_90", "sm_90a", "sm_120")])
def test_sass_work_per_loop_matches_the_counted_work(arch, cache, cubins, tmp_path):
    """The machine code executes what _gpu.py counts: per trip of the timed loop, RL_FMA_CHAINS x RL_FMA_UNROLL
    FMAs, RL_MMA_CHAINS matrix instructions on that many distinct (A, B) register pairs, RL_WGMMA_UNROLL wgmma;
    nothing spills to local memory; the SM clock is read around the loop."""
    info = _nvrtc_or_skip()
    if info["archs"] and int(arch[3:].rstrip("a")) not in info["archs"]:
        pytest.skip(f"NVRTC does not know {arch}")
    d = _gpu_compile._DEFINES
    if arch == "sm_90a":
        functions = _sass(_cubin(cubins, "wgmma", arch), tmp_path)
        for kernel in ("rl_wgmma_f16", "rl_wgmma_bf16", "rl_wgmma_tf32", "rl_wgmma_s8", "rl_wgmma_e4m3"):
            sass = functions[kernel]
            body = _loop_body(sass)
            assert len(_opcodes(body, "(HGMMA|IGMMA|QGMMA)")) == d["wgmma"]["RL_WGMMA_UNROLL"], (kernel, body)
            assert not _opcodes([t for _a, t in sass], "(STL|LDL)"), kernel
        return
    fma = _sass(_cubin(cubins, "fma", arch), tmp_path)
    per_trip = d["fma"]["RL_FMA_CHAINS"] * d["fma"]["RL_FMA_UNROLL"]
    for kernel, op in (("rl_fma_f32", "FFMA"), ("rl_fma_f64", "DFMA"), ("rl_fma_f16x2", "HFMA2"),
                       ("rl_fma_bf16x2", "HFMA2")):
        sass = fma[kernel]
        body = _loop_body(sass)
        assert len(_opcodes(body, op)) == per_trip, (kernel, len(_opcodes(body, op)))
        # The loop's own instructions (counter, compare, branch and, on some targets, a reload of the constant
        # multiplier and a loop-exit call) are at most 6 next to 512 FMAs, over 98.8% FMAs (with 128 FMAs per trip
        # the same overhead left 97.7%).
        # (NOPs do not count: on sm_120, whose DFMA unit runs at 1/64 rate, the compiler paces DFMAs with them.)
        overhead = [t for t in body if not t.startswith(op) and t != "NOP"]
        assert len(overhead) <= 6, (kernel, overhead)
        texts = [t for _a, t in sass]
        clocks = [i for i, t in enumerate(texts) if "SR_CLOCKLO" in t]
        first_fma = next(i for i, t in enumerate(texts) if body[0] == t)
        assert len(clocks) == 2 and clocks[0] < first_fma < clocks[1], kernel
        assert not _opcodes(texts, "(STL|LDL)"), kernel
    mma = _sass(_cubin(cubins, "mma", arch), tmp_path)
    kernels = ["rl_mma_f16", "rl_mma_bf16", "rl_mma_tf32", "rl_mma_s8"]
    if arch in ("sm_89", "sm_120"):
        kernels.append("rl_mma_e4m3")
    for kernel in kernels:
        sass = mma[kernel]
        body = _loop_body(sass)
        ops = _opcodes(body, "(HMMA|IMMA|QMMA|OMMA)")
        assert len(ops) == d["mma"]["RL_MMA_CHAINS"], (kernel, body)
        # Operands after the destination: A, B, C. Every instruction of the trip uses its own (A, B) pair.
        pairs = {tuple(op.split(",")[1:3]) for op in ops}
        assert len(pairs) == d["mma"]["RL_MMA_CHAINS"], (kernel, ops)
        assert len({p[0] for p in pairs}) == d["mma"]["RL_MMA_SETS"], (kernel, ops)
        assert not _opcodes([t for _a, t in sass], "(STL|LDL)"), kernel
    bandwidth = _sass(_cubin(cubins, "bandwidth", arch), tmp_path)
    # The full-trip loop: the smallest loop with loads in it (the pass loop encloses it).
    body = min((b for b in _loops(bandwidth["rl_l2_read"]) if any("LDG" in t for t in b)), key=len)
    loads = [i for i, t in enumerate(body) if "LDG" in t]
    folds = [i for i, t in enumerate(body) if t.startswith("LOP3")]
    # The full trips: RL_L2_LOADS loads issued before the first instruction that uses one.
    assert len(loads) >= d["bandwidth"]["RL_L2_LOADS"] and max(loads[:4]) < min(folds), body


# ---- without CUDA ----------------------------------------------------------------------------------------------


def _run_python(code, **env):
    full_env = dict(os.environ)
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=120)


def test_import_works_and_measure_names_libcuda_when_cuda_is_missing():
    code = """
        import roofline
        from roofline import _core
        from roofline._hardware import _gpu
        assert _core.gpu_loaded() == {"driver": None, "nvrtc": None}, "a library was loaded at import"
        try:
            _gpu.measure()
        except _gpu.CudaUnavailableError as exc:
            assert isinstance(exc, RuntimeError)
            print("RAISED", exc)
        else:
            raise SystemExit("measure() did not raise")
        assert _core.gpu_loaded()["driver"] is None
    """
    proc = _run_python(code, ROOFLINE_LIBCUDA_PATH="/nonexistent/libcuda.so.1",
                       ROOFLINE_NVRTC_PATH="/nonexistent/libnvrtc.so.13")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    message = proc.stdout
    assert "RAISED" in message and "libcuda" in message
    assert "/nonexistent/libcuda.so.1" in message and "ROOFLINE_LIBCUDA_PATH" in message


def test_compile_names_nvrtc_when_it_is_missing():
    code = """
        from roofline._hardware import _gpu
        try:
            _gpu.compile("bandwidth", "sm_80")
        except _gpu.CudaUnavailableError as exc:
            print("RAISED", exc)
    """
    proc = _run_python(code, ROOFLINE_NVRTC_PATH="/nonexistent/libnvrtc.so.13")
    assert proc.returncode == 0, proc.stderr
    assert "RAISED" in proc.stdout and "libnvrtc" in proc.stdout and "nvidia-cuda-nvrtc" in proc.stdout


def test_device_functions_raise_cleanly_without_a_driver():
    proc = _run_python(
        """
        from roofline._hardware import _gpu
        for f in (_gpu.device_count, _gpu.device_info):
            try:
                f()
            except _gpu.CudaUnavailableError as exc:
                print("RAISED", f.__name__)
        """,
        ROOFLINE_LIBCUDA_PATH="/nonexistent/libcuda.so.1",
    )
    assert proc.stdout.count("RAISED") == 2, proc.stdout + proc.stderr


def test_nvrtc_search_order(monkeypatch, tmp_path):
    monkeypatch.delenv("ROOFLINE_NVRTC_PATH", raising=False)
    wheel = tmp_path / "nvidia" / "cu13" / "lib"
    wheel.mkdir(parents=True)
    (wheel / "libnvrtc.so.13").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
    candidates = _gpu_libs._nvrtc_candidates()
    assert candidates[0] == str(wheel / "libnvrtc.so.13")
    assert candidates[-3:] == ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    # With a CUDA 12 driver, CUDA 13 candidates go last.
    older = _gpu_libs._nvrtc_candidates(driver_version=12080)
    assert older.index("libnvrtc.so.12") < older.index(str(wheel / "libnvrtc.so.13"))
    monkeypatch.setenv("ROOFLINE_NVRTC_PATH", "/opt/x/libnvrtc.so")
    assert _gpu_libs._nvrtc_candidates() == ["/opt/x/libnvrtc.so"]


# ---- measure() with a simulated device -------------------------------------------------------------------------


# K of each tensor-core kernel's instruction (m16n8k16 for f16/bf16, ...), written out here from the PTX ISA so
# that the simulated check results below do not come from the code under test.
TENSOR_K = {"rl_mma_f16": 16, "rl_mma_bf16": 16, "rl_mma_tf32": 8, "rl_mma_s8": 32, "rl_mma_e4m3": 32,
            "rl_wgmma_f16": 16, "rl_wgmma_bf16": 16, "rl_wgmma_tf32": 8, "rl_wgmma_s8": 32, "rl_wgmma_e4m3": 32}


def simulated_check_result(kernel, iters, threads):
    """The bytes a correct tensor-core kernel stores in its check mode (all-ones operands, block 0): mma.sync
    kernels start accumulator c, element j at 0.125 * (4c + j) (4c + j for int8) and add K per loop to each of
    their 8 chains x 4 elements; wgmma kernels start register i at i % 16 and add 16 x K per loop (16 wgmma per
    loop) to each of their 128 registers."""
    import struct

    k = TENSOR_K[kernel]
    integer = kernel.endswith("s8")
    if "wgmma" in kernel:
        values = [(i % 16) + iters * 16 * k for i in range(128)]
    else:
        values = [(i if integer else 0.125 * i) + iters * k for i in range(8 * 4)]
    return struct.pack(f"<{len(values) * threads}{'i' if integer else 'f'}", *(values * threads))


class _FakeDevice:
    """Stands in for the driver: an H100-like device on which every launch takes `seconds` (or
    `seconds(kernel, args)`), at an SM clock of `clock_hz`. Check-mode launches of the tensor-core kernels read
    back what a correct kernel computes, unless the kernel is in `wrong`."""

    def __init__(self, seconds=1e-3, clock_hz=1.755e9, wrong=()):
        self.seconds = seconds
        self.clock_hz = clock_hz
        self.wrong = set(wrong)
        self.launches = []
        self.events = []  # ("compile", source, arch) and ("launch", kernel) in order

    def install(self, monkeypatch):
        monkeypatch.delenv("ROOFLINE_GPU_WGMMA", raising=False)
        monkeypatch.setattr(_core, "gpu_loaded", lambda: {"driver": "fake", "nvrtc": "fake"})
        monkeypatch.setattr(_core, "gpu_load_driver", lambda paths: "fake")
        monkeypatch.setattr(_core, "gpu_device_count", lambda: 1)
        monkeypatch.setattr(_core, "gpu_driver_version", lambda: 13000)
        monkeypatch.setattr(_core, "gpu_nvrtc_version", lambda: (13, 0))
        monkeypatch.setattr(_core, "gpu_mem_info", lambda index: (80 << 30, 80 << 30))
        monkeypatch.setattr(_core, "gpu_device_props", lambda index: {
            "name": "Fake H100", "index": index, "uuid": bytes(range(16)), "compute_capability": (9, 0),
            "sm_count": 132, "clock_khz": 1980000, "memory_clock_khz": 2619000, "memory_bus_width_bits": 5120,
            "l2_cache_bytes": 50 << 20, "max_threads_per_sm": 2048, "max_shared_per_block_optin": 232448,
            "registers_per_sm": 65536, "total_memory_bytes": 80 << 30, "pci_domain": 0, "pci_bus": 0x1b,
            "pci_device": 0})

        def fake_compile(source, arch):
            self.events.append(("compile", source, arch))
            return b"\x7fELF" + source.encode() + arch.encode()

        monkeypatch.setattr(_gpu_bench, "compile", fake_compile)
        monkeypatch.setattr(_core, "gpu_bench", self.bench)

    def bench(self, device, cubin, kernel, grid, block, shared, buffers, args, warmup, reps, readback=None,
              max_blocks_per_sm=0, launches_per_rep=1):
        self.launches.append((kernel, grid, block, list(buffers), list(args), reps, launches_per_rep))
        self.events.append(("launch", kernel))
        per_sm = max_blocks_per_sm or (1 if "wgmma" in kernel else 8)
        seconds = self.seconds(kernel, args) if callable(self.seconds) else self.seconds
        data = None
        if readback is not None:
            index, offset, nbytes = readback
            iters, check = args[1][1], args[-1][1]
            assert kernel in TENSOR_K and check == 1 and grid == 1, (kernel, args, grid)
            data = simulated_check_result(kernel, iters, block)
            if kernel in self.wrong:
                data = data[:-4] + b"\0\0\0\0"
            assert len(data) == nbytes == buffers[index][0]
        launches = reps * launches_per_rep
        return {"times_s": [seconds] * reps, "grid": grid or 132 * per_sm, "block": block,
                "launches_per_rep": launches_per_rep, "blocks_per_sm": per_sm, "registers": 32, "local_bytes": 0,
                "static_shared_bytes": 0, "params_checked": True,
                "clock_cycles": round(self.clock_hz * seconds) * launches if self.clock_hz else 0,
                "clock_ns": round(seconds * 1e9) * launches if self.clock_hz else 0,
                "readback": data}

    def timed(self, kernel):
        """The last launch of `kernel` (the timed one)."""
        return [launch for launch in self.launches if launch[0] == kernel][-1]


def test_measure_contract_with_a_simulated_device(monkeypatch):
    fake = _FakeDevice()
    fake.install(monkeypatch)
    seen = []
    result = _gpu.measure(0, quick=True, progress=seen.append)

    assert set(result) == {"device", "peaks", "bandwidth", "method", "sm_clock_hz", "notes", "duration_s"}
    assert set(result["device"]) == {"name", "index", "sm_count", "compute_capability", "clock_hz",
                                     "memory_bandwidth_theoretical", "fingerprint"}
    dev = result["device"]
    assert dev["compute_capability"] == [9, 0] and dev["sm_count"] == 132 and dev["clock_hz"] == 1.98e9
    # 2 transfers per clock x 2619 MHz x 5120 bits / 8 = 3.352 TB/s (the H100 SXM datasheet's 3.35 TB/s).
    assert dev["memory_bandwidth_theoretical"] == 2 * 2619e6 * 5120 / 8
    assert set(result["peaks"]) == set(_gpu.PEAK_KEYS)
    assert set(result["bandwidth"]) == set(_gpu.BANDWIDTH_KEYS)
    assert all(isinstance(v, float) and v > 0 for v in result["peaks"].values()), result["peaks"]
    assert all(isinstance(v, float) and v > 0 for v in result["bandwidth"].values())
    assert result["bandwidth"]["DRAM"] == result["bandwidth"]["DRAM_copy"]
    for key in list(_gpu.PEAK_KEYS) + list(_gpu.BANDWIDTH_KEYS):
        assert result["method"].get(key), key
    assert "warm-up" in seen and "DRAM copy" in seen and "bf16 wgmma" in seen
    assert isinstance(result["duration_s"], float)
    assert result["notes"] == []  # the (simulated) driver checked every launch's arguments

    # The arithmetic, with every launch taking 1 ms:
    # DRAM copy of two 1 GiB buffers (32 x 50 MiB L2 = 1600 MiB, capped at 1 GiB in quick mode):
    # 2 * 16 * (2**30 / 16) bytes / 1e-3 s.
    assert result["bandwidth"]["DRAM_copy"] == pytest.approx(2 * 2**30 / 1e-3)
    assert result["bandwidth"]["DRAM_read"] == pytest.approx(2**30 / 1e-3)
    # Each DRAM sample times ceil(4 ms target / 1 ms per launch) = 4 back-to-back launches in one event pair,
    # and the times reported are per launch (so the rates above are unchanged by the batching).
    for kernel in ("rl_bw_read", "rl_bw_write", "rl_bw_copy"):
        assert fake.timed(kernel)[6] == 4, fake.timed(kernel)
    assert "4 back-to-back launches per CUDA event pair" in result["method"]["DRAM_copy"]
    # fp32 FMA: every launch lasts 1 ms, so calibration asks for iters = 16 * 4 ms / 1 ms = 64 loops.
    # FLOPs = 2 * threads (132 SMs * 8 blocks * 256) * 64 loops * 64 unrolled * 8 chains * 1 lane.
    assert result["peaks"]["vector/float32"] == pytest.approx(2 * 132 * 8 * 256 * 64 * 64 * 8 / 1e-3)
    assert fake.timed("rl_fma_f32")[4][1] == ("i32", 64)
    # L2: 50 MiB L2, 132 x 8 blocks of 256 threads, 4 loads per thread per trip: one trip of every thread is
    # 1056 * 256 * 4 * 16 B = 17.3 MB, within a third of the L2 (17.5 MB), so the whole grid runs one trip per
    # pass: n = 1056 * 256 * 4 words, and 64 passes (16 probed x 4 ms / 1 ms).
    l2 = fake.timed("rl_l2_read")
    assert l2[1] == 1056 and l2[4][1] == ("u64", 1056 * 256 * 4) and l2[4][2] == ("i32", 64)
    assert result["bandwidth"]["L2"] == pytest.approx(16 * 1056 * 256 * 4 * 64 / 1e-3)
    # The SM clock each kernel counted (1.755 GHz in the simulation) is reported per figure and in its method.
    assert result["sm_clock_hz"]["vector/float32"] == pytest.approx(1.755e9)
    assert result["sm_clock_hz"]["DRAM"] == pytest.approx(1.755e9)
    assert set(result["sm_clock_hz"]) == set(_gpu.PEAK_KEYS) | set(_gpu.BANDWIDTH_KEYS)
    assert "SM clock 1.755 GHz during the timed launches" in result["method"]["matrix/bfloat16"]
    assert result["peaks"]["vector/bfloat16"] == pytest.approx(2 * result["peaks"]["vector/float32"])
    # bf16 wgmma: 132 blocks of 2 warpgroups, 64 loops, 16 wgmma per loop, 2*64*256*16 FLOPs each; it beats
    # mma.sync (132*8*8 warps * 64 loops * 8 chains * 2*16*8*16), so it is the reported figure.
    wgmma = 132 * 2 * 64 * 16 * 2 * 64 * 256 * 16 / 1e-3
    assert result["peaks"]["matrix/bfloat16"] == pytest.approx(wgmma)
    assert result["method"]["matrix/bfloat16"].startswith("wgmma")
    assert "also measured" in result["method"]["matrix/bfloat16"]
    # fp8 on Hopper comes from wgmma only (mma.sync e4m3 is not native there).
    assert not any(k == "rl_mma_e4m3" for k, *_ in fake.launches)
    # Every tensor-core kernel was run once in its check mode (one block, all-ones operands, result read back)
    # before it was timed, and the timed launches use the timing mode.
    for kernel in ("rl_mma_f16", "rl_mma_bf16", "rl_mma_tf32", "rl_mma_s8", "rl_wgmma_f16", "rl_wgmma_bf16",
                   "rl_wgmma_tf32", "rl_wgmma_s8", "rl_wgmma_e4m3"):
        runs = [launch for launch in fake.launches if launch[0] == kernel]
        assert runs[0][1] == 1 and runs[0][4][-1] == ("i32", 1), runs[0]
        assert all(run[4][-1] == ("i32", 0) for run in runs[1:]), kernel
    assert "result checked on all-ones operands" in result["method"]["matrix/bfloat16"]


def test_everything_is_compiled_before_the_warm_up(monkeypatch):
    """Compiling a kernel (seconds for wgmma) between the warm-up and its benchmark would let the clocks drop:
    every source the device runs is compiled, once, before the first launch."""
    fake = _FakeDevice()
    fake.install(monkeypatch)
    _gpu.measure(0)
    first_launch = next(i for i, event in enumerate(fake.events) if event[0] == "launch")
    compiles = [event for event in fake.events if event[0] == "compile"]
    assert all(i < first_launch for i, event in enumerate(fake.events) if event[0] == "compile")
    assert sorted(compiles) == [("compile", "bandwidth", "sm_90"), ("compile", "fma", "sm_90"),
                                ("compile", "mma", "sm_90"), ("compile", "wgmma", "sm_90a")]


def test_a_compile_error_fails_only_its_benchmarks(monkeypatch):
    fake = _FakeDevice()
    fake.install(monkeypatch)

    def failing(source, arch):
        if source == "wgmma":
            exc = _gpu.NvrtcError("nvrtcCompileProgram failed with NVRTC_ERROR_COMPILATION (6)")
            exc.call, exc.code, exc.log = "nvrtcCompileProgram", 6, "error"
            raise exc
        return b"\x7fELF" + source.encode()

    monkeypatch.setattr(_gpu_bench, "compile", failing)
    with pytest.warns(RuntimeWarning, match="bf16 wgmma failed: nvrtcCompileProgram"):
        result = _gpu.measure(0)
    assert result["method"]["matrix/bfloat16"].startswith("mma.sync")
    assert result["peaks"]["matrix/float8_e4m3fn"] is None


def test_a_wrong_tensor_core_result_is_not_reported(monkeypatch):
    fake = _FakeDevice(wrong={"rl_wgmma_bf16"})
    fake.install(monkeypatch)
    with pytest.warns(RuntimeWarning, match="rl_wgmma_bf16 computed wrong results"):
        result = _gpu.measure(0)
    assert result["method"]["matrix/bfloat16"].startswith("mma.sync")
    assert "bf16 wgmma failed: rl_wgmma_bf16 computed wrong results" in result["method"]["matrix/bfloat16"]
    # Only the check launch ran: nothing was timed for the wrong kernel.
    assert [launch[1] for launch in fake.launches if launch[0] == "rl_wgmma_bf16"] == [1]


@pytest.mark.parametrize("kernel, bench_key", [
    ("rl_mma_bf16", "matrix/bfloat16"), ("rl_mma_s8", "matrix/int8"), ("rl_mma_tf32", "matrix/tfloat32"),
    ("rl_wgmma_f16", "matrix/float16"), ("rl_wgmma_s8", "matrix/int8"), ("rl_wgmma_e4m3", "matrix/float8_e4m3fn"),
])
def test_tensor_check_compares_every_value(kernel, bench_key):
    bench = next(b for b in _gpu_bench._REGISTRY if b.kernel == kernel and b.key == bench_key)
    threads = 256
    good = simulated_check_result(kernel, 4, threads)
    assert _gpu_bench._tensor_check_compare(bench, good, 4) == []
    # One wrong value anywhere is found and located.
    per_thread = 128 if "wgmma" in kernel else 32
    for index in (0, 37, threads * per_thread - 1):
        bad = bytearray(good)
        bad[4 * index: 4 * index + 4] = b"\x00\x00\xc0\x7f"  # a NaN, or a large int
        problems = _gpu_bench._tensor_check_compare(bench, bytes(bad), 4)
        thread, value = divmod(index, per_thread)
        assert len(problems) == 1 and problems[0].startswith(f"thread {thread} value {value}:"), problems
    # A result from another iteration count (a wrong K per instruction would look the same) fails everywhere.
    assert _gpu_bench._tensor_check_compare(bench, simulated_check_result(kernel, 5, threads), 4)[-1] == "..."
    assert "read back" in _gpu_bench._tensor_check_compare(bench, good[:-4], 4)[0]


def test_calibration_scales_from_the_last_probe(monkeypatch):
    """When every probe is shorter than 100 us, the final count scales from the last probe's own count (the old
    code scaled from 16x more and overshot the target 16x)."""
    fake = _FakeDevice(seconds=lambda kernel, args: args[1][1] * 5e-12 if kernel == "rl_fma_f32" else 1e-3)
    fake.install(monkeypatch)
    ctx = _gpu_bench._Context(0, _gpu.device_info(0), _gpu_bench._QUICK)
    bench = next(b for b in _gpu_bench._REGISTRY if b.kernel == "rl_fma_f32")
    _gpu_bench._run_fma(ctx, bench)
    probes = [launch[4][1][1] for launch in fake.launches]
    # Six probes, 16 .. 16**6 iterations; the last lasts 16**6 * 5 ps = 83.9 us < 100 us. Then 4 ms / 5 ps.
    assert probes[:6] == [16, 256, 4096, 65536, 16**5, 16**6]
    assert probes[6] == pytest.approx(4e-3 / 5e-12, abs=1)
    assert len(probes) == 7


def test_calibration_stops_at_the_first_probe_over_100_us(monkeypatch):
    fake = _FakeDevice(seconds=lambda kernel, args: args[1][1] * 1e-9 if kernel == "rl_fma_f32" else 1e-3)
    fake.install(monkeypatch)
    ctx = _gpu_bench._Context(0, _gpu.device_info(0), _gpu_bench._QUICK)
    bench = next(b for b in _gpu_bench._REGISTRY if b.kernel == "rl_fma_f32")
    _gpu_bench._run_fma(ctx, bench)
    probes = [launch[4][1][1] for launch in fake.launches]
    # 16**5 iterations at 1 ns last 1.05 ms >= 100 us; 4 ms then needs 4,000,000 iterations.
    assert probes == [16, 256, 4096, 65536, 16**5, 4_000_000]


@pytest.mark.parametrize("l2, full_grid, sms, blocks, n", [
    # H200: 60 MiB L2, 132 SMs x 8 blocks. One trip of all 1056 x 256 threads, 4 x 16 B each, is 17.3 MB, within a
    # third of the L2 (21.0 MB), and a quarter (15.7 MB) holds no second trip: n = 1056 * 256 * 4.
    (60 << 20, 1056, 132, 1056, 1056 * 256 * 4),
    # A100: 40 MiB L2, 108 SMs x 8 blocks: 864 * 16384 B = 14.2 MB > 40 MiB / 3 = 14.0 MB, so the grid shrinks to
    # whole waves: 14.0 MB // 16384 B = 853 blocks -> 7 waves of 108 = 756 blocks; trips = 10.5 MB // 12.4 MB -> 1.
    (40 << 20, 864, 108, 756, 756 * 256 * 4),
    # T4: 4 MiB L2, 40 SMs x 4 blocks: 1.40 MB // 16384 = 85 blocks -> 2 waves = 80 blocks; n = 80 * 256 * 4.
    (4 << 20, 160, 40, 80, 80 * 256 * 4),
    # A small grid on a large L2: a quarter of 64 MiB holds 16.8 MB // (8 * 16384 B) = 128 trips.
    (64 << 20, 8, 1, 8, 128 * 8 * 256 * 4),
])
def test_l2_working_set_is_whole_trips(l2, full_grid, sms, blocks, n):
    assert _gpu_bench._l2_shape(l2, full_grid, 256, sms) == (blocks, n)
    assert n % (blocks * 256 * 4) == 0 and 16 * n <= l2 // 3


def test_measure_without_wgmma_and_on_ampere(monkeypatch):
    fake = _FakeDevice()
    fake.install(monkeypatch)
    props = _core.gpu_device_props(0)
    props.update(name="Fake A100", compute_capability=(8, 0), sm_count=108)
    monkeypatch.setattr(_core, "gpu_device_props", lambda index: dict(props))
    result = _gpu.measure(0)
    assert result["peaks"]["matrix/float8_e4m3fn"] is None
    assert "not available on compute capability 8.0" in result["method"]["matrix/float8_e4m3fn"]
    assert result["method"]["matrix/bfloat16"].startswith("mma.sync")
    assert not any("wgmma" in k for k, *_ in fake.launches)


def test_wgmma_can_be_switched_off(monkeypatch):
    fake = _FakeDevice()
    fake.install(monkeypatch)
    monkeypatch.setenv("ROOFLINE_GPU_WGMMA", "0")
    result = _gpu.measure(0)
    assert not any("wgmma" in k for k, *_ in fake.launches)
    assert result["method"]["matrix/bfloat16"].startswith("mma.sync")
    assert "ROOFLINE_GPU_WGMMA=0" in result["method"]["matrix/bfloat16"]


def test_a_failing_benchmark_is_reported_not_fatal(monkeypatch):
    fake = _FakeDevice()
    fake.install(monkeypatch)
    real = fake.bench

    def flaky(device, cubin, kernel, *args, **kwargs):
        if kernel == "rl_wgmma_bf16":
            exc = _gpu.CudaError("cuModuleLoadData failed with CUDA_ERROR_INVALID_IMAGE (200): invalid image")
            exc.call, exc.code = "cuModuleLoadData", 200
            raise exc
        return real(device, cubin, kernel, *args, **kwargs)

    monkeypatch.setattr(_core, "gpu_bench", flaky)
    with pytest.warns(RuntimeWarning, match="bf16 wgmma failed"):
        result = _gpu.measure(0)
    assert result["method"]["matrix/bfloat16"].startswith("mma.sync")
    assert "bf16 wgmma failed" in result["method"]["matrix/bfloat16"]
    assert result["peaks"]["matrix/bfloat16"] > 0


def test_a_sticky_fault_is_raised(monkeypatch):
    fake = _FakeDevice()
    fake.install(monkeypatch)

    def faulting(*args, **kwargs):
        exc = _gpu.CudaError("cuCtxSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS (700)")
        exc.call, exc.code = "cuCtxSynchronize", 700
        raise exc

    monkeypatch.setattr(_core, "gpu_bench", faulting)
    with pytest.raises(_gpu.CudaError, match="restart the process"):
        _gpu.measure(0)


# ---- on a GPU -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def measured():
    return _gpu.measure(0, quick=True)


@requires_gpu
def test_device_info_on_device():
    info = _gpu.device_info(0)
    assert info["name"] and info["sm_count"] > 0 and info["compute_capability"][0] >= 3
    assert info["fingerprint"] == _gpu.device_info(0)["fingerprint"]


@requires_gpu
def test_copy_and_write_kernels_move_the_right_data():
    cc = tuple(_gpu.device_info(0)["compute_capability"])
    cubin = _gpu.compile("bandwidth", cc)
    n = (1 << 20) + 3  # not a multiple of the grid: the tail loop runs too
    size = 16 * n
    res = _core.gpu_bench(0, cubin, "rl_bw_copy", 0, 256, 0, [(size, 0x01020304), (size, 0)],
                          [("buffer", 0), ("buffer", 1), ("u64", n)], 1, 1, (1, 0, size))
    assert res["readback"] == bytes([4, 3, 2, 1]) * (size // 4)
    res = _core.gpu_bench(0, cubin, "rl_bw_write", 0, 256, 0, [(size, 0)],
                          [("buffer", 0), ("u64", n), ("i32", 7)], 1, 1, (0, 0, size))
    import numpy as np

    words = np.frombuffer(res["readback"], dtype=np.int32).reshape(n, 4)
    j = np.arange(n, dtype=np.int64).astype(np.int32)
    assert (words[:, 0] == 7).all() and (words[:, 1] == (7 ^ j)).all() and (words[:, 3] == j).all()


@requires_gpu
def test_tensor_kernels_compute_the_right_results_on_device():
    """Every tensor-core kernel this device runs, in its check mode (all-ones operands): D must be exactly the
    start value plus K per instruction. wgmma is skipped when ROOFLINE_GPU_WGMMA=0 (bench/gpu_check.sh sets it
    when the wgmma smoke test, run first in its own process, failed)."""
    info = _gpu.device_info(0)
    ctx = _gpu_bench._Context(0, info, _gpu_bench._QUICK)
    checked = []
    for bench in _gpu_bench._REGISTRY:
        if bench.runner not in (_gpu_bench._run_mma, _gpu_bench._run_wgmma) or not bench.supported(ctx.cc):
            continue
        if bench.source == "wgmma" and not _gpu_bench._wgmma_enabled():
            continue
        _gpu_bench._tensor_check(ctx, bench)  # raises GpuError naming the first wrong values
        checked.append(bench.kernel)
    if tuple(info["compute_capability"]) >= (8, 0):
        assert checked


@requires_gpu
def test_measured_ceilings_respect_the_hardware_limits(measured):
    """No figure may exceed what the hardware can issue at the SM clock the kernel itself measured: more would
    mean the compiler deleted work or the counting is wrong. (How close each figure comes to the datasheet and to
    PyTorch is a timing question, checked by bench/gpu_ceilings.py, not here.)"""
    info = _gpu.device_info(0)
    peaks, clocks = measured["peaks"], measured["sm_clock_hz"]
    assert all(v is None or (isinstance(v, float) and v > 0) for v in peaks.values())
    assert all(v is None or (isinstance(v, float) and v > 0) for v in measured["bandwidth"].values())
    sms = info["sm_count"]
    # FP32: 64 FMA lanes per SM up to sm_80 (Volta, Turing, A100), 128 from sm_86 on (GA10x, Ada, Hopper,
    # Blackwell), 2 FLOPs each per clock; 1% for the clock measurement (%globaltimer's resolution).
    lanes = 64 if tuple(info["compute_capability"]) <= (8, 0) else 128
    clock = clocks["vector/float32"]
    assert clock, measured["method"]["vector/float32"]
    assert peaks["vector/float32"] <= sms * lanes * 2 * clock * 1.01
    # Dense bf16 tensor FLOPs per SM per clock: 4096 on Hopper (989.4e12 / (132 x 1.83e9)), 2048 on A100
    # (312e12 / (108 x 1.41e9)).
    per_clock = {(9, 0): 4096, (8, 0): 2048}.get(tuple(info["compute_capability"]))
    if per_clock and clocks["matrix/bfloat16"]:
        assert peaks["matrix/bfloat16"] <= sms * per_clock * clocks["matrix/bfloat16"] * 1.01
    for key in ("matrix/bfloat16", "matrix/float16", "matrix/int8"):
        if peaks[key] is not None:
            assert "result checked on all-ones operands" in measured["method"][key]


def test_unsupported_gpu_peaks_fall_back_to_the_datasheet():
    """measure() leaves a peak None when the device cannot run its benchmark (no fp8 mma.sync on an A100): the
    Ceilings keep the datasheet figure for it instead of failing."""
    import importlib

    ceil = importlib.import_module("roofline._hardware._ceilings")
    result = {
        "device": {"name": "NVIDIA A100-SXM4-80GB", "index": 0, "sm_count": 108, "compute_capability": [8, 0],
                   "clock_hz": 1410000000, "memory_bandwidth_theoretical": None, "fingerprint": "x"},
        "peaks": {"vector/float32": 19.0e12, "matrix/bfloat16": 290e12, "matrix/float8_e4m3fn": None},
        "bandwidth": {"DRAM": 1.8e12, "L2": None},
        "method": {}, "duration_s": 1.0,
    }
    c = ceil._from_gpu_result(result, "cuda:0", True, 1.0)
    assert c.peak("matrix", "bfloat16") == 290e12
    assert ("matrix", "float8_e4m3fn") not in c.peaks or c.peaks[("matrix", "float8_e4m3fn")].measured is None
    assert c.bandwidth("DRAM") == 1.8e12 and "L2" not in c.bandwidths
