"""roofline.integrations.lightning: RooflineCallback inside a Lightning Trainer run (a tiny language model, 12
optimizer steps of 2 accumulated micro-batches on the CPU, steps 5-7 profiled, every step monitored), checked
against the same step written by hand. One Trainer run for the file: importing Lightning is slow."""

import types

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")
try:
    import lightning.pytorch as pl
except ImportError:
    pl = pytest.importorskip("pytorch_lightning")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

import roofline  # noqa: E402
from _graph import ceilings  # noqa: E402
from roofline.integrations import lightning as integration  # noqa: E402

VOCAB, D, H, B, S, STEPS, ACCUMULATE = 128, 32, 64, 4, 16, 12, 2
CEIL = ceilings()


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, D)
        self.fc = torch.nn.Linear(D, H)
        self.out = torch.nn.Linear(H, VOCAB)

    def forward(self, ids):
        return self.out(torch.nn.functional.gelu(self.fc(self.emb(ids))))


def _loss(model, ids):
    logits = model(ids[:, :-1])
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


class Module(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lm = TinyLM()

    def training_step(self, batch, batch_idx):
        loss = _loss(self.lm, batch["input_ids"])
        self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3, fused=True)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models on one thread: two threads on a busy two-core machine made the run ten times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lightning")
    torch.manual_seed(0)
    data = [{"input_ids": ids} for ids in torch.randint(0, VOCAB, (STEPS * ACCUMULATE * B, S))]
    cb = integration.RooflineCallback(steps=(5, 7), monitor=True, ceilings=CEIL)
    trainer = pl.Trainer(max_steps=STEPS, accumulate_grad_batches=ACCUMULATE, accelerator="cpu", devices=1,
                         logger=pl.loggers.TensorBoardLogger(str(out)), log_every_n_steps=1, callbacks=[cb],
                         enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), torch.utils.data.DataLoader(data, batch_size=B))
    assert trainer.global_step == STEPS
    events = sorted(out.rglob("events.out.tfevents.*"))
    assert len(events) == 1, events
    acc = EventAccumulator(str(events[0]))
    acc.Reload()
    return types.SimpleNamespace(out=out, trainer=trainer, cb=cb, events=acc)


def test_the_profiled_steps_count_what_the_step_written_by_hand_counts(run):
    """Steps 5, 6, 7 of the trainer's global steps (step 4 the warm-up), each two micro-batches: every op's matrix
    FLOPs, and the AdamW update's FLOPs and bytes, are those of the step written by hand (two forward and backward
    passes of the loss scaled by 1/2, one optimizer step). Compared op by op rather than phase by phase: Lightning
    runs training_step and the backward inside ``optimizer.step(closure)``."""
    torch.manual_seed(1)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    batches = torch.randint(0, VOCAB, (ACCUMULATE, B, S))

    def step():
        for ids in batches:
            (_loss(model, ids) / ACCUMULATE).backward()
        opt.step()
        opt.zero_grad()

    step()
    with roofline.measure(model, ceilings=CEIL) as by_hand:
        step()
    (r,) = run.cb.reports
    assert r.meta["trainer"]["steps"] == [5, 6, 7]
    assert r.meta["trainer"]["tokens"] == [ACCUMULATE * B * S] * 3
    assert r.meta["trainer"]["framework"].split()[0] == pl.__name__.split(".")[0]
    assert r.meta["steady"]["other_steps"] == []
    # 2 micro-batches x (forward + 2 backward products) x 2 x tokens x (D*H + H*V), the embedding without FLOPs
    tokens = B * (S - 1)
    assert r.matrix_flops == by_hand.matrix_flops == ACCUMULATE * 3 * 2 * tokens * (D * H + H * VOCAB)

    def matrix(rep):
        return {op: row["matrix_flops"] for op, row in rep.by_op().items() if row["matrix_flops"]}

    assert matrix(r) == matrix(by_hand)
    adam = "aten._fused_adamw_.default"
    for key in ("calls", "vector_flops", "bytes_read", "bytes_written"):
        assert r.by_op()[adam][key] == by_hand.by_op()[adam][key]
    assert run.cb.merged == []  # one process: nothing to merge


def test_each_report_is_written_as_json_and_html_into_the_log_dir(run):
    (r,) = run.cb.reports
    folder = run.out / "lightning_logs" / "version_0" / "roofline"  # trainer.log_dir of the TensorBoardLogger
    assert sorted(p.name for p in folder.iterdir()) == ["steps5-7.html", "steps5-7.json"]
    back = roofline.load(folder / "steps5-7.json")
    assert (back.matrix_flops, back.bytes_written, back.wall_time) == (r.matrix_flops, r.bytes_written, r.wall_time)
    page = (folder / "steps5-7.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "roofline report" in page


def test_the_figures_reach_the_trainers_logger(run):
    (r,) = run.cb.reports
    t = r.totals()
    scalars = {tag: {e.step: e.value for e in run.events.Scalars(tag)} for tag in run.events.Tags()["scalars"]}
    expected = {"mfu": t["mfu"], "mbu": t["mbu"], "achieved_flops": t["achieved_flops"],
                "achieved_bytes": t["achieved_bytes"], "compute_share": t["compute_share"], "step_time": r.wall_time,
                "tokens_per_s": ACCUMULATE * B * S / r.wall_time}
    # Lightning logs the metrics of global step k at logger step k - 1 (the module's loss: steps 0 to 11); the
    # figures of a step go where its loss goes
    assert sorted(scalars["loss"]) == list(range(STEPS))
    for name, value in expected.items():
        got = scalars[f"roofline/profile/{name}"]
        assert list(got) == [7 - 1] and got[6] == pytest.approx(value, rel=1e-6), name
    # monitor: not step 1 (its warm-up), 2 (its count) nor 4 to 7 (the profiler's)
    history = {m["step"] + 1: m for m in run.cb.monitor.history}
    logged = [3, 8, 9, 10, 11, 12]
    for name, key in (("mfu", "mfu"), ("step_time", "time_s")):
        got = scalars[f"roofline/monitor/{name}"]
        assert sorted(got) == [s - 1 for s in logged]
        assert all(got[s - 1] == pytest.approx(history[s][key], rel=1e-6) for s in logged)
    assert all(scalars["roofline/monitor/tokens_per_s"][s - 1] == pytest.approx(
        ACCUMULATE * B * S / history[s]["time_s"], rel=1e-6) for s in logged)


def test_callback_class_names_the_package():
    assert issubclass(integration.RooflineCallback, pl.Callback)
    assert integration.callback_class(pl.__name__) is integration.RooflineCallback
    with pytest.raises(ValueError, match="package must be"):
        integration.callback_class("keras")
    with pytest.raises(ValueError, match="nothing to do"):
        integration.RooflineCallback()
