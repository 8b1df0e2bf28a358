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
