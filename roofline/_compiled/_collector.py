"""The per-block collector of the compiled view: counts each compiled graph call with the block's recorder (a plan
per graph, sizes and active modules, replayed in C when every op is counted by the C model), names its modules as the
eager tracker does, adds up the kernels' bytes and times, and builds the compiled part of the report
(:meth:`Collector.summary`)."""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from roofline._compiled import _recover
from roofline._compiled._graph import _Graph, tensor_leaves
from roofline._compiled._hooks import MIN_TORCH, CompiledViewUnavailable, _state, hooks_in_place, install
from roofline._compiled._kernels import _bytes_of, _kernel_static
from roofline._compiled._run import _hide_hooks, _remove_mode, _restore_mode, _timed_call
from roofline._datamodel._records import BACKWARD, COUNTS, FORWARD, RECOMPUTE, RECORD_DTYPE
from roofline._util import _warn


class Collector:
    """What one measure block learns about compiled code: graphs run, kernels, breaks, warnings."""

    def __init__(self, session):
        self.session = session
        self.graph_calls: dict[int, int] = {}   # graph index -> calls
        self.graphs: dict[int, _Graph] = {}
        self.kernel_calls: list = []            # (graph index, kernel index, t0, t1, phase, module id)
        self.uncounted = 0
        self.unrecovered: dict[str, int] = {}  # why a graph compiled before the block is not counted -> its calls
        self.recovered = 0  # graphs compiled before the block, recompiled privately in it (roofline._compiled._recover)
        self.recovery_time = 0.0  # seconds those private compilations took (left out of the block's clock)
        self.frames_before = None
        self.breaks = None  # graph breaks in the block, read when it is left (stop)
        self.problems: list[str] = []
        self._root_names: dict[str, str] = {}
        self._mid_cache: dict = {}
        self._kernel_sizes: dict = {}  # (graph, size binding) -> [(bytes read, bytes written, known)] per kernel
        self._plans: dict = {}  # (graph, its ops for the call's sizes, active modules) -> [entries, span, replayable]
        self.graph_time = 0.0
        self.entering = False
        self.eager_reason = None
        self.node_rows: dict = {}   # graph index -> [(FX node name, first record, end record)] of its first call
        self.call_rows: list = []   # (graph index, first record, end record) per graph call
        self.size_calls: dict = {}  # (graph, size binding) -> calls with those sizes
        self.last_env: dict = {}  # graph index -> size-symbol values of its last call
        self.ctx_hooks: list = []  # (a Dynamo context's enter_exit_hooks, the function added to it)
        # (first record, end record, entries, fixes) per graph call whose records need the corrections of fix():
        # the bytes inside a decomposed eager op, recomputed forward ops
        self.fix_calls: list = []

    def ready(self):
        """(True, None) when compiled graphs can be counted now, else (False, why)."""
        if not _state["installed"]:
            if self.entering and "torch._inductor.compile_fx" not in sys.modules:
                return False, "Inductor not imported yet"
            try:
                install()
            except CompiledViewUnavailable as e:
                return False, str(e)
        broken = hooks_in_place()
        if broken is not None:
            return False, broken
        return True, None

    def eager_fallback(self, reason):
        """Dynamo is about to run a frame eagerly under the block: say so (once per block)."""
        if self.eager_reason is None:
            self.eager_reason = reason
            _warn.warn(f"roofline: torch.compile'd code runs EAGERLY inside this measure block ({reason}); the "
                       "counts and times are those of the eager ops, not of the compiled kernels. The compiled "
                       f"view needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]} with Inductor's internals as roofline "
                       "knows them (see docs/compiled.md).", RuntimeWarning)

    # --- naming: nn_module_stack paths -> the names the tracker gives modules ---
    def _name(self, root: str, path: str) -> str:
        """A module's name from its ``nn_module_stack`` path: below the measured model's name when ``measure``
        was given the model (the compiled module, or the model a compiled function takes), else below the name of
        the compiled frame's local (``model.fc1``)."""
        base = self._root_names.get(root)
        if base is None:
            model = self.session.model
            base = self.session.tracker.known.get(model, root) if model is not None else root
            self._root_names[root] = base
        return f"{base}.{path}" if path else base

    def _module_id(self, modules: tuple, parents: frozenset, implicit_root: bool = True) -> int:
        """The module-set id of an op with ``nn_module_stack`` chain ``modules`` run while the tracker's modules
        ``parents`` (``frozenset(tracker.c.parents)``) are active; the chain's root module is added unless
        ``implicit_root`` is False (a backward op's replayed set says itself whether the root is active)."""
        c = self.session.tracker.c
        key = (parents, modules, implicit_root)
        mid = self._mid_cache.get(key)
        if mid is not None:
            return mid
        names = {self._name(root, path) for root, path in modules}
        if modules and implicit_root:
            names.add(self._name(modules[0][0], ""))
        added = [n for n in names if n not in parents]
        for n in added:
            c.add(n)
        mid = c.module_id
        for n in added:
            c.discard(n)
        self._mid_cache[key] = mid
        return mid

    def recover(self, compiled):
        """The graph of a CompiledFxGraph compiled before the block (roofline._compiled._recover), or None. The
        block's clock stops while roofline compiles: its wall time and op times leave the private compilation out."""
        s = self.session
        why = compiled.__dict__.get("_roofline_unrecovered")
        if why is not None:  # tried before: only a graph filed since then (its forward recovered) can be found
            graph = _recover.filed(compiled)
        else:
            t0 = time.perf_counter()
            try:
                graph = _recover.recover(compiled, sys._getframe(2), lambda: _hide_hooks(s.tracker))
                self.recovered += 1
            except _recover.Unrecoverable as e:
                graph, why = None, str(e)
            finally:
                dt = time.perf_counter() - t0
                self.recovery_time += dt
                if s._t0 is not None:
                    s._t0 += dt
                s.t_base += dt
        if graph is None:
            compiled._roofline_unrecovered = why
            self.unrecovered[why] = self.unrecovered.get(why, 0) + 1
            return None
        compiled._roofline_graph = graph
        return graph

    def run_graph(self, compiled, orig, inputs):
        s = self.session
        graph = getattr(compiled, "_roofline_graph", None)
        if graph is None:
            graph = self.recover(compiled)
        env = graph.bind(inputs) if graph is not None and graph.symbolic else None  # before the call empties it
        above = _remove_mode(s.mode)  # the graph's own aten calls (extern kernels) are not counted twice
        try:
            kernels = graph.kernels if graph is not None and s.timing == "op" else None
            if kernels:
                out, times = _timed_call(compiled, orig, inputs, kernels)
            else:
                t0 = time.perf_counter()
                out = orig(compiled, inputs)
                times = None
                self.graph_time += time.perf_counter() - t0
        finally:
            _restore_mode(s.mode, above)
        if graph is None:
            self.uncounted += 1
            if self.uncounted == 1:
                why = compiled.__dict__.get("_roofline_unrecovered") or "unknown"
                _warn.warn("roofline: a torch.compile graph compiled before the block ran inside measure and "
                           f"could not be recovered ({why}): its ops are NOT counted and the report is marked "
                           "incomplete (r.complete is False). Make the first call of the compiled model (its "
                           "compilation) inside a measure block, or call torch._dynamo.reset() before it.", RuntimeWarning)
            return out
        try:
            self.count(graph, times, env)
        except Exception as e:  # noqa: BLE001 - the step's result stands; the graph is reported uncounted
            self.uncounted += 1
            self.problems.append(f"graph {graph.index} could not be counted ({type(e).__name__}: {e})")
        return out

    def count(self, graph: _Graph, times=None, env=None):
        s = self.session

        self.graphs[graph.index] = graph
        self.graph_calls[graph.index] = self.graph_calls.get(graph.index, 0) + 1
        ops = graph.ops
        if graph.symbolic:
            ops = graph.ops_for(env or {})
            if ops is None:
                self.uncounted += 1
                self.problems.append(f"graph {graph.index} has symbolic sizes that its inputs do not determine: "
                                     "its ops are not counted")
                return
        phase = s.phase if s.phase is not None else (BACKWARD if graph.backward else FORWARD)
        # a backward graph's ops are credited to the module of the forward op each differentiates, inside the
        # modules that were active when the compiled forward ran (its autograd node's forward set, linked as an
        # eager backward op's is); the eager tracker's set (replayed from the forward's tape) is kept for
        # FlopCounterMode's structure
        fwd_parents = None
        if graph.backward and s.phase is None:
            linked, _, _, unlinked = s.tracker.c.attribute()
            if not unlinked:
                fwd_parents = frozenset(s.tracker.c.sets[linked])
        rec = s.recorder
        first = graph.index not in self.node_rows
        rows = [] if first else None
        r_start = len(rec)
        # the plan of a call (each op's recorder index and module id) depends on the graph, the sizes and the
        # modules active around the call: built once, then each call is a loop of C calls
        parents = frozenset(s.tracker.c.parents)
        pkey = (graph.index, id(ops), parents, fwd_parents)
        plan = self._plans.get(pkey)
        if plan is None:
            if graph.skipped:
                names = sorted(set(graph.skipped))
                self.problems.append(f"graph {graph.index} calls {len(graph.skipped)} function(s) that are not "
                                     f"operators roofline can count ({', '.join(names[:5])}"
                                     f"{', ...' if len(names) > 5 else ''}): their work is missing from the counts")
            if graph.untracked:
                self.problems.append(f"graph {graph.index} (backward): its ops are credited to the module of the "
                                     "forward op each differentiates, not by the eager module tracker's rule (no "
                                     "forward graph with sequence numbers was found for it): r.by_module() and "
                                     "r.flop_counter_compatible() may differ from the eager step's for modules that "
                                     "share an input (a residual block's downsample)")
            before = set(s.devices)
            entries = []
            for op in ops:
                func = op.func
                idx = s.op_index.get(func)
                if idx is None:
                    idx = s.resolve(func, op.args)
                if idx == "decompose":  # an AOT graph holds ops as they ran: count each as itself
                    s.resolve(func, op.args, allow_decompose=False)
                    idx = s.op_index[func]
                if idx == "decline":
                    continue
                if op.tracked is None:
                    mid, fcm = self._module_id(op.modules, parents), None
                else:
                    fcm = self._module_id(op.tracked, parents, implicit_root=False)
                    mid = self._module_id(op.modules, fwd_parents if fwd_parents is not None else parents)
                    fcm = None if fcm == mid else fcm
                entries.append((idx, mid, op, fcm))
            # [entries, the records of the first call under this plan (start, end) or None, replayable]: when
            # every op is counted by the C model, the records of a call are a function of the plan alone (same
            # ops, fake-tensor arguments, modules), so later calls copy them in C (Recorder.replay) instead of
            # describing every argument again
            plan = self._plans[pkey] = [entries, None, all(e[0].__class__ is int for e in entries),
                                        _fixes(entries)]
            # the ops were resolved with the graph's meta or fake values: the devices are those the graph ran on
            s.devices.difference_update({"meta", "fake"} - before)
            s.devices.update(graph.devices)
        entries, span, replayable, fixes = plan
        note = s.tracker.c.note
        if span is not None:
            rec.replay(span[0], span[1], phase)
            for i, e in enumerate(entries):  # one record per entry (replayable: every op counted in C)
                if e[3] is not None:
                    note(r_start + i, e[3], False)
        else:
            record = rec.record
            for idx, mid, op, fcm in entries:
                r0 = len(rec)
                if idx.__class__ is int:
                    record(idx, mid, phase, op.args, op.kwargs or None, op.out)
                elif idx[0] == "hop":
                    rec.append(idx[1], mid, phase, 0, 0, 0, 0, 0, 0, 0)
                else:  # ("formula", index, Formula): a formula computed in Python (roofline/_counting/_resolve.py)
                    s.record_formula(idx, mid, phase, op.args, op.kwargs, op.out)
                if fcm is not None:
                    for row in range(r0, len(rec)):
                        note(row, fcm, False)
                if first:
                    rows.append((op.name, r0, len(rec)))
            if replayable:
                plan[1] = (r_start, len(rec))
        if first:
            self.node_rows[graph.index] = rows
        self.call_rows.append((graph.index, r_start, len(rec)))
        if fixes is not None:
            self.fix_calls.append((r_start, len(rec), len(entries), fixes))
        # the kernels' bytes in this call (sizes may be symbolic: evaluated once per binding)
        ekey = (graph.index, tuple(sorted((str(k), v) for k, v in env.items())) if env else None)
        sizes = self._kernel_sizes.get(ekey)
        if sizes is None:
            sizes = []
            for k in graph.kernels:
                r = w = 0
                known = True
                for j, side in ((0, "inputs"), (1, "outputs")):
                    for v in k.get(side, {}).values():
                        b = _bytes_of(v, env)
                        if b is None:
                            known = False
                        elif j == 0:
                            r += b
                        else:
                            w += b
                sizes.append((r, w, known))
            self._kernel_sizes[ekey] = sizes
        gi = graph.index
        self.size_calls[ekey] = self.size_calls.get(ekey, 0) + 1  # the bytes are added up in summary()
        self.last_env[gi] = env
        if times is not None:
            for k, (t0, t1) in times.items():
                self.kernel_calls.append((graph.index, k, t0 - s.t_base, t1 - s.t_base, phase))
        else:
            self.kernel_calls.append((graph.index, None, float("nan"), float("nan"), phase))

    def summary(self, frames_breaks) -> dict:
        """The compiled part of the report (JSON-compatible): graphs, breaks, and one entry per generated kernel
        with the aten ops it fused, its input and output buffers (bytes), the FLOPs of its ops (roofline's cost
        model), and its measured host time (``timing="op"``; None otherwise)."""

        recs = self.fix(np.frombuffer(self.session.recorder.records_bytes(), dtype=RECORD_DTYPE).copy())
        kernels = []
        unknown = []
        calls = self.graph_calls
        kernel_bytes: dict = {}  # (graph, kernel) -> [bytes read, bytes written, all known] over all calls
        for ekey, n in self.size_calls.items():
            for ki, (r, w, known) in enumerate(self._kernel_sizes[ekey]):
                tot = kernel_bytes.setdefault((ekey[0], ki), [0, 0, True])
                tot[0] += n * r
                tot[1] += n * w
                tot[2] = tot[2] and known
        for gi, graph in sorted(self.graphs.items()):
            per_node = _per_node_counts(recs, self.node_rows.get(gi, ()))
            st = graph.static
            if st is None:
                st = graph.static = _kernel_static(graph)
            # module names depend on the names the block gives the graph's roots
            names_key = tuple(self._name(r, "") for r in st["roots"])
            kmods = st["modules"].get(names_key)
            if kmods is None:
                kmods = st["modules"][names_key] = [self._kernel_module(paths, roots)
                                                    for _, _, paths, roots in st["kernels"]]
            for ki, k in enumerate(graph.kernels):
                k = dict(k)
                origins, ops, _, _ = st["kernels"][ki]
                k["origins"] = list(origins)
                counts = [per_node.get(n, (0, 0, 0, 0, 0)) for n in origins]
                k["ops"] = list(ops)
                k["matrix_flops"] = sum(c[0] for c in counts)
                k["vector_flops"] = sum(c[1] for c in counts)
                k["special_ops"] = sum(c[2] for c in counts)
                k["unfused_bytes"] = sum(c[3] + c[4] for c in counts)
                env = self.last_env.get(gi)
                ins = {b: _bytes_of(v, env) for b, v in k.get("inputs", {}).items()}
                outs = {b: _bytes_of(v, env) for b, v in k.get("outputs", {}).items()}
                k["inputs"], k["outputs"] = ins, outs  # per call, with the sizes of the graph's last call
                k["input_buffers"] = {b: _bytes_of(v, env) for b, v in k.get("input_buffers", {}).items()}
                tot = kernel_bytes.get((gi, ki), [0, 0, True])
                known = all(v is not None for v in (*ins.values(), *outs.values())) and "error" not in k and tot[2]
                n = max(calls.get(gi, 0), 1)
                # per call: the mean over the calls (the same every call unless sizes are dynamic)
                k["bytes_read"], k["bytes_written"] = tot[0] // n, tot[1] // n
                k["bytes_read_total"], k["bytes_written_total"] = tot[0], tot[1]
                k["symbolic"] = graph.symbolic
                k["bytes_known"] = known
                if not known:
                    unknown.append(f"{k.get('name')} ({k.get('error', 'a buffer without a size')})")
                k["module"] = kmods[ki]
                k.update(graph=gi, index=ki, calls=calls.get(gi, 0),
                         phase="backward" if graph.backward else "forward")
                kernels.append(k)
        times: dict = {}
        for gi, ki, t0, t1, _ in self.kernel_calls:
            if ki is not None:
                times[(gi, ki)] = times.get((gi, ki), 0.0) + (t1 - t0)
        for k in kernels:
            k["time"] = times.get((k["graph"], k["index"]))
        if unknown:
            self.problems.append(f"{len(unknown)} kernels have buffers of unknown size; their bytes are left out "
                                 f"(bytes_known=False): {', '.join(unknown[:3])}{', ...' if len(unknown) > 3 else ''}")
        aten_bytes = 0
        for _, r0, r1 in self.call_rows:
            part = recs[r0:r1]
            aten_bytes += int(part["bytes_read"].sum()) + int(part["bytes_written"].sum())
        return {"graphs": len(self.graphs), "eager_fallback": self.eager_reason,
                "graph_calls": sum(calls.values()), "uncounted_graph_calls": self.uncounted,
                "recovered_graphs": self.recovered, "recovery_time": self.recovery_time,
                "incomplete": self.incomplete(),
                "graph_breaks": frames_breaks, "aten_bytes": aten_bytes,
                "graph_list": [{"graph": gi, "phase": "backward" if g.backward else "forward", "calls": calls[gi],
                                "ops": len(g.ops), "kernels": len(g.kernels)} for gi, g in sorted(self.graphs.items())],
                "kernels": kernels, "problems": list(dict.fromkeys(self.problems))}

    def fix(self, recs):
        """The block's records (a writable copy) with the compiled graphs' ops counted as the step's eager ops are:
        the parts of a decomposed eager op (``_graph.decomposition_io``) read and write only what that op reads and
        writes, each input once; a forward op a backward graph computes again is in the recompute phase
        (``r.by_phase()``), not the backward's. A call whose entries did not each give one record is left as it is
        and said in ``problems``. Returns ``recs``."""
        skipped = 0
        for r0, r1, n, (pos, dr, nowrite, again) in self.fix_calls:
            if r1 - r0 != n or r1 > len(recs):
                skipped += 1
                continue
            rows = pos + r0
            br = recs["bytes_read"][rows]
            recs["bytes_read"][rows] = br - np.minimum(br, dr)
            w = rows[nowrite]
            recs["bytes_written"][w] = 0
            a = rows[again]
            a = a[recs["phase"][a] == BACKWARD]
            recs["phase"][a] = RECOMPUTE
        if skipped:
            self.problems.append(f"{skipped} compiled graph call(s) made more records than ops: the bytes of their "
                                 "decomposed ops are counted part by part (more than the eager ops they replace)")
        return recs

    def incomplete(self) -> list[str]:
        """Why the block's counts miss work of compiled graphs: one line per reason (empty when every compiled graph
        call was counted). The report keeps them in ``meta["incomplete"]``."""
        out = [f"{n} call{'s' if n != 1 else ''} of a torch.compile graph compiled before the block not counted: "
               f"{why}" for why, n in self.unrecovered.items()]
        other = self.uncounted - sum(self.unrecovered.values())
        if other > 0:
            out.append(f"{other} call{'s' if other != 1 else ''} of torch.compile graphs not counted (see "
                       "r.compiled['problems'])")
        return out

    def _kernel_module(self, paths, roots) -> str:
        """The module a kernel belongs to: the innermost module common to all the ops it fused ("Global" when
        they span the model's top level). ``paths``: the ops' ``nn_module_stack`` chains ((root, path) pairs);
        ``roots``: their roots."""
        paths = [tuple(self._name(r, p) for r, p in chain) for chain in paths]
        if not paths:
            return "Global"
        common = paths[0]
        for p in paths[1:]:
            i = 0
            while i < min(len(common), len(p)) and common[i] == p[i]:
                i += 1
            common = common[:i]
        if common:
            return common[-1]
        return self._name(roots[0], "") if roots else "Global"


def _fixes(entries):
    """The corrections of :meth:`Collector.fix` for a call of ``entries``, as arrays (positions among the entries,
    bytes not read, output not written, recomputed); None when there is none."""
    pos, dr, nw, again = [], [], [], []
    for i, (_idx, _mid, op, _fcm) in enumerate(entries):
        if not (op.noread or op.nowrite or op.recomputed):
            continue
        b = 0
        if op.noread:
            leaves = tensor_leaves((op.args, op.kwargs))
            b = sum(_extent_bytes(leaves[j]) for j in op.noread if j < len(leaves))
        pos.append(i)
        dr.append(b)
        nw.append(bool(op.nowrite))
        again.append(bool(op.recomputed))
    if not pos:
        return None
    return (np.asarray(pos, dtype=np.int64), np.asarray(dr, dtype=np.uint64), np.asarray(nw, dtype=bool),
            np.asarray(again, dtype=bool))


def _extent_bytes(t) -> int:
    """Bytes of the memory a tensor's view spans (0 for anything else): what the cost model reads of an argument."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
        return 0
    try:
        if t.numel() == 0:
            return 0
        span = 1 + sum((int(n) - 1) * abs(int(st)) for n, st in zip(t.shape, t.stride()))
        return span * t.element_size()
    except (RuntimeError, TypeError):  # symbolic: nothing taken off
        return 0


_FIELDS = COUNTS


def _per_node_counts(recs, node_rows) -> dict:
    """FX node name -> its five counts, from the records of the graph's first call (one reduction per field)."""
    if not node_rows:
        return {}
    names = [n for n, _, _ in node_rows]
    starts = np.array([r0 for _, r0, _ in node_rows], dtype=np.int64)
    ends = np.array([r1 for _, _, r1 in node_rows], dtype=np.int64)
    lo, hi = int(starts.min()), int(ends.max())
    part = recs[lo:hi]
    cols = []
    for f in _FIELDS:  # differences of running sums modulo 2**64: exact for a node of one record
        c = np.concatenate((np.zeros(1, np.uint64), np.cumsum(part[f], dtype=np.uint64)))
        cols.append(c[ends - lo] - c[starts - lo])
    out = dict(zip(names, zip(*(c.tolist() for c in cols))))
    for n, r0, r1 in node_rows:
        if r1 - r0 > 1:  # several records (rare): summed exactly as Python ints
            out[n] = tuple(sum(int(v) for v in recs[f][r0:r1]) for f in _FIELDS)
    return out
