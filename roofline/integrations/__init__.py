"""Trainer integrations: callbacks that profile steps of a training run with :func:`roofline.profile` (and
optionally time every step with :func:`roofline.monitor`), write each rank's report into the run's output folder,
merge the ranks of a distributed run on rank 0, and log the figures through the trainer's own loggers.

* :mod:`roofline.integrations.huggingface`: ``RooflineCallback`` for ``transformers.Trainer``
  (``pip install "roofline[huggingface]"``);
* :mod:`roofline.integrations.lightning`: ``RooflineCallback`` for ``lightning.pytorch.Trainer`` or
  ``pytorch_lightning.Trainer`` (``pip install "roofline[lightning]"``).

Importing this package imports neither framework: each submodule imports its own when it is imported.
docs/training.md has the recipes and what each callback writes and logs.
"""

__all__: list = []
