"""Token layouts under hostile use (issue 40): checked against the calls they describe, read outside the report's
count, fake and meta masks, huge counts, and one schema for ``measure(tokens=...)``, ``to_json`` and ``load``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import roofline


def _matrix(r):
    return int(r.records["matrix_flops"].sum())


# ---- token layouts: checked against the calls, read outside the report, fake and meta masks, the schema -----------


class _Tok(torch.nn.Module):
    """A tiny language model's shape: token ids (B, S) -> embeddings -> a linear layer; takes an attention mask."""

    def __init__(self):
        super().__init__()
        self.emb, self.lin = torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8)

    def forward(self, input_ids, attention_mask=None, cu_seq_lens_q=None):
        return self.lin(self.emb(input_ids))


_IDS = torch.zeros(2, 5, dtype=torch.long)
_MASK = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])


def _ops(r):
    return sorted(r.op_names[o] for o in r.records["op"])


def _bare_ops(m, *a, **k):
    """The ops of the call as a plain dispatch mode sees them (a second counter: torch's own mode)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Log():
        m(*a, **k)
    return sorted(s for s in seen if s != "prim.device.default")


def test_attention_mask_detection_records_none_of_its_own_ops():
    m = _Tok()
    with roofline.measure(m) as r:
        m(_IDS, attention_mask=_MASK)
    # the layout was read: 3 + 5 real tokens of 2 x 5
    assert r.meta["tokens"] == {"batch": 2, "seq_len": 5, "lengths": [3, 5], "packed": False}
    # and the report holds the model's ops only (it held an aten.detach of the mask)
    assert _ops(r) == _bare_ops(m, _IDS, attention_mask=_MASK)
    assert "aten.detach.default" not in _ops(r)
    # an enclosing block or mode does not see the read either
    with roofline.measure() as outer:
        with roofline.measure(m) as inner:
            m(_IDS, attention_mask=_MASK)
    assert _ops(outer) == _ops(inner) == _ops(r)


def test_packed_batch_detection_records_none_of_its_own_ops():
    m = _Tok()
    ids, cu = torch.zeros(1, 7, dtype=torch.long), torch.tensor([0, 3, 7], dtype=torch.int32)
    with roofline.measure(m) as r:
        m(ids, cu_seq_lens_q=cu)
    assert r.meta["tokens"] == {"batch": 1, "seq_len": 7, "lengths": [3, 4], "packed": True}
    assert _ops(r) == _bare_ops(m, ids)


def test_a_mask_changed_in_place_in_the_block_is_read_as_it_was_passed():
    m = _Tok()
    mask = _MASK.clone()
    with roofline.measure(m) as r:
        m(_IDS, attention_mask=mask)
        mask.fill_(1)  # a reused buffer: the CPU mask was read when the model returned
    assert r.meta["tokens"]["lengths"] == [3, 5]


def test_fake_and_meta_masks_of_the_model_give_no_layout_and_say_why():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        m = _Tok()
        ids, mask = torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 5, dtype=torch.long)
        with roofline.measure(m) as r:  # crashed: .numpy() on a fake tensor
            m(ids, attention_mask=mask)
    assert "tokens" not in r.meta and "fake tensor" in r.meta["tokens_unknown"]
    # (2*5, 8) @ (8, 8): 2*10*8*8 = 1280 matrix FLOPs, counted as without a mask
    assert _matrix(r) == 1280
    m = _Tok().to("meta")
    with roofline.measure(m) as r:
        m(torch.zeros(2, 5, dtype=torch.long, device="meta"), attention_mask=torch.ones(2, 5, device="meta"))
    assert "meta tensor" in r.meta["tokens_unknown"] and _matrix(r) == 1280
    assert roofline.load(r.to_json()).meta["tokens_unknown"] == r.meta["tokens_unknown"]
    with pytest.raises(ValueError, match="which tokens are real is unknown"):
        r.useful_work()


def test_meta_and_fake_tokens_arguments_are_refused_naming_tokens():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with pytest.raises(ValueError, match=r"^tokens is a meta tensor"):
        roofline.measure(tokens=torch.ones(2, 5, device="meta"))
    with pytest.raises(ValueError, match=r"^tokens\['cu_seqlens'\] is a meta tensor"):
        roofline.measure(tokens={"cu_seqlens": torch.tensor([0, 3], device="meta")})
    with FakeTensorMode():
        fake = torch.ones(2, 5)
    with pytest.raises(ValueError, match=r"^tokens is a fake tensor"):
        roofline.measure(tokens=fake)
    # a real tensor mask is read (2 + 1 real of 2 x 3), also while FakeTensorMode is on
    real = torch.tensor([[1, 1, 0], [1, 0, 0]])
    with FakeTensorMode():
        m = roofline.measure(tokens=real)
    assert m._tokens["lengths"] == [2, 1]


def test_a_layout_that_matches_no_call_is_flagged_and_said():
    m = _Tok()
    with pytest.warns(RuntimeWarning, match=r"matches no call of the step"):
        with roofline.measure(m, tokens=torch.ones(3, 7)) as r:  # the step's batch is 2 x 5
            m(_IDS)
    assert r.meta["tokens"]["matched"] is False
    assert "matches no call" in str(r) and "tokens/s" not in str(r)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the flagged layout is not warned about again
        assert r.useful_work()["matched"] is False
        assert roofline.load(r.to_json()).meta["tokens"]["matched"] is False
    # a layout given to useful_work is checked there too
    with roofline.measure(m) as r2:
        m(_IDS)
    with pytest.warns(RuntimeWarning, match="matches no call"):
        assert r2.useful_work(tokens={"lengths": [4], "seq_len": 9})["matched"] is False
    # neighbours that match: the step's own mask (2 x 5), and B x S = 10 rows with a (1, 10) packed layout
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with roofline.measure(m, tokens=_MASK) as r3:
            m(_IDS)
        u = r3.useful_work()
        assert u["matched"] and "matched" not in r3.meta["tokens"]
        # 2 of the 10 positions are padding: 2/10 of the per-token FLOPs (all of them here)
        assert u["padding_share"] == pytest.approx(0.2)
        assert r2.useful_work(tokens={"cu_seqlens": [0, 4, 10]})["matched"]


@pytest.mark.parametrize("tokens,field", [
    ({"cu_seqlens": [0, 0]}, "cu_seqlens"),
    ({"cu_seqlens": [0, 2**53 + 1]}, "seq_len"),
    ({"lengths": [3], "seq_len": 2**53 + 1}, "seq_len"),
    ({"lengths": [2**60], "seq_len": 2**60}, "seq_len"),
    ({"lengths": [10**400], "seq_len": 10**400}, "seq_len"),
    ({"cu_seqlens": [0, 10**400]}, "seq_len"),
    (10**400, "tokens"),
])
def test_out_of_range_layouts_are_refused_naming_tokens(tokens, field):
    with pytest.raises(ValueError, match=r"^tokens") as e:
        roofline.measure(tokens=tokens)
    assert field in str(e.value)
    r = _small_report()
    with pytest.raises(ValueError, match=r"^tokens"):
        r.useful_work(tokens=tokens)


def test_largest_layout_in_range_round_trips():
    r = _small_report()
    lay = roofline.measure(tokens={"lengths": [2**53], "seq_len": 2**53})._tokens
    r.meta["tokens"] = lay
    assert roofline.load(r.to_json()).meta["tokens"] == lay


def test_to_json_refuses_what_load_would_refuse():
    r = _small_report()
    saved = r.meta.get("tokens")
    try:
        r.meta["tokens"] = {"batch": 1, "seq_len": 0, "lengths": [0], "packed": True}  # set by hand
        with pytest.raises(ValueError, match=r"cannot be saved: meta\.tokens\.seq_len is 0"):
            r.to_json()
    finally:
        r.meta["tokens"] = saved


_SMALL = []


def _small_report():
    """One small measured step with a token mask (built once)."""
    if not _SMALL:
        m = _Tok()
        with roofline.measure(m) as r:
            m(_IDS, attention_mask=_MASK)
        _SMALL.append(r)
    return _SMALL[0]


hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_INT = st.one_of(st.integers(-3, 12), st.integers(2**53 - 2, 2**53 + 2), st.integers(2**62, 2**65),
                 st.just(10**400))
_LAYOUTS = st.one_of(
    st.fixed_dictionaries({"cu_seqlens": st.lists(_INT, max_size=5)}),
    st.fixed_dictionaries({"lengths": st.lists(_INT, max_size=5), "seq_len": _INT}),
    st.lists(st.lists(st.integers(0, 1), min_size=1, max_size=4), min_size=1, max_size=3),
)


@settings(max_examples=150, deadline=None, database=None)
@given(_LAYOUTS)
def test_any_accepted_layout_round_trips_through_to_json_and_load(tokens):
    """A layout measure accepts is written by to_json and loaded back as it was; one it refuses is a ValueError
    naming tokens (never another exception)."""
    r = _small_report()
    try:
        lay = roofline.measure(tokens=tokens)._tokens
    except ValueError as e:
        assert str(e).startswith("tokens")
        return
    saved = r.meta.get("tokens")
    try:
        r.meta["tokens"] = lay
        back = roofline.load(r.to_json())
    finally:
        r.meta["tokens"] = saved
    assert back.meta["tokens"] == lay
    # the figures of a loaded layout are finite
    u = back.useful_work()
    assert np.isfinite(u["padding_share"]) and u["real_tokens"] == sum(lay["lengths"])


def test_a_packed_batch_whose_first_sequence_is_empty_is_accepted():
    # cu_seqlens [0, 0, 4]: an empty sequence, then one of 4 tokens: 4 tokens in all, none padded
    assert roofline.measure(tokens={"cu_seqlens": [0, 0, 4]})._tokens == \
        {"batch": 1, "seq_len": 4, "lengths": [0, 4], "packed": True}


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_sparse_masks_are_refused_naming_tokens(layout):
    dense = torch.tensor([[1, 1, 0], [1, 0, 0]])
    mask = dense.to_sparse() if layout == "sparse_coo" else dense.to_sparse_csr()
    with pytest.raises(ValueError, match=rf"^tokens is a torch\.{layout} tensor"):
        roofline.measure(tokens=mask)
