"""The Hugging Face callback's small branches (roofline/integrations/huggingface.py) that
tests/test_integrations_hf.py leaves open: figures logged only at the steps the Trainer logs (``logging_steps`` 3),
the tokens of the model's inputs (positional, evaluation mode, ``tokens=False`` or a callable). A tiny Trainer run (a
one-layer GPT-2, 6 steps of 2 x 8 tokens)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from _graph import ceilings  # noqa: E402
from roofline.integrations.huggingface import RooflineCallback  # noqa: E402

CEIL = ceilings(vector=1e12, matrix=2e12, dram=1e11)
B, S = 2, 8


def _model():
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32,
                                                                n_positions=S))


def test_a_run_logging_every_3_steps(tmp_path):
    """Steps 2-3 profiled (step 1 the warm-up), the monitor on (recount_every 0), the Trainer logging every 3 steps
    (one test: the checks of one run). Profile figures at the cycle's last step, 3. Monitor figures at the Trainer's
    logged steps (3 and 6): at 3 none are waiting (step 1 its warm-up, 2-3 the profiler's), at 6 those of steps 5
    and 6 (4 was its count)."""
    data = [{"input_ids": ids, "labels": ids} for ids in torch.randint(0, 32, (6 * B, S))]
    args = transformers.TrainingArguments(output_dir=str(tmp_path), max_steps=6, per_device_train_batch_size=B,
                                          use_cpu=True, save_strategy="no", disable_tqdm=True, report_to=[],
                                          logging_steps=3)
    trainer = transformers.Trainer(model=_model(), args=args, train_dataset=data)
    cb = RooflineCallback(trainer, steps=(2, 3), monitor={"recount_every": 0}, ceilings=CEIL)
    trainer.add_callback(cb)
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        trainer.train()
    # given the trainer, the figures go through trainer.log: no warning about where they go
    assert not [w for w in seen if "RooflineCallback" in str(w.message)], [str(w.message) for w in seen]
    (r,) = cb.reports
    assert r.steps == [2, 3] and r.meta["steady"]["warmup"] == 1 and r.meta["trainer"]["tokens"] == [B * S, B * S]
    logged = [(e["step"], sorted({k.split("/")[1] for k in e if k.startswith("roofline/")}))
              for e in trainer.state.log_history if any(k.startswith("roofline/") for k in e)]
    assert logged == [(3, ["profile"]), (6, ["monitor"])]
    h = {m["step"] + 1: m for m in cb.monitor.history}  # by global step
    assert [h[g]["recounted"] for g in (4, 5, 6)] == [True, False, False]
    monitor = next(e for e in trainer.state.log_history if "roofline/monitor/step_time" in e)
    assert monitor["roofline/monitor/step_time"] == pytest.approx((h[5]["time_s"] + h[6]["time_s"]) / 2, rel=1e-9)
    assert monitor["roofline/monitor/tokens_per_s"] == pytest.approx(2 * B * S / (h[5]["time_s"] + h[6]["time_s"]),
                                                                     rel=1e-9)


def test_the_default_gather_timeout_is_120_seconds():
    assert RooflineCallback(monitor=True).options.gather_timeout == 120.0


def test_the_tokens_of_the_models_inputs():
    model = _model()
    ids = torch.ones(3, 5, dtype=torch.int64)
    cb = RooflineCallback(monitor=True, ceilings=CEIL)
    model.train()
    cb._on_forward(model, (ids,), {})  # positional: the model's main input
    cb._on_forward(model, (), {"attention_mask": torch.ones(2, 4)})
    model.eval()
    cb._on_forward(model, (ids,), {})  # evaluation inside the run: not the step's batch
    assert cb._counts == [3 * 5, 2 * 4]
    assert cb._inputs[0] == (("M", (("input_ids", ("T", (3, 5), "torch.int64", "cpu")),)))
    off = RooflineCallback(monitor=True, tokens=False, ceilings=CEIL)
    model.train()
    off._on_forward(model, (ids,), {})
    assert off._counts == [None] and len(off._inputs) == 1
    seen = []
    mine = RooflineCallback(monitor=True, tokens=lambda batch: seen.append(sorted(batch)) or 7, ceilings=CEIL)
    mine._on_forward(model, (ids,), {"labels": ids})
    assert mine._counts == [7] and seen == [["input_ids", "labels"]]


class _FakeRun:
    """What the callback calls of a run: step, stop, abort, running, stopped, monitor."""

    def __init__(self, running=True, stopped=False):
        self.running, self.stopped, self.monitor = running, stopped, None
        self.steps, self.aborted = [], []

    def step(self, inputs, tokens, global_step):
        self.steps.append((inputs, tokens, global_step))

    def stop(self):
        self.running, self.stopped = False, True

    def abort(self, exc):
        self.aborted.append(exc)
        self.running, self.stopped = False, True


def _callback(runs, inputs, counts, global_step=5):
    import types

    cb = RooflineCallback(monitor=True, ceilings=CEIL)
    cb._runs, cb._inputs, cb._counts = runs, list(inputs), list(counts)
    cb._state = types.SimpleNamespace(global_step=global_step, log_history=[])
    return cb


def test_the_end_of_training_ends_the_step_in_progress_of_the_latest_run():
    """When the Trainer had not planned to stop at the last step's on_step_end, on_train_end ends it: its inputs
    and tokens (the sum over its micro-batches), named by the Trainer's global step."""
    old, run = _FakeRun(running=False, stopped=True), _FakeRun()
    cb = _callback([old, run], [("a",), ("b",)], [3, 4], global_step=5)
    cb.on_train_end(None, None, None)
    assert run.steps == [((("a",), ("b",)), 3 + 4, 5)] and run.stopped and old.steps == []
    assert cb._inputs == [] and cb._counts == []


@pytest.mark.parametrize("counts", [[3, None], [None], []])
def test_a_step_with_a_micro_batch_of_unknown_tokens_has_none(counts):
    run = _FakeRun()
    cb = _callback([run], [], counts)
    cb.on_train_end(None, None, None)
    assert run.steps == [(None, None, 5)]  # no inputs seen: None, not an empty tuple


def test_close_aborts_the_latest_run_if_it_did_not_end():
    first, latest = _FakeRun(running=False, stopped=True), _FakeRun()
    cb = _callback([first, latest], [], [])
    assert cb._current() is latest
    cb.close()
    (e,) = latest.aborted
    assert isinstance(e, RuntimeError) and str(e) == "RooflineCallback: the training run did not end (it raised)"
    assert first.aborted == []
    cb.close()  # ended now: nothing more
    assert len(latest.aborted) == 1


def test_without_the_trainer_the_monitor_figures_go_to_the_log_history_at_their_step():
    run = _FakeRun()
    run.monitor = object()  # a monitor is running
    run.take_monitor_figures = lambda: (7, {"roofline/monitor/mfu": 0.5})
    cb = _callback([run], [], [])
    cb._log_due = True  # the Trainer logs this step
    cb._end_step(run)
    assert cb._state.log_history == [{"roofline/monitor/mfu": 0.5, "step": 7}]
    cb._end_step(run)  # the next step is not logged (on_step_end has not said so)
    assert len(cb._state.log_history) == 1
    cb._log({}, 8)  # nothing to log: no entry
    assert len(cb._state.log_history) == 1
