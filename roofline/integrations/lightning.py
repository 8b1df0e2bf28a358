"""``RooflineCallback``: :func:`roofline.profile` (and optionally :func:`roofline.monitor`) inside a Lightning
``Trainer`` run, for ``lightning`` (``lightning.pytorch``) or ``pytorch_lightning``, whichever is installed
(``lightning`` when both are: :func:`callback_class` gives the other's).

.. code-block:: python

    trainer = L.Trainer(max_steps=100, callbacks=[RooflineCallback(steps=(5, 7), monitor=True)])
    trainer.fit(module, loader)

What it does, per ``fit`` (docs/training.md, "Lightning"):

* step boundaries: a step runs from ``on_train_batch_start`` of its first batch to that of the next step's first
  batch (the last step: to ``on_train_end``); a step's last batch is the one after which the trainer's
  ``global_step`` has moved (with ``accumulate_grad_batches``, the optimizer steps every so many batches). A measured
  step holds its ``training_step`` and backward passes, the optimizer step, then Lightning's logging and validation
  after the step, and the fetching of the next batch;
* ``steps=(first, last)`` are ``trainer.global_step`` values after the step (1-based): ``(5, 7)`` counts step 4 and
  discards it (warm-up), and measures steps 5, 6 and 7 into one report; with manual optimisation the global step
  moves once per ``optimizer.step()`` (two optimizers: by 2 per batch), and the steps are the batches after which
  it is in ``first..last`` (``(4, 6)``: the batches that bring it to 4 and 6, report ``steps4-6``);
* each report goes to ``trainer.log_dir/roofline/`` (the first logger's folder, or ``default_root_dir`` without a
  logger; ``output_dir=`` to change) as ``steps5-7.json`` and ``.html``; in a distributed run each rank writes
  ``steps5-7.rank{r}.json`` / ``.html`` and rank 0 gathers them into ``steps5-7.merged.json`` and ``.merged.txt``;
* scalars go to every logger of the trainer (``logger.log_metrics``, rank 0): ``roofline/profile/...`` once per
  profiled cycle, at its last step; with ``monitor=True``, ``roofline/monitor/...`` every ``log_every_n_steps``,
  over the steps since the previous log whose time includes no counting; each at the logger step where Lightning
  logs that step's own metrics (``global_step - 1``: the figures of steps 5-7 are at logger step 6);
* tokens: the elements of the batch's ``input_ids`` (or ``attention_mask``) when the batch is a mapping, summed
  over the step's micro-batches, on this rank; ``tokens=`` a callable ``batch -> int`` for other batches.
"""

from __future__ import annotations

import importlib
import os

from roofline.integrations import _run

_WHO = "RooflineCallback"


try:
    import lightning.pytorch as _PACKAGE
except ImportError:
    try:
        import pytorch_lightning as _PACKAGE
    except ImportError as e:
        raise ImportError("roofline.integrations.lightning needs Lightning: pip install 'roofline[lightning]' (or "
                          "pytorch-lightning)") from e


class _Callback(_run.Outputs):
    """Profile steps of a Lightning ``Trainer`` run with :func:`roofline.profile`, optionally time every step with
    :func:`roofline.monitor`, write the reports and log their figures (the class of each package is made by
    :func:`callback_class` from this body).

    ``steps``: the trainer's global steps to profile, ``(first, last)`` inclusive or one step number (1-based: the
    first optimizer step is step 1); the step before ``first`` is the warm-up (counted and discarded); one report.
    ``schedule``: instead of ``steps``, a :func:`roofline.schedule` (or ``torch.profiler.schedule``) over the steps
    of the ``fit`` counted from 0, one report per cycle. ``monitor``: True, or a dict of :func:`roofline.monitor`'s
    ``warmup``, ``recount_every``, ``history_size``, ``max_signatures``. At least one of them is needed.

    ``output_dir``: where the reports go (default ``trainer.log_dir/roofline``). ``token_count``: None (the elements of
    the batch's ``input_ids`` or ``attention_mask`` when the batch is a mapping), False (no tokens/s), or a callable
    ``batch -> number of tokens`` (run outside the measure blocks: its tensor ops are not counted). ``timing``,
    ``ceilings``, ``attention``: passed to :func:`roofline.measure` (the monitor takes ``ceilings`` and
    ``attention``). ``gather_timeout``: seconds :func:`roofline.gather` waits for the other ranks. ``log``: False to
    log nothing (the reports are still written). ``step_time``: the profiled reports' step time, as in
    :func:`roofline.profile` (``"unwaited"`` on a shared machine; the logged ``profile/step_time_code`` says which).
    ``tokens``: ``token_count``'s name before 0.5 (deprecated, removed in 0.7).

    Attributes: ``reports`` (this rank's :class:`roofline.SteadyReport` s, every ``fit``), ``merged`` (the
    :class:`roofline.distributed.MergedReport` s, rank 0 of a distributed run), ``files`` (the paths written),
    ``profiler`` and ``monitor`` (those of the latest ``fit``, None when not used). An exception in the run
    (``on_exception``) closes the open measure block with it: torch is left as it was.
    """

    def __init__(self, *, steps=None, schedule=None, monitor=False, output_dir=None, token_count=None,
                 timing: str | None = "model", ceilings="measured", attention: str | None = None,
                 gather_timeout: float = 120.0, log: bool = True, step_time: str = "median", tokens=_run.NOT_GIVEN):
        super().__init__()
        self.options = _run.Options(_WHO, steps=steps, schedule=schedule, monitor=monitor, output_dir=output_dir,
                                     tokens=_run.token_count_option(_WHO, token_count, tokens), timing=timing,
                                     ceilings=ceilings, attention=attention, gather_timeout=gather_timeout, log=log,
                                     step_time=step_time)
        self._runs: list = []
        self._trainer = None
        self._inputs, self._counts, self._stepped = [], [], False
        self._last_step = 0

    # ---- Lightning hooks ---------------------------------------------------------------------------------------
    def setup(self, trainer, pl_module, stage):
        # before anything runs: one roofline callback per Trainer (see roofline.integrations._run); the callbacks
        # act in fit only
        if str(getattr(stage, "value", stage)) != "fit":
            return
        mine = [c for c in trainer.callbacks if isinstance(c, _Callback)]
        if len(mine) > 1:
            raise ValueError(f"{_WHO}: the Trainer has {len(mine)} RooflineCallbacks: their measure blocks would be "
                             "opened and closed at the same step boundaries, out of order; use one callback with "
                             "steps= (or schedule=) and monitor= together")

    def on_train_start(self, trainer, pl_module):
        self._close_previous()
        out = self.options.output_dir
        if out is None:  # trainer.log_dir is a collective (broadcast from rank 0): every rank reads it here
            out = os.path.join(trainer.log_dir or trainer.default_root_dir, "roofline")
        _run.check_output_dir(_WHO, "output_dir" if self.options.output_dir else
                               "the report folder (trainer.log_dir/roofline)", out)
        self._trainer = trainer
        self._inputs, self._counts, self._stepped = [], [], False
        self._last_step = trainer.global_step
        # manual optimisation: the global step moves once per optimizer.step() call (likely one per optimizer)
        delta = 1 if pl_module.automatic_optimization else max(1, len(trainer.optimizers))
        run = _run.Run(self.options, pl_module, offset=trainer.global_step, output_dir=out, delta=delta,
                        framework=f"{_PACKAGE.__name__.split('.')[0]} {_PACKAGE.__version__}", log=self._log,
                        close=self._close_previous)
        self._runs.append(run)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        # a step runs from the start of its first batch to the start of the next step's: Lightning's logging and
        # validation after a step are that step's work
        run = self._current()
        if run is None:
            return
        if not run.started:
            run.start()
        elif self._stepped and run.running:
            self._end_step(run, trainer)
        fn = self.options.tokens
        n = None if fn is False else _run.user_tokens(_WHO, fn, batch) if callable(fn) else _run.batch_tokens(batch)
        self._counts.append(n)
        self._inputs.append(_run.describe(batch))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step != self._last_step:  # the optimizer stepped: the step's last batch
            self._last_step = trainer.global_step
            self._stepped = True

    def on_train_end(self, trainer, pl_module):
        run = self._current()
        if run is not None:
            if self._stepped and run.running:
                self._end_step(run, trainer)  # the last step: no batch starts after it
            run.stop()

    def on_exception(self, trainer, pl_module, exception):
        run = self._runs[-1] if self._runs else None
        if run is not None and not run.stopped:
            run.abort(exception)

    def _current(self):
        return self._runs[-1] if self._runs else None

    def _end_step(self, run, trainer):
        inputs, tokens = tuple(self._inputs) or None, None
        if self._counts and all(n is not None for n in self._counts):
            tokens = sum(self._counts)
        self._inputs, self._counts, self._stepped = [], [], False
        # the step's name: trainer.global_step after it (optimizer steps: 2 per batch with two optimizers stepped
        # by hand)
        run.step(inputs=inputs, tokens=tokens, global_step=trainer.global_step)  # a cycle ending here logs
        every = trainer.log_every_n_steps
        if self.options.log and run.monitor is not None and every and self._last_step % every == 0:
            fig = run.take_monitor_figures()
            if fig is not None:
                self._log(fig[1], self._last_step)

    def _close_previous(self):
        run = self._runs[-1] if self._runs else None
        if run is not None and not run.stopped:
            run.abort(RuntimeError(f"{_WHO}: the previous training run did not end"))

    def _log(self, values: dict, step: int):
        # Lightning logs a step's own metrics at the step count before it (global_step - 1, from 0): so are these
        if values and self._trainer is not None:
            for logger in self._trainer.loggers:
                logger.log_metrics(dict(values), step=step - 1)


_CLASSES: dict = {}


def callback_class(package: str = _PACKAGE.__name__):
    """The ``RooflineCallback`` class for ``package``: ``"lightning.pytorch"`` (or ``"lightning"``) or
    ``"pytorch_lightning"``; a Trainer of one takes only callbacks of its own package. ImportError when it is
    not installed, ValueError for another name."""
    name = {"lightning": "lightning.pytorch"}.get(package, package)
    if name not in ("lightning.pytorch", "pytorch_lightning"):
        raise ValueError(f"callback_class: package must be 'lightning.pytorch' or 'pytorch_lightning', got "
                         f"{package!r}")
    if name not in _CLASSES:
        pkg = importlib.import_module(name)
        _CLASSES[name] = type("RooflineCallback", (_Callback, pkg.Callback),
                              {"__module__": __name__, "__doc__": _Callback.__doc__})
    return _CLASSES[name]


RooflineCallback = callback_class()
