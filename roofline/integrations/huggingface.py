"""``RooflineCallback``: :func:`roofline.profile` (and optionally :func:`roofline.monitor`) inside a
``transformers.Trainer`` run.

.. code-block:: python

    trainer = Trainer(model=model, args=args, train_dataset=ds)
    trainer.add_callback(RooflineCallback(trainer, steps=(5, 7), monitor=True))
    trainer.train()

What it does, per training run (docs/training.md, "Hugging Face Trainer"):

* step boundaries: a step runs from the Trainer's ``on_step_begin`` to the next step's (the last step: to its
  ``on_step_end``, or to ``on_train_end`` when the Trainer had not planned to stop there), so a measured step holds
  its forward and backward (every micro-batch of gradient accumulation), gradient clipping, the optimizer and
  scheduler steps, ``zero_grad``, then what the Trainer does after the step (its logging, evaluation, checkpoint)
  and the fetching and collating of the next step's batches;
* ``steps=(first, last)`` are the Trainer's global steps (1-based, as it logs them): ``(5, 7)`` counts step 4 and
  discards it (warm-up), and measures steps 5, 6 and 7 into one report;
* each report goes to ``args.output_dir/roofline/`` (``output_dir=`` to change) as ``steps5-7.json`` and
  ``steps5-7.html``; in a distributed run each rank writes ``steps5-7.rank{r}.json`` / ``.html`` and rank 0 gathers
  them (:func:`roofline.gather`) into ``steps5-7.merged.json`` and the table ``steps5-7.merged.txt``;
* scalars: ``roofline/profile/{mfu,mbu,achieved_flops,achieved_bytes,compute_share,step_time,tokens_per_s}`` once
  per profiled cycle, at its last step; with ``monitor=True``, ``roofline/monitor/{mfu,mbu,achieved_flops,
  achieved_bytes,step_time,tokens_per_s}`` at each step the Trainer logs (``logging_steps``), over the steps since
  the previous log whose time includes no counting (the monitor's own counts and the profiled steps are left out);
  all through ``trainer.log``: every reporter of ``report_to`` (TensorBoard adds its ``train/`` prefix),
  ``state.log_history`` and the console get them;
* tokens: the model's inputs are read by a forward pre-hook on the model (training mode only): a step's tokens are
  the elements of ``input_ids`` (or ``attention_mask``) over its micro-batches, padding included, on this rank.
"""

from __future__ import annotations

import os

import transformers
from transformers import TrainerCallback

from roofline.integrations import _run
from roofline._util import _warn

_WHO = "RooflineCallback"


class RooflineCallback(_run.Outputs, TrainerCallback):
    """Profile steps of a ``transformers.Trainer`` run with :func:`roofline.profile`, optionally time every step
    with :func:`roofline.monitor`, write the reports and log their figures.

    ``trainer``: the Trainer the callback is added to, whose ``log`` method hands the figures to every reporter of
    ``args.report_to``. A callback can only reach them through it: the Trainer calls its reporters before the
    callbacks passed to it, and gives callbacks no handle on itself. Without it (``Trainer(callbacks=[...])``), the
    figures are appended to ``state.log_history`` only, and a warning says so when ``report_to`` names reporters.

    ``steps``: the Trainer's global steps to profile, ``(first, last)`` inclusive or one step number (1-based: the
    first step of training is step 1); the step before ``first`` is the warm-up (counted and discarded); one report.
    ``schedule``: instead of ``steps``, a :func:`roofline.schedule` (or ``torch.profiler.schedule``) over the steps
    of the run counted from 0, one report per cycle. ``monitor``: True, or a dict of :func:`roofline.monitor`'s
    ``warmup``, ``recount_every``, ``history_size``, ``max_signatures``. At least one of them is needed.

    ``output_dir``: where the reports go (default ``args.output_dir/roofline``). ``token_count``: None (the elements of
    the ``input_ids`` or ``attention_mask`` the model is called with), False (no tokens/s), or a callable taking the
    model's keyword inputs (a dict) and returning a number of tokens (run outside the measure blocks: its tensor ops
    are not counted; on CUDA, ``.item()`` in it synchronises every micro-batch). ``timing``, ``ceilings``,
    ``attention``: passed to :func:`roofline.measure` (the monitor takes ``ceilings`` and ``attention``).
    ``gather_timeout``: seconds :func:`roofline.gather` waits for the other ranks. ``log``: False to log nothing
    (the reports are still written). ``step_time``: the profiled reports' step time, as in :func:`roofline.profile`
    (``"unwaited"`` on a shared machine; the logged ``profile/step_time_code`` says which).
    ``tokens``: ``token_count``'s name before 0.5 (deprecated, removed in 0.7).

    Attributes: ``reports`` (this rank's :class:`roofline.SteadyReport` s, every run), ``merged`` (the
    :class:`roofline.distributed.MergedReport` s, rank 0 of a distributed run), ``files`` (the paths written),
    ``profiler`` and ``monitor`` (those of the latest run, None when not used).

    If the Trainer raises inside a step, the measure block of that step stays open (the Trainer has no callback
    for exceptions): call :meth:`close` (the next ``train()`` does it too) to close it and leave torch as it was.
    """

    def __init__(self, trainer=None, *, steps=None, schedule=None, monitor=False, output_dir=None, token_count=None,
                 timing: str | None = "model", ceilings="measured", attention: str | None = None,
                 gather_timeout: float = 120.0, log: bool = True, step_time: str = "median", tokens=_run.NOT_GIVEN):
        if trainer is not None and not isinstance(trainer, transformers.Trainer):
            raise TypeError(f"{_WHO}: trainer must be a transformers.Trainer or None, got {type(trainer).__name__}")
        self.trainer = trainer
        self.options = _run.Options(_WHO, steps=steps, schedule=schedule, monitor=monitor, output_dir=output_dir,
                                     tokens=_run.token_count_option(_WHO, token_count, tokens), timing=timing,
                                     ceilings=ceilings, attention=attention, gather_timeout=gather_timeout, log=log,
                                     step_time=step_time)
        if trainer is not None and output_dir is None:  # where the reports will go, checked now
            _run.check_output_dir(_WHO, "the report folder (args.output_dir/roofline)", self._folder(trainer.args))
        self._runs: list = []
        self._hook = None
        self._state = None
        self._inputs, self._counts, self._log_due = [], [], False

    # ---- Trainer events ------------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.close()
        if self.trainer is not None and self.trainer.state is not state:
            raise ValueError(f"{_WHO}: the callback was given another Trainer than the one running it")
        if model is None:
            raise RuntimeError(f"{_WHO}: the Trainer passed no model to on_train_begin")
        reporters = [r for r in (args.report_to or []) if r != "none"]
        if self.trainer is None and self.options.log and reporters:
            _warn.warn(f"{_WHO}: without the trainer (RooflineCallback(trainer, ...)), the figures go to "
                       f"state.log_history only, not to {', '.join(reporters)}: the Trainer calls its reporters "
                       "before the callbacks passed to it")
        if self.trainer is not None:
            mine = [c for c in self.trainer.callback_handler.callbacks if isinstance(c, RooflineCallback)]
            if len(mine) > 1:
                raise ValueError(f"{_WHO}: the Trainer has {len(mine)} RooflineCallbacks: their measure blocks would "
                                 "be opened and closed at the same step boundaries, out of order; use one callback "
                                 "with steps= (or schedule=) and monitor= together")
        out = self.options.output_dir or self._folder(args)
        _run.check_output_dir(_WHO, "output_dir" if self.options.output_dir else
                               "the report folder (args.output_dir/roofline)", out)
        self._state = state
        run = _run.Run(self.options, model, offset=state.global_step, output_dir=out,
                        framework=f"transformers {transformers.__version__}", log=self._log, close=self.close)
        self._runs.append(run)
        self._inputs, self._counts, self._log_due = [], [], False
        self._hook = model.register_forward_pre_hook(self._on_forward, with_kwargs=True)

    def on_step_begin(self, args, state, control, **kwargs):
        # a step runs from its on_step_begin to the next one: the Trainer's logging, evaluation and checkpoint
        # after a step's on_step_end are that step's work
        run = self._current()
        if run is None:
            return
        if not run.started:
            run.start()
        elif run.running:
            self._end_step(run)

    def on_step_end(self, args, state, control, **kwargs):
        # whether the Trainer logs this step: DefaultFlowCallback, called before this callback, has set it
        self._log_due = should_log = bool(control.should_log)
        run = self._current()
        if control.should_training_stop and run is not None and run.running:
            # the last step ends here, while the reporters are still open (the Trainer closes them in
            # on_train_end, before this callback's); trainer.log clears should_log: put back for the Trainer's own
            try:
                self._end_step(run)
                run.stop()
            finally:
                control.should_log = should_log

    def on_train_end(self, args, state, control, **kwargs):
        run = self._current()
        try:
            if run is not None:
                if run.running:
                    self._end_step(run)  # the last step: no step begins after it
                run.stop()
        finally:
            self._remove_hook()

    def close(self):
        """Close what an interrupted run left open: its measure block (with a RuntimeError as the reason: nothing
        of that step is kept) and the forward hook. Nothing to do after a run that ended normally."""
        self._remove_hook()
        run = self._runs[-1] if self._runs else None
        if run is not None and not run.stopped:
            run.abort(RuntimeError(f"{_WHO}: the training run did not end (it raised)"))

    # ---- helpers -----------------------------------------------------------------------------------------------
    @staticmethod
    def _folder(args) -> str:
        return os.path.join(args.output_dir or ".", "roofline")

    def _current(self):
        return self._runs[-1] if self._runs else None

    def _end_step(self, run):
        inputs, tokens = tuple(self._inputs) or None, None
        if self._counts and all(n is not None for n in self._counts):
            tokens = sum(self._counts)
        self._inputs, self._counts = [], []
        # the step's name: the Trainer's global step after it (it counts optimizer steps, one per step here)
        run.step(inputs=inputs, tokens=tokens, global_step=self._state.global_step)  # a cycle ending here logs
        if self._log_due and self.options.log and run.monitor is not None:  # logged with the Trainer's own
            fig = run.take_monitor_figures()
            if fig is not None:
                self._log(fig[1], fig[0])
        self._log_due = False

    def _remove_hook(self):
        if self._hook is not None:
            self._hook.remove()
            self._hook = None

    def _on_forward(self, module, args, kwargs):
        if not module.training:
            return None  # evaluation inside the training run: not the step's batch
        batch = dict(kwargs)
        if args:
            batch.setdefault(getattr(module, "main_input_name", "input_ids"), args[0])
        fn = self.options.tokens
        n = None if fn is False else _run.user_tokens(_WHO, fn, batch) if callable(fn) else _run.batch_tokens(batch)
        self._counts.append(n)
        self._inputs.append(_run.describe(batch))
        return None

    def _log(self, values: dict, step: int):
        if not values:
            return
        if self.trainer is not None:
            self.trainer.log(dict(values))
        elif self._state is not None:
            self._state.log_history.append({**values, "step": step})
