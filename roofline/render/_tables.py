"""A report as one row per op call: the columns, CSV and a pandas DataFrame (:meth:`roofline.Report.to_csv`,
:meth:`roofline.Report.to_dataframe`)."""

from __future__ import annotations

import csv
import io

import numpy as np

from roofline._analysis._rollup import times
from roofline._io._export import check_path, write
from roofline._datamodel._records import BOUNDS, COUNTS_AND_FLOP_COUNTER, DTYPE_NAMES, PHASES

# the count columns of a per-call row, after op, module, phase and dtype
COUNT_COLUMNS = COUNTS_AND_FLOP_COUNTER
# the classification columns of a per-call row, after the measured time
CLASS_COLUMNS = ("intensity", "t_min", "achieved_flops", "achieved_bytes", "efficiency", "mfu", "mbu")


def columns(report) -> dict:
    """One row per op call, column name -> values: ``op``, ``module`` (innermost), ``phase``, ``dtype`` (names),
    the :data:`COUNT_COLUMNS`, the measured ``time``, the :data:`CLASS_COLUMNS` and ``bound`` (a name)."""
    r = report.records
    c = report.classification()
    names = report.op_names
    cols = {
        "op": [names[i] for i in r["op"].tolist()],
        "module": [report.module_path(m) for m in r["module"].tolist()],
        "phase": [PHASES[p] for p in r["phase"].tolist()],
        "dtype": [DTYPE_NAMES.get(d, "unknown") for d in r["dtype"].tolist()],
    }
    for f in COUNT_COLUMNS:
        cols[f] = r[f]
    cols["time"] = times(r)
    for f in CLASS_COLUMNS:
        cols[f] = c[f]
    cols["bound"] = [BOUNDS[b] for b in c["bound"].tolist()]
    return cols


def to_csv(cols: dict, path=None) -> str:
    """The :func:`columns` as CSV (floats as ``repr``, so they read back exactly), written to ``path`` when
    given."""
    check_path(path, "Report.to_csv")  # before the rows are formatted
    names = list(cols)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(names)
    for row in zip(*(cols[n] for n in names)):
        w.writerow([repr(float(v)) if isinstance(v, (float, np.floating)) else v for v in row])
    return write(buf.getvalue(), path, "Report.to_csv", newline="")


def to_dataframe(cols: dict):
    """The :func:`columns` as a pandas DataFrame (ImportError naming pandas without it)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_dataframe needs pandas: pip install pandas") from None
    return pd.DataFrame(cols)
