"""The C binding at its boundary: Python code run while a call is described, values no tensor can have, counts and
codes out of range, and the error texts of the CPU benchmarks.

Cases that corrupted memory before their fix run in a child interpreter (with PYTHONMALLOC=malloc, so that a build
with AddressSanitizer sees freed Python objects): a crash fails the test instead of the test run, and a sanitizer
report on its stderr fails it too. Expected counts are worked out by hand in the comments (float32: 4 bytes).
"""

import errno
import json
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

import roofline
from roofline import TensorSpec, _core
from roofline._datamodel._records import RECORD_DTYPE

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(roofline.__file__)))
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")

PRELUDE = '''
import json
import numpy as np
from roofline import _core, TensorSpec
from roofline._datamodel._records import RECORD_DTYPE

FIELDS = ("matrix_flops", "vector_flops", "special_ops", "bytes_read", "bytes_written", "status", "dtype", "op")

def rows(r):
    return [{k: int(x[k]) for k in FIELDS} for x in np.frombuffer(r.records_bytes(), RECORD_DTYPE)]

class T(TensorSpec):
    """A TensorSpec whose stride() runs a hook (once) before answering."""
    __slots__ = ("hook",)

    def stride(self):
        h = getattr(self, "hook", None)
        if h is not None:
            self.hook = None
            h()
        return super().stride()

def S(*shape):
    return TensorSpec(shape)

def caught(f):
    """Run f; return the type name and text of what it raised, or None."""
    try:
        f()
    except Exception as e:
        return [type(e).__name__, str(e)]
    return None

F32 = {"float32": 2}
'''


def _child(code):
    """Run PRELUDE + code in a child interpreter; return the JSON object its last line of output prints."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONMALLOC"] = "malloc"
    p = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=300, env=env, cwd=ROOT)
    assert p.returncode == 0, f"child exited with {p.returncode}:\n{p.stderr[-4000:]}"
    assert "runtime error:" not in p.stderr and "Sanitizer" not in p.stderr, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def _rows(rec):
    return np.frombuffer(rec.records_bytes(), RECORD_DTYPE)


def _recorder():
    return _core.Recorder(TensorSpec, {"float32": 2})


# ---- Python code that mutates what is being described -----------------------------------------------------


def test_tensor_list_cleared_by_stride_while_it_is_walked():
    out = _child('''
        r = _core.Recorder(TensorSpec, F32)
        lst = []
        first = T((2, 3))
        first.hook = lst.clear  # frees the list's item array and, with it, the only references to the others
        lst.extend([first] + [S(2, 3) for _ in range(3)])
        del first
        i = r.add_op(_core.K_COPY)
        r.record(i, 0, 0, (lst, 0), None, S(8, 3))
        print(json.dumps({"len": len(lst), "rows": rows(r)}))
    ''')
    assert out["len"] == 0
    (row,) = out["rows"]
    # cat of four (2, 3) float32 tensors into (8, 3): reads 4 * 6 * 4 = 96 bytes, writes 24 * 4 = 96 bytes
    assert (row["status"], row["bytes_read"], row["bytes_written"], row["vector_flops"]) == (0, 96, 96, 0)


def test_outputs_list_cleared_while_it_is_walked():
    out = _child('''
        r = _core.Recorder(TensorSpec, F32)
        outs = []
        first = T((2, 3))
        first.hook = outs.clear
        outs.extend([first, S(2, 3), [S(2, 3), S(2, 3)]])
        del first
        i = r.add_op(_core.K_EWISE, 1, 0)
        r.record(i, 0, 0, (S(2, 3),), None, outs)
        print(json.dumps(rows(r)))
    ''')
    (row,) = out
    # 1 FLOP per element of the first result (6); reads the (2, 3) input (24 bytes); writes four (2, 3) results
    assert (row["status"], row["vector_flops"], row["bytes_read"], row["bytes_written"]) == (0, 6, 24, 96)


def test_keyword_argument_dropped_from_kwargs_while_it_is_described():
    out = _child('''
        r = _core.Recorder(TensorSpec, F32)
        kw = {}
        a, b = T((2, 3)), T((2, 3))
        a.hook = kw.clear  # drops the only reference to the list being walked
        b.hook = kw.clear
        kw["others"] = [a, b, S(2, 3)]
        del a, b
        i = r.add_op(_core.K_COPY, kwnames=("others",), kwpos=1)
        r.record(i, 0, 0, (S(2, 3),), kw, S(8, 3))
        print(json.dumps(rows(r)))
    ''')
    (row,) = out
    # reads the (2, 3) argument and the three (2, 3) tensors of the keyword list: 4 * 24; writes (8, 3): 96
    assert (row["status"], row["bytes_read"], row["bytes_written"]) == (0, 96, 96)


def test_add_op_from_inside_record_is_refused_and_the_call_still_counted():
    out = _child('''
        r = _core.Recorder(TensorSpec, F32)
        i = r.add_op(_core.K_EWISE, 1, 0)
        seen = []
        def grow():  # would reallocate the op table under record()
            seen.append(caught(lambda: [r.add_op(_core.K_EWISE, 1, 0) for _ in range(200)]))
        a = T((2, 3))
        a.hook = grow
        r.record(i, 0, 0, (a, S(2, 3)), None, S(2, 3))
        print(json.dumps({"seen": seen, "rows": rows(r), "next": r.add_op(_core.K_ZERO)}))
    ''')
    assert out["seen"][0][0] == "RuntimeError" and "not re-entrant" in out["seen"][0][1]
    assert out["next"] == 1  # nothing was added while record() ran
    (row,) = out["rows"]
    # add of two (2, 3) tensors: 6 FLOPs, reads 2 * 24, writes 24
    assert (row["status"], row["vector_flops"], row["bytes_read"], row["bytes_written"]) == (0, 6, 48, 24)


def test_nested_record_is_refused_and_the_outer_call_still_counted():
    out = _child('''
        r = _core.Recorder(TensorSpec, F32)
        i = r.add_op(_core.K_EWISE, 1, 0)
        many = [S(4, 4) for _ in range(300)]  # would reallocate the scratch arrays the outer call is filling
        seen = []
        a = T((2, 3))
        a.hook = lambda: seen.append(caught(lambda: r.record(i, 0, 0, (many,), None, many)))
        r.record(i, 0, 0, (a, S(2, 3)), None, S(2, 3))
        print(json.dumps({"seen": seen, "rows": rows(r)}))
    ''')
    assert out["seen"][0][0] == "RuntimeError" and "not re-entrant" in out["seen"][0][1]
    (row,) = out["rows"]
    assert (row["status"], row["vector_flops"], row["bytes_read"], row["bytes_written"]) == (0, 6, 48, 24)


def test_tensor_like_whose_shape_property_reenters_every_method():
    out = _child('''
        class Fake:
            """Tensor-like: shape and dtype are Python properties."""
            def __init__(self, shape, hook=None):
                self._shape, self.hook = shape, hook
            @property
            def shape(self):
                h, self.hook = self.hook, None
                if h is not None:
                    h()
                return self._shape
            def stride(self):
                return (self._shape[1], 1)
            @property
            def dtype(self):
                return "float32"

        r = _core.Recorder(Fake, F32)
        i = r.add_op(_core.K_EWISE, 1, 0)
        r.append(i, 0, 0, 2, 1, 1, 0, 1, 1, 0)
        calls = {
            "record": lambda: r.record(i, 0, 0, (Fake((2, 3)),), None, Fake((2, 3))),
            "add_op": lambda: r.add_op(_core.K_ZERO),
            "append": lambda: r.append(i, 0, 0, 2, 1, 1, 0, 1, 1, 0),
            "clear": r.clear,
            "set_times": lambda: r.set_times(0, 0.0, 1.0),
            "__init__": lambda: r.__init__(Fake, {}),
        }
        seen = {}
        def every():
            for name, f in calls.items():
                seen[name] = caught(f)
        r.record(i, 0, 0, (Fake((2, 3), every), Fake((2, 3))), None, Fake((2, 3)))
        print(json.dumps({"seen": seen, "rows": rows(r)}))
    ''')
    for name, err in out["seen"].items():
        assert err is not None and err[0] == "RuntimeError" and f"Recorder.{name}" in err[1], (name, err)
    first, second = out["rows"]  # the appended row survived the refused clear(); the described call follows it
    assert (first["vector_flops"], first["bytes_read"]) == (1, 1)
    assert (second["status"], second["vector_flops"], second["bytes_read"], second["bytes_written"], second["dtype"]) \
        == (0, 6, 48, 24, 2)


def test_dtype_map_is_a_private_copy():
    dm = {"float32": 2}
    rec = _core.Recorder(TensorSpec, dm)
    dm["float32"] = 999  # changing the caller's dict afterwards changes nothing
    i = rec.add_op(_core.K_EWISE, 1, 0)
    rec.record(i, 0, 0, (TensorSpec((2,)),), None, TensorSpec((2,)))
    assert int(_rows(rec)[0]["dtype"]) == 2


def test_dtype_code_out_of_range_is_an_error():
    rec = _core.Recorder(TensorSpec, {"float32": 300})
    i = rec.add_op(_core.K_EWISE, 1, 0)
    with pytest.raises(ValueError, match="300 is not a dtype code"):
        rec.record(i, 0, 0, (TensorSpec((2,)),), None, TensorSpec((2,)))


# ---- shapes and integer arguments no tensor can have --------------------------------------------------------


def test_contiguous_stride_overflow_is_an_overflow_error_naming_the_argument():
    out = _child('''
        import roofline
        res = {"sum": caught(lambda: roofline.cost("sum", (2**62, 2**62, 4), out=()))}

        class NoStrides(TensorSpec):  # a layout without strides (sparse): described as contiguous
            __slots__ = ()
            def stride(self):
                raise RuntimeError("no strides")

        r = _core.Recorder(TensorSpec, F32)
        i = r.add_op(_core.K_COPY)
        # 0 elements, but the contiguous strides 4 * 2**62 do not fit in int64
        res["empty"] = caught(lambda: r.record(i, 0, 0, (NoStrides((0, 2**62, 4)),), None, S(0)))
        r.record(i, 0, 0, (NoStrides((2**20, 2**20)),), None, S(1))  # fits: recorded as an estimate
        res["rows"] = rows(r)
        print(json.dumps(res))
    ''')
    kind, msg = out["sum"]
    assert kind == "OverflowError" and "argument 0" in msg
    assert "(4611686018427387904, 4611686018427387904, 4) has 2**63 or more elements" in msg
    kind, msg = out["empty"]
    assert kind == "OverflowError" and "argument 0" in msg and "contiguous strides" in msg
    (row,) = out["rows"]
    assert row["status"] == _core.E_DESCRIBE and row["bytes_read"] == 0


def test_size_beyond_64_bits_names_the_argument_and_dimension():
    # cost() validates its shapes before the recorder sees them; both layers name the argument and the overflow.
    with pytest.raises(OverflowError, match=r"argument 0: .*18446744073709551616 .*does not fit in 64 bits"):
        roofline.cost("sum", (2**64, 3), out=())
    rec = _recorder()
    i = rec.add_op(_core.K_COPY, name="aten::sum")

    class Unchecked(TensorSpec):  # a tensor-like whose shape skipped TensorSpec's own validation
        __slots__ = ("fake",)

        def __getattribute__(self, name):
            if name == "shape":
                return object.__getattribute__(self, "fake")
            return object.__getattribute__(self, name)

    big = Unchecked((2, 3))
    big.fake = (2**64, 3)
    with pytest.raises(OverflowError, match=r"^aten::sum: argument 0: shape\[0\] does not fit in a signed 64-bit"):
        rec.record(i, 0, 0, (big,), None, TensorSpec(()))
    big.fake = (1, 2**70)
    with pytest.raises(OverflowError, match=r"^aten::sum: output 0: shape\[1\] does not fit"):
        rec.record(i, 0, 0, (TensorSpec((2, 3)),), None, big)
    i = rec.add_op(_core.K_COPY, name="aten::cat")
    with pytest.raises(OverflowError, match=r"^aten::cat: argument 0, element 1: shape\[2\] does not fit"):
        big.fake = (1, 1, 2**63)
        rec.record(i, 0, 0, ([TensorSpec((1,)), big],), None, TensorSpec((2,)))
    with pytest.raises(OverflowError, match=r"stride 9223372036854775808 at dimension 0 does not fit"):
        TensorSpec((2, 2), stride=(2**63, 1))  # TensorSpec refuses it itself ...

    class UncheckedStride(TensorSpec):  # ... and the recorder refuses it from a tensor-like that does not
        __slots__ = ()

        def stride(self):
            return (2**63, 1)

    with pytest.raises(OverflowError, match=r"^aten::cat: argument 0: stride\(\)\[0\] does not fit"):
        rec.record(i, 0, 0, (UncheckedStride((2, 2)),), None, TensorSpec((4,)))


def test_int_list_element_beyond_64_bits_names_the_argument():
    with pytest.raises(OverflowError, match=r"argument 1: .*18446744073709551616\].*does not fit in 64 bits"):
        roofline.cost("sum", (2, 3), [0, 2**64], out=())  # cost() checks before the recorder
    rec = _recorder()
    i = rec.add_op(_core.K_COPY, name="aten::sum")
    with pytest.raises(OverflowError, match=r"^aten::sum: argument 1, element 1: does not fit in a signed 64-bit"):
        rec.record(i, 0, 0, (TensorSpec((2, 3)), [0, 2**64]), None, TensorSpec(()))


def test_sizes_no_tensor_has_are_errors_naming_them():
    class Shaped(TensorSpec):
        __slots__ = ("fake",)

        def __getattribute__(self, name):
            if name == "shape":
                return object.__getattribute__(self, "fake")
            return object.__getattribute__(self, name)

    rec = _recorder()
    i = rec.add_op(_core.K_COPY)
    neg = Shaped((2, 3))
    neg.fake = (2, -3)
    with pytest.raises(ValueError, match=r"^op #0: argument 0: shape\[1\] = -3 is negative"):
        rec.record(i, 0, 0, (neg,), None, TensorSpec((6,)))
    flag = Shaped((2, 3))
    flag.fake = (True, 3)
    with pytest.raises(TypeError, match=r"shape\[0\] is a bool"):
        rec.record(i, 0, 0, (flag,), None, TensorSpec((6,)))
    symbolic = Shaped((2, 3))
    symbolic.fake = (2, "s0")  # not an int: cannot be described, the record says so
    rec.record(i, 0, 0, (symbolic,), None, TensorSpec((6,)))
    assert int(_rows(rec)[-1]["status"]) == _core.E_DESCRIBE


def test_long_int_list_is_not_copied():
    rec = _recorder()
    i = rec.add_op(_core.K_EWISE_IN, 1, 0)
    junk = [1] * 1_000_000
    tracemalloc.start()
    try:
        rec.record(i, 0, 0, (TensorSpec((2, 3)), junk), None, TensorSpec((2, 3)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024  # copying the list would take 8 MB
    row = _rows(rec)[0]
    assert (int(row["status"]), int(row["vector_flops"])) == (0, 6)  # 1 FLOP per element of the (2, 3) input


def test_error_messages_stay_short():
    rec = _recorder()
    i = rec.add_op(_core.K_COPY, name="x" * 1_000_000)
    with pytest.raises(OverflowError) as e:
        rec.record(i, 0, 0, (TensorSpec((2**40,) * 16),), None, TensorSpec((1,)))
    assert len(str(e.value)) < 1000 and "has 2**63 or more elements" in str(e.value)
    with pytest.raises(OverflowError) as e:
        rec.append(i, 0, 0, 0, 2**100000, 0, 0, 0, 0, 0)
    assert len(str(e.value)) < 1000


# ---- counts, codes and masks at the boundary ------------------------------------------------------------------


def test_append_counts_are_never_wrapped_or_truncated():
    rec = _recorder()
    i = rec.add_op(_core.K_ZERO, name="mylib::op")
    with pytest.raises(OverflowError, match=r"mylib::op: matrix_flops does not fit in 64 bits"):
        rec.append(i, 0, 0, 0, 2**64, 0, 0, 0, 0, 0)
    with pytest.raises(OverflowError, match=r"mylib::op: flop_counter_flops does not fit in 64 bits"):
        rec.append(i, 0, 0, 0, 0, 0, 0, 0, 0, 2**70)
    with pytest.raises(ValueError, match=r"mylib::op: bytes_read must not be negative, got -1"):
        rec.append(i, 0, 0, 0, 0, 0, 0, -1, 0, 0)
    with pytest.raises(TypeError, match=r"mylib::op: vector_flops must be an int, not float"):
        rec.append(i, 0, 0, 0, 0, 2.7, 0, 0, 0, 0)
    with pytest.raises(TypeError, match=r"special_ops must be an int, not bool"):
        rec.append(i, 0, 0, 0, 0, 0, True, 0, 0, 0)
    assert len(rec) == 0
    rec.append(i, 0, 0, 0, 2**64 - 1, 2**63, 0, 0, 1, 0)  # the largest counts are kept exactly
    row = _rows(rec)[0]
    assert int(row["matrix_flops"]) == 2**64 - 1 and int(row["vector_flops"]) == 2**63
    rec.append(i, np.uint32(1), np.int64(2), np.int8(2), np.uint64(2**64 - 1), np.int64(5), 0, 0, 0, 0)
    row = _rows(rec)[1]  # integers of other libraries are read exactly, through __index__
    assert (int(row["module"]), int(row["phase"]), int(row["matrix_flops"]), int(row["vector_flops"])) == (
        1, 2, 2**64 - 1, 5)
    with pytest.raises(TypeError, match="vector_flops must be an int, not numpy.float64"):
        rec.append(i, 0, 0, 0, 0, np.float64(2.0), 0, 0, 0, 0)
    unnamed = rec.add_op(_core.K_ZERO)
    with pytest.raises(OverflowError, match=r"op #1: bytes_written"):
        rec.append(unnamed, 0, 0, 0, 0, 0, 0, 0, 2**64, 0)


def test_record_and_append_check_module_phase_dtype_status():
    rec = _recorder()
    i = rec.add_op(_core.K_EWISE, 1, 0)
    args = ((TensorSpec((2,)),), None, TensorSpec((2,)))
    with pytest.raises(ValueError, match="module must not be negative"):
        rec.record(i, -1, 0, *args)
    with pytest.raises(OverflowError, match="module must be at most 4294967295"):
        rec.record(i, 2**32, 0, *args)
    with pytest.raises(OverflowError,
                       match=r"phase \(0 forward, 1 backward, 2 optimizer, 3 recompute\) must be at most 3, got 257"):
        rec.record(i, 0, 257, *args)
    with pytest.raises(ValueError, match="phase .* must not be negative"):
        rec.record(i, 0, -1, *args)
    with pytest.raises(TypeError, match="phase .* must be an int"):
        rec.record(i, 0, 1.0, *args)
    with pytest.raises(TypeError, match="kwargs must be a dict or None"):
        rec.record(i, 0, 0, args[0], [("alpha", 1)], args[2])
    with pytest.raises(ValueError, match="op index -1 was not registered"):
        rec.record(-1, 0, 0, *args)
    with pytest.raises(ValueError, match="module must not be negative"):
        rec.append(i, -1, 0, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(OverflowError, match="phase .* must be at most 3, got 4"):
        rec.append(i, 0, 4, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(OverflowError, match=f"dtype must be at most {len(_core.dtype_table())}, got 256"):
        rec.append(i, 0, 0, 256, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="dtype must not be negative"):
        rec.append(i, 0, 0, -1, 0, 0, 0, 0, 0, 0)
    with pytest.raises(OverflowError, match="status must be at most 255"):
        rec.append(i, 0, 0, 0, 0, 0, 0, 0, 0, 0, 256)
    with pytest.raises(ValueError, match="status 8 is not a record status"):  # 0..7: RL_OK .. RL_E_DATA
        rec.append(i, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8)
    assert len(rec) == 0
    rec.record(i, 2**32 - 1, 2, *args)
    rec.append(i, 7, 1, 2, 0, 0, 0, 0, 0, 0, _core.E_DESCRIBE)
    rows = _rows(rec)
    assert [(int(r["module"]), int(r["phase"]), int(r["status"])) for r in rows] == [
        (2**32 - 1, 2, 0), (7, 1, _core.E_DESCRIBE)]


def test_add_op_masks_and_flags_are_range_checked():
    rec = _recorder()
    with pytest.raises(ValueError, match="noread_mask must not be negative"):
        rec.add_op(_core.K_EWISE, noread_mask=-1)
    with pytest.raises(OverflowError, match="write_mask does not fit in 64 bits"):
        rec.add_op(_core.K_EWISE, write_mask=2**64)
    with pytest.raises(OverflowError, match="flags must be at most 4294967295"):
        rec.add_op(_core.K_EWISE, flags=2**32)
    with pytest.raises(TypeError, match="kwnames must be a tuple of str"):
        rec.add_op(_core.K_EWISE, kwnames=(1,))
    with pytest.raises(ValueError, match="kwpos must be -1"):
        rec.add_op(_core.K_EWISE, kwpos=-5)
    assert rec.add_op(_core.K_EWISE, noread_mask=2**64 - 1, flags=2**32 - 1) == 0


# ---- classify and the CPU benchmarks --------------------------------------------------------------------------


def test_classify_converts_only_type_errors():
    class Boom(Exception):
        pass

    class Exploding:
        def __array__(self, *a, **k):
            raise Boom("from __array__")

    class Hungry:
        def __array__(self, *a, **k):
            raise MemoryError("no memory")

    one = [1.0]
    with pytest.raises(Boom):
        _core.classify(Exploding(), one, one, one, one)
    with pytest.raises(MemoryError):
        _core.classify(one, Hungry(), one, one, one)
    with pytest.raises(TypeError, match="classify: time must be a 1-D array of numbers"):
        _core.classify(one, one, "abc", one, one)
    with pytest.raises(TypeError, match="classify: peak must be a 1-D array of numbers"):
        _core.classify(one, one, one, [[1.0]], one)


def test_cpu_benchmark_argument_errors_are_value_errors_with_the_numbers():
    with pytest.raises(ValueError, match=r"^seconds must be > 0 and <= 600\.0, not 1000000000\.0$"):
        _core.cpu_fma_peak("float64", 1e9)
    with pytest.raises(ValueError, match=r"^seconds must be > 0 and <= 600\.0, not nan$"):
        _core.cpu_fma_peak("float64", float("nan"))
    with pytest.raises(ValueError, match=r"^min_seconds must be >= 0 and <= 600\.0, not -0\.5$"):
        _core.cpu_bandwidth_sweep([1 << 20], "read", 1, min_seconds=-0.5)
    with pytest.raises(ValueError, match=r"^min_seconds must be >= 0 and <= 600\.0, not inf$"):
        _core.cpu_bandwidth_sweep([1 << 20], "read", 1, min_seconds=float("inf"))


@pytest.mark.skipif(UNDER_ASAN, reason="an address-space limit and AddressSanitizer's shadow memory do not mix")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc are Linux")
def test_failed_system_call_names_the_call_and_the_error():
    out = _child('''
        import resource
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (64 << 20), resource.RLIM_INFINITY))
        print(json.dumps(caught(lambda: _core.cpu_bandwidth_sweep([1 << 30], "read", 1, 1, min_seconds=0.0))))
    ''')
    assert out is not None and out[0] == "RuntimeError"
    assert out[1] == f"mmap failed: {os.strerror(errno.ENOMEM)} (errno {errno.ENOMEM})"
