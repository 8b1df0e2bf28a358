"""The Lightning callback's small branches (roofline/integrations/lightning.py) that tests/test_integrations_lightning.py
leaves open: figures logged every ``log_every_n_steps`` other than 1, at the logger step before the global step; the
report folder when the logger has no folder; the expected step of manual optimisation with one optimizer; the
callbacks acting in ``fit`` only. Tiny fits (a Linear(8, 4) on 3-row batches); each test's checks are those of its own fit."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
try:
    import lightning.pytorch as pl
except ImportError:
    pl = pytest.importorskip("pytorch_lightning")

from _graph import ceilings  # noqa: E402
from roofline.integrations import lightning as integration  # noqa: E402

CEIL = ceilings(vector=1e12, matrix=2e12, dram=1e11)


class Recorder(pl.loggers.Logger):
    """A logger without a folder (save_dir None) that keeps every log_metrics call."""

    def __init__(self):
        super().__init__()
        self.calls = []

    @property
    def name(self):
        return "recorder"

    @property
    def version(self):
        return 0

    @property
    def save_dir(self):
        return None

    def log_hyperparams(self, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        self.calls.append((step, dict(metrics)))


class Auto(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(8, 4, bias=False)

    def training_step(self, batch, batch_idx):
        return self.net(batch).sum()

    def validation_step(self, batch, batch_idx):
        return self.net(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Manual(Auto):
    """Manual optimisation with one optimizer: the global step moves by 1 per batch."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        self.manual_backward(self.net(batch).sum())
        opt.step()


def _trainer(root, callbacks, logger=False, steps=8, every=3):
    return pl.Trainer(max_steps=steps, accelerator="cpu", devices=1, logger=logger, callbacks=callbacks,
                      log_every_n_steps=every, enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, default_root_dir=str(root), num_sanity_val_steps=0,
                      limit_val_batches=0)


def _loader(n=8):
    torch.manual_seed(0)
    return torch.utils.data.DataLoader([torch.randn(3, 8) for _ in range(n)], batch_size=None)


def test_a_fit_logging_every_3_steps_with_a_logger_without_a_folder(tmp_path):
    """Steps 3-4 profiled (step 2 the warm-up), the monitor on (recount_every 0), figures logged every 3 steps (one
    test: the checks of one fit). The report goes to default_root_dir/roofline (the logger has no folder). Profile
    figures at the cycle's last step (4), logger step 4 - 1. Monitor figures when the global step after a step is a
    multiple of 3: after step 3 none are waiting (steps 1-4: the monitor's warm-up and the profiler's steps), after
    step 6 those of step 6 (step 5 was the monitor's count): logger step 6 - 1; after steps 7 and 8 nothing is
    logged (8 is not a multiple of 3)."""
    cb = integration.RooflineCallback(steps=(3, 4), monitor={"recount_every": 0}, tokens=lambda b: b.shape[0],
                                      ceilings=CEIL)
    logger = Recorder()
    trainer = _trainer(tmp_path, [cb], logger=logger)
    trainer.fit(Auto(), _loader())
    assert trainer.global_step == 8
    (r,) = cb.reports
    assert r.steps == [3, 4] and r.meta["steady"]["warmup"] == 1 and r.meta["trainer"]["tokens"] == [3, 3]
    assert sorted(os.listdir(tmp_path / "roofline")) == ["steps3-4.html", "steps3-4.json"]
    h = {m["step"] + 1: m for m in cb.monitor.history}  # by global step
    assert [m["recounted"] for m in (h[5], h[6])] == [True, False]
    steps = [(step, sorted({k.split("/")[1] for k in values})) for step, values in logger.calls]
    assert steps == [(4 - 1, ["profile"]), (6 - 1, ["monitor"])]
    monitor = logger.calls[1][1]
    assert monitor["roofline/monitor/step_time"] == pytest.approx(h[6]["time_s"], rel=1e-12)
    assert monitor["roofline/monitor/tokens_per_s"] == pytest.approx(3 / h[6]["time_s"], rel=1e-12)
    assert logger.calls[0][1]["roofline/profile/step_time"] == r.wall_time


def test_manual_optimisation_with_one_optimizer_expects_one_step_per_batch(tmp_path):
    """The first batch is step 1 (the global step moves by 1 per batch from the start): steps=(1, 1) profiles it."""
    cb = integration.RooflineCallback(steps=(1, 1), ceilings=CEIL)
    trainer = _trainer(tmp_path, [cb], steps=3)
    trainer.fit(Manual(), _loader(3))
    assert trainer.global_step == 3 and [r.steps for r in cb.reports] == [[1]]


def test_two_callbacks_are_accepted_outside_fit(tmp_path):
    """The callbacks act in fit only: validating with two of them is not refused."""
    cbs = [integration.RooflineCallback(steps=(1, 1), ceilings=CEIL),
           integration.RooflineCallback(monitor=True, ceilings=CEIL)]
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, callbacks=list(cbs), enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=str(tmp_path), limit_val_batches=2)
    trainer.validate(Auto(), _loader(2), verbose=False)
    assert all(cb.reports == [] and cb._runs == [] for cb in cbs)


def test_callback_class_takes_the_short_package_name():
    if pl.__name__ != "lightning.pytorch":
        with pytest.raises(ImportError):
            integration.callback_class("lightning")  # "lightning" means lightning.pytorch, not installed here
    else:
        assert integration.callback_class("lightning") is integration.RooflineCallback
    assert integration.callback_class() is integration.RooflineCallback


def test_a_step_of_accumulated_batches_runs_from_its_first_batch_to_the_next_steps(tmp_path):
    """accumulate_grad_batches=2 over batches of 1 to 6 rows: steps (1, 2), (3, 4), (5, 6) rows; step 2 (the 2nd
    optimizer step) holds 3 + 4 = 7 rows, step 3 5 + 6 = 11."""
    cb = integration.RooflineCallback(steps=(2, 3), tokens=lambda b: b.shape[0], monitor={"recount_every": 0},
                                      ceilings=CEIL)
    trainer = pl.Trainer(max_steps=3, accumulate_grad_batches=2, accelerator="cpu", devices=1, logger=False,
                         callbacks=[cb], enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=str(tmp_path))
    loader = torch.utils.data.DataLoader([torch.randn(b, 8) for b in range(1, 7)], batch_size=None)
    with pytest.warns(UserWarning, match="roofline.profile: the measured steps"):  # 7 and 11 rows, the last step
        trainer.fit(Auto(), loader)  # ends at the end of training
    (r,) = cb.reports
    assert r.steps == [2, 3] and r.meta["trainer"]["tokens"] == [3 + 4, 5 + 6]
    # the batches are the monitor's inputs: each step's shapes differ from the previous step's
    assert [m["changed"] for m in cb.monitor.history] == [False, True, True]


def test_the_default_gather_timeout_is_120_seconds():
    assert integration.RooflineCallback(monitor=True).options.gather_timeout == 120.0


class Dicts(Auto):
    """Manual optimisation over mapping batches; the optimizer steps on the first two batches only."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        opt.zero_grad()
        self.manual_backward(self.net(batch["input_ids"]).sum())
        if batch_idx < 2:
            opt.step()


def test_a_last_batch_without_an_optimizer_step_ends_no_step_and_tokens_false_counts_none(tmp_path):
    """Three batches, the optimizer stepped after the first two: steps 1 and 2 end; the third batch never ends a
    step (the trainer's global step did not move): the monitor has figures of steps 0 and 1 only. tokens=False:
    none read, though the batches hold input_ids."""
    cb = integration.RooflineCallback(steps=(1, 1), monitor={"recount_every": 0}, tokens=False, ceilings=CEIL)
    trainer = _trainer(tmp_path, [cb], steps=-1, every=1)
    trainer.fit_loop.max_epochs = 1
    trainer.fit(Dicts(), torch.utils.data.DataLoader([{"input_ids": torch.randn(3, 8)} for _ in range(3)],
                                                     batch_size=None))
    assert trainer.global_step == 2
    (r,) = cb.reports
    assert r.steps == [1] and r.meta["trainer"]["tokens"] == [None]
    assert [m["step"] for m in cb.monitor.history] == [0, 1]


class _FakeRun:
    def __init__(self, stopped):
        self.stopped, self.aborted = stopped, []

    def abort(self, exc):
        self.aborted.append(exc)
        self.stopped = True


def test_an_exception_and_a_new_fit_close_the_latest_run_if_open():
    cb = integration.RooflineCallback(monitor=True, ceilings=CEIL)
    assert cb._current() is None
    cb.on_exception(None, None, ValueError("x"))  # no run: nothing to do
    cb._close_previous()
    runs = cb._runs = [_FakeRun(False), _FakeRun(True), _FakeRun(False)]
    assert cb._current() is runs[2]
    error = ValueError("the training step raised")
    cb.on_exception(None, None, error)
    assert runs[2].aborted == [error] and runs[0].aborted == runs[1].aborted == []
    cb.on_exception(None, None, error)  # stopped now: not again
    assert runs[2].aborted == [error]
    runs.append(_FakeRun(False))
    cb._close_previous()
    (e,) = runs[3].aborted
    assert isinstance(e, RuntimeError) and str(e) == "RooflineCallback: the previous training run did not end"
    assert runs[0].aborted == runs[1].aborted == [] and runs[2].aborted == [error]
    cb._close_previous()  # stopped: nothing more
    assert len(runs[3].aborted) == 1


def test_figures_go_to_every_logger_at_the_step_before_and_nothing_empty():
    import types

    cb = integration.RooflineCallback(monitor=True, ceilings=CEIL)
    cb._log({"a": 1.0}, 5)  # before a fit: no trainer, nothing to log to
    loggers = [Recorder(), Recorder()]
    cb._trainer = types.SimpleNamespace(loggers=loggers)
    cb._log({}, 5)
    cb._log({"a": 1.0}, 5)
    assert [lg.calls for lg in loggers] == [[(5 - 1, {"a": 1.0})]] * 2
