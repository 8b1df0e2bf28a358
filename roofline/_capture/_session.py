"""The PyTorch side: a dispatch mode that records the cost of every aten op into the C recorder.

Imported only when torch is used (``roofline.measure``, ``roofline.register`` on a torch op), never by
``import roofline``. ``Session`` (one measure block) is made of its jobs' parts: the op table
(roofline/_capture/_optable.py: each op resolved once), the recording of Python-path ops
(roofline/_capture/_recording.py), the dispatch modes (roofline/_capture/_modes.py), the module tracker and hooks
(roofline/_capture/_tracking.py), torch's mode stack and flags (roofline/_capture/_modestack.py); this module holds
its state and its lifecycle (entering and leaving the block, the optimizer hooks, the token layout it watches for).
"""

from __future__ import annotations

import functools
import threading
import time
import types

import numpy as np
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack as _mode_stack

from roofline import _core
from roofline._capture import _collectives, _fcm_names

try:  # torch imports dynamo lazily on the first op under a dispatch mode (~1 s): not inside the first timed block
    import torch._dynamo  # noqa: F401
except Exception:  # pragma: no cover - optional in minimal torch builds
    pass

from roofline._capture._dtypes import TORCH_DTYPES
from roofline._capture._modes import _Mode, _reentry, _TimedMode
from roofline._capture._modestack import (_FLAG_HOLDERS, _INTERLEAVED, _MODE_FLAGS, _OPEN, _STACK, _forget_flags,
                                         _mode_flags, _run_all, _set_mode_flags, _settle_interrupted)
from roofline._capture._optable import OpTable
from roofline._capture._recording import Recording
from roofline._capture._tracking import _LINK, _Tracker
from roofline._compiled import _view
from roofline._counting import _sparse_calls
from roofline._datamodel import _tokens
from roofline._datamodel._records import OPTIMIZER, OpInfo
from roofline._hardware._contention import OP_WAITS, run_delay_ns, step_readings, thread_stats

_graph_task_id = torch._C._current_graph_task_id
_now = time.perf_counter

# Dataflow capture: the id of a tensor's storage block is the address of its StorageImpl (views share it; meta
# tensors have one too, while their data_ptr() is 0). torch._C._storage_address reads it in one call; older torch
# builds without it go through the untyped storage. tests/test_recorder_capture.py pins both.
_storage_id = getattr(torch._C, "_storage_address", None) or (lambda t: t.untyped_storage()._cdata)
# Whether sessions capture call signatures and dataflow rows (Report.signatures / Report.accesses). Always on; the
# overhead benchmark switches it off to measure what the capture costs.
CAPTURE = True


class Session(OpTable, Recording):
    """State of one ``measure`` block: the recorder, op table, module sets, phase, hooks."""

    def __init__(self, model=None, timing="model", tokens=None, formulas=None):
        if timing not in ("model", "op", None):
            raise ValueError(f"measure: timing must be 'model', 'op' or None, got {timing!r}")
        self.model = model
        self.root_name = None  # the model's name (its class name), its modules' names are made from
        self.tokens = tokens  # the token layout (roofline._datamodel._tokens.token_layout), given or seen
        self.tokens_unknown = None  # why the layout of the mask the model was called with is unknown
        self._seen = None  # (keyword, tensor, its version): a mask see() keeps until finish() reads it
        self.timing = timing
        self.events: list = []
        # timing="op" inside roofline.steady / profile with step_time="ops_min" (OP_WAITS): each CPU op's record
        # index and its thread's waits for a CPU before and after it (run_delay_ns; None from another thread), and
        # the block's own at its start and end (op_waits_array)
        self.op_waits = [] if timing == "op" and OP_WAITS.get() else None
        self.wait_at = [None, None]
        self.thread = None
        self._base_event = None  # the CUDA event the ops' events are timed from (timing="op" with CUDA in use)
        self._base_offset = 0.0  # seconds from the block's start to that event
        self.t_base = 0.0
        self.cuda_possible = False
        self.devices: set[str] = set()
        self.capture = CAPTURE
        self.recorder = (_core.Recorder(torch.Tensor, TORCH_DTYPES, storage=_storage_id, signatures=True)
                         if self.capture else _core.Recorder(torch.Tensor, TORCH_DTYPES))
        self.op_index: dict = {}      # OpOverload -> recorder op index (int) or a slow-path marker
        self.ops: list[OpInfo] = []   # by recorder op index
        # a call the C path cannot describe (a sparse argument to mm, sum, ...): counted from its stored values
        self.recorder.undescribed = _sparse_calls.undescribed(self.ops)
        self._opt_depth = 0
        self.mode = _TimedMode(self) if timing == "op" else _Mode(self)
        self.tracker = _Tracker(self.mode, self)
        # the per-op path in C; `phase` is OPTIMIZER inside optimizer.step, else None (forward/backward by autograd)
        self.dispatch = _core.Dispatch(self.tracker.c, self.recorder.record, _graph_task_id, _Mode.__torch_dispatch__,
                                       rows=self.recorder, adopt=self.adopt, **_reentry(self.mode))
        if timing != "op":  # bound to the mode, as the C++ dispatcher requires of a __torch_dispatch__
            self.mode.__torch_dispatch__ = types.MethodType(self.dispatch, self.mode)
        self._handles = []
        self.formulas: dict = formulas or {}  # the block's own formulas (measure(formulas=)): key -> _resolve.Formula
        self.collectives = _collectives.Collectives()  # one row per collective call (network bytes, group size)
        self.wall_time = None
        self._t0 = self._t1 = None
        # every own thread's scheduler statistics next to _t0 and _t1 (timed blocks), and the clock read just
        # outside each reading: the window they describe (step_load)
        self.threads_at = [None, None]
        self.threads_window = [None, None]
        self._flags = None  # torch's mode flags before the mode was entered; None while it is not (see enter)
        self._left: list = []  # what leaving the mode found above it (roofline._core.remove_mode's log)
        self.token = None  # this block in _OPEN, once it is entered
        self.interleaved = None  # why the block gives no report, when it interleaved with another
        self.fix_records = None  # records -> records: Collector.fix of the block's compiled graphs, or None
        self.compiled = self.compiled_summary = None  # torch.compile'd code under the block (roofline._compiled._view)
        self._compiled_left = None  # its collector once stopped, until finish() summarises it

    # ---- optimizer hooks -------------------------------------------------------------------------------------
    def _active_here(self) -> bool:
        """Whether this measure block is active on the calling thread (hooks are process-global; modes are not)."""
        return self.mode in _mode_stack()

    def _opt_pre(self, optimizer, args, kwargs):
        if self._active_here():
            self._opt_depth += 1  # nested steps (a wrapper optimizer calling its inner one) stay in the phase
            self.phase = OPTIMIZER
            # step(closure): the closure's forward and backward (LBFGS, Lightning's automatic optimization) are
            # not the optimizer's work: they run in their own phases. torch passes the optimizer as args[0].
            if len(args) > 1 and callable(args[1]):
                return (args[0], self._outside_optimizer(args[1]), *args[2:]), kwargs
            if callable(kwargs.get("closure")):
                return args, {**kwargs, "closure": self._outside_optimizer(kwargs["closure"])}
        return None

    def _outside_optimizer(self, closure):
        """``closure`` run with the phase set by autograd again (forward, backward), then the optimizer's."""
        @functools.wraps(closure)
        def run(*a, **k):
            saved = self.phase
            self.phase = None
            try:
                return closure(*a, **k)
            finally:
                self.phase = saved

        return run

    def _opt_post(self, optimizer, args, kwargs):
        if self._active_here() and self._opt_depth > 0:
            self._opt_depth -= 1
            if self._opt_depth == 0:
                self.phase = None

    # ---- enter / exit ---------------------------------------------------------------------------------------------
    # roofline.measure's block (roofline/_measure.py, a roofline._core.Block) calls these: prepare() and
    # closing() outside the block lock; enter() under it, and release() (until it completes) when enter raised;
    # release() under it at exit. Each global change enter() makes is recorded before it is made, and release()
    # undoes each from what is there, so an exception on any line of enter() or release() leaves nothing behind.
    def prepare(self):
        """Before the block is entered, outside the block lock: the compiled-code view's hooks installed when Inductor
        is imported (roofline._compiled._view.prepare); the device synchronised when the block is timed."""
        _view.prepare()  # Inductor's hooks, once per process: not under the block lock
        self.cuda_possible = torch.cuda.is_available()
        if self.timing is not None:
            _sync_all(self.cuda_possible)

    def enter(self):
        """Install the block: module and optimizer hooks, the compiled-code view, then the dispatch mode. RuntimeError
        (before anything is installed) when a block of another asyncio task or context is open on this thread."""
        self._check_stack()
        self.token = object()
        self.tracker.enter()
        if self.model is not None:
            self.root_name = self.tracker.name(self.model)  # name the model's modules from its root
        self._hook_optimizer()
        self.tracker.module_id  # noqa: B018 - interns {"Global"} as module set 0
        _collectives.install(self)  # DTensor's sharding propagation is not counted

        _view.start(self)  # sets self.compiled first
        if self.timing is not None:
            self.threads_window[0] = time.perf_counter()
            self.threads_at[0] = thread_stats()  # the step's own waits: read next to the clock (step_load)
        self._t0 = self.t_base = time.perf_counter()
        if self.timing == "op" and self.cuda_possible and torch.cuda.is_initialized():
            # CUDA already in use: the ops' events are timed from here, the block's start. A process that has not
            # used CUDA yet is not made to (that costs seconds and device memory, and a process forked later could
            # not use CUDA): the first op on a CUDA tensor records the base event instead
            self.cuda_base(synchronize=False)  # (the device was synchronised in prepare)
        if self.op_waits is not None:
            self.thread, self.wait_at[0] = threading.get_ident(), run_delay_ns()
        _FLAG_HOLDERS.append(self)  # recorded first: _leave_mode takes it out whatever follows
        self._flags = _mode_flags(self.mode)
        self.mode.__enter__()
        _OPEN.set(_OPEN.get() + (self.token,))
        self.compiled.entering = False

    def watching(self) -> bool:
        """Whether the block looks for the token layout in its model's keyword arguments (none was given)."""
        return self.tokens is None and self.model is not None

    def see(self, kwargs):
        """The model's call ended (the global forward hook, which torch gives the call's keyword arguments): its
        ``attention_mask`` (or a packed batch's ``cu_seq_lens_q``) is the token layout, on the first call that has
        one. No hook of the model's own is added (one would change the guards of compiled code that calls it).

        Nothing here is an op of the block: a CPU tensor's values are read at once with torch's Python dispatch key
        excluded (no mode, this block's included, sees the read); a tensor on another device is kept and read by
        :meth:`finish`, once the block is left and its time taken (a device copy inside the block would synchronise
        it), unless it was changed in place meanwhile. A meta or fake tensor holds no values: the layout is then
        unknown (``tokens_unknown`` says why)."""
        if self.tokens is not None or self._seen is not None or not kwargs or not self._active_here():
            return
        cu = kwargs.get("cu_seq_lens_q")
        mask = kwargs.get("attention_mask")
        if isinstance(cu, torch.Tensor) and cu.dim() == 1:
            self._seen = ("cu_seq_lens_q", cu, _version(cu))
        elif isinstance(mask, torch.Tensor) and mask.dim() == 2:
            self._seen = ("attention_mask", mask, _version(mask))
        else:
            return
        t = self._seen[1]
        if t.device.type == "cpu" or _tokens.values_unknown(t) is not None:
            self._read_seen()

    def _read_seen(self):
        """The token layout from the tensor :meth:`see` kept (``tokens``), or why there is none (``tokens_unknown``);
        a mask that is not a token mask (an additive or 4-D one) gives neither."""
        name, t, version = self._seen
        self._seen = None
        why = _tokens.values_unknown(t)
        if why is None and version != _version(t):
            why = "a tensor changed in place during the block, before it could be read"
        if why is not None:
            self.tokens_unknown = f"the model's {name} is {why}: which of its tokens are real is unknown"
            return
        try:
            values = _tokens.tensor_values(t, name)
            self.tokens = _tokens.token_layout({"cu_seqlens": values} if name == "cu_seq_lens_q" else values)
        except ValueError:  # not a token mask: no layout rather than a guessed one
            pass

    def _check_stack(self):
        mine = _OPEN.get()
        for m in _mode_stack():
            if isinstance(m, _Mode) and m.s.token is not None and m.s.token not in mine:
                raise RuntimeError(
                    "roofline.measure: a measure block of another asyncio task (or contextvars context) is open on "
                    "this thread; its ops and this block's would be counted by both. Blocks on one thread must nest "
                    "within one task: measure each task's work while no other task's block is open (or run the "
                    "tasks in threads)")

    def _hook_optimizer(self):
        from torch.optim import optimizer as optim
        from torch.utils.hooks import RemovableHandle

        for table, hook in ((optim._global_optimizer_pre_hooks, self._opt_pre),
                            (optim._global_optimizer_post_hooks, self._opt_post)):
            h = RemovableHandle(table)
            self._handles.append(h)  # recorded before the hook is in the table
            table[h.id] = hook

    def closing(self, exc_type, exc):
        """At exit, the mode still in place: the block's end time (after synchronising the device); when the block
        ends with an exception, torch's mode-stack context managers it cut off are completed first
        (:func:`_settle_interrupted`)."""
        if exc is not None:
            _settle_interrupted(exc)
        if exc_type is None and self.timing is not None and self._t1 is None and self._t0 is not None:
            _sync_all(self.cuda_possible)
            if self.op_waits is not None and threading.get_ident() == self.thread:
                self.wait_at[1] = run_delay_ns()  # read inside the block's time, as every read of the waits
            self._t1 = time.perf_counter()
            self.threads_at[1] = thread_stats()
            self.threads_window[1] = time.perf_counter()

    def step_load(self) -> dict | None:
        """The block's threads' time on a CPU and waiting for one over its timed window and the two readings at
        its edges (microseconds), and its unwaited time (:func:`roofline._hardware._contention.step_readings`):
        ``meta["load"]["step"]``. The block's own ``meta["load"]`` spans its entry and exit as well, whose waits
        are not the step's."""
        w0, w1 = self.threads_window
        if w0 is None or w1 is None:
            return None
        # over the window from the clock read before the first reading to the one after the last: a wait for a CPU
        # that falls within a reading (between it and the step's own clock read) is then inside the window's time
        # too, never counted against the step's (its unwaited time is at most the readings' own time, microseconds,
        # above the step's; the steps' least is never pulled below their time on a CPU by a wait placed wrong)
        return step_readings(self.threads_at[0], self.threads_at[1], w1 - w0)

    def release(self):
        """Take out everything :meth:`enter` installed, from whatever state it is in. Idempotent; every step runs
        even when one raises (the first exception is raised after)."""
        _run_all((self._leave_mode, self._leave_context, self._stop_compiled, self._unhook_optimizer,
                  self.tracker.exit, self._reset_phase, self._uninstall_collectives))

    def finish(self):
        """After :meth:`release` of a block that completed, outside the block lock: its wall time, per-op CUDA times
        and the compiled-code view (``compiled_summary``; its warnings are issued here)."""
        if self._compiled_left is not None:
            coll, self._compiled_left = self._compiled_left, None
            self.compiled_summary = _view.summary(coll)
            if coll.fix_calls:
                self.fix_records = coll.fix  # the compiled graphs' records as the step's eager ops count
        if self._t1 is not None:
            self.wall_time = self._t1 - self._t0
        if self.events:
            self._resolve_events()
        if self._seen is not None:  # a mask on a device: read now that the block is left and timed
            self._read_seen()

    def _leave_mode(self):
        """Take the mode off this thread's stack (roofline._core.remove_mode: one step, wherever it is) and put
        torch's mode flags back. The flags are process-wide, so the open blocks of all threads are one stack for them
        (:data:`_FLAG_HOLDERS`, in entry order): a block entered after this one, in any thread, inherits the flags
        this one saved (it puts them back when it leaves); only the last entered block still open writes them.
        When modes entered after it are still above it on this thread, they stay, in their order, and the lowest
        inherits the flags it saved; the block (and every block among them) is then marked ``interleaved``.
        Idempotent."""
        flags = self._flags
        if flags is None:
            _forget_flags(self)
            return
        _core.remove_mode(self.mode, *_STACK, self._left)
        values, lengths = flags
        above = self._left[0] if self._left else ()
        if above:
            names = ", ".join(type(m).__name__ for m in above)
            self.interleaved = (f"roofline.measure: this block was left while {len(above)} dispatch mode(s) entered "
                                f"after it were still open above it on this thread ({names}): {_INTERLEAVED}")
            for m in above:
                if isinstance(m, _Mode) and m.s.token is not None:
                    m.s.interleaved = ("roofline.measure: a block entered before this one was left while this one "
                                       f"was open on the same thread: {_INTERLEAVED}")
            low = above[0]  # its saved flags were this mode's; from now on they are those from before this mode
            # its deques hold one entry per place it has on the stack, in order: the one of its lowest place above
            # this mode is the one its exit from there restores (a mode entered again above itself has several)
            places = sum(1 for m in above if m is low)
            for (_, queue), value in zip(_MODE_FLAGS, values):
                q = getattr(low, queue, None)
                if q:
                    q[max(len(q) - places, 0)] = value
        i = next((i for i, s in enumerate(_FLAG_HOLDERS) if s is self), None)
        if i is not None:  # else done by an earlier, interrupted call
            later = [s for s in _FLAG_HOLDERS[i + 1:] if s._flags is not None]
            foreign = above and not (isinstance(above[0], _Mode) and above[0].s._flags is not None)
            if later and not (foreign and later[0].mode in above):
                # the next block entered (a block of another thread, or this thread's lowest mode above it) stands
                # where this one stood; a mode above it that is not a block's has the flags in its deque (above)
                later[0]._flags = (values, later[0]._flags[1])
            elif not above:
                _set_mode_flags(values)
            _forget_flags(self)
        for (_, queue), n in zip(_MODE_FLAGS, lengths):
            q = getattr(self.mode, queue, None)
            while q is not None and len(q) > n:
                q.pop()
        self._flags = None

    def _leave_context(self):
        mine = _OPEN.get()
        if self.token is not None and self.token in mine:
            _OPEN.set(tuple(t for t in mine if t is not self.token))

    def _stop_compiled(self):
        if self.compiled is not None:
            _view.stop(self, self.compiled)
            self._compiled_left = self.compiled  # summarised by finish(), outside the block lock
            self.compiled = None

    def _unhook_optimizer(self):
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _reset_phase(self):
        self.phase = None

    def _uninstall_collectives(self):
        _collectives.uninstall(self)

    def op_waits_array(self, n: int):
        """``(waits, at_end)`` for a block that recorded its thread's waits for a CPU (None otherwise): ``waits`` per
        record of ``n``: seconds its thread had waited since the block's start before and after the op, and the
        seconds the two reads took (before, after: outside the op's own times, inside the intervals around it); NaN
        where unknown (an op of another thread, a device op, no scheduler statistics). ``at_end``: the seconds waited
        by the block's end (NaN where unknown)."""
        start = self.wait_at[0]
        if self.op_waits is None or start is None:
            return None
        out = np.full((n, 4), np.nan)
        for i, w0, w1, r0, r1 in self.op_waits:
            if w0 is not None and w1 is not None and i < n:
                out[i] = ((w0 - start) * 1e-9, (w1 - start) * 1e-9, r0, r1)
        end = self.wait_at[1]
        return out, (np.nan if end is None else (end - start) * 1e-9)

    def cuda_base(self, synchronize: bool = True):
        """Record the event the ops' CUDA events are timed from, and its time from the block's start by the host
        clock (read once the event is recorded): at the block's start when CUDA is in use, else when the block's first
        op on a CUDA tensor finds none. The device is synchronised first (``synchronize``), so that the event is
        reached at once whatever was queued before it (CUDA work of the block that no op timing saw: a formula's op, a
        collective)."""
        if self._base_event is None:
            if synchronize:
                torch.cuda.synchronize()
            self._base_event = torch.cuda.Event(enable_timing=True)
            self._base_event.record()
            self._base_offset = _now() - self.t_base

    def _resolve_events(self):
        """Turn the CUDA event pairs into op start/end times, in seconds from the block's start (the device was
        synchronised at entry, so the base event and the host clock start together; a base event recorded by the
        block's first CUDA op starts ``_base_offset`` seconds in)."""
        base, offset = self._base_event, self._base_offset
        for i, e0, e1 in self.events:
            self.recorder.set_times(i, offset + base.elapsed_time(e0) / 1e3, offset + base.elapsed_time(e1) / 1e3)
        self.events.clear()


def _version(t):
    """A tensor's version counter (bumped by every in-place change), or None where it has none (an inference
    tensor)."""
    try:
        return t._version
    except RuntimeError:
        return None


def attribution_meta(session) -> dict:
    """``meta["attribution"]`` of a finished block: how backward ops were credited to modules (``"autograd"``: to the
    module whose forward created each op's autograd node; ``"module_tracker"``: torch's ModuleTracker rule, where
    torch lacks what linking needs), the rows credited to another module set than ModuleTracker's (their
    ModuleTracker set, for FlopCounterMode's structure) and the backward rows that could not be linked."""
    fcm, unlinked = session.attribution()
    out = {"method": "autograd" if _LINK is not None and not session.tracker.c.links_broken else "module_tracker",
           "flop_counter_rows": fcm[0::2], "flop_counter_modules": fcm[1::2], "unlinked_rows": unlinked}
    if session.root_name is not None:  # FlopCounterMode's names where the root was not the first module entered
        names, note = _fcm_names.replay(session.model, session.root_name, session.module_sets)
        if names:
            out["flop_counter_names"] = names
        if note:
            out["names_note"] = note
    if session.tracker.c.links_broken:
        out["note"] = ("autograd's node numbers went backwards during the block (forward ops of several threads): "
                       "backward ops after that are credited as torch's ModuleTracker credits them")
    return out


def _sync_all(cuda_possible):
    """Wait for every CUDA device, where CUDA is in use. ``cuda_possible``: ``torch.cuda.is_available()``, read once
    per block (it does not change within a process; whether CUDA is initialised does)."""
    if cuda_possible and torch.cuda.is_initialized():
        torch.cuda.synchronize()


_OVERHEAD: dict = {}


def instrumentation_overhead(timing) -> dict:
    """Per-op cost of the instrumentation itself, measured once per process on a tiny CPU op: ``counting_per_op_s``
    (the dispatch mode, formula and record) and ``timing_per_op_s`` (the clock reads of ``timing="op"``). Reports
    show it beside the wall time, which includes it."""
    if "counting_per_op_s" not in _OVERHEAD:
        n = 200

        def loop():
            t0 = time.perf_counter()
            for _ in range(n):
                torch.add(a, b)
            return (time.perf_counter() - t0) / n

        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():  # outside any mode the caller has active (an enclosing measure, say)
            a, b = torch.ones(4, device="cpu"), torch.ones(4, device="cpu")
            bare = min(loop() for _ in range(3))
            s = Session(None, timing=None)
            s.mode.__enter__()
            try:
                counted = min(loop() for _ in range(3))
            finally:
                s.mode.__exit__(None, None, None)
        t0 = time.perf_counter()
        for _ in range(1000):
            _now()
            _now()
        _OVERHEAD["counting_per_op_s"] = max(counted - bare, 0.0)
        _OVERHEAD["timing_per_op_s"] = (time.perf_counter() - t0) / 1000
    if "cuda_timing_per_op_s" not in _OVERHEAD and torch.cuda.is_available() and torch.cuda.is_initialized():
        # the CUDA path creates and records two events per op instead; measured once CUDA is in use (a process
        # that has not used CUDA is not made to)
        t0 = time.perf_counter()
        for _ in range(200):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            e1.record()
        _OVERHEAD["cuda_timing_per_op_s"] = (time.perf_counter() - t0) / 200
    out = {"counting_per_op_s": _OVERHEAD["counting_per_op_s"]}
    if timing == "op":
        out["timing_per_op_s"] = _OVERHEAD["timing_per_op_s"]
        if "cuda_timing_per_op_s" in _OVERHEAD:
            out["cuda_timing_per_op_s"] = _OVERHEAD["cuda_timing_per_op_s"]
    return out
