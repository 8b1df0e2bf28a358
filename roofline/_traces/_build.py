"""From the event model of a trace to the parts of a report: one record per counted op call, the op table, the
module sets, the collectives table and ``meta["trace"]``.

Which ops are records: the level ``roofline.measure`` records (``_ops.counted``: the outermost op that is not
``CompositeImplicitAutograd``), so a trace and a measured block of the same
step give the same rows. Each record's time is the summed duration of the GPU activities launched inside it (its
subtree: the op's own launches and those of the ops it called); a record that launched nothing on the GPU of a
GPU trace is untimed (its ``t_start``/``t_end`` are NaN), on a trace with no GPU activity its time is the op's CPU
duration.

A GPU activity launched outside every counted op is never dropped: inside ``record_param_comms`` it is a
collective's (a record, judged on the interconnect with the sizes the trace gives); otherwise it is listed in
``meta["trace"]["unattributed"]`` by kernel name, with its calls and time.
"""

from __future__ import annotations

import bisect
import math
import re

import numpy as np

from roofline._counting import _registry
from roofline._datamodel import _collectives
from roofline._datamodel._records import COUNTS_AND_FLOP_COUNTER, DTYPE_CODES, ITEMSIZE, PHASES, RECORD_DTYPE, OpInfo
from roofline._traces import _events, _ops
from roofline._traces._events import _OP
from roofline._util import _ints
from roofline._util._version import VERSION

US = 1e-6  # trace times are microseconds

# the status of a cost -> the record's status code (csrc's: 0 ok, 2 missing or mistyped argument: arguments not
# recorded or not fitting the op; 4 unknown cost kind, for an uncounted call of an op whose other calls were counted)
_STATUS_CODE = {"ok": 0, "unknown": 0, "no_shapes": 2, "error": 2}

# dtype names of record_param_comms's "dtype" argument (c10 ScalarType names)
_SCALAR_TYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
                 "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
                 "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2", "ComplexFloat": "complex64"}

# kineto's Input type strings -> dtype names, for the signature column only
_INPUT_TYPES = {"float": "f32", "double": "f64", "c10::Half": "f16", "c10::BFloat16": "bf16", "long int": "i64",
                "int": "i32", "short int": "i16", "signed char": "i8", "unsigned char": "u8", "bool": "b8",
                "c10::Float8_e4m3fn": "f8e4m3fn", "c10::Float8_e5m2": "f8e5m2"}

COMMS = _events.COMMS
_WRAPPERS = ("autograd::", "torch::autograd::")


def _collective_kind(name: str) -> tuple[str, bool]:
    """(collective of the vocabulary, uncertain) for record_param_comms's "Collective name"."""
    n = name.lower().replace("_", "")
    for key, kind in (("allreduce", "all_reduce"), ("reducescatter", "reduce_scatter"), ("allgather", "all_gather"),
                      ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("barrier", "barrier"),
                      ("gather", "gather"), ("scatter", "scatter"), ("reduce", "reduce"), ("send", "send"),
                      ("recv", "recv")):
        if key in n:
            return kind, False
    return "p2p", True


_OP_NAME = re.compile(r"[A-Za-z_]\w*::[A-Za-z_]\w*")


def _has_op_below(node) -> bool:
    stack = list(node.children)
    while stack:
        n = stack.pop()
        if n.kind == _OP and _OP_NAME.fullmatch(n.name):
            return True
        stack.extend(n.children)
    return False


def _signature(args) -> str:
    """The dtypes and shapes of the tensor arguments, as measure writes them (``bf16[1,512], f32[4]``)."""
    dims, types = args.get("Input Dims") or [], args.get("Input type") or []
    parts = []
    for d, t in zip(dims, types):
        if t in _INPUT_TYPES and isinstance(d, list):
            parts.append(f"{_INPUT_TYPES[t]}[{','.join(str(x) for x in d)}]")
        elif t == "TensorList" and isinstance(d, list):
            parts.append("[" + ", ".join(f"?[{','.join(str(x) for x in s)}]" for s in d if isinstance(s, list)) + "]")
    return ", ".join(parts)


class Calls:
    """The counted calls of a trace, with everything a report of any set of steps needs."""

    def __init__(self, model):
        self.model = model
        self.nodes = []        # record nodes, in thread and time order
        self.costs = []        # their costs (TraceOpCost), None for collectives
        self.comms = []        # per record: None, or the collective's (kind, group size, message bytes, uncertain)
        self.kernel_owner = []  # per kernel: record index or -1
        self._by_step = None
        self.gpu_time = sum(k.dur for k in model.kernels)  # microseconds of GPU activity in the whole file
        self._choose()
        self._link()

    def _choose(self):
        """The records: the events ``_ops.counted`` picks (the level measure records), and the collectives: an
        op enclosing a ``record_param_comms`` event (``c10d::allreduce_``), or that event itself when no counted op
        encloses it, is a collective with the sizes the event records."""
        nodes = self.model.nodes
        chosen = _ops.counted(*self.model.tree())
        # a composite op whose parts the trace does not show (no op below it) but which launched GPU work: the work
        # is its own, so it is a record (its cost is then that of the op itself, or unknown), never dropped
        for n in nodes:
            if (not chosen[n.index] and n.kind == _OP and n.subtree > 0 and _OP_NAME.fullmatch(n.name)
                    and not any(chosen[a.index] for a in n.ancestors()) and not _has_op_below(n)):
                chosen[n.index] = True
        comm_of: dict = {}  # node index of a record -> its record_param_comms node
        for n in nodes:
            if n.kind == _OP and n.name == COMMS:
                a = next((x for x in (n, *n.ancestors()) if chosen[x.index]), None)
                if a is None:
                    chosen[n.index] = True
                    a = n
                comm_of.setdefault(a.index, n)
        memo: dict = {}  # (name, recorded arguments) -> cost: a layer's ops repeat with the same shapes
        for n in nodes:
            if not chosen[n.index]:
                n.record = n.parent.record if n.parent is not None else -1
                continue
            n.record = len(self.nodes)
            self.nodes.append(n)
            if n.index in comm_of:
                self.costs.append(None)
                self.comms.append(self._comm(comm_of[n.index]))
                continue
            key = (n.name, id(n.args))  # the event model shares one args dict per distinct value
            c = memo.get(key)
            if c is None:
                c = memo[key] = _ops.cost_event(n.name, n.args or {})
            self.costs.append(c)
            self.comms.append(None)

    def by_step(self):
        """``(records by step, GPU activities by step, activities launched before the trace)``: the positions in
        :func:`step_table` as keys (-1: outside every step), record and kernel indices as values. A record belongs
        to the step whose range holds its start on the CPU; a kernel to its record's step, or (launched by no op)
        to the step holding its launch, or (unlinked) to the last step that started before it ran."""
        if self._by_step is None:
            steps = step_table(self.model)
            starts = [s for _, s, _ in steps]

            def cpu_step(t):
                p = bisect.bisect_right(starts, t) - 1
                return p if p >= 0 and t < steps[p][2] else -1

            recs: dict = {}
            rec_step = []
            for g, n in enumerate(self.nodes):
                p = cpu_step(n.ts)
                rec_step.append(p)
                recs.setdefault(p, []).append(g)
            kers: dict = {}
            early = []
            for i, (k, owner) in enumerate(zip(self.model.kernels, self.kernel_owner)):
                if owner >= 0:
                    p = rec_step[owner]
                elif k.early:
                    early.append(i)
                    continue
                elif k.launch_ts is not None:
                    p = cpu_step(k.launch_ts)
                else:
                    p = bisect.bisect_right(starts, k.ts) - 1
                kers.setdefault(p, []).append(i)
            self._by_step = (recs, kers, early)
        return self._by_step

    def _comm(self, n):
        a = n.args or {}
        kind, uncertain = _collective_kind(str(a.get("Collective name", "")))
        dtype = _SCALAR_TYPES.get(str(a.get("dtype", "")), None)
        size = ITEMSIZE.get(dtype, 0) if dtype else 0
        elems = max(int(a.get("In msg nelems") or 0), int(a.get("Out msg nelems") or 0))
        group = a.get("Group size")
        if not isinstance(group, int) or group < 1:
            info = self.model.header.get("distributedInfo")
            group = info.get("world_size") if isinstance(info, dict) else None
            if not isinstance(group, int) or group < 1:
                group, uncertain = 1, True
        if not size:
            uncertain = True
        return kind, group, elems * size, uncertain, dtype

    def _link(self):
        self.kernel_owner = [(k.launch.record if k.launch is not None else -1) for k in self.model.kernels]


def step_table(model):
    """``[(number, start, end)]`` of the ProfilerStep annotations in time order; end extended to the last kernel
    its launches ran (GPU work runs after its launch)."""
    return [(num, n.ts, n.end) for num, n in model.steps]


def choose_steps(model, steps):
    """``(list of step numbers or [None], how)``: which steps a report covers. ``steps``: None or "median" (the
    step of median duration; the whole trace when it has no ProfilerStep), "all" (every step together), an int
    (that step) or a list of ints (those steps, one report each)."""
    avail = [num for num, _ in model.steps]
    if steps is None or steps == "median":
        if not avail:
            return [None], "the whole trace (no ProfilerStep annotations)"
        if len(avail) == 1:
            return [avail[0]], f"step {avail[0]}, the only ProfilerStep of the trace"
        durs = {num: n.end - n.ts for num, n in model.steps}
        order = sorted(avail, key=lambda s: (durs[s], s))
        pick = order[(len(order) - 1) // 2]
        return [pick], (f"step {pick}, of median duration among the {len(avail)} ProfilerSteps "
                        f"({', '.join(str(s) for s in avail)})")
    if steps == "all":
        return [None], (f"all {len(avail)} ProfilerSteps together" if avail else
                        "the whole trace (no ProfilerStep annotations)")
    if isinstance(steps, str) or (isinstance(steps, (list, tuple, range)) and not steps):
        raise ValueError(f"load_trace: steps must be None, 'median', 'all', a step number or a list of step numbers, "
                         f"got {steps!r}")
    if isinstance(steps, (list, tuple, range)):
        wanted = [_ints.count(s, f"steps[{i}]", "load_trace", 0) for i, s in enumerate(steps)]
    else:  # one step number
        wanted = [_ints.count(steps, "steps", "load_trace", 0)]
    missing = [s for s in wanted if s not in avail]
    if missing:
        raise ValueError(f"load_trace: step {missing[0]} is not in the trace; its ProfilerSteps are "
                         f"{', '.join(str(s) for s in avail) or 'none'}")
    return list(wanted), "the step asked for"


def _short_kernel(name: str, limit: int = 120) -> str:
    s = re.sub(r"\s+", " ", name).strip()
    return s if len(s) <= limit else s[:limit - 3] + "..."


def build_report(calls: Calls, step, how: str, device_spec, device_note: str, ceilings, source_name: str,
                 report_cls):
    """The report of one step (``step`` a ProfilerStep number) or of the whole trace (``step`` None)."""
    model = calls.model
    steps = step_table(model)
    gpu_trace = bool(model.kernels)
    if step is not None:
        pos = [num for num, _, _ in steps].index(step)
        s0, s1 = steps[pos][1], steps[pos][2]

    else:
        s0 = min([n.ts for n in model.nodes] + [k.ts for k in model.kernels], default=0.0)

    # records and GPU work of this step (the trace split by step once, for every report of it)
    rec_by_step, ker_by_step, early = calls.by_step()
    key = -1 if step is None else pos
    if step is None:
        rec_ids = list(range(len(calls.nodes)))
        mine = [i for i, k in enumerate(model.kernels) if not k.early]
    else:
        rec_ids = rec_by_step.get(key, [])
        mine = ker_by_step.get(key, [])
    local = {g: j for j, g in enumerate(rec_ids)}
    kt = [0.0] * len(rec_ids)
    kfirst = [math.inf] * len(rec_ids)
    unattributed: dict = {}
    before = [len(early), sum(model.kernels[i].dur for i in early)]
    total = 0.0
    last_end = s0
    for i in mine:
        k, owner = model.kernels[i], calls.kernel_owner[i]
        if owner >= 0:
            j = local[owner]
            kt[j] += k.dur
            kfirst[j] = min(kfirst[j], k.ts)
        else:
            u = unattributed.setdefault(_short_kernel(k.name), [0, 0.0, k.cat])
            u[0] += 1
            u[1] += k.dur
        total += k.dur
        last_end = max(last_end, k.ts + k.dur)
    n_kernels = len(mine)
    outside = calls.gpu_time - total - before[1]

    # the op table, module sets, signatures
    ops: list = []
    op_index: dict = {}
    mod_index: dict = {("Global",): 0}
    module_sets = [("Global",)]
    sig_index = {"": 0}
    signatures = [""]
    fwd_modules = _forward_modules(model, calls) if model.has_modules else {}
    records = np.zeros(len(rec_ids), dtype=RECORD_DTYPE)
    coll = {c: [] for c in _collectives.COLUMNS}
    attributed = unknown_t = error_t = comm_t = zero_t = 0.0
    by_status: dict = {}
    # a call whose overload could not be chosen (no shapes, arguments that fit none) is named by the overload the
    # op's other calls resolved to, else by its packet ("aten.mm")
    overload_of: dict = {}
    for g in rec_ids:
        c = calls.costs[g]
        if c is not None and c.overload:
            overload_of.setdefault(c.op, (c.overload, c.kind))

    def identity(g):
        n, c, comm = calls.nodes[g], calls.costs[g], calls.comms[g]
        if comm is not None:
            packet = n.name.replace("::", ".") if n.name != COMMS else f"c10d.{comm[0]}"
            return f"{packet}.default", "collective", "ok"
        if c.overload:
            return c.overload, c.kind or "unknown", c.status
        if c.op in overload_of:
            return overload_of[c.op][0], overload_of[c.op][1], c.status
        entry = _registry.lookup(c.op) if c.status != "unknown" else None  # the op's formula, when it has one
        return c.op.replace("::", "."), entry.kind if entry is not None else "unknown", c.status

    # an op's kind is that of its countable calls: "unknown" (r.unknown_ops) only when it has no formula; a call of
    # it that could not be counted is an error of that op (r.errors), never a silent 0
    known: dict = {}
    for g in rec_ids:
        name, kind, status = identity(g)
        if status != "unknown" and kind != "unknown":
            known.setdefault(name, kind)
    for j, g in enumerate(rec_ids):
        n, c, comm = calls.nodes[g], calls.costs[g], calls.comms[g]
        r = records[j]
        name, kind, status = identity(g)
        if name not in op_index:
            op_index[name] = len(ops)
            packet = name.rsplit(".", 1)[0] if name.count(".") >= 2 else name
            ops.append(OpInfo(name, packet, known.get(name, "unknown")))
        r["op"] = op_index[name]
        phase = _events.phase_of(n)
        r["phase"] = PHASES.index(phase)
        mods = _module_set(n, phase, fwd_modules)
        if mods not in mod_index:
            mod_index[mods] = len(module_sets)
            module_sets.append(mods)
        r["module"] = mod_index[mods]
        sig = _signature(n.args or {})
        if sig not in sig_index:
            sig_index[sig] = len(signatures)
            signatures.append(sig)
        r["sig"] = sig_index[sig]
        r["seq"] = j
        if comm is not None:
            ckind, group, msg, uncertain, dtype = comm
            r["bytes_read"] = r["bytes_written"] = msg
            r["dtype"] = DTYPE_CODES.get(dtype or "unknown", 0)
            coll["record"].append(j)
            coll["collective"].append(ckind)
            coll["group_size"].append(group)
            coll["message_bytes"].append(msg)
            coll["bus_bytes"].append(int(round(msg * _collectives.bus_factor(ckind, group))))
            coll["async_op"].append(False)
            coll["uncertain"].append(bool(uncertain))
            comm_t += kt[j]
        else:
            for f in COUNTS_AND_FLOP_COUNTER:
                r[f] = int(getattr(c, f, 0) or 0)
            r["dtype"] = DTYPE_CODES.get(c.dtype or "unknown", 0)
            r["status"] = _STATUS_CODE.get(status, 2) if not (status == "unknown" and name in known) else 4
            by_status[status] = by_status.get(status, 0.0) + kt[j]
            if status == "ok":
                if r["matrix_flops"] or r["vector_flops"] or r["bytes_read"] or r["bytes_written"]:
                    attributed += kt[j]
                else:
                    zero_t += kt[j]
            elif status == "unknown":
                unknown_t += kt[j]
            else:
                error_t += kt[j]
        # time
        if gpu_trace:
            if kt[j] > 0:
                start = (kfirst[j] - s0) * US
                r["t_start"], r["t_end"] = start, start + kt[j] * US
            else:
                r["t_start"] = r["t_end"] = math.nan
        else:
            start = (n.ts - s0) * US
            r["t_start"], r["t_end"] = start, start + (n.end - n.ts) * US

    if step is not None:
        wall_end = max(s1, last_end)
    else:
        wall_end = max([n.end for n in model.nodes] + [last_end], default=s0)
    wall_time = max(wall_end - s0, 0.0) * US

    un_time = sum(v[1] for v in unattributed.values())
    trace_meta = {
        "source": source_name,
        "step": step,
        "steps": [num for num, _ in model.steps],
        "step_times": [{"step": num, "time": (n.end - n.ts) * US} for num, n in model.steps],
        "step_choice": how,
        "device": device_spec.name if device_spec is not None else None,
        "device_note": device_note,
        "devices": _devices(model),
        "shapes": bool(model.has_shapes),
        "modules": bool(model.has_modules),
        "kernels": n_kernels,
        "kernel_time": total * US,
        "attributed_time": attributed * US,
        "attributed_share": min(attributed / total, 1.0) if total else 0.0,
        "op_time": sum(kt) * US,
        "collective_time": comm_t * US,
        "unknown_op_time": unknown_t * US,
        "uncounted_op_time": error_t * US,
        "zero_cost_op_time": zero_t * US,
        "unattributed_time": un_time * US,
        "unattributed": {k: {"calls": v[0], "time": v[1] * US, "cat": v[2]}
                         for k, v in sorted(unattributed.items(), key=lambda kv: -kv[1][1])},
        "outside_step_time": max(outside, 0.0) * US,
        "before_trace": {"calls": before[0], "time": before[1] * US, "cat": "kernel"},
        "problems": list(model.problems),
    }
    meta = {"timing": "op", "devices": _device_names(model), "version": VERSION, "ceilings_source": "datasheet",
            "trace": trace_meta}
    incomplete = []
    if not model.has_shapes and calls.nodes:
        incomplete.append("the trace was recorded without shapes (record_shapes=False): no FLOPs or bytes, only "
                          "the time breakdown")
    if not model.complete:
        incomplete.append(model.problems[0])
    if un_time > 0:
        incomplete.append(f"{un_time * US * 1e6:.1f} us of GPU work ({un_time / total:.1%} of the kernel time) was "
                          f"launched by no recorded op ({len(unattributed)} kernel names: "
                          "r.meta['trace']['unattributed']): timed, not counted")
    if incomplete:
        meta["incomplete"] = incomplete
    if coll["record"]:
        meta["collectives"] = coll
    dist = _distributed(model.header)
    if dist is not None:
        meta["distributed"] = dist
    return report_cls(records, ops, module_sets, wall_time=wall_time, meta=meta, ceilings=ceilings,
                      signatures=signatures)


def _distributed(header):
    """The rank, world size and backend of a rank's trace (Kineto's ``distributedInfo``), as measure's
    ``meta["distributed"]``; None when the trace has none or it is incomplete."""
    info = header.get("distributedInfo")
    if not isinstance(info, dict):
        return None
    rank, world, backend = info.get("rank"), info.get("world_size"), info.get("backend")
    if (isinstance(rank, int) and isinstance(world, int) and not isinstance(rank, bool) and 0 <= rank < world
            and isinstance(backend, str)):
        return {"rank": rank, "world_size": world, "backend": backend}
    return None


def _devices(model) -> list:
    out = []
    seen = set()
    for k in model.kernels:
        if k.device not in seen:
            seen.add(k.device)
    for d in sorted(seen, key=str):
        out.append({"id": d, "name": model.device_name(d)})
    if not out:
        out = [{"id": p.get("id"), "name": p.get("name")} for p in model.device_properties]
    return out


def _device_names(model) -> list:
    devs = sorted({k.device for k in model.kernels}, key=str)
    return [f"cuda:{d}" for d in devs] or ["cpu"]


def _module_path(chain) -> tuple:
    """``("Global", "Root", "Root.Child_0", ...)`` from the module calls outermost first (``Class_N``): the root
    named by its class, as measure names it."""
    if not chain:
        return ("Global",)
    root = re.sub(r"_\d+\Z", "", chain[0])
    out, path = ["Global", root], root
    for c in chain[1:]:
        path = f"{path}.{c}"
        out.append(path)
    return tuple(out)


def _forward_modules(model, calls) -> dict:
    """Autograd sequence number -> the module set of the forward op that made the node (for backward records)."""
    out = {}
    for n in model.nodes:
        if n.kind == _OP and n.seq is not None and not n.name.startswith(_WRAPPERS):
            if _events.phase_of(n) == "forward":
                out.setdefault(n.seq, _module_path(_events.module_chain(n)))
    return out


def _module_set(node, phase, fwd_modules) -> tuple:
    chain = _events.module_chain(node)
    if chain or phase != "backward":
        return _module_path(chain)
    for a in node.ancestors():  # the backward node's sequence number -> its forward op's modules
        if a.seq is not None and a.seq in fwd_modules:
            return fwd_modules[a.seq]
    return ("Global",)

