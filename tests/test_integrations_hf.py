"""roofline.integrations.huggingface: RooflineCallback inside a transformers.Trainer run (a tiny GPT-2 fine-tuned for
12 steps on the CPU, steps 5-7 profiled, every step monitored), checked against the same step written by hand."""

import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

import roofline  # noqa: E402
from _graph import ceilings  # noqa: E402
from roofline.integrations.huggingface import RooflineCallback  # noqa: E402

B, S, VOCAB, STEPS, LR, CLIP = 4, 16, 128, 12, 5e-5, 1.0
CEIL = ceilings()


def _model():
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=VOCAB, n_positions=32))


def _data(n):
    return [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, VOCAB, (n, S))]


def _args(out, steps, **kw):
    return TrainingArguments(output_dir=str(out), max_steps=steps, per_device_train_batch_size=B, learning_rate=LR,
                             weight_decay=0.0, max_grad_norm=CLIP, optim="adamw_torch_fused", use_cpu=True,
                             save_strategy="no", disable_tqdm=True, **kw)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on one thread: two threads on a busy two-core machine made the run ten times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hf")
    torch.manual_seed(0)
    trainer = Trainer(model=_model(), train_dataset=_data(STEPS * B),
                      args=_args(out, STEPS, logging_steps=1, report_to=["tensorboard"]))
    cb = RooflineCallback(trainer, steps=(5, 7), monitor=True, ceilings=CEIL)
    trainer.add_callback(cb)
    trainer.train()
    events = sorted(out.rglob("events.out.tfevents.*"))
    assert len(events) == 1, events
    acc = EventAccumulator(str(events[0]))
    acc.Reload()
    return types.SimpleNamespace(out=out, trainer=trainer, cb=cb, events=acc)


@pytest.fixture(scope="module")
def by_hand():
    """The Trainer's step written out: forward with labels, backward, gradient clipping, fused AdamW, the scheduler,
    zero_grad; measured after one warm-up step (the optimizer creates its state)."""
    torch.manual_seed(1)
    model = _model()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    ids = torch.randint(0, VOCAB, (B, S))

    def step():
        model(input_ids=ids, labels=ids).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        sched.step()
        opt.zero_grad()

    step()
    with roofline.measure(model, ceilings=CEIL) as r:
        step()
    return r


def test_the_profiled_steps_count_what_the_step_written_by_hand_counts(run, by_hand):
    """One report, of the Trainer's global steps 5, 6, 7 (step 4 the warm-up). Its matrix FLOPs are the hand-written
    step's, phase by phase: the forward and backward run the same model on a batch of the same shape. The
    optimizer phase (fused AdamW over the same parameters) counts the same FLOPs and bytes: the Trainer's two
    parameter groups (with and without weight decay) make two calls of the same total. The vector work of the
    forward and backward phases differs, and is not compared: the Trainer's step also collates the batch, counts the
    label tokens and divides the loss by them (a division in the forward and in the backward), checks the loss for
    NaN, computes the gradient norm for its logs and adds up the loss for logging."""
    (r,) = run.cb.reports
    assert r.meta["trainer"]["steps"] == [5, 6, 7]
    assert r.meta["trainer"]["tokens"] == [B * S] * 3
    assert r.meta["steady"]["warmup"] == 1 and r.meta["steady"]["other_steps"] == []
    assert r.matrix_flops == by_hand.matrix_flops > 0
    mine, theirs = r.by_phase(), by_hand.by_phase()
    for phase in ("forward", "backward"):
        assert mine[phase]["matrix_flops"] == theirs[phase]["matrix_flops"] > 0
    for key in ("matrix_flops", "vector_flops", "bytes_read", "bytes_written"):
        assert mine["optimizer"][key] == theirs["optimizer"][key]
    assert mine["optimizer"]["vector_flops"] > 0
    assert run.cb.merged == []  # one process: nothing to merge


def test_each_report_is_written_as_json_and_html_into_the_output_dir(run):
    (r,) = run.cb.reports
    folder = run.out / "roofline"
    assert sorted(p.name for p in folder.iterdir()) == ["steps5-7.html", "steps5-7.json"]
    assert run.cb.files == [str(folder / "steps5-7.json"), str(folder / "steps5-7.html")]
    back = roofline.load(folder / "steps5-7.json")
    assert (back.matrix_flops, back.bytes_read, back.wall_time) == (r.matrix_flops, r.bytes_read, r.wall_time)
    assert back.meta["trainer"]["steps"] == [5, 6, 7]
    page = (folder / "steps5-7.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "roofline report" in page and page.rstrip().endswith("</html>")


def _scalars(acc, tag):
    return {e.step: e.value for e in acc.Scalars(tag)}


def test_the_figures_reach_tensorboard_and_the_log_history(run):
    (r,) = run.cb.reports
    t = r.totals()
    # the profiled cycle's figures, once, at its last step; TensorBoard stores float32
    expected = {"mfu": t["mfu"], "mbu": t["mbu"], "achieved_flops": t["achieved_flops"],
                "achieved_bytes": t["achieved_bytes"], "compute_share": t["compute_share"],
                "step_time": r.wall_time, "tokens_per_s": B * S / r.wall_time}
    for name, value in expected.items():
        got = _scalars(run.events, f"train/roofline/profile/{name}")
        assert list(got) == [7] and got[7] == pytest.approx(value, rel=1e-6), name
    assert r.wall_time == sorted(r.meta["steady"]["wall_times"])[1]  # the median of the three steps
    # the monitor's figures at every logged step, except the steps whose time includes counting: step 1 is its
    # warm-up (timed only), step 2 its first count, steps 4 to 7 the profiler's
    history = {m["step"] + 1: m for m in run.cb.monitor.history}
    assert sorted(history) == list(range(1, STEPS + 1))
    logged = [3, 8, 9, 10, 11, 12]
    for name, key in (("mfu", "mfu"), ("mbu", "mbu"), ("step_time", "time_s")):
        got = _scalars(run.events, f"train/roofline/monitor/{name}")
        assert sorted(got) == logged, name
        for step in logged:
            assert got[step] == pytest.approx(history[step][key], rel=1e-6)
    tps = _scalars(run.events, "train/roofline/monitor/tokens_per_s")
    assert all(tps[s] == pytest.approx(B * S / history[s]["time_s"], rel=1e-6) for s in logged)
    # the Trainer's own history holds the same entries
    profile = [e for e in run.trainer.state.log_history if "roofline/profile/mfu" in e]
    assert [e["step"] for e in profile] == [7] and profile[0]["roofline/profile/mfu"] == t["mfu"]
    loss = _scalars(run.events, "train/loss")
    assert sorted(loss) == list(range(1, STEPS + 1))  # the Trainer's own logging is untouched


def test_without_the_trainer_the_figures_go_to_the_log_history_and_a_warning_says_where(tmp_path):
    torch.manual_seed(0)
    cb = RooflineCallback(steps=3, ceilings=CEIL, output_dir=tmp_path / "reports")
    trainer = Trainer(model=_model(), train_dataset=_data(3 * B), callbacks=[cb],
                      args=_args(tmp_path, 3, logging_steps=1, report_to=["tensorboard"]))
    with pytest.warns(UserWarning, match="state.log_history only, not to tensorboard"):
        trainer.train()
    (r,) = cb.reports
    assert r.meta["trainer"]["steps"] == [3]
    entries = [e for e in trainer.state.log_history if "roofline/profile/mfu" in e]
    assert [e["step"] for e in entries] == [3] and entries[0]["roofline/profile/mfu"] == r.totals()["mfu"]
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["step3.html", "step3.json"]


def test_a_run_that_raises_leaves_its_block_to_close(tmp_path):
    """The Trainer has no event for an exception: the measure block of the step that raised stays open until
    close() (or the next train()), which leaves torch as it was."""
    torch.manual_seed(0)
    model = _model()
    calls = []

    def fail_on_third(module, args, kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("batch 3 is bad")

    model.register_forward_pre_hook(fail_on_third, with_kwargs=True)
    trainer = Trainer(model=model, train_dataset=_data(4 * B), args=_args(tmp_path, 4, report_to=[]))
    cb = RooflineCallback(trainer, steps=(3, 4), ceilings=CEIL)
    trainer.add_callback(cb)
    with pytest.raises(RuntimeError, match="batch 3 is bad"):
        trainer.train()
    assert cb.profiler.running  # step 3's block is open
    cb.close()
    assert not cb.profiler.running and cb.reports == []
    x = torch.randn(8, 8)
    with roofline.measure(ceilings=CEIL) as r:
        x @ x
    assert r.matrix_flops == 2 * 8 * 8 * 8  # a new block counts only its own work


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(), ValueError, "nothing to do"),
    (dict(steps=(7, 5)), ValueError, "first <= last"),
    (dict(steps=0), ValueError, "steps must be an int >= 1, got 0"),
    (dict(steps=(1, 2, 3)), ValueError, "a pair"),
    (dict(steps=(1.0, 2)), TypeError, r"steps must be an int >= 1, got 1.0 \(float\)"),
    (dict(steps=5, schedule=roofline.schedule()), ValueError, "not both"),
    (dict(schedule=5), TypeError, "schedule must be"),
    (dict(monitor="yes"), TypeError, "monitor must be"),
    (dict(monitor={"every": 3}), ValueError, "'every'"),
    (dict(monitor={"recount_every": -1}), ValueError, "recount_every"),
    (dict(steps=5, token_count=3), TypeError, "token_count must be"),
    (dict(steps=5, timing="wall"), ValueError, "timing"),
    (dict(steps=5, gather_timeout=0), ValueError, "gather_timeout"),
    (dict(steps=5, output_dir=3), TypeError, "RooflineCallback"),
    (dict(steps=5, trainer="trainer"), TypeError, "transformers.Trainer"),
])
def test_bad_arguments_are_refused_when_the_callback_is_made(kwargs, error, match):
    with pytest.raises(error, match=match):
        RooflineCallback(**kwargs)


def test_importing_the_integrations_package_imports_no_framework():
    code = ("import sys, roofline.integrations; "
            "print(sorted(m for m in ('transformers', 'lightning', 'pytorch_lightning', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["[]"]


# ---- the shared machinery (roofline/integrations/_run.py), driven by a plain loop --------------------------------
def _loop_run(tmp_path, offset, **kwargs):
    from roofline.integrations import _run

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    logged = []
    opts = _run.Options("cb", **{**dict(steps=None, schedule=None, monitor=False, output_dir=None, tokens=None,
                                         timing="model", ceilings=CEIL, attention=None, gather_timeout=10.0,
                                         log=True), **kwargs})
    run = _run.Run(opts, model, offset=offset, output_dir=str(tmp_path), framework="loop",
                    log=lambda values, step: logged.append((step, values)))
    return run, model, opt, logged


def _drive(run, model, opt, n):
    x = torch.randn(2, 8)
    run.start()
    for _ in range(n):
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()
        run.step(inputs=x, tokens=2)
    run.stop()


def test_steps_are_the_trainers_numbers_when_a_run_resumes(tmp_path):
    """Resumed after step 3: the loop's step 0 is the trainer's step 4 (the warm-up of steps 5-7)."""
    run, model, opt, logged = _loop_run(tmp_path, 3, steps=(5, 7))
    _drive(run, model, opt, 6)
    (r,) = run.reports
    assert r.steps == [5, 6, 7] and r.meta["trainer"] == {"framework": "loop", "steps": [5, 6, 7],
                                                          "token_counts": [2, 2, 2], "tokens": [2, 2, 2]}
    assert r.steady_line().startswith("profiler cycle 0, loop steps 5-7: 1 warm-up step")
    assert [step for step, _ in logged] == [7]
    with pytest.warns(UserWarning, match="steps 6-7 are profiled, not 2-7"):
        run, *_ = _loop_run(tmp_path, 5, steps=(2, 7))
    with pytest.warns(UserWarning, match="steps 2-3 are not profiled"):
        _loop_run(tmp_path, 5, steps=(2, 3))


def test_steps_never_reached_are_named_in_a_warning(tmp_path):
    run, model, opt, _ = _loop_run(tmp_path, 0, steps=(5, 7))
    with pytest.warns(UserWarning, match="steps 5-7 were not profiled: training ended after step 3"):
        _drive(run, model, opt, 3)
    assert run.reports == []


def test_the_monitor_never_counts_a_step_the_profiler_measures(tmp_path):
    """Profiled steps 1-3 (no warm-up before step 1) and a monitor that wants to count its step 1 and every other
    step after: the two would open nested blocks left out of order. The monitor counts the first step after the
    profiler's instead, and every second one from there."""
    run, model, opt, logged = _loop_run(tmp_path, 0, steps=(1, 3), monitor={"recount_every": 2})
    _drive(run, model, opt, 8)
    (r,) = run.reports
    assert r.meta["trainer"]["steps"] == [1, 2, 3] and r.meta["steady"]["first_step"]
    counted = [m["step"] for m in run.monitor.history if m["recounted"]]
    assert counted == [3, 5, 7]
    assert [step for step, _ in logged] == [3]  # the profile's figures, at its last step
    # the monitor's figures not yet taken: over the steps timed only (loop steps 4 and 6: trainer steps 5 and 7),
    # their totals over their total time
    step, figures = run.take_monitor_figures()
    timed = [m for m in run.monitor.history if m["step"] in (4, 6)]
    time = sum(m["time_s"] for m in timed)
    assert step == 7 and figures["roofline/monitor/step_time"] == pytest.approx(time / 2, rel=1e-12)
    assert figures["roofline/monitor/mfu"] == pytest.approx(sum(m["mfu"] * m["time_s"] for m in timed) / time,
                                                            rel=1e-12)
    assert figures["roofline/monitor/achieved_flops"] == pytest.approx(sum(m["flops"] for m in timed) / time,
                                                                       rel=1e-12)
    assert figures["roofline/monitor/tokens_per_s"] == pytest.approx(4 / time, rel=1e-12)
    assert run.take_monitor_figures() is None  # taken


def test_a_tokens_callable_runs_uncounted():
    from roofline.integrations import _run

    batch = {"attention_mask": torch.ones(2, 5, dtype=torch.long)}
    with roofline.measure(ceilings=CEIL) as r:
        n = _run.user_tokens("cb", lambda b: b["attention_mask"].sum(), batch)
    assert n == 10 and len(r.records) == 0
    with pytest.raises(ValueError, match="int >= 0 or None, got -1"):
        _run.user_tokens("cb", lambda b: -1, batch)
    with pytest.raises(TypeError, match="got float"):
        _run.user_tokens("cb", lambda b: 2.5, batch)
    assert _run.batch_tokens({"input_ids": torch.zeros(3, 7)}) == 21 and _run.batch_tokens((1, 2)) is None
