"""The torch side of a block: the dispatch session that records every op, collectives and DTensor, the attention
kernel counted where none runs. ``_torch``, ``_collectives`` and ``_dtypes`` import torch and are imported when a
block is made, so that ``import roofline`` needs no torch."""
