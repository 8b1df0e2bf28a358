"""Hand-built reports for the dataflow, cache-model and hint tests: op calls with their storages, no torch."""

import numpy as np

from roofline._hardware._ceilings import Ceiling, Ceilings
from roofline._analysis._dataflow import ACCESS_DTYPE
from roofline._datamodel._records import DTYPE_CODES, RECORD_DTYPE
from roofline.report import OpInfo, Report

F32 = DTYPE_CODES["float32"]
BF16 = DTYPE_CODES["bfloat16"]


def ceilings(device="cpu", vector=1e12, matrix=2e12, dram=1e11, extra_peaks=None, bandwidths=None, info=None):
    """Ceilings with measured figures only: fp32 vector and matrix peaks, DRAM (and optional other) bandwidths."""
    peaks = {("vector", "float32"): Ceiling(vector), ("matrix", "float32"): Ceiling(matrix)}
    for k, v in (extra_peaks or {}).items():
        peaks[k] = Ceiling(v)
    bws = {"DRAM": Ceiling(dram)}
    for k, v in (bandwidths or {}).items():
        bws[k] = Ceiling(v)
    return Ceilings(device=device, name="test device", fingerprint="test", peaks=peaks, bandwidths=bws,
                    info=dict(info or {}))


class Graph:
    """Op calls added one by one: ``call(name, kind, reads=[(storage, nbytes)], writes=[...], matrix=, vector=)``."""

    def __init__(self):
        self.rows, self.acc, self.ops, self.opidx = [], [], [], {}
        self.modules = [("Global",)]

    def call(self, name, kind, reads=(), writes=(), matrix=0, vector=0, dtype=F32, phase=0, module="Global",
             t=None):
        if name not in self.opidx:
            self.opidx[name] = len(self.ops)
            self.ops.append(OpInfo(name, name.rsplit(".", 1)[0], kind))
        mset = ("Global",) if module == "Global" else ("Global", module)
        if mset not in self.modules:
            self.modules.append(mset)
        i = len(self.rows)
        for s, nb in reads:
            self.acc.append((i, s, nb, 0))
        for s, nb in writes:
            self.acc.append((i, s, nb, 1))
        self.rows.append(dict(matrix_flops=matrix, vector_flops=vector, bytes_read=sum(nb for _, nb in reads),
                              bytes_written=sum(nb for _, nb in writes), op=self.opidx[name],
                              module=self.modules.index(mset), phase=phase, dtype=dtype,
                              kind=0, t=t))
        return i

    def report(self, ceil=None, wall_time=None, with_accesses=True, overhead=None):
        rec = np.zeros(len(self.rows), RECORD_DTYPE)
        clock = 0.0
        for i, r in enumerate(self.rows):
            for k in ("matrix_flops", "vector_flops", "bytes_read", "bytes_written", "op", "module", "phase",
                      "dtype"):
                rec[k][i] = r[k]
            if r["t"] is None:
                rec["t_start"][i] = rec["t_end"][i] = np.nan
            else:
                rec["t_start"][i], rec["t_end"][i] = clock, clock + r["t"]
                clock += r["t"]
            rec["seq"][i] = i
        return Report(rec, self.ops, self.modules, wall_time=wall_time, meta={"devices": ["cpu"]},
                      ceilings=ceil if ceil is not None else ceilings(), overhead=overhead,
                      accesses=np.array(self.acc, dtype=ACCESS_DTYPE) if with_accesses else None)


# ---- the acceptance chain: linear -> bias -> GELU -> dropout -> residual add -> LayerNorm ------------------------
T, D = 64, 128
ACT = T * D * 4            # one fp32 activation
W = D * D * 4              # the weight
VEC = D * 4                # bias, LayerNorm weight and bias
MASK = T * D               # dropout mask, one byte per element


def chain(extra_reader_of=None, phase=0):
    """The six calls of a transformer MLP output with its residual and norm, storages numbered as below.
    ``extra_reader_of``: a storage a later call reads too (as the backward of a training step would)."""
    g = Graph()
    x, w, b, gamma, beta = 1, 2, 3, 4, 5
    g.call("aten.mm.default", "mm", [(x, ACT), (w, W)], [(10, ACT)], matrix=2 * T * D * D, phase=phase,
           module="mlp.fc")
    g.call("aten.add.Tensor", "ewise", [(10, ACT), (b, VEC)], [(11, ACT)], vector=T * D, phase=phase,
           module="mlp")
    g.call("aten.gelu.default", "ewise", [(11, ACT)], [(12, ACT)], vector=4 * T * D, phase=phase, module="mlp.act")
    g.call("aten.native_dropout.default", "ewise", [(12, ACT)], [(13, ACT), (14, MASK)], vector=2 * T * D,
           phase=phase, module="mlp.drop")
    g.call("aten.add.Tensor", "ewise", [(13, ACT), (x, ACT)], [(15, ACT)], vector=T * D, phase=phase, module="block")
    g.call("aten.native_layer_norm.default", "ewise_in", [(15, ACT), (gamma, VEC), (beta, VEC)],
           [(16, ACT), (17, T * 4), (18, T * 4)], vector=8 * T * D, phase=phase, module="block.ln")
    if extra_reader_of is not None:
        g.call("aten.gelu_backward.default", "ewise", [(extra_reader_of, ACT), (16, ACT)], [(19, ACT)],
               vector=6 * T * D, phase=1, module="mlp.act")
    return g


# ---- math-path attention: (B*H, L, d) queries, keys, values ---------------------------------------------------------
BH, L, DH = 8, 128, 32
QKV = BH * L * DH * 4
SCORES = BH * L * L * 4


def attention(g=None, base=100, module="attn"):
    g = g or Graph()
    q, k, v = base + 1, base + 2, base + 3
    g.call("aten.bmm.default", "bmm", [(q, QKV), (k, QKV)], [(base + 10, SCORES)], matrix=2 * BH * L * L * DH,
           module=module)
    g.call("aten.div.Tensor", "ewise", [(base + 10, SCORES)], [(base + 11, SCORES)], vector=BH * L * L,
           module=module)
    g.call("aten._softmax.default", "ewise_in", [(base + 11, SCORES)], [(base + 12, SCORES)], vector=4 * BH * L * L,
           module=module)
    g.call("aten.bmm.default", "bmm", [(base + 12, SCORES), (v, QKV)], [(base + 13, QKV)],
           matrix=2 * BH * L * L * DH, module=module)
    return g


# ---- six hints at once: dropout mask, optimizer state fill, layout copy, cast there and back, unfused optimizer, small
# GEMM (the advice views list a number of them) ---------------------------------------------------------------------
def six_hints():
    g = Graph()
    g.call("aten.native_dropout.default", "ewise", [(1, 4000)], [(2, 4000), (3, 1000)], vector=2000)  # dropout
    g.call("aten.add.Tensor", "ewise", [(2, 4000), (3, 1000)], [(4, 4000)], vector=1000)
    g.call("aten.zeros_like.default", "fill", [], [(5, 2000)], phase=2)                       # state init
    g.call("aten.clone.default", "copy", [(4, 4000)], [(6, 4000)])                            # layout copies
    g.call("aten._to_copy.default", "copy", [(6, 4000)], [(7, 2000)])                         # cast there ...
    g.call("aten._to_copy.default", "copy", [(7, 2000)], [(8, 4000)], dtype=BF16)             # ... and back
    for _ in range(3):  # unfused optimizer step
        g.call("aten.add_.Tensor", "ewise", [(10, 2000), (11, 2000)], [(10, 2000)], vector=500, phase=2)
    g.call("aten.mm.default", "mm", [(20, 2048), (21, 16384)], [(22, 2048)], matrix=2 * 8 * 64 * 64)  # small GEMM
    return g
