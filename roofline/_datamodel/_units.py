"""The units and dtypes a peak can be given for: one table for the measured ceilings
(roofline/_hardware/_ceilings.py) and the datasheet table (roofline/_hardware/_devices.py)."""

UNITS = ("vector", "matrix")
# widest first, then the 8-bit formats, integers last (the order the ceilings are listed in)
PEAK_DTYPES = (
    "float64",
    "float32",
    "tfloat32",
    "bfloat16",
    "float16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "int8",
)
