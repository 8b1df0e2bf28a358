"""torch's dtypes -> the record's dtype codes (csrc/record.h, roofline/_datamodel/_records.py), for the recorder and the
collectives."""

from __future__ import annotations

import torch

from roofline._datamodel._records import DTYPE_CODES

TORCH_DTYPES = {getattr(torch, name): code for name, code in DTYPE_CODES.items() if hasattr(torch, name)}
