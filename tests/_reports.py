"""Small reports built by hand, shared by test files."""


def two_op_report():
    """One mm of 400 FLOPs on a 100 FLOP/s unit, one add of 20 FLOPs on a 10 FLOP/s unit, 50 bytes read at 5 B/s;
    a wall time of 99 s."""
    import numpy as np

    import roofline
    from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
    from roofline.report import OpInfo, Report

    c = roofline.Ceilings(device="cpu", name="test", fingerprint="test",
                          peaks={("matrix", "float32"): roofline.Ceiling(100.0),
                                 ("vector", "float32"): roofline.Ceiling(10.0)},
                          bandwidths={"DRAM": roofline.Ceiling(5.0)})
    rec = np.zeros(2, dtype=RECORD_DTYPE)
    rec["op"] = [0, 1]
    rec["matrix_flops"], rec["vector_flops"] = [400, 0], [0, 20]
    rec["bytes_read"], rec["dtype"] = [30, 20], DTYPE_CODES["float32"]
    ops = [OpInfo("aten.mm.default", "aten.mm", "mm"), OpInfo("aten.add.Tensor", "aten.add", "ewise")]
    return Report(rec, ops, [("Global",)], wall_time=99.0, ceilings=c)
