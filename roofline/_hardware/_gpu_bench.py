"""The GPU ceiling benchmarks: the registry (``_REGISTRY``: which kernel measures which key, on which compute
capabilities), the launch context of one device, and the runners that launch each kernel and count its work
(bandwidth: DRAM and L2; vector FMA; tensor cores: mma.sync and wgmma, with their result checks).
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import struct
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from roofline import _core
from roofline._hardware._gpu_compile import _DEFINES, compile
from roofline._hardware._gpu_libs import CudaError, GpuError, NvrtcError


# CUDA errors after which the context is unusable for the rest of the process.
_STICKY_ERRORS = {700, 702, 714, 715, 716, 717, 718, 719}
# Errors loading a cubin that usually mean "NVRTC is newer than the driver".
_IMAGE_ERRORS = {200, 209, 218, 222}


# ---------------------------------------------------------------------------------------------------------------
# The benchmark registry
# ---------------------------------------------------------------------------------------------------------------

CC = Tuple[int, int]


@dataclasses.dataclass(frozen=True)
class _Settings:
    """How long and how often to run each benchmark."""

    target_s: float  # wanted duration of one timed launch of a compute kernel
    warmup: int  # untimed launches before timing
    reps: int  # timed launches (the median is reported)
    bw_reps: int  # timed launches of the bandwidth kernels
    dram_bytes_max: int  # largest DRAM buffer
    warmup_s: float  # untimed work at the start so the clocks leave idle


_QUICK = _Settings(target_s=0.004, warmup=2, reps=9, bw_reps=15, dram_bytes_max=1 << 30, warmup_s=0.25)
_FULL = _Settings(target_s=0.02, warmup=5, reps=31, bw_reps=61, dram_bytes_max=2 << 30, warmup_s=1.0)


@dataclasses.dataclass
class _Context:
    index: int
    info: Dict[str, Any]
    settings: _Settings
    cubins: Dict[Tuple[str, str], bytes] = dataclasses.field(default_factory=dict)
    compile_errors: Dict[Tuple[str, str], GpuError] = dataclasses.field(default_factory=dict)
    last: Optional[Dict[str, Any]] = None  # result of the latest launch (the timed one, after a runner returns)
    unchecked_params: bool = False  # some launch ran without the driver checking its arguments

    @property
    def cc(self) -> CC:
        return (self.info["compute_capability"][0], self.info["compute_capability"][1])

    def arch(self, suffix: str = "") -> str:
        major, minor = self.cc
        return f"sm_{major}{minor}{suffix}"

    def prepare(self, source: str, suffix: str = "") -> None:
        """Compile (or fetch from the cache) ``source`` for this device now; a compile error is kept and raised
        by :meth:`cubin` when a benchmark asks for it, so the other benchmarks still run."""
        key = (source, self.arch(suffix))
        if key in self.cubins or key in self.compile_errors:
            return
        try:
            self.cubins[key] = compile(source, key[1])
        except (NvrtcError, GpuError) as exc:
            self.compile_errors[key] = exc

    def cubin(self, source: str, suffix: str = "") -> bytes:
        key = (source, self.arch(suffix))
        self.prepare(source, suffix)
        if key in self.compile_errors:
            raise self.compile_errors[key]
        return self.cubins[key]


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """One ceiling benchmark: which result key it measures, with which kernel, and where it can run."""

    key: str  # "matrix/bfloat16", "bandwidth/DRAM_copy", ...
    label: str  # short text for progress callbacks
    source: str  # cuda/<source>.cu
    kernel: str  # extern "C" name
    supported: Callable[[CC], bool]
    runner: Callable[["_Context", "Benchmark"], Tuple[float, str]]
    params: Tuple[Tuple[str, Any], ...] = ()
    arch_suffix: str = ""  # "a" for sm_90a-only instructions

    def param(self, name: str) -> Any:
        return dict(self.params)[name]


def _median_s(result: Dict[str, Any]) -> float:
    times = [t for t in result["times_s"] if t > 0]
    if not times:
        raise GpuError(f"every timed launch took 0 s: {result!r}")
    return statistics.median(times)


def _clock_hz(result: Optional[Dict[str, Any]]) -> Optional[float]:
    """Average SM clock of a launch's timed runs, from the cycles and nanoseconds the kernel's block 0 counted
    (``%clock64`` / ``%globaltimer``), or None when the kernel did not count them."""
    if not result:
        return None
    cycles, ns = result.get("clock_cycles") or 0, result.get("clock_ns") or 0
    if cycles <= 0 or ns <= 0:
        return None
    return cycles / ns * 1e9


def _launch(
    ctx: _Context,
    bench: Benchmark,
    buffers: Sequence[Tuple[int, int]],
    args: Sequence[Tuple[str, Any]],
    *,
    block: int,
    warmup: int,
    reps: int,
    grid: int = 0,
    max_blocks_per_sm: int = 0,
    readback: Optional[Tuple[int, int, int]] = None,
    launches_per_rep: int = 1,
) -> Dict[str, Any]:
    cubin = ctx.cubin(bench.source, bench.arch_suffix)
    try:
        result = _core.gpu_bench(
            ctx.index, cubin, bench.kernel, grid, block, 0, list(buffers), list(args), warmup, reps, readback,
            max_blocks_per_sm, launches_per_rep,
        )
    except CudaError as exc:
        raise _explain(exc, ctx, bench) from None
    ctx.last = result
    if not result.get("params_checked", True):
        ctx.unchecked_params = True
    return result


def _explain(exc: CudaError, ctx: _Context, bench: Benchmark) -> CudaError:
    """Add what the user can do to a driver error from a benchmark launch."""
    text = f"{bench.label} ({bench.kernel} from {bench.source}.cu for {ctx.arch(bench.arch_suffix)}): {exc}"
    if exc.code in _STICKY_ERRORS:
        text += ". The CUDA context of this process is now unusable; restart the process"
    elif exc.code in _IMAGE_ERRORS:
        version = "%d.%d" % tuple(_core.gpu_nvrtc_version())
        driver = _core.gpu_driver_version()
        text += (
            f". The cubin came from NVRTC {version}; the driver supports CUDA {driver // 1000}.{driver % 1000 // 10}."
            " Use an NVRTC whose major version is not newer than the driver's (ROOFLINE_NVRTC_PATH)"
        )
    new = CudaError(text)
    new.call, new.code = exc.call, exc.code
    return new


# Sentinels for the "store only if the result equals this" guards: a NaN never compares equal; the integer ones
# are values the kernels' folds cannot produce (see the .cu files).
_NAN = float("nan")
_INT_SENTINEL = 0x5BD1E995

# Calibration: probes grow the iteration count 16x at a time until one lasts _PROBE_MIN_S, for at most
# _PROBE_MAX probes.
_PROBE_MIN_S = 1e-4
_PROBE_MAX = 6
_ITERS_MAX = (1 << 31) - 1


def _calibrate(ctx: _Context, bench: Benchmark, make_args: Callable[[int], list], launch_kw: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """Find an iteration count whose launch lasts about ``settings.target_s``, then time it.

    Probes start at 16 iterations and grow 16x while a probe is shorter than 100 us (at most 6 probes), then the
    count scales linearly from the last probe, the one actually timed, to the target. Returns (iterations, timed
    result).
    """
    target = ctx.settings.target_s
    common = {"block": launch_kw["block"], "grid": launch_kw.get("grid", 0),
              "max_blocks_per_sm": launch_kw.get("max_blocks_per_sm", 0)}
    iters = 16
    for probe_number in range(1, _PROBE_MAX + 1):
        probe = _launch(ctx, bench, launch_kw["buffers"], make_args(iters), warmup=1, reps=1, **common)
        elapsed = _median_s(probe)
        if elapsed >= _PROBE_MIN_S or probe_number == _PROBE_MAX or iters * 16 > _ITERS_MAX:
            break
        iters *= 16
    # `elapsed` is the time of `iters` iterations: the count that was probed last.
    iters = max(1, min(_ITERS_MAX, int(iters * target / elapsed)))
    result = _launch(ctx, bench, launch_kw["buffers"], make_args(iters), warmup=ctx.settings.warmup,
                     reps=ctx.settings.reps, **common)
    return iters, result


def _describe_timing(result: Dict[str, Any], median: float) -> str:
    per = result.get("launches_per_rep", 1) or 1
    batch = f" (timed {per} back-to-back launches per CUDA event pair)" if per > 1 else ""
    return (
        f"{result['grid']} blocks x {result['block']} threads, median of {len(result['times_s'])} launches of "
        f"{median * 1e3:.3g} ms{batch}"
    )


# ---- bandwidth ------------------------------------------------------------------------------------------------

_FILL = 0x3C00_3C00  # buffer contents: a nonzero pattern (two fp16 1.0s per word)
_LAUNCHES_PER_REP_MAX = 1000


def _dram_bytes(ctx: _Context) -> int:
    """Buffer size for the DRAM kernels: 32x the L2 (so nothing survives in it) within [256 MiB, max], at most a
    sixth of the free memory (a copy needs two buffers), rounded down to a multiple of 1 MiB."""
    l2 = ctx.info.get("l2_cache_bytes") or (64 << 20)
    want = min(max(256 << 20, 32 * l2), ctx.settings.dram_bytes_max)
    try:
        free, _total = _core.gpu_mem_info(ctx.index)
        want = min(want, free // 6)
    except GpuError:
        pass
    size = (want >> 20) << 20
    if size < (16 << 20):
        raise GpuError(f"too little free device memory for the bandwidth benchmarks ({want} bytes usable)")
    return size


def _launches_per_rep(ctx: _Context, one_launch_s: float) -> int:
    """How many launches one CUDA event pair times so that the pair spans about ``settings.target_s``: an event
    pair around a single sub-millisecond launch adds its own fixed cost to the time and reads the rate low."""
    if one_launch_s <= 0:
        return 1
    return max(1, min(_LAUNCHES_PER_REP_MAX, math.ceil(ctx.settings.target_s / one_launch_s)))


def _run_dram(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """DRAM read / write / copy over one large buffer per operand. Bytes per launch: 16*n read, 16*n written, or
    2*16*n copied, with n = buffer bytes / 16. One probe launch gives the time of a launch; each timed sample
    then covers enough back-to-back launches to last about ``settings.target_s`` (time per launch reported)."""
    kind = bench.param("kind")
    size = _dram_bytes(ctx)
    n = size // 16
    s = ctx.settings
    if kind == "read":
        buffers = [(size, _FILL), (128, 0)]
        args = [("buffer", 0), ("u64", n), ("buffer", 1), ("i32", _INT_SENTINEL)]
        moved = 16 * n
    elif kind == "write":
        buffers = [(size, 0)]
        args = [("buffer", 0), ("u64", n), ("i32", 0x1234)]
        moved = 16 * n
    else:
        buffers = [(size, _FILL), (size, 0)]
        args = [("buffer", 0), ("buffer", 1), ("u64", n)]
        moved = 2 * 16 * n
    probe = _launch(ctx, bench, buffers, args, block=256, warmup=1, reps=1)
    per_rep = _launches_per_rep(ctx, _median_s(probe))
    result = _launch(ctx, bench, buffers, args, block=256, warmup=max(3, s.warmup), reps=s.bw_reps,
                     launches_per_rep=per_rep)
    median = _median_s(result)
    what = {"read": "read", "write": "written", "copy": "read + written"}[kind]
    text = (
        f"{bench.kernel}: 16-byte accesses over {size >> 20} MiB, bytes {what} / time; "
        + _describe_timing(result, median)
    )
    return moved / median, text


def _l2_shape(l2_bytes: int, full_grid: int, block: int, sm_count: int) -> Tuple[int, int]:
    """(blocks, n) for the L2 kernel: n 16-byte words, a whole number of trips of RL_L2_LOADS loads by every
    thread of ``blocks`` blocks, so that no thread has a partial trip.

    The working set stays near a quarter of the L2 and never above a third of it. The whole device (``full_grid``
    blocks) is used when one trip of every thread fits in that third; on a GPU whose L2 is small for its thread
    count, the grid shrinks to whole waves of ``sm_count`` blocks (at least one block per multiprocessor).
    """
    loads = _DEFINES["bandwidth"]["RL_L2_LOADS"]
    per_block = loads * block * 16  # bytes one block reads in one trip
    blocks = full_grid
    if blocks * per_block > l2_bytes // 3:
        sms = max(1, sm_count)
        blocks = max(sms, (l2_bytes // 3 // per_block) // sms * sms)
        blocks = min(blocks, full_grid)
    trips = max(1, (l2_bytes // 4) // (blocks * per_block))
    return blocks, trips * blocks * block * loads


def _run_l2(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """L2 read: a working set of about a quarter of the L2 (a whole number of RL_L2_LOADS-load trips per thread,
    see :func:`_l2_shape`), read `passes` times with L1-bypassing loads. Bytes per launch: 16 * n * passes."""
    l2 = ctx.info.get("l2_cache_bytes") or (4 << 20)
    block = 256
    sink = (128, 0)

    def make_args(n: int, passes: int) -> list:
        return [("buffer", 0), ("u64", n), ("i32", passes), ("buffer", 1), ("i32", _INT_SENTINEL)]

    # One short launch to learn the grid that fills the device.
    shape_probe = _launch(ctx, bench, [(1 << 20, _FILL), sink], make_args(1 << 16, 1), block=block, warmup=0,
                          reps=1)
    blocks, n = _l2_shape(l2, shape_probe["grid"], block, ctx.info.get("sm_count") or 1)
    size = 16 * n
    passes, result = _calibrate(ctx, bench, lambda p: make_args(n, p),
                                {"buffers": [(size, _FILL), sink], "block": block, "grid": blocks})
    median = _median_s(result)
    loads = _DEFINES["bandwidth"]["RL_L2_LOADS"]
    text = (
        f"{bench.kernel}: {size >> 10} KiB working set (L2 is {l2 >> 20} MiB) read {passes} times with "
        f"ld.global.cg (L1 bypassed), 16-byte accesses, {n // (blocks * block)} per thread per pass in trips of "
        f"{loads} loads in flight; " + _describe_timing(result, median)
    )
    return 16 * n * passes / median, text


# ---- vector FMA -----------------------------------------------------------------------------------------------


def _run_fma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = threads * iters * RL_FMA_UNROLL * RL_FMA_CHAINS * lanes * 2."""
    lanes = bench.param("lanes")
    argkind = bench.param("argkind")
    chains = _DEFINES["fma"]["RL_FMA_CHAINS"]
    unroll = _DEFINES["fma"]["RL_FMA_UNROLL"]
    if argkind == "x2":
        tail = [("f32", 0.999), ("f32", 0.001), ("u32", 0xFFFFFFFF)]  # XOR of positive halves: sign bits stay 0
    else:
        tail = [(argkind, 0.999), (argkind, 0.001), (argkind, _NAN)]

    def make_args(iters: int) -> list:
        return [("buffer", 0), ("i32", iters)] + tail

    iters, result = _calibrate(ctx, bench, make_args, {"buffers": [(256, 0)], "block": 256})
    median = _median_s(result)
    threads = result["grid"] * result["block"]
    flops = 2 * threads * iters * unroll * chains * lanes
    text = (
        f"{bench.param('instruction')}: {chains} independent chains x {unroll} per loop x {iters} loops per "
        f"thread, {lanes} lane(s) per instruction, 2 FLOPs per FMA; " + _describe_timing(result, median)
    )
    return flops / median, text


# ---- tensor cores ---------------------------------------------------------------------------------------------

# Result check of the tensor-core kernels (their `check` argument = 1): all-ones operands, one block, a few loops.
_CHECK_ITERS = 4
_CHECK_BLOCK = 256


def _tensor_check_layout(bench: Benchmark) -> Tuple[int, int]:
    """(threads, values per thread) the check mode of a tensor-core kernel stores: block 0's accumulators."""
    if bench.source == "wgmma":
        return _DEFINES["wgmma"]["RL_WGMMA_THREADS"], 128
    return _CHECK_BLOCK, _DEFINES["mma"]["RL_MMA_CHAINS"] * 4


def _tensor_check_expected(bench: Benchmark, iters: int) -> List[float]:
    """What a tensor-core kernel's check mode must store after ``iters`` loops on all-ones operands: each matrix
    instruction adds K (the dot product of K ones) to every accumulator element, and the kernels start from
    known values (see cuda/mma.cu and cuda/wgmma.cu).

    mma.sync: value (c, j) of a thread, for accumulator chain c and element j, is INIT(c, j) + iters * K, with
    INIT(c, j) = 0.125 * (4c + j) for a float accumulator and 4c + j for int32. wgmma: value i of a thread is
    (i & 15) + iters * RL_WGMMA_UNROLL * K."""
    _m, _n, k = bench.param("shape")
    threads, per_thread = _tensor_check_layout(bench)
    if bench.source == "wgmma":
        step = iters * _DEFINES["wgmma"]["RL_WGMMA_UNROLL"] * k
        one = [(i & 15) + step if bench.param("integer") else float((i & 15) + step) for i in range(per_thread)]
    else:
        integer = bench.param("integer")
        one = [(i if integer else 0.125 * i) + iters * k for i in range(per_thread)]
    return one * threads


def _tensor_check_compare(bench: Benchmark, data: bytes, iters: int) -> List[str]:
    """Compare the bytes a check launch read back with :func:`_tensor_check_expected`; return a description of
    each of the first few mismatches (an empty list when every value matches exactly)."""
    expected = _tensor_check_expected(bench, iters)
    code = "i" if bench.param("integer") else "f"
    if len(data) != 4 * len(expected):
        return [f"read back {len(data)} bytes, expected {4 * len(expected)}"]
    got = struct.unpack(f"<{len(expected)}{code}", data)
    _threads, per_thread = _tensor_check_layout(bench)
    problems = []
    for index, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            thread, value = divmod(index, per_thread)
            problems.append(f"thread {thread} value {value}: {g!r} instead of {e!r}")
            if len(problems) == 5:
                problems.append("...")
                break
    return problems


def _tensor_check(ctx: _Context, bench: Benchmark) -> None:
    """Run ``bench``'s kernel once in its check mode and raise GpuError when D is not what the instruction count
    and K imply, so that no throughput is ever reported for a kernel that computes something else."""
    threads, per_thread = _tensor_check_layout(bench)
    nbytes = 4 * threads * per_thread
    sentinel = ("i32", -_INT_SENTINEL) if bench.param("integer") else ("f32", _NAN)
    args = [("buffer", 0), ("i32", _CHECK_ITERS), ("u32", 0), sentinel, ("i32", 1)]
    result = _launch(ctx, bench, [(nbytes, 0)], args, block=threads, grid=1, warmup=0, reps=1,
                     readback=(0, 0, nbytes))
    problems = _tensor_check_compare(bench, result["readback"], _CHECK_ITERS)
    if problems:
        raise GpuError(f"{bench.kernel} computed wrong results on all-ones operands ({_CHECK_ITERS} loops): "
                       + "; ".join(problems))


def _tensor_rate(ctx: _Context, bench: Benchmark, launch_kw: Dict[str, Any], group_threads: int,
                 per_iter: int) -> Tuple[float, int, str]:
    """Check the tensor-core kernel of ``bench`` on all-ones operands, then calibrate and time it on random ones
    (arguments: sink, iters, seed, sentinel, check=0). FLOPs per launch = groups * iters * per_iter * 2*m*n*k, a
    group being ``group_threads`` threads that issue ``per_iter`` instructions per loop. Returns (FLOP/s, iters,
    the timing description)."""
    m, n, k = bench.param("shape")
    sentinel = ("i32", -_INT_SENTINEL) if bench.param("integer") else ("f32", _NAN)
    _tensor_check(ctx, bench)

    def make_args(iters: int) -> list:
        return [("buffer", 0), ("i32", iters), ("u32", 0x9E3779B9), sentinel, ("i32", 0)]

    iters, result = _calibrate(ctx, bench, make_args, {"buffers": [(256, 0)], **launch_kw})
    median = _median_s(result)
    groups = result["grid"] * result["block"] // group_threads
    flops = groups * iters * per_iter * 2 * m * n * k
    return flops / median, iters, _describe_timing(result, median)


def _run_mma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = warps * iters * RL_MMA_CHAINS * 2*m*n*k."""
    m, n, k = bench.param("shape")
    chains = _DEFINES["mma"]["RL_MMA_CHAINS"]
    sets = _DEFINES["mma"]["RL_MMA_SETS"]
    rate, iters, timing = _tensor_rate(ctx, bench, {"block": 256}, 32, chains)
    return rate, (
        f"mma.sync m{m}n{n}k{k} {bench.param('types')}: {chains} independent accumulators per warp x {iters} "
        f"loops, 2*m*n*k per instruction, random operands cycling through {sets} A and {sets} B fragment sets, "
        f"result checked on all-ones operands; " + timing
    )


def _run_wgmma(ctx: _Context, bench: Benchmark) -> Tuple[float, str]:
    """FLOPs per launch = warpgroups * iters * RL_WGMMA_UNROLL * 2*64*256*k."""
    m, n, k = bench.param("shape")
    unroll = _DEFINES["wgmma"]["RL_WGMMA_UNROLL"]
    tiles = _DEFINES["wgmma"]["RL_WGMMA_TILES"]
    launch = {"block": _DEFINES["wgmma"]["RL_WGMMA_THREADS"], "max_blocks_per_sm": 1}
    rate, iters, timing = _tensor_rate(ctx, bench, launch, 128, unroll)
    return rate, (
        f"wgmma.mma_async m{m}n{n}k{k} {bench.param('types')} (sm_90a), A and B from shared memory: {unroll} per "
        f"commit group x {iters} loops per warpgroup, 2*m*n*k per instruction, random operands cycling through "
        f"{tiles} A and {tiles} B tiles, result checked on all-ones operands; " + timing
    )


def _sm80(cc: CC) -> bool:
    return cc >= (8, 0)


def _fp8_mma_sync(cc: CC) -> bool:
    # Native e4m3 mma.sync (QMMA): sm_89 and sm_12x. sm_90 / sm_100 only emulate it through fp16 (see mma.cu).
    return cc == (8, 9) or cc[0] == 12


def _hopper(cc: CC) -> bool:
    return cc == (9, 0)


def _always(cc: CC) -> bool:
    return True


def _wgmma_enabled() -> bool:
    return os.environ.get("ROOFLINE_GPU_WGMMA", "1") != "0"


_REGISTRY: Tuple[Benchmark, ...] = (
    Benchmark("bandwidth/DRAM_read", "DRAM read", "bandwidth", "rl_bw_read", _always, _run_dram, (("kind", "read"),)),
    Benchmark("bandwidth/DRAM_write", "DRAM write", "bandwidth", "rl_bw_write", _always, _run_dram,
              (("kind", "write"),)),
    Benchmark("bandwidth/DRAM_copy", "DRAM copy", "bandwidth", "rl_bw_copy", _always, _run_dram, (("kind", "copy"),)),
    Benchmark("bandwidth/L2", "L2 read", "bandwidth", "rl_l2_read", _always, _run_l2),
    Benchmark("vector/float64", "fp64 FMA", "fma", "rl_fma_f64", _always, _run_fma,
              (("lanes", 1), ("argkind", "f64"), ("instruction", "DFMA"))),
    Benchmark("vector/float32", "fp32 FMA", "fma", "rl_fma_f32", _always, _run_fma,
              (("lanes", 1), ("argkind", "f32"), ("instruction", "FFMA"))),
    Benchmark("vector/float16", "fp16x2 FMA", "fma", "rl_fma_f16x2", _sm80, _run_fma,
              (("lanes", 2), ("argkind", "x2"), ("instruction", "fma.rn.f16x2 (HFMA2)"))),
    Benchmark("vector/bfloat16", "bf16x2 FMA", "fma", "rl_fma_bf16x2", _sm80, _run_fma,
              (("lanes", 2), ("argkind", "x2"), ("instruction", "fma.rn.bf16x2 (HFMA2.BF16)"))),
    Benchmark("matrix/float16", "fp16 mma.sync", "mma", "rl_mma_f16", _sm80, _run_mma,
              (("shape", (16, 8, 16)), ("types", "f16 x f16 -> f32"), ("integer", False))),
    Benchmark("matrix/bfloat16", "bf16 mma.sync", "mma", "rl_mma_bf16", _sm80, _run_mma,
              (("shape", (16, 8, 16)), ("types", "bf16 x bf16 -> f32"), ("integer", False))),
    Benchmark("matrix/tfloat32", "tf32 mma.sync", "mma", "rl_mma_tf32", _sm80, _run_mma,
              (("shape", (16, 8, 8)), ("types", "tf32 x tf32 -> f32"), ("integer", False))),
    Benchmark("matrix/int8", "int8 mma.sync", "mma", "rl_mma_s8", _sm80, _run_mma,
              (("shape", (16, 8, 32)), ("types", "s8 x s8 -> s32"), ("integer", True))),
    Benchmark("matrix/float8_e4m3fn", "fp8 e4m3 mma.sync", "mma", "rl_mma_e4m3", _fp8_mma_sync, _run_mma,
              (("shape", (16, 8, 32)), ("types", "e4m3 x e4m3 -> f32"), ("integer", False))),
    # Hopper only; run last, since they are the newest code path (see docs/gpu.md). ROOFLINE_GPU_WGMMA=0 skips them.
    Benchmark("matrix/float16", "fp16 wgmma", "wgmma", "rl_wgmma_f16", _hopper, _run_wgmma,
              (("shape", (64, 256, 16)), ("types", "f16 x f16 -> f32"), ("integer", False)), "a"),
    Benchmark("matrix/bfloat16", "bf16 wgmma", "wgmma", "rl_wgmma_bf16", _hopper, _run_wgmma,
              (("shape", (64, 256, 16)), ("types", "bf16 x bf16 -> f32"), ("integer", False)), "a"),
    Benchmark("matrix/tfloat32", "tf32 wgmma", "wgmma", "rl_wgmma_tf32", _hopper, _run_wgmma,
              (("shape", (64, 256, 8)), ("types", "tf32 x tf32 -> f32"), ("integer", False)), "a"),
    Benchmark("matrix/int8", "int8 wgmma", "wgmma", "rl_wgmma_s8", _hopper, _run_wgmma,
              (("shape", (64, 256, 32)), ("types", "s8 x s8 -> s32"), ("integer", True)), "a"),
    Benchmark("matrix/float8_e4m3fn", "fp8 e4m3 wgmma", "wgmma", "rl_wgmma_e4m3", _hopper, _run_wgmma,
              (("shape", (64, 256, 32)), ("types", "e4m3 x e4m3 -> f32"), ("integer", False)), "a"),
)


def kernels(compute_capability: Optional[Sequence[int]] = None) -> List[Dict[str, Any]]:
    """The benchmark registry: one dict per benchmark with ``key``, ``label``, ``source``, ``kernel``, ``arch``
    (``"sm_XY"`` or ``"sm_XYa"`` pattern) and, when ``compute_capability`` is given, ``supported`` for it."""
    out = []
    for bench in _REGISTRY:
        entry = {
            "key": bench.key,
            "label": bench.label,
            "source": bench.source,
            "kernel": bench.kernel,
            "arch": "sm_XY" + bench.arch_suffix,
        }
        if compute_capability is not None:
            cc = (int(compute_capability[0]), int(compute_capability[1]))
            entry["supported"] = bool(bench.supported(cc))
        out.append(entry)
    return out
