"""The step loops (roofline.profiler, roofline.monitor) and the trainer callbacks under hostile use: callbacks that
call back into their loop, interrupts landing on any instruction of the block hand-over, epochs with a smaller last
batch, step numbers that follow the trainer's global step, nested tensors, bad output folders, two callbacks, a
block that fails to open, huge numbers, and the monitor's history read as a list. After each case no dispatch mode
(or anything else a block installs) is left behind."""

import contextvars
import importlib.util
import os
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from _graph import ceilings  # noqa: E402
from roofline._loops import _monitor, _schedule  # noqa: E402
from roofline.integrations import _run as _core  # noqa: E402

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "interrupt_stress.py")
_spec = importlib.util.spec_from_file_location("roofline_bench_interrupt_stress", _PATH)
stress = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stress)
global_state = stress.global_state

CEIL = ceilings(vector=1e12, matrix=2e12, dram=1e11)
D_IN, D_OUT = 8, 4


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(D_IN, D_OUT, bias=False)


def _flops(b):
    """Forward of Linear(8, 4, bias=False) on b rows, under no_grad: one product, 2 * b * 8 * 4 FLOPs."""
    return 2 * b * D_IN * D_OUT


def _run(model, b):
    with torch.no_grad():
        model(torch.randn(b, D_IN))


def _modes():
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return _get_current_dispatch_mode_stack(), torch._C._len_torch_dispatch_stack()


@pytest.fixture
def clean():
    """The process-global state before the test, checked equal after it (no mode, hook or global left)."""
    _run(_model(), 2)
    with roofline.measure(_model(), ceilings=CEIL):  # first block of the process: lazy imports
        _run(_model(), 2)
    before = global_state()
    yield
    assert _modes() == ([], 0)
    assert global_state() == before, stress.differences(before, global_state())


# ---- 1. callbacks that call back into their loop --------------------------------------------------------------------
def test_stop_from_on_report_stops_the_profiler_there_and_leaves_no_mode(clean):
    model = _model()
    seen = []

    def on_report(r):
        seen.append(r.steps)
        prof.stop()

    prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=2), ceilings=CEIL,
                             on_report=on_report)
    with prof:
        for _ in range(5):
            _run(model, 3)
            if prof.running:
                prof.step()
    assert seen == [[0, 1]] and [r.steps for r in prof.reports] == [[0, 1]] and not prof.running
    assert prof.reports[0].matrix_flops == _flops(3)
    with pytest.raises(RuntimeError, match="has been stopped"):
        prof.step()


def test_stop_from_the_partial_cycles_on_report_during_stop_does_nothing_more(clean):
    model = _model()
    prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=4), ceilings=CEIL,
                             on_report=lambda r: prof.stop())
    with prof:
        for _ in range(2):
            _run(model, 3)
            prof.step()
    (r,) = prof.reports
    assert r.steps == [0, 1] and r.meta["steady"]["partial"] is True


def test_step_from_on_report_is_refused_and_leaves_no_mode(clean):
    model = _model()
    prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=1), ceilings=CEIL,
                             on_report=lambda r: prof.step())
    with pytest.raises(RuntimeError, match=r"step\(\) called from inside its own on_report callback"):
        with prof:
            for _ in range(3):
                _run(model, 3)
                prof.step()
    assert not prof.running and len(prof.reports) == 1


def test_stop_from_on_step_stops_the_monitor_and_step_from_it_is_refused(clean):
    model = _model()
    seen = []

    def on_step(m):
        seen.append(m["step"])
        if m["step"] == 2:
            mon.stop()

    mon = roofline.monitor(model, on_step=on_step, ceilings=CEIL)
    with mon:
        for _ in range(6):
            _run(model, 3)
            if mon.running:
                mon.step()
    assert seen == [0, 1, 2] and len(mon.history) == 3 and not mon.running
    assert mon.history[1]["flops"] == _flops(3)  # step 1 was counted

    mon = roofline.monitor(model, on_step=lambda m: mon.step(), ceilings=CEIL)
    with pytest.raises(RuntimeError, match=r"step\(\) called from inside its own on_step callback"):
        with mon:
            for _ in range(3):
                _run(model, 3)
                mon.step()


def test_a_callback_that_always_stops_is_harmless_when_stop_flushes(clean):
    """on_step calling stop() for steps handed over by stop() itself (its flush): nothing raises."""
    model = _model()
    calls = []
    mon = roofline.monitor(model, on_step=lambda m: (calls.append(m["step"]), mon.stop()), ceilings=CEIL)
    with mon:
        _run(model, 2)
        mon.step()
    assert calls == [0]


# ---- 2. an interrupt on any instruction of the block hand-over -----------------------------------------------------
_HANDOVER = {"_open_block", "_close_block", "enter", "exit", "start", "stop", "_release", "step", "_begin",
             "_on_start", "_prepare", "_enter", "_abort", "_closing", "_leave", "_unwind", "_finish", "_on_stop",
             "_close_cycle", "_flush", "_call_back"}
_FILES = (os.path.join("roofline", "_loops", "_schedule.py"), os.path.join("roofline", "_loops", "_monitor.py"))


class _InterruptAt:
    """A trace function raising KeyboardInterrupt before the ``k``-th instruction run in the step loops' hand-over
    functions (a superset of where a signal handler can run: CPython runs them between some instructions)."""

    def __init__(self, k):
        self.k, self.n, self.fired = k, 0, False

    def __call__(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code.co_name in _HANDOVER and code.co_filename.endswith(_FILES):
                frame.f_trace_opcodes = True
                return self
            return None
        if event == "opcode" and not self.fired:
            self.n += 1
            if self.n == self.k:
                self.fired = True
                raise KeyboardInterrupt("injected")
        return self


def _interrupted_loop(kind, k):
    model = _model()
    loop = (roofline.profile(model, schedule=roofline.schedule(warmup=1, active=1), ceilings=CEIL)
            if kind == "profiler" else roofline.monitor(model, ceilings=CEIL))
    tracer = _InterruptAt(k)
    sys.settrace(tracer)
    try:
        with loop:
            for _ in range(3):
                _run(model, 2)
                loop.step()
    except KeyboardInterrupt as e:
        assert e.args == ("injected",)
    finally:
        sys.settrace(None)
    return tracer, loop


@pytest.mark.parametrize("kind", ["profiler", "monitor"])
def test_an_interrupt_before_any_instruction_of_the_loop_leaves_nothing_open(kind, clean):
    """Every third instruction of the loops' hand-over code in turn (bench/loop_stress.py --sweep: every one), in a
    three-step loop inside a with block: after the interrupt, nothing is left open (the with statement, or the
    step's own code, closed the block it held)."""
    k, fired = 0, True
    while fired:
        k += 3
        tracer, loop = _interrupted_loop(kind, k)
        fired = tracer.fired
        assert _modes() == ([], 0), f"mode left by an interrupt before instruction {k}"
        assert loop._block is None or not loop._block.open
    assert k > 100  # the whole loop ran under the tracer at the end


def test_an_interrupt_after_the_block_is_entered_leaves_it_held_and_the_next_step_closes_it(clean, monkeypatch):
    """The interrupt lands once the block is open (after __enter__ returned): the caller catches it and goes on;
    the next step() closes the block (a report of the step it covered), stop() anything left."""
    model = _model()
    entered = _schedule._Held.enter
    calls = []

    def enter(self):
        out = entered(self)
        calls.append(1)
        if len(calls) == 2:  # step 1's block
            raise KeyboardInterrupt("after entry")
        return out

    monkeypatch.setattr(_schedule._Held, "enter", enter)
    prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=2), ceilings=CEIL).start()
    _run(model, 2)
    with pytest.raises(KeyboardInterrupt):
        prof.step()  # step 1's block is open when the interrupt lands
    assert prof._block.open and len(_modes()[0]) == 1
    _run(model, 5)
    prof.step()  # closes step 1: its report is kept
    prof.stop()
    assert _modes() == ([], 0)
    (r,) = prof.reports
    assert r.steps == [0, 1] and [x.matrix_flops for x in r.repeats] == [_flops(2), _flops(5)]


# ---- 3. epochs with a smaller last batch ----------------------------------------------------------------------------
def _monitored(sizes, **kw):
    model = _model()
    xs = {b: torch.randn(b, D_IN) for b in set(sizes)}
    with roofline.monitor(model, ceilings=CEIL, **kw) as mon:
        for b in sizes:
            with torch.no_grad():
                model(xs[b])
            mon.step(inputs=xs[b])
    return list(mon.history)


def test_the_small_last_batch_of_each_epoch_gets_figures_and_full_batches_are_not_recounted(clean):
    """Epochs of [8, 8, 8, 3] rows, five of them. Step 0 is the warm-up, step 1 counted (8 rows). Step 3 (3 rows,
    a new signature) has no figures and the next step is counted (step 4: 8 rows again). Step 7 (3 rows, seen at
    step 3) has no figures; its period, 4, makes step 11 counted: 3 rows. From then on every step has figures and
    none is counted."""
    h = _monitored([8, 8, 8, 3] * 5)
    assert [m["step"] for m in h if m["recounted"]] == [1, 4, 11]
    assert [m["step"] for m in h if m["flops"] is None] == [0, 3, 7]
    for m in h:
        if m["flops"] is not None:
            assert m["flops"] == _flops(3 if m["step"] % 4 == 3 else 8)
    assert [m["counts_from"] for m in h if m["step"] % 4 == 3 and m["step"] > 7] == [11, 11, 11]


def test_shapes_that_cycle_are_each_counted_once(clean):
    """2, 3, 5 rows in turn: step 1 (3 rows) counted; 5 rows first at step 2, so step 3 (2 rows) is counted; 5
    rows again at step 5: period 3, step 8 counted. No figures for steps 0, 2, 5 only."""
    h = _monitored([2, 3, 5] * 4)
    assert [m["step"] for m in h if m["recounted"]] == [1, 3, 8]
    assert [m["step"] for m in h if m["flops"] is None] == [0, 2, 5]
    assert all(m["flops"] == _flops((2, 3, 5)[m["step"] % 3]) for m in h if m["flops"] is not None)


def test_a_change_of_shapes_that_lasts_is_counted_at_the_next_step(clean):
    h = _monitored([8, 8, 8, 3, 3, 3, 3])
    assert [m["step"] for m in h if m["recounted"]] == [1, 4]
    assert [m["step"] for m in h if m["flops"] is None] == [0, 3]
    assert [m["flops"] for m in h[4:]] == [_flops(3)] * 3


def test_the_periodic_recount_still_runs_with_a_small_last_batch(clean):
    h = _monitored([8, 8, 8, 3] * 4, recount_every=6)
    # counted: 1 (first), 4 (after the new 3-row signature), 10 (6 steps after 4), 11 (3 rows, seen at steps 3
    # and 7: due at 11)
    assert [m["step"] for m in h if m["recounted"]] == [1, 4, 10, 11]


# ---- 4. step numbers follow the trainer's global step -------------------------------------------------------------
def _loop_run(tmp_path, offset=0, delta=1, **kwargs):
    opts = _core.Options("cb", **{**dict(steps=None, schedule=None, monitor=False, output_dir=None, tokens=None,
                                         timing="model", ceilings=CEIL, attention=None, gather_timeout=10.0,
                                         log=True), **kwargs})
    return _core.Run(opts, _model(), offset=offset, output_dir=str(tmp_path), framework="loop", delta=delta,
                     log=lambda values, step: None)


def _drive(run, sizes, moves):
    """One step per batch size; the trainer's global step moves by ``moves`` per step."""
    g = run.offset
    run.start()
    try:
        for b in sizes:
            _run(run.profiler._model if run.profiler else run.monitor._model, b)
            g += moves
            run.step(tokens=b, global_step=g)
    finally:
        run.stop()


@pytest.mark.parametrize("delta", [1, 2])
def test_two_optimizer_steps_per_batch_profile_the_batches_steps_names(tmp_path, delta, clean):
    """The global step moves by 2 per batch (two optimizers stepped by hand): steps=(4, 6) are the batches after
    which it is 4 and 6 (the 2nd and 3rd, 1-based; 3 and 5 rows), the 1st is the warm-up when the run expects 2
    per step from the start (delta=2); with delta=1 it learns it after the first step, too late for a warm-up."""
    run = _loop_run(tmp_path, delta=delta, steps=(4, 6))
    with pytest.warns(UserWarning, match="ran the same ops with different counts"):  # 3 and 5 rows
        _drive(run, [2, 3, 5, 7, 11], 2)
    (r,) = run.reports
    assert r.steps == [4, 6] and r.meta["trainer"]["steps"] == [4, 6] and r.meta["trainer"]["tokens"] == [3, 5]
    assert [x.matrix_flops for x in r.repeats] == [_flops(3), _flops(5)]
    assert r.meta["steady"]["warmup"] == (1 if delta == 2 else 0)
    assert sorted(os.listdir(tmp_path)) == ["steps4-6.html", "steps4-6.json"]


def test_a_schedule_is_in_steps_of_the_run_and_its_reports_carry_the_global_steps(tmp_path, clean):
    run = _loop_run(tmp_path, offset=10, schedule=roofline.schedule(skip_first=1, warmup=0, active=2, repeat=1))
    with pytest.warns(UserWarning, match="ran the same ops with different counts"):
        _drive(run, [2, 3, 5, 7], 3)
    (r,) = run.reports
    # steps of the run 1 and 2 (3 and 5 rows): the global step after them is 10 + 2*3 and 10 + 3*3
    assert r.steps == [16, 19] and [x.matrix_flops for x in r.repeats] == [_flops(3), _flops(5)]


def _lightning():
    try:
        import lightning.pytorch as pl
    except ImportError:
        pl = pytest.importorskip("pytorch_lightning")
    from roofline.integrations import lightning as integration

    class TwoOptimizers(pl.LightningModule):
        """Manual optimisation, two optimizers stepped per batch: the global step moves by 2 per batch."""

        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            self.a, self.b = torch.nn.Linear(D_IN, D_OUT, bias=False), torch.nn.Linear(D_IN, D_OUT, bias=False)

        def training_step(self, batch, batch_idx):
            opt_a, opt_b = self.optimizers()
            for net, opt in ((self.a, opt_a), (self.b, opt_b)):
                opt.zero_grad()
                self.manual_backward(net(batch).sum())
                opt.step()

        def configure_optimizers(self):
            return torch.optim.SGD(self.a.parameters(), lr=0.1), torch.optim.SGD(self.b.parameters(), lr=0.1)

    def fit(tmp_path, callbacks, sizes):
        trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, callbacks=callbacks,
                             enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                             default_root_dir=str(tmp_path))
        data = [torch.randn(b, D_IN) for b in sizes]
        trainer.fit(TwoOptimizers(), torch.utils.data.DataLoader(data, batch_size=None))
        return trainer

    return integration, fit


def _two_optimizer_flops(b):
    """One batch of b rows: per network, forward 2*b*8*4 and the weight gradient 2*b*8*4 (the input needs none)."""
    return 2 * (2 * 2 * b * D_IN * D_OUT)


def test_lightning_two_optimizers_profile_the_global_steps_named(tmp_path, clean):
    integration, fit = _lightning()
    cb = integration.RooflineCallback(steps=(4, 6), ceilings=CEIL, output_dir=str(tmp_path / "out"))
    with pytest.warns(UserWarning, match="ran the same ops with different counts"):  # 3 and 5 rows
        trainer = fit(tmp_path, [cb], [2, 3, 5, 7, 11])
    assert trainer.global_step == 10  # 2 per batch
    (r,) = cb.reports
    assert r.steps == [4, 6] and r.meta["trainer"]["steps"] == [4, 6] and r.meta["steady"]["warmup"] == 1
    assert [x.matrix_flops for x in r.repeats] == [_two_optimizer_flops(3), _two_optimizer_flops(5)]
    assert sorted(os.listdir(tmp_path / "out")) == ["steps4-6.html", "steps4-6.json"]


def test_lightning_two_roofline_callbacks_are_refused_before_training(tmp_path, clean):
    integration, fit = _lightning()
    cbs = [integration.RooflineCallback(steps=(1, 2), ceilings=CEIL),
           integration.RooflineCallback(monitor=True, ceilings=CEIL)]
    with pytest.raises(ValueError, match="the Trainer has 2 RooflineCallbacks"):
        fit(tmp_path, cbs, [2, 3, 5])
    assert all(cb.reports == [] for cb in cbs)


def test_lightning_a_report_folder_that_is_a_file_stops_the_run_before_its_first_step(tmp_path, clean):
    integration, fit = _lightning()
    (tmp_path / "file").write_text("x")
    cb = integration.callback_class()(steps=(1, 2), ceilings=CEIL)
    cb.options.output_dir = str(tmp_path / "file")  # as if the folder had become a file since the callback was made
    with pytest.raises(ValueError, match="is a file, not a folder"):
        fit(tmp_path, [cb], [2, 3, 5])
    assert cb.reports == [] and not cb._runs


# ---- 5. nested tensors in the inputs ----------------------------------------------------------------------------
@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_nested_tensor_inputs_are_part_of_the_signature(layout, clean):
    model = _model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prototype warning of strided nested tensors
        a = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=layout)
        b = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(5, 3)], layout=layout)
    with roofline.monitor(model, ceilings=CEIL) as mon:
        for x in (a, a, a, b, b):
            _run(model, 2)
            mon.step(inputs={"x": x})
    h = mon.history
    assert [m["changed"] for m in h] == [False, False, False, True, False]
    assert [m["recounted"] for m in h] == [False, True, False, False, True]
    assert all(m["flops"] == _flops(2) for m in h[1:3]) and h[4]["flops"] == _flops(2)
    assert _core.describe({"x": a}) != _core.describe({"x": b})


# ---- 6. the output folder is checked before the run ---------------------------------------------------------------
def test_an_output_folder_that_is_a_file_is_refused_when_the_callback_is_made(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match=r"output_dir .*file.* is a file, not a folder"):
        _loop_run(tmp_path, output_dir=str(f), steps=(1, 1))
    with pytest.raises(ValueError, match=r"output_dir .*file.*sub.* is under .*file.*, which is a file"):
        _loop_run(tmp_path, output_dir=str(f / "sub" / "dir"), steps=(1, 1))
    opts = _loop_run(tmp_path, output_dir=str(tmp_path / "new" / "dir"), steps=(1, 1)).opts  # made when written
    assert opts.output_dir == str(tmp_path / "new" / "dir") and not (tmp_path / "new").exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root may write anywhere")
def test_an_output_folder_that_cannot_be_written_is_refused(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="not writable"):
            _loop_run(tmp_path, output_dir=str(d / "out"), steps=(1, 1))
    finally:
        d.chmod(0o700)


# ---- 7. two roofline callbacks -------------------------------------------------------------------------------------
def test_a_second_run_on_the_thread_is_refused_and_both_are_closed(tmp_path, clean):
    first = _loop_run(tmp_path, steps=(1, 2))
    second = _loop_run(tmp_path, monitor=True)
    closed = []
    first._close = lambda: closed.append("first")
    first.start()
    assert len(_modes()[0]) == 1  # the first run's step 1 is being measured
    with pytest.raises(ValueError, match="another roofline callback's training run is in progress on this thread"):
        second.start()
    assert closed == ["first"] and first.stopped and not first.running and not second.running
    third = _loop_run(tmp_path, steps=(1, 1))  # afterwards, one run works
    _drive(third, [2, 3], 1)
    assert [r.steps for r in third.reports] == [[1]]


# ---- 8. a block that fails to open --------------------------------------------------------------------------------
def test_a_block_that_fails_to_open_leaves_the_profiler_consistent(clean):
    """A measure block of another contextvars context is open on the thread: the profiler's next block cannot be
    entered. step() raises that error, the step runs unmeasured; later steps go on; the cycle none of whose active
    steps was measured warns that it has no report."""
    model = _model()
    other = roofline.measure(ceilings=CEIL)
    ctx = contextvars.copy_context()
    prof = roofline.profile(model, schedule=roofline.schedule(wait=1, warmup=0, active=1, repeat=2),
                             ceilings=CEIL).start()
    _run(model, 2)
    ctx.run(other.__enter__)
    try:
        with pytest.raises(RuntimeError, match="another asyncio task"):
            prof.step()  # step 1 is active: its block cannot be entered
    finally:
        ctx.run(other.__exit__, None, None, None)
    _run(model, 3)
    with pytest.warns(UserWarning, match="cycle 0 has no report: none of its active steps was measured") as w:
        prof.step()
    assert w[0].filename == __file__
    for b in (5, 7):
        _run(model, b)
        prof.step()
    prof.stop()
    (r,) = prof.reports
    assert r.steps == [3] and r.cycle == 1 and r.matrix_flops == _flops(7)


# ---- 9. numbers too large -----------------------------------------------------------------------------------------
def test_huge_numbers_are_refused_naming_the_argument_and_the_step_is_not_lost(clean):
    with pytest.raises(ValueError, match=r"monitor: history_size must be an int in \[1, 9223372036854775807\]"):
        roofline.monitor(ceilings=CEIL, history_size=10**30)
    with roofline.monitor(ceilings=CEIL) as mon:
        for bad in (10**400, 2**63, -1):  # out of range: ValueError
            with pytest.raises(ValueError, match="monitor.step: tokens must be an int"):
                mon.step(tokens=bad)
        for bad in (True, 2.0):  # not an int by the package's one rule: TypeError
            with pytest.raises(TypeError, match="monitor.step: tokens must be an int"):
                mon.step(tokens=bad)
        mon.step(tokens=2**63 - 1)  # the same step, ended now
        mon.step(tokens=0)
    assert [(m["step"], m["tokens"]) for m in mon.history] == [(0, 2**63 - 1), (1, 0)]
    assert mon.history[0]["tokens_per_s"] > 0
    with pytest.raises(ValueError, match=r"tokens\(batch\) must return an int <= 2\*\*63 - 1"):
        _core.user_tokens("cb", lambda b: 10**400, {})

    class Huge:  # a tensor-like batch entry beyond int64 (torch's numel cannot be): no count rather than a wrong one
        def numel(self):
            return 2**64

    assert _core.batch_tokens({"input_ids": Huge()}) is None


# ---- 10. the history is read as a list ----------------------------------------------------------------------------
def test_the_history_is_a_bounded_list_like_sequence(clean):
    with roofline.monitor(ceilings=CEIL, history_size=4) as mon:
        for _ in range(6):
            mon.step(tokens=1)
    h = mon.history
    steps = [2, 3, 4, 5]  # the latest 4 of steps 0 to 5
    assert len(h) == 4 and h.maxlen == 4 and [m["step"] for m in h] == steps
    assert [m["step"] for m in h[:2]] == [2, 3] and [m["step"] for m in h[-2:]] == [4, 5]
    assert [m["step"] for m in h[::2]] == [2, 4] and [m["step"] for m in h[::-1]] == [5, 4, 3, 2]
    assert h[1:1] == [] and h[3:1] == [] and isinstance(h[:2], list)
    assert h[0]["step"] == 2 and h[-1]["step"] == 5 and h == list(h) and h != list(h)[:3]
    with pytest.raises(IndexError):
        h[4]
    with pytest.raises(TypeError):
        h["a"]
    with pytest.raises(TypeError):
        h[0] = {}


# ---- the Hugging Face callback: the report folder and a second callback, before training -----------------------
def _hf_trainer(out):
    transformers = pytest.importorskip("transformers")
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32,
                                                                 n_positions=8))
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 32, (4, 8))]
    args = transformers.TrainingArguments(output_dir=str(out), max_steps=2, per_device_train_batch_size=2,
                                          use_cpu=True, save_strategy="no", disable_tqdm=True, report_to=[])
    return transformers.Trainer(model=model, args=args, train_dataset=data)


def test_hf_report_folder_that_is_a_file_and_two_callbacks_are_refused_before_training(tmp_path, clean):
    from roofline.integrations.huggingface import RooflineCallback

    out = tmp_path / "run"
    out.mkdir()
    (out / "roofline").write_text("x")
    trainer = _hf_trainer(out)
    with pytest.raises(ValueError, match=r"args.output_dir/roofline.*is a file, not a folder"):
        RooflineCallback(trainer, steps=(1, 1), ceilings=CEIL)
    (out / "roofline").unlink()
    for cb in (RooflineCallback(trainer, steps=(1, 1), ceilings=CEIL),
               RooflineCallback(trainer, monitor=True, ceilings=CEIL)):
        trainer.add_callback(cb)
    with pytest.raises(ValueError, match="the Trainer has 2 RooflineCallbacks"):
        trainer.train()
    assert trainer.state.global_step == 0


# ---- the periodic recount's comparison: calls of each op, and the counts --------------------------------------
def _recounted(steps, every=2):
    """Run ``steps`` (callables, one per step) under a monitor recounting every ``every`` steps, same signature
    throughout; (the warnings, the history)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with roofline.monitor(ceilings=CEIL, recount_every=every) as mon:
            for fn in steps:
                fn()
                mon.step()  # the warnings' line
    mine = [w for w in seen if "roofline.monitor" in str(w.message)]
    import inspect

    lines, first = inspect.getsourcelines(_recounted)
    line = first + next(i for i, text in enumerate(lines) if "# the warnings' line" in text and "text" not in text)
    assert all((w.filename, w.lineno) == (__file__, line) for w in mine)
    return [str(w.message) for w in mine], list(mon.history)


def test_a_recount_of_the_same_work_warns_nothing_and_changes_nothing(clean):
    a, b = torch.randn(4, 8), torch.randn(8, 2)
    msgs, h = _recounted([lambda: torch.mm(a, b)] * 6)
    assert msgs == [] and [m["recounted"] for m in h] == [False, True, False, True, False, True]
    assert not any(m["changed"] for m in h) and all(m["flops"] == 2 * 4 * 8 * 2 for m in h[1:])


def test_a_recount_with_the_same_calls_and_other_counts_warns(clean):
    """Step 3 multiplies by an 8 x 3 matrix instead of 8 x 2: the same op, called once, other FLOPs (2*4*8*3)."""
    a, b, c = torch.randn(4, 8), torch.randn(8, 2), torch.randn(8, 3)
    msgs, h = _recounted([lambda: torch.mm(a, b)] * 3 + [lambda: torch.mm(a, c)] * 2)
    assert msgs == ["roofline.monitor: step 3 ran other ops than step 1, counted with the same signature (input "
                    "shapes, parameters, modes, compiled graphs); step 2 of that signature was given step 1's counts"]
    assert [m["changed"] for m in h] == [False, False, False, True, False] and h[4]["flops"] == 2 * 4 * 8 * 3


def test_a_recount_with_the_same_counts_and_other_calls_warns(clean):
    """add then sub of two 4 x 8 tensors: one vector FLOP per element either way, the same bytes; other ops."""
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    msgs, h = _recounted([lambda: torch.add(a, b)] * 3 + [lambda: torch.sub(a, b)] * 2)
    assert len(msgs) == 1 and msgs[0].startswith("roofline.monitor: step 3 ran other ops than step 1")
    assert h[1]["flops"] == h[3]["flops"] == 32 and [m["changed"] for m in h] == [False, False, False, True, False]


# ---- the signature: what of the inputs it reads ---------------------------------------------------------------
def _changed(inputs_per_step, **kw):
    with roofline.monitor(ceilings=CEIL, **kw) as mon:
        for inputs in inputs_per_step:
            mon.step(inputs=inputs)
    return [m["changed"] for m in mon.history]


def _nest(x, levels, mapping):
    for _ in range(levels):
        x = {"k": x} if mapping else [x]
    return x


@pytest.mark.parametrize("mapping", [False, True])
def test_the_signature_reads_eight_levels_of_nesting_and_no_more(mapping, clean):
    """Containers at depths 0 to 7 are opened (8 levels), one at depth 8 is read as its type: a tensor under 8
    containers is read, under 9 it is not."""
    a, b = torch.zeros(2), torch.zeros(3)
    assert _changed([_nest(a, 8, mapping), _nest(b, 8, mapping)]) == [False, True]
    assert _changed([_nest(a, 9, mapping), _nest(b, 9, mapping)]) == [False, False]
    assert _changed([_nest(a, 2, mapping), _nest(b, 2, mapping)]) == [False, True]


def test_ints_bools_and_strings_are_read_by_value(clean):
    assert _changed([{"n": 3}, {"n": 4}, {"n": 4}, {"s": "a"}, {"s": "b"}, {"f": True}, {"f": False}]) \
        == [False, True, False, True, True, True, True]
    assert _changed([{"lr": 0.1}, {"lr": 0.2}, {"x": None}, {"x": None}]) == [False, False, True, False]


def test_a_jagged_tensor_of_other_lengths_with_the_same_total_is_another_signature(clean):
    """Rows 2 + 4 and 1 + 1 + 4: 6 rows in all either way; 2 and 3 sequences."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged)
        b = torch.nested.nested_tensor([torch.randn(1, 3), torch.randn(1, 3), torch.randn(4, 3)],
                                       layout=torch.jagged)
    assert _changed([a, a, b]) == [False, False, True]


def test_a_tensor_whose_shape_cannot_be_read_is_named_in_a_warning_at_the_callers_line(clean):
    class NoShape(torch.Tensor):
        @property
        def shape(self):
            raise RuntimeError("no shape here")

    x = torch.Tensor._make_subclass(NoShape, torch.zeros(2))
    for inputs in (x, {"a": [x]}):
        with roofline.monitor(ceilings=CEIL) as mon:
            with pytest.warns(UserWarning, match="the shape of a .*NoShape in inputs could not be read") as w:
                mon.step(inputs=inputs)
        assert w[0].filename == __file__  # the line of the mon.step call
        assert mon.history[0]["step"] == 0


def test_a_new_compiled_graph_changes_the_signature(clean, monkeypatch):
    """torch._dynamo not imported yet (0 graphs), then imported with 1 graph, then 2: each a change."""
    import types as _types

    fake = _types.SimpleNamespace(counters={"stats": {"unique_graphs": 1}})
    with roofline.monitor(ceilings=CEIL) as mon:
        # "not imported" as the monitor sees it (sys.modules.get gives None); the module itself stays imported: taking
        # it out of sys.modules would let a later import make a second copy of it, with Dynamo's state split in two
        monkeypatch.setattr(sys, "modules", {k: v for k, v in sys.modules.items() if k != "torch._dynamo.utils"})
        mon.step()
        mon.step()
        monkeypatch.setitem(sys.modules, "torch._dynamo.utils", fake)
        mon.step()
        fake.counters["stats"]["unique_graphs"] = 2
        mon.step()
        mon.step()
    assert [m["changed"] for m in mon.history] == [False, False, True, True, False]


def test_without_a_model_the_clock_is_cuda_events_only_once_cuda_is_initialised(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert isinstance(_monitor._clock_for(None), _monitor._PerfClock)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert isinstance(_monitor._clock_for(None), _monitor._PerfClock)


def test_two_histories_compare_by_their_items():
    h1, h2, h3 = _monitor.History(3), _monitor.History(5), _monitor.History(3)
    for h, items in ((h1, [1, 2]), (h2, [1, 2]), (h3, [1, 3])):
        for i in items:
            h._append(i)
    assert h1 == h2 and not (h1 != h2) and h1 != h3 and not (h1 == h3) and h1 != "12"


def test_after_a_counted_step_the_next_steps_time_starts_once_its_bookkeeping_is_done(clean):
    """on_step of the counted step 1 sleeps 0.2 s inside step(): step 2, which runs nothing, does not include it;
    step 3, after the uncounted step 2 whose on_step also sleeps, does (its time runs from step 2's step() call)."""
    import time as _time

    def on_step(m):
        if m["step"] in (1, 2):
            _time.sleep(0.2)

    with roofline.monitor(ceilings=CEIL, on_step=on_step, recount_every=None) as mon:
        for _ in range(4):
            mon.step()
    h = mon.history
    assert h[1]["recounted"] and not h[2]["recounted"]
    assert h[2]["time_s"] < 0.2 <= h[3]["time_s"]


def test_modules_are_listed_at_start_and_at_each_count(clean):
    """A layer added to the model after step 1's count: its parameters enter the signature at the next count (step
    3, recount_every=2), not before (the modules are listed at start() and at each count)."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with roofline.monitor(model, ceilings=CEIL, recount_every=2) as mon:
        for i in range(5):
            if i == 2:
                model.append(torch.nn.Linear(2, 3))
            mon.step()
    assert [m["recounted"] for m in mon.history] == [False, True, False, True, False]
    assert [m["changed"] for m in mon.history] == [False, False, False, True, False]


def test_a_recount_right_after_a_count_names_no_step_given_older_counts(clean):
    a, b, c = torch.randn(4, 8), torch.randn(8, 2), torch.randn(8, 3)
    msgs, h = _recounted([lambda: torch.mm(a, b)] * 2 + [lambda: torch.mm(a, c)], every=1)
    assert msgs == ["roofline.monitor: step 2 ran other ops than step 1, counted with the same signature (input "
                    "shapes, parameters, modes, compiled graphs)"]
    assert [m["recounted"] for m in h] == [False, True, True]


def test_when_on_step_raises_the_next_step_starts_after_it(clean):
    """on_step of step 1 sleeps 0.2 s and raises; the loop catches it and goes on: step 2, which runs nothing,
    starts once step()'s failure is over."""
    import time as _time

    def on_step(m):
        if m["step"] == 1:
            _time.sleep(0.2)
            raise ValueError("from on_step")

    with roofline.monitor(ceilings=CEIL, on_step=on_step, warmup=5) as mon:
        mon.step()
        with pytest.raises(ValueError, match="from on_step"):
            mon.step()
        mon.step()
    assert [m["step"] for m in mon.history] == [0, 1, 2] and mon.history[2]["time_s"] < 0.2


def test_one_signature_kept_small_last_batches(clean):
    """max_signatures=1: one signature's counts and one signature seen without counts are kept. Epochs of [8, 8, 8,
    3] rows, six: counted 1; 4 (after the first 3-row step); 11 (3 rows due: seen at 3 and 7), which replaces the
    8-row counts; 13 (8 rows: no counts any more, not seen before without counts); 16 (after the 3-row step 15,
    whose counts were replaced and which is new to the seen table again); 23 (3 rows due: seen at 15 and 19)."""
    h = _monitored([8, 8, 8, 3] * 6, max_signatures=1, recount_every=None)
    assert [m["step"] for m in h if m["recounted"]] == [1, 4, 11, 13, 16, 23]
    assert all(m["flops"] == _flops(8) for m in h[14:15])


def test_a_due_signature_pushed_out_of_the_seen_table_is_not_counted(clean):
    """max_signatures=1. 3 rows at steps 2 and 6: due at 10. 5 rows at step 7, new: step 8 counted, and the 3-row
    signature leaves the table of signatures seen without counts: step 10 is not counted."""
    h = _monitored([8, 8, 3, 8, 8, 8, 3, 5, 8, 8, 8], max_signatures=1, recount_every=None)
    assert [m["step"] for m in h if m["recounted"]] == [1, 3, 8]


def test_the_monitors_defaults_are_the_documented_ones():
    """docs/training.md: a recount every 500 steps, the latest 10,000 steps in the history, 64 signatures kept,
    step 0 the warm-up."""
    import inspect

    p = inspect.signature(roofline.monitor).parameters
    assert (p["recount_every"].default, p["history_size"].default, p["max_signatures"].default,
            p["warmup"].default) == (500, 10000, 64, 1)
    assert "the latest 10,000" in open(os.path.join(os.path.dirname(_PATH), "..", "docs", "training.md")).read()


def test_tokens_per_s_of_steps_of_any_length(clean):
    """tokens / time_s for a step of a microsecond and one of 1.2 s alike."""
    import time as _time

    with roofline.monitor(ceilings=CEIL, warmup=9) as mon:
        mon.step(tokens=10)
        _time.sleep(1.2)
        mon.step(tokens=10)
    h = mon.history
    assert h[0]["time_s"] < 1 <= h[1]["time_s"]
    assert [m["tokens_per_s"] for m in h] == [10 / m["time_s"] for m in h]


# ---- the profiler's arguments and messages ---------------------------------------------------------------------
def test_the_profilers_default_schedule_is_the_documented_one():
    """profiler's doc: default roofline.schedule(warmup=1, active=5, repeat=1)."""
    prof = roofline.profile(ceilings=CEIL)
    assert prof.schedule == roofline.schedule(warmup=1, active=5, repeat=1)
    assert prof.schedule.as_dict() == {"wait": 0, "warmup": 1, "active": 5, "repeat": 1, "skip_first": 0}


def test_a_schedule_returning_an_unknown_name_is_refused():
    with pytest.raises(ValueError, match=r"schedule\(0\) returned 'bogus'"):
        roofline.profile(ceilings=CEIL, schedule=lambda step: "bogus")


def test_a_huge_argument_is_shown_whole_up_to_60_characters():
    """10**59 has 60 digits: shown whole; 10**60 (61 digits): its first 57 digits and '...'."""
    with roofline.monitor(ceilings=CEIL) as mon:
        with pytest.raises(ValueError) as e:
            mon.step(tokens=10**59)
        assert str(e.value).endswith("got 1" + "0" * 59)
        with pytest.raises(ValueError) as e:
            mon.step(tokens=10**60)
        assert str(e.value).endswith("got 1" + "0" * 56 + "...")


def test_a_schedules_repr_equality_and_defaults():
    s = roofline.schedule(wait=2, warmup=1, active=3, repeat=2)
    assert repr(s) == "roofline.schedule(wait=2, warmup=1, active=3, repeat=2, skip_first=0)"
    assert s == roofline.schedule(wait=2, warmup=1, active=3, repeat=2) and not (s == 5) and s != "s"
    # the documented defaults: wait 0, warmup 1, active 1, repeat 0 (forever), skip_first 0
    assert roofline.schedule().as_dict() == {"wait": 0, "warmup": 1, "active": 1, "repeat": 0, "skip_first": 0}


def test_step_num_before_start_and_misuse_messages():
    prof = roofline.profile(ceilings=CEIL, schedule=roofline.schedule(warmup=0))
    assert prof.step_num == 0 and not prof.running
    with pytest.raises(RuntimeError, match=r"__exit__ called outside a with block of it"):
        prof.__exit__(None, None, None)
    with prof:
        pass
    with pytest.raises(RuntimeError, match="has already been started; it is single-use"):
        with prof:
            pass


def test_a_start_that_fails_names_step_0_afterwards(clean):
    other = roofline.measure(ceilings=CEIL)
    ctx = contextvars.copy_context()
    prof = roofline.profile(ceilings=CEIL, schedule=roofline.schedule(warmup=0))
    ctx.run(other.__enter__)
    try:
        with pytest.raises(RuntimeError, match="another asyncio task"):
            prof.start()
    finally:
        ctx.run(other.__exit__, None, None, None)
    with pytest.raises(RuntimeError, match="it stopped after an error at step 0"):
        prof.step()


def test_an_interrupt_before_a_block_is_left_keeps_it_held_for_the_with_statement(clean, monkeypatch):
    """The interrupt lands in the hand-over before the block's __exit__ started: the block stays held (open), the
    profiler stops with the error named at its step, and the with statement's exit closes the block."""
    exit_ = _schedule._Held.exit
    calls = []

    def exit(self, *args):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt("before the exit")
        return exit_(self, *args)

    monkeypatch.setattr(_schedule._Held, "exit", exit)
    model = _model()
    prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=2), ceilings=CEIL)
    with pytest.raises(KeyboardInterrupt):
        with prof:
            _run(model, 2)
            try:
                prof.step()
            finally:
                assert prof._block is not None and prof._block.open and not prof.running
                with pytest.raises(RuntimeError, match="stopped after an error at step 0"):
                    prof.step()
    assert _modes() == ([], 0)


def test_an_interrupt_in_the_with_statements_closing_leaves_the_unwinding_to_close_the_block(clean, monkeypatch):
    """The with block raises; closing its step is interrupted before the block is left: the closing is not repeated
    (the loop already stopped), and the unwinding closes the block still held."""
    close = _schedule._StepLoop._close_block
    calls = []

    def close_block(self, *args):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt("in the closing")
        return close(self, *args)

    monkeypatch.setattr(_schedule._StepLoop, "_close_block", close_block)
    model = _model()
    prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=2), ceilings=CEIL)
    with pytest.raises((ValueError, KeyboardInterrupt)):
        with prof:
            _run(model, 2)
            raise ValueError("the loop's")
    assert _modes() == ([], 0) and prof._block is None


@pytest.mark.parametrize("warmup", [0, 1])
def test_a_step_that_failed_to_open_is_no_warm_up(warmup, clean):
    """Step 1 (the warm-up, or the first of two active steps) cannot be opened; the report (of step 2) says 0
    warm-up steps."""
    model = _model()
    other = roofline.measure(ceilings=CEIL)
    ctx = contextvars.copy_context()
    prof = roofline.profile(model, schedule=roofline.schedule(wait=1, warmup=warmup, active=2 - warmup, repeat=1),
                             ceilings=CEIL).start()
    _run(model, 2)
    ctx.run(other.__enter__)
    try:
        with pytest.raises(RuntimeError, match="another asyncio task"):
            prof.step()
    finally:
        ctx.run(other.__exit__, None, None, None)
    for b in (3, 5):
        _run(model, b)
        prof.step()
    prof.stop()
    (r,) = prof.reports
    assert r.steps == [2] and r.meta["steady"]["warmup"] == 0 and r.matrix_flops == _flops(5)


def test_the_profilers_warnings_point_at_the_users_step_and_stop_calls(clean):
    """The cycle's steps ran other ops (step 3 also runs a relu): the warning is made at the end of the cycle, by
    step(), or by stop() for a partial cycle; it points at that call."""
    model = _model()
    import inspect

    here = inspect.currentframe()
    sched = roofline.schedule(skip_first=1, warmup=0, active=3, repeat=1)  # steps 1-3: not the first step
    prof = roofline.profile(model, schedule=sched, ceilings=CEIL)
    with pytest.warns(UserWarning, match="did not all run the same ops") as w:
        with prof:
            for b in (2, 2, 2, 3):
                _run(model, b)
                torch.relu(torch.ones(b)) if b == 3 else None
                line = here.f_lineno + 1
                prof.step()
    assert (w[0].filename, w[0].lineno) == (__file__, line)
    prof = roofline.profile(model, schedule=sched, ceilings=CEIL).start()
    for b in (2, 2, 3):
        _run(model, b)
        torch.relu(torch.ones(b)) if b == 3 else None
        prof.step()
    with pytest.warns(UserWarning, match="did not all run the same ops") as w:
        line = here.f_lineno + 1
        prof.stop()
    assert (w[0].filename, w[0].lineno) == (__file__, line)


def test_first_step_is_said_only_of_a_cycle_starting_at_step_0(clean):
    model = _model()
    for skip, first in ((0, True), (1, False)):
        prof = roofline.profile(model, schedule=roofline.schedule(warmup=0, active=1, repeat=1, skip_first=skip),
                                 ceilings=CEIL)
        with prof:
            for _ in range(2):
                _run(model, 2)
                prof.step()
        (r,) = prof.reports
        assert r.steps == [skip] and r.meta["steady"]["first_step"] is first


def test_a_torch_profiler_schedule_gives_no_active_count(clean):
    sched = torch.profiler.schedule(wait=0, warmup=1, active=1, repeat=1)
    prof = roofline.profile(ceilings=CEIL, schedule=sched)
    with prof:
        prof.step()
        prof.step()
    (r,) = prof.reports
    assert "active" not in r.meta["steady"] and isinstance(r.meta["steady"]["schedule"], str)
