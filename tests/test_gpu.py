"""Tests of the GPU ceilings: kernel compilation (NVRTC and nvcc), the cubin cache, error reporting, the benchmark
registry and measure()'s contract. They run on a machine without a GPU; the tests at the end need a CUDA device
and skip cleanly without one."""

import os
import shutil
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import roofline
from roofline import _core, _gpu

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
    assert _gpu._normalize_arch("sm_90") == "sm_90"
    assert _gpu._normalize_arch("sm_90a") == "sm_90a"
    assert _gpu._normalize_arch(90) == "sm_90"
    assert _gpu._normalize_arch((12, 0)) == "sm_120"
    assert _gpu._normalize_arch("compute_80") == "sm_80"
    with pytest.raises(ValueError):
        _gpu._normalize_arch("hopper")


# ---- NVRTC ---------------------------------------------------------------------------------------------------


def _nvrtc_archs():
    """(arch, reason-to-skip-or-None): sm_80 and sm_90 always, sm_90a, sm_100, sm_120 where NVRTC knows them."""
    return ["sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"]


@pytest.mark.parametrize("arch", _nvrtc_archs())
@pytest.mark.parametrize("source", SOURCES)
def test_nvrtc_compiles_every_kernel(source, arch, cache):
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


def test_cache_key_changes_with_every_input():
    base = ("src", ["-arch=sm_90", "-std=c++17"], (13, 0), "sm_90")
    key = _gpu._cache_key(*base)
    assert key == _gpu._cache_key(*base)
    assert key != _gpu._cache_key("src ", *base[1:])
    assert key != _gpu._cache_key(base[0], ["-arch=sm_90", "-std=c++17", "-DX=1"], *base[2:])
    assert key != _gpu._cache_key(base[0], base[1], (13, 1), base[3])
    assert key != _gpu._cache_key(base[0], base[1], base[2], "sm_90a")


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


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a", "sm_100", "sm_120"])
@pytest.mark.parametrize("source", SOURCES)
def test_nvcc_compiles_without_warnings(source, arch, tmp_path):
    if arch.rstrip("a") not in NVCC_ARCHS:
        pytest.skip(f"this nvcc does not know {arch}")
    if arch.endswith("a"):
        target = [f"-gencode=arch=compute_{arch[3:]},code={arch}"]
    else:
        target = [f"-arch={arch}"]
    flags = [f"-D{k}={v}" for k, v in sorted(_gpu._DEFINES[source].items())]
    cmd = [NVCC, "-cubin", *target, "-std=c++17", "-Werror", "all-warnings", *flags,
           "-o", str(tmp_path / "k.cubin"), str(ROOT / "cuda" / f"{source}.cu")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


# ---- without CUDA ----------------------------------------------------------------------------------------------


def _run_python(code, **env):
    full_env = dict(os.environ)
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=120)


def test_import_works_and_measure_names_libcuda_when_cuda_is_missing():
    code = """
        import roofline
        from roofline import _core, _gpu
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
        from roofline import _gpu
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
        from roofline import _gpu
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
    candidates = _gpu._nvrtc_candidates()
    assert candidates[0] == str(wheel / "libnvrtc.so.13")
    assert candidates[-3:] == ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    # With a CUDA 12 driver, CUDA 13 candidates go last.
    older = _gpu._nvrtc_candidates(driver_version=12080)
    assert older.index("libnvrtc.so.12") < older.index(str(wheel / "libnvrtc.so.13"))
    monkeypatch.setenv("ROOFLINE_NVRTC_PATH", "/opt/x/libnvrtc.so")
    assert _gpu._nvrtc_candidates() == ["/opt/x/libnvrtc.so"]


# ---- measure() with a simulated device -------------------------------------------------------------------------


class _FakeDevice:
    """Stands in for the driver: an H100-like device on which every launch takes `seconds`."""

    def __init__(self, seconds=1e-3):
        self.seconds = seconds
        self.launches = []

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
        monkeypatch.setattr(_gpu, "compile", lambda source, arch: b"\x7fELF" + source.encode() + arch.encode())
        monkeypatch.setattr(_core, "gpu_bench", self.bench)

    def bench(self, device, cubin, kernel, grid, block, shared, buffers, args, warmup, reps, readback=None,
              max_blocks_per_sm=0):
        self.launches.append((kernel, grid, block, list(buffers), list(args), reps))
        per_sm = max_blocks_per_sm or (1 if "wgmma" in kernel else 8)
        return {"times_s": [self.seconds] * reps, "grid": grid or 132 * per_sm, "block": block,
                "blocks_per_sm": per_sm, "registers": 32, "local_bytes": 0, "static_shared_bytes": 0,
                "readback": None}


def test_measure_contract_with_a_simulated_device(monkeypatch):
    fake = _FakeDevice()
    fake.install(monkeypatch)
    seen = []
    result = _gpu.measure(0, quick=True, progress=seen.append)

    assert set(result) == {"device", "peaks", "bandwidth", "method", "duration_s"}
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

    # The arithmetic, with every launch taking 1 ms:
    # DRAM copy of two 1 GiB buffers (32 x 50 MiB L2 = 1600 MiB, capped at 1 GiB in quick mode):
    # 2 * 16 * (2**30 / 16) bytes / 1e-3 s.
    assert result["bandwidth"]["DRAM_copy"] == pytest.approx(2 * 2**30 / 1e-3)
    assert result["bandwidth"]["DRAM_read"] == pytest.approx(2**30 / 1e-3)
    # fp32 FMA: every launch lasts 1 ms, so calibration asks for iters = 16 * 4 ms / 1 ms = 64 loops.
    # FLOPs = 2 * threads (132 SMs * 8 blocks * 256) * 64 loops * 16 unrolled * 8 chains * 1 lane.
    assert result["peaks"]["vector/float32"] == pytest.approx(2 * 132 * 8 * 256 * 64 * 16 * 8 / 1e-3)
    assert result["peaks"]["vector/bfloat16"] == pytest.approx(2 * result["peaks"]["vector/float32"])
    # bf16 wgmma: 132 blocks of 2 warpgroups, 64 loops, 16 wgmma per loop, 2*64*256*16 FLOPs each; it beats
    # mma.sync (132*8*8 warps * 64 loops * 8 chains * 2*16*8*16), so it is the reported figure.
    wgmma = 132 * 2 * 64 * 16 * 2 * 64 * 256 * 16 / 1e-3
    assert result["peaks"]["matrix/bfloat16"] == pytest.approx(wgmma)
    assert result["method"]["matrix/bfloat16"].startswith("wgmma")
    assert "also measured" in result["method"]["matrix/bfloat16"]
    # fp8 on Hopper comes from wgmma only (mma.sync e4m3 is not native there).
    assert not any(k == "rl_mma_e4m3" for k, *_ in fake.launches)


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
def test_measured_ceilings_are_plausible(measured):
    info = _gpu.device_info(0)
    bw, peaks = measured["bandwidth"], measured["peaks"]
    theoretical = info["memory_bandwidth_theoretical"]
    assert bw["DRAM_copy"] > 0 and bw["DRAM_read"] > 0 and bw["DRAM_write"] > 0
    if theoretical:
        # Within reach of the memory system, and not a sign that work was optimised away.
        assert 0.3 * theoretical < bw["DRAM_copy"] < 1.05 * theoretical, (bw, theoretical)
        assert bw["DRAM_read"] < 1.05 * theoretical
    assert bw["L2"] > bw["DRAM_read"]
    # No SM issues more than 128 fp32 FMAs per clock: more would mean the compiler deleted work.
    if info["clock_hz"]:
        fp32_bound = info["sm_count"] * 128 * 2 * info["clock_hz"]
        assert 0.3 * fp32_bound < peaks["vector/float32"] < 1.05 * fp32_bound
    if info["compute_capability"][0] >= 8:
        assert peaks["matrix/float16"] > peaks["vector/float16"]
        assert peaks["matrix/bfloat16"] > peaks["vector/float32"]
        assert peaks["matrix/int8"] > peaks["matrix/bfloat16"] * 0.9
        # tf32 runs at half the bf16 rate on every tensor core generation measured here (power limits can
        # narrow the gap, so only a clear margin is required).
        assert peaks["matrix/bfloat16"] > 1.2 * peaks["matrix/tfloat32"]
    assert measured["duration_s"] < 60


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


@requires_gpu
def test_against_torch(measured):
    torch = _torch_cuda()
    if torch is None:
        pytest.skip("torch with CUDA is not installed")

    def median_time(fn, warmup=3, reps=10):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3)
        return statistics.median(times)

    x = torch.empty(1 << 28, dtype=torch.float32, device="cuda").uniform_()
    y = torch.empty_like(x)
    copy_rate = 2 * x.numel() * 4 / median_time(lambda: y.copy_(x))
    del x, y
    n = 4096
    a = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    mm_rate = 2 * n**3 / median_time(lambda: a @ b)
    ratio_copy = measured["bandwidth"]["DRAM_copy"] / copy_rate
    ratio_mm = measured["peaks"]["matrix/bfloat16"] / mm_rate
    print(f"DRAM copy vs torch {ratio_copy:.3f}, bf16 tensor vs torch matmul {ratio_mm:.3f}")
    assert 0.7 < ratio_copy < 1.4
    assert 0.5 < ratio_mm < 2.0


def test_unsupported_gpu_peaks_fall_back_to_the_datasheet():
    """measure() leaves a peak None when the device cannot run its benchmark (no fp8 mma.sync on an A100): the
    Ceilings keep the datasheet figure for it instead of failing."""
    import importlib

    ceil = importlib.import_module("roofline._ceilings")
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
