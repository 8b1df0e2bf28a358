"""What measure() captures per op call besides its counts: the call signature (records["sig"] indexing
Report.signatures) and the dataflow rows (Report.accesses). Expected storages come from torch's own view of the
tensors (untyped_storage()._cdata, the StorageImpl address), expected byte counts from numel * itemsize written
here."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import roofline  # noqa: E402
from roofline import _core  # noqa: E402
from roofline._capture import _session
from roofline._datamodel._records import ACCESS_DTYPE, RECORD_DTYPE  # noqa: E402

F32 = 4


def sid(t):
    """The storage id a second way: the StorageImpl address through the untyped storage."""
    return t.untyped_storage()._cdata


def calls(r, name):
    """Record indices of the calls of op `name` (e.g. "aten.gelu.default")."""
    ops = r.op_names
    return [i for i, o in enumerate(r.records["op"].tolist()) if ops[o] == name]


def rows(r, i):
    """{(storage, write): nbytes} of record i."""
    a = r.accesses[r.accesses["record"] == i]
    out = {(int(s), int(w)): int(n) for s, w, n in zip(a["storage"], a["write"], a["nbytes"])}
    assert len(out) == len(a), "one row per (storage, direction)"
    return out


# ---- the storage id --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_storage_id_is_the_storage_impl_and_views_share_it(device):
    a = torch.empty(8, 8, device=device)
    b = torch.empty(8, 8, device=device)
    v, t = a[2:], a.t()
    assert _session._storage_id(a) == sid(a) == _session._storage_id(v) == _session._storage_id(t) != 0
    assert _session._storage_id(b) == sid(b) != _session._storage_id(a)
    if device == "meta":  # why data_ptr cannot be the id: every meta tensor has the same (null) base pointer
        assert a.data_ptr() == b.data_ptr() == 0


def test_the_storage_fallback_reads_the_same_id():
    a = torch.ones(3)
    assert (lambda t: t.untyped_storage()._cdata)(a[1:]) == _session._storage_id(a)


# ---- dataflow: a linear -> gelu -> add chain -----------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_linear_gelu_add_chain(device):
    x = torch.randn(4, 8, device=device)
    w = torch.randn(16, 8, device=device)
    b = torch.randn(16, device=device)
    with roofline.measure() as r:
        h = F.linear(x, w, b)
        g = F.gelu(h)
        o = g + h
    (mm,), (ge,), (ad,) = calls(r, "aten.addmm.default"), calls(r, "aten.gelu.default"), calls(r, "aten.add.Tensor")
    assert mm < ge < ad
    # addmm reads the bias, the input and the weight (through its transposed view: the weight's storage), and
    # writes h; each at numel * 4 bytes
    assert rows(r, mm) == {(sid(b), 0): 16 * F32, (sid(x), 0): 4 * 8 * F32, (sid(w), 0): 16 * 8 * F32,
                           (sid(h), 1): 4 * 16 * F32}
    assert rows(r, ge) == {(sid(h), 0): 4 * 16 * F32, (sid(g), 1): 4 * 16 * F32}
    assert rows(r, ad) == {(sid(g), 0): 4 * 16 * F32, (sid(h), 0): 4 * 16 * F32, (sid(o), 1): 4 * 16 * F32}
    assert len({sid(t) for t in (x, w, b, h, g, o)}) == 6
    # the transpose itself (a view) moves no bytes and has no row
    for i in calls(r, "aten.t.default"):
        assert rows(r, i) == {}
    # rows are in call order, and every read / written byte count is the record's
    assert (np.diff(r.accesses["record"].astype(np.int64)) >= 0).all()
    for i in (mm, ge, ad):
        a = r.accesses[r.accesses["record"] == i]
        assert int(a["nbytes"][a["write"] == 0].sum()) == int(r.records["bytes_read"][i])
        assert int(a["nbytes"][a["write"] == 1].sum()) == int(r.records["bytes_written"][i])


def test_the_c_fast_path_captures_like_the_first_call():
    """The first call of an op goes through the Python path, later ones through the C dispatch: same rows."""
    xs = [torch.randn(5, 3) for _ in range(3)]
    with roofline.measure() as r:
        ys = [torch.relu(x) for x in xs]
    idx = calls(r, "aten.relu.default")
    assert len(idx) == 3
    for i, x, y in zip(idx, xs, ys):
        assert rows(r, i) == {(sid(x), 0): 15 * F32, (sid(y), 1): 15 * F32}


def test_views_read_the_storage_they_cover():
    x = torch.randn(4, 6)
    with roofline.measure() as r:
        v = x[:, :3]  # a view: no bytes, no row
        y = v * 2
        z = x.t().contiguous()
    (mul,) = calls(r, "aten.mul.Tensor")
    assert rows(r, mul) == {(sid(x), 0): 4 * 3 * F32, (sid(y), 1): 4 * 3 * F32}
    assert sid(v) == sid(x)
    (cp,) = calls(r, "aten.clone.default") or calls(r, "aten.copy_.default")
    got = rows(r, cp)
    assert got[(sid(x), 0)] == 24 * F32 and got[(sid(z), 1)] == 24 * F32
    for i in calls(r, "aten.slice.Tensor") + calls(r, "aten.t.default"):
        assert rows(r, i) == {}


def test_two_views_of_one_storage_are_one_row():
    x = torch.randn(2, 8)
    a, b = x[0], x[1]
    with roofline.measure() as r:
        c = a + b
    (i,) = calls(r, "aten.add.Tensor")
    assert rows(r, i) == {(sid(x), 0): 2 * 8 * F32, (sid(c), 1): 8 * F32}


def test_in_place_reads_and_writes_the_same_storage():
    a, b = torch.randn(3, 5), torch.randn(3, 5)
    with roofline.measure() as r:
        a.add_(b)
        a.relu_()
    (add,), (relu,) = calls(r, "aten.add_.Tensor"), calls(r, "aten.relu_.default")
    assert rows(r, add) == {(sid(a), 0): 15 * F32, (sid(b), 0): 15 * F32, (sid(a), 1): 15 * F32}
    assert rows(r, relu) == {(sid(a), 0): 15 * F32, (sid(a), 1): 15 * F32}


def test_out_argument_is_written_not_read():
    a, b, c = torch.randn(6), torch.randn(6), torch.empty(6)
    with roofline.measure() as r:
        torch.add(a, b, out=c)
    (i,) = calls(r, "aten.add.out")
    assert rows(r, i) == {(sid(a), 0): 6 * F32, (sid(b), 0): 6 * F32, (sid(c), 1): 6 * F32}


def test_broadcast_input_is_read_at_its_own_size():
    x, bias = torch.randn(32, 16), torch.randn(16)
    with roofline.measure() as r:
        y = x + bias
    (i,) = calls(r, "aten.add.Tensor")
    assert rows(r, i) == {(sid(x), 0): 32 * 16 * F32, (sid(bias), 0): 16 * F32, (sid(y), 1): 32 * 16 * F32}


def test_backward_calls_have_rows_too():
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with roofline.measure(lin) as r:
        lin(x).sum().backward()
    back = np.flatnonzero(r.records["phase"] == 1)
    assert len(back)
    written = set(r.accesses["storage"][np.isin(r.accesses["record"], back) & (r.accesses["write"] == 1)].tolist())
    assert sid(lin.weight.grad) in written and sid(lin.bias.grad) in written


def test_python_formula_calls_have_rows():
    lib = torch.library.Library("rlcapture", "DEF")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
    n = 7
    roofline.register(torch.ops.rlcapture.twice,
                      lambda x, out=None: {"vector_flops": x.numel(), "bytes_read": x.numel() * 4,
                                           "bytes_written": out.numel() * 4})
    try:
        x = torch.randn(n)
        with roofline.measure() as r:
            y = torch.ops.rlcapture.twice(x)
        (i,) = calls(r, "rlcapture.twice.default")
        assert rows(r, i) == {(sid(x), 0): n * F32, (sid(y), 1): n * F32}
        assert r.signatures[r.records["sig"][i]] == f"f32[{n}]"
    finally:
        roofline.unregister(torch.ops.rlcapture.twice)


# ---- signatures ------------------------------------------------------------------------------------------------
def test_signatures_text_and_interning():
    x = torch.randn(4, 8)
    w = torch.randn(16, 8)
    b = torch.randn(16)
    with roofline.measure() as r:
        F.linear(x, w, b)
        F.linear(x, w, b)
        torch.cat([torch.ones(2, 3), torch.zeros(4, 3)])
        torch.ones(3, dtype=torch.bfloat16) * torch.tensor(2.0, dtype=torch.bfloat16)
        torch.arange(5).sum()
    sig = lambda i: r.signatures[r.records["sig"][i]]  # noqa: E731
    assert r.signatures[0] == ""  # a call without tensor arguments
    mm = calls(r, "aten.addmm.default")
    assert [sig(i) for i in mm] == ["f32[16], f32[4,8], f32[8,16]"] * 2
    assert r.records["sig"][mm[0]] == r.records["sig"][mm[1]]
    (cat,) = calls(r, "aten.cat.default")
    assert sig(cat) == "[f32[2,3], f32[4,3]]"
    (mul,) = calls(r, "aten.mul.Tensor")
    assert sig(mul) == "bf16[3], bf16[]"
    (s,) = calls(r, "aten.sum.default")
    assert sig(s) == "i64[5]"
    for i in calls(r, "aten.ones.default") + calls(r, "aten.arange.default"):
        assert r.records["sig"][i] == 0  # factory ops: no tensor argument
    assert len(set(r.signatures)) == len(r.signatures)  # each text once
    assert (r.records["sig"] < len(r.signatures)).all()


def test_signature_texts_are_made_when_first_read_and_survive_copying():
    """The texts are formatted after the block, on the first read of Report.signatures (the block keeps only the
    interned keys); a report copied before that read carries them too."""
    import copy

    x, w = torch.randn(4, 8), torch.randn(8, 2)
    with roofline.measure() as r:
        torch.mm(x, w)
        torch.relu(x)
    assert callable(r.__dict__["_signatures"])  # nothing formatted yet
    other = copy.copy(r)
    assert other.__dict__["_signatures"] == ["", "f32[4,8], f32[8,2]", "f32[4,8]"]
    assert r.signatures == ["", "f32[4,8], f32[8,2]", "f32[4,8]"]
    assert r.signatures is r.signatures  # formatted once


def test_a_released_recorder_records_again():
    """clear(release=True) frees the records' memory; the recorder still works, and keeps its signatures."""
    rec = _core.Recorder(torch.Tensor, _session.TORCH_DTYPES, storage=_session._storage_id, signatures=True)
    i = rec.add_op(_core.K_EWISE, 1, 0)
    a = torch.ones(2, 3)
    rec.record(i, 0, 0, (a,), None, a)
    rec.clear(release=True)
    assert len(rec) == 0 and rec.accesses_bytes() == b"" and rec.signatures == ["", "f32[2,3]"]
    rec.record(i, 0, 0, (a, a), None, a)
    assert len(rec) == 1 and rec.signatures == ["", "f32[2,3]", "f32[2,3], f32[2,3]"]
    row = np.frombuffer(rec.records_bytes(), dtype=RECORD_DTYPE)[0]
    assert (int(row["vector_flops"]), int(row["sig"])) == (6, 2)
    with pytest.raises(TypeError):
        rec.clear(True)  # keyword only


# ---- saved with the report -------------------------------------------------------------------------------------
def test_round_trip_keeps_signatures_and_accesses():
    x = torch.randn(3, 4)
    with roofline.measure() as r:
        (x * 2).relu_()
    assert len(r.accesses) and len(r.signatures) > 1
    back = roofline.load(json.dumps(r.to_dict()))
    assert back.signatures == r.signatures
    assert back.accesses.dtype == ACCESS_DTYPE
    assert back.accesses.tobytes() == r.accesses.tobytes()
    assert back.records.tobytes() == r.records.tobytes()


def test_reports_saved_before_the_capture_still_load():
    """A document from before `sig` (80-byte records, no signatures or accesses keys)."""
    with roofline.measure() as r:
        torch.ones(3) + 1
    d = r.to_dict()
    import base64

    old = np.zeros(len(r.records), dtype=[(n, RECORD_DTYPE.fields[n][0]) for n in RECORD_DTYPE.names[:-2]])
    for n in old.dtype.names:
        old[n] = r.records[n]
    assert old.dtype.itemsize == 80
    d["records"] = base64.b64encode(old.tobytes()).decode("ascii")
    for k in ("signatures", "accesses", "n_accesses"):
        del d[k]
    back = roofline.Report.from_dict(d)
    assert back.signatures == [] and len(back.accesses) == 0
    assert (back.records["sig"] == 0).all()
    for n in old.dtype.names:
        assert np.array_equal(back.records[n], r.records[n], equal_nan=n in ("t_start", "t_end")), n


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(n_accesses=d["n_accesses"] + 1), "n_accesses"),
    (lambda d: d.update(accesses="***"), "accesses"),
    (lambda d: d.update(signatures=[""]), "sig"),
    (lambda d: d.update(signatures="f32[3]"), "signatures"),
])
def test_a_corrupt_capture_is_refused_naming_the_field(change, field):
    with roofline.measure() as r:
        torch.ones(3) + torch.ones(3)
    d = r.to_dict()
    change(d)
    with pytest.raises(ValueError, match=field):
        roofline.Report.from_dict(d)


def test_capture_off_changes_no_count():
    x = torch.randn(6, 6)

    def run():
        with roofline.measure() as r:
            (x @ x).softmax(-1).sum()
        return r

    on = run()
    _session.CAPTURE = False
    try:
        off = run()
    finally:
        _session.CAPTURE = True
    assert off.signatures == [] and len(off.accesses) == 0
    fields = [n for n in RECORD_DTYPE.names if n not in ("t_start", "t_end", "sig")]
    assert on.records[fields].tolist() == off.records[fields].tolist()


# ---- the recorder's own checks ---------------------------------------------------------------------------------
def test_recorder_arguments_are_checked():
    with pytest.raises(TypeError, match="storage"):
        _core.Recorder(torch.Tensor, {}, storage=3)
    rec = _core.Recorder(torch.Tensor, {torch.float32: 2}, storage=_session._storage_id, signatures=True)
    with pytest.raises(ValueError, match="no record"):
        rec.attach((), None, None)
    with pytest.raises(TypeError, match="args must be a tuple"):
        rec.attach([], None, None)
    assert rec.signatures == [""]


@pytest.mark.parametrize("storage", [lambda t: 1 / 0, lambda t: "not an int", lambda t: -5])
def test_a_storage_that_cannot_be_named_gives_no_row(storage):
    rec = _core.Recorder(torch.Tensor, {torch.float32: 2}, storage=storage, signatures=True)
    i = rec.add_op(_core.K_EWISE, p1=1)
    x = torch.ones(4)
    rec.record(i, 0, 0, (x,), None, x + 1)
    assert rec.accesses_bytes() == b""
    assert len(rec) == 1 and rec.signatures == ["", "f32[4]"]


def test_recorder_rows_by_hand():
    ids = {}
    rec = _core.Recorder(torch.Tensor, {torch.float32: 2}, storage=lambda t: ids.setdefault(id(t), len(ids) + 1))
    i = rec.add_op(_core.K_EWISE, p1=1)
    a, b = torch.ones(2, 3), torch.ones(2, 3)
    out = a + b
    rec.record(i, 0, 0, (a, b), None, out)
    from roofline._datamodel._records import accesses_from_raw

    got = accesses_from_raw(rec.accesses_bytes())
    assert got.tolist() == [(0, 1, 24, 0), (0, 2, 24, 0), (0, 3, 24, 1)]
    assert rec.signatures == []  # signatures off
    rec.clear()
    assert rec.accesses_bytes() == b""


def test_replay_equals_recording_the_calls_again():
    """replay(start, stop, phase) must leave the recorder as recording the same calls again would: the same
    records (op, module, counts, status, kind, signature; the new phase; new call order numbers; no times) and
    the same dataflow rows pointing at the new records. The second recorder records them for real."""
    from roofline._datamodel._records import RECORD_DTYPE, accesses_from_raw

    def records_from_raw(raw):
        return np.frombuffer(raw, dtype=RECORD_DTYPE)

    def fresh():
        ids = {}
        rec = _core.Recorder(torch.Tensor, {torch.float32: 2, torch.float16: 1},
                             storage=lambda t: ids.setdefault(id(t), len(ids) + 1), signatures=True)
        return rec, rec.add_op(_core.K_EWISE, p1=1), rec.add_op(_core.K_COPY)

    a, b, h = torch.ones(2, 3), torch.ones(2, 3), torch.ones(5, dtype=torch.float16)
    out, out2 = a + b, h.clone()
    calls = [(0, 7, (a, b), out), (1, 9, (h,), out2), (0, 7, (out, b), a)]  # (op, module, args, out)
    replayed, add, cp = fresh()
    again, add2, cp2 = fresh()
    assert (add, cp) == (add2, cp2)
    replayed.append(cp, 3, 0, 2, 0, 0, 0, 40, 40, 0)  # a record before the range: not copied
    again.append(cp, 3, 0, 2, 0, 0, 0, 40, 40, 0)
    for rec in (replayed, again):
        for op, mod, args, o in calls:
            rec.record(op, mod, 0, args, None, o, 1.0, 2.0)
    replayed.replay(1, 4, 1)
    for op, mod, args, o in calls:
        again.record(op, mod, 1, args, None, o)
    got, want = records_from_raw(replayed.records_bytes()), records_from_raw(again.records_bytes())
    assert len(got) == len(want) == 7
    assert got.tolist()[4:] != got.tolist()[1:4]  # phase, seq and times changed in the copies
    for f in got.dtype.names:
        assert np.array_equal(got[f], want[f], equal_nan=True), f
    assert got["seq"].tolist() == list(range(7)) and np.isnan(got["t_start"][4:]).all()
    assert got["phase"].tolist() == [0, 0, 0, 0, 1, 1, 1]
    assert replayed.signatures == again.signatures
    ra, wa = accesses_from_raw(replayed.accesses_bytes()), accesses_from_raw(again.accesses_bytes())
    assert ra.tolist() == wa.tolist()
    assert sorted(set(ra["record"].tolist())) == [1, 2, 3, 4, 5, 6]
    # nothing to copy: no change
    replayed.replay(2, 2, 0)
    assert len(replayed) == 7


def test_replay_refuses_bad_ranges_and_changes_nothing():
    rec = _core.Recorder(torch.Tensor, {torch.float32: 2}, storage=_session._storage_id, signatures=True)
    i = rec.add_op(_core.K_EWISE, p1=1)
    x = torch.ones(4)
    rec.record(i, 0, 0, (x,), None, x + 1)
    before = (rec.records_bytes(), rec.accesses_bytes())
    for start, stop in ((0, 2), (-1, 1), (1, 0), (0, 2**70), (2**70, 2**71)):
        with pytest.raises(ValueError, match="not a range of the 1 records"):
            rec.replay(start, stop, 0)
    with pytest.raises(OverflowError, match="phase .* must be at most 3, got 4"):  # as record() says it
        rec.replay(0, 1, 4)
    with pytest.raises(TypeError, match="start must be an int"):
        rec.replay(0.0, 1, 0)
    with pytest.raises(TypeError, match="stop must be an int"):
        rec.replay(0, True, 0)
    with pytest.raises(TypeError, match="replay"):
        rec.replay(0, 1)
    assert (rec.records_bytes(), rec.accesses_bytes()) == before


def test_ops_with_a_built_in_python_formula_get_their_dataflow_rows():
    """torch.sort is counted by a built-in Python formula (roofline/_counting/_formulas.py); its call still has a signature
    and read/write rows: the 4 x 8 float32 input read (128 bytes), values (128) and int64 indices (256) written."""
    x = torch.randn(4, 8)
    with roofline.measure(timing=None) as r:
        torch.sort(x, dim=-1)
    (row,) = [i for i, o in enumerate(r.records["op"].tolist()) if r.op_names[o].startswith("aten.sort")]
    acc = r.accesses[r.accesses["record"] == row]
    reads, writes = acc[acc["write"] == 0], acc[acc["write"] == 1]
    assert reads["nbytes"].tolist() == [4 * 8 * 4]
    assert sorted(writes["nbytes"].tolist()) == [4 * 8 * 4, 4 * 8 * 8]
    assert r.signatures[int(r.records["sig"][row])] == "f32[4,8]"


def test_a_onednn_layout_tensor_is_not_taken_for_a_broadcast():
    """oneDNN's opaque layout reports strides (1, 0, 0, ...), which read as a broadcast over all but one dimension:
    such a tensor is not described from its strides (an error row says so) where a real broadcast is counted once."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    from roofline._counting import _formula_base, _formulas

    x = torch.randn(2, 3, 4, 5)
    m = x.to_mkldnn()
    assert m.stride() == (1, 0, 0, 0)  # what torch reports (pinned: the rule exists because of it)
    column = torch.randn(6)[:, None].expand(6, 7)  # a real broadcast with the strides oneDNN reports, (1, 0)
    assert column.stride() == (1, 0)
    with roofline.measure(timing=None) as r:
        m.to_dense()
        m.clone()
        torch.randn(1, 5).expand(4, 5) * 2.0
        column * 2.0
    dense, = calls(r, "aten._to_dense.default")
    cloned, = calls(r, "aten.clone.default")
    row, col = calls(r, "aten.mul.Tensor")
    # a C kind (clone): an error row, never a 1-row broadcast's bytes
    assert r.records["status"][cloned] == _core.E_DESCRIBE and r.records["bytes_read"][cloned] == 0
    # _to_dense has a Python formula, which counts the oneDNN tensor's elements: 2*3*4*5 float32 read and written
    assert r.records["status"][dense] == 0
    assert r.records["bytes_read"][dense] == r.records["bytes_written"][dense] == 2 * 3 * 4 * 5 * F32
    assert r.records["bytes_read"][row] == 5 * F32  # the broadcast row read once
    assert r.records["bytes_read"][col] == 6 * F32 and r.records["status"][col] == 0  # the column read once
    assert _formula_base._touched_bytes(m) == 2 * 3 * 4 * 5 * F32  # the Python formulas: its elements
