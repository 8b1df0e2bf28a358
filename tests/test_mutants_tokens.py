"""The token layouts roofline.measure(tokens=...) and Report.useful_work(tokens=...) take, at their boundaries:
exactly which masks, lengths and cu_seqlens are accepted (and the layout each one gives, written out by hand), and
which are refused, with a message naming the field that was wrong. The smallest valid values sit next to the
largest invalid ones: a sequence length of 1 against 0, cu_seqlens of two entries against one, a 1 x 1 mask
against an empty one; bools are not counts anywhere."""

import numpy as np
import pytest

import roofline
from roofline._datamodel._tokens import token_layout


def _layout(batch, seq_len, lengths, packed=False):
    return {"batch": batch, "seq_len": seq_len, "lengths": lengths, "packed": packed}


@pytest.mark.parametrize("tokens, want", [
    # lengths + seq_len: seq_len 1 is the shortest padded batch; a length may be 0 (an all-padding row)
    ({"lengths": [1, 0], "seq_len": 1}, _layout(2, 1, [1, 0])),
    ({"lengths": (3, 2, 3), "seq_len": 3}, _layout(3, 3, [3, 2, 3])),
    ({"lengths": np.array([4, 1]), "seq_len": np.int64(6)}, _layout(2, 6, [4, 1])),
    ({"lengths": [0], "seq_len": 2}, _layout(1, 2, [0])),
    # cu_seqlens: two entries are one sequence; a repeated boundary is an empty sequence, not a decrease
    ({"cu_seqlens": [0, 5]}, _layout(1, 5, [5], True)),
    ({"cu_seqlens": [0, 3, 3, 7]}, _layout(1, 7, [3 - 0, 3 - 3, 7 - 3], True)),
    ({"cu_seqlens": np.array([0, 2, 6, 7])}, _layout(1, 7, [2, 4, 1], True)),
    # masks: each row's real count is its sum, wherever the padding sits
    ([[1]], _layout(1, 1, [1])),
    ([[0]], _layout(1, 1, [0])),
    ([[0, 1, 1], [1, 1, 0], [1, 0, 1]], _layout(3, 3, [2, 2, 2])),
    (np.array([[True, False, False, False]]), _layout(1, 4, [1])),
    (np.array([[1.0, 1.0], [0.0, 1.0]]), _layout(2, 2, [2, 1])),
])
def test_accepted_layouts(tokens, want):
    got = token_layout(tokens)
    assert got == want
    assert all(type(v) is int for v in [got["batch"], got["seq_len"], *got["lengths"]])


# (tokens, the message): seq_len, lengths and cu_seqlens are named by their key, the mask by its shape
REFUSED = [
    ({"lengths": [1], "seq_len": 0}, r"tokens\['seq_len'\] must be an int >= 1, got 0$"),
    ({"lengths": [0], "seq_len": 0}, r"tokens\['seq_len'\] must be an int >= 1, got 0$"),
    ({"lengths": [0], "seq_len": -1}, r"tokens\['seq_len'\] must be an int >= 1, got -1$"),
    ({"lengths": [1], "seq_len": True}, r"tokens\['seq_len'\] must be an int >= 1, got True$"),
    ({"lengths": [1], "seq_len": 2.0}, r"tokens\['seq_len'\] must be an int >= 1, got 2\.0$"),
    ({"lengths": [1], "seq_len": "2"}, r"tokens\['seq_len'\] must be an int >= 1, got '2'$"),
    ({"lengths": [], "seq_len": 2}, r"tokens\['lengths'\] must be a non-empty list of lengths <= seq_len 2, got \[\]"),
    ({"lengths": [True, 1], "seq_len": 4}, r"tokens\['lengths'\] must be a list of ints >= 0, got \[True, 1\]$"),
    ({"lengths": [2, -1], "seq_len": 4}, r"tokens\['lengths'\] must be a list of ints >= 0, got \[2, -1\]$"),
    ({"lengths": [2.0], "seq_len": 4}, r"tokens\['lengths'\] must be a list of ints >= 0, got \[2\.0\]$"),
    ({"lengths": 3, "seq_len": 4}, r"tokens\['lengths'\] must be a list of ints >= 0, got 3$"),
    ({"lengths": {2: 1}, "seq_len": 4}, r"tokens\['lengths'\] must be a list of ints >= 0, got \{2: 1\}$"),
    ({"cu_seqlens": [0]}, r"tokens\['cu_seqlens'\] must start at 0 .* at least one sequence, got \[0\]$"),
    ({"cu_seqlens": []}, r"tokens\['cu_seqlens'\] must start at 0 .* at least one sequence, got \[\]$"),
    ({"cu_seqlens": [0, True]}, r"tokens\['cu_seqlens'\] must be a list of ints >= 0, got \[0, True\]$"),
    ({"cu_seqlens": [0, 2.5]}, r"tokens\['cu_seqlens'\] must be a list of ints >= 0, got \[0, 2\.5\]$"),
    ({"cu_seqlens": [0, -3]}, r"tokens\['cu_seqlens'\] must be a list of ints >= 0, got \[0, -3\]$"),
    ({"cu_seqlens": [0, 5, 3]}, r"tokens\['cu_seqlens'\] must start at 0 and not decrease, .* got \[0, 5, 3\]$"),
    ({"cu_seqlens": [0, 2, 1, 4]}, r"tokens\['cu_seqlens'\] must start at 0 and not decrease, .* got \[0, 2, 1, 4\]$"),
    ({"cu_seqlens": [1, 5]}, r"tokens\['cu_seqlens'\] must start at 0 and not decrease, .* got \[1, 5\]$"),
    # a packed batch of no token: a layout of 0 positions, which a saved report could not be loaded with
    ({"cu_seqlens": [0, 0]}, r"tokens\['cu_seqlens'\] holds no token .* got \[0, 0\]$"),
    ({"lengths": [3]}, r"tokens: give both 'lengths' and 'seq_len'"),
    ({"seq_len": 3}, r"tokens: give both 'lengths' and 'seq_len'"),
    ({}, r"tokens: give both 'lengths' and 'seq_len'"),
    ({"lengths": [3], "seq_len": 3, "mask": 1}, r"tokens: unknown keys \['mask'\]"),
    (np.zeros((0, 3)), r"non-empty 2-D array .* got shape \(0, 3\) of float64$"),
    (np.zeros((2, 0), dtype=np.int64), r"non-empty 2-D array .* got shape \(2, 0\) of int64$"),
    ([[]], r"non-empty 2-D array .* got shape \(1, 0\)"),
    ([1, 1, 0], r"non-empty 2-D array .* got shape \(3,\)"),
]


@pytest.mark.parametrize("tokens, match", REFUSED)
def test_refused_layouts_name_what_is_wrong(tokens, match):
    with pytest.raises(ValueError, match=match):
        token_layout(tokens)


@pytest.mark.parametrize("tokens, match", REFUSED)
def test_measure_refuses_them_before_the_block(tokens, match):
    # measure validates tokens= when called, before anything is captured
    with pytest.raises(ValueError, match=match):
        roofline.measure(tokens=tokens)


@pytest.fixture(scope="module")
def block():
    torch = pytest.importorskip("torch")
    # datasheet ceilings, no timing: nothing here reads a time, and measuring the machine's ceilings takes seconds
    # one call over the 7 packed tokens: the layout describes it (a layout that matches no call is flagged)
    with roofline.measure(timing=None, ceilings="datasheet", tokens={"cu_seqlens": [0, 3, 3, 7]}) as r:
        torch.ones(7) + 1
    return r


def test_measure_keeps_the_layout_it_was_given(block):
    assert block.meta["tokens"] == _layout(1, 7, [3, 0, 4], True)
    u = block.useful_work()
    # a packed batch: 1 x 7 positions, all real
    assert (u["real_tokens"], u["positions"], u["padded_positions"]) == (7, 7, 0)


@pytest.mark.parametrize("tokens, real, positions", [
    ({"lengths": [1, 0], "seq_len": 1}, 1 + 0, 2 * 1),
    ({"cu_seqlens": [0, 5]}, 5, 1 * 5),
    ([[1]], 1, 1 * 1),
    ([[0, 1, 1], [1, 0, 0]], 2 + 1, 2 * 3),
])
def test_useful_work_reads_the_layout_given_to_it(block, tokens, real, positions):
    u = block.useful_work(tokens=tokens)
    assert (u["real_tokens"], u["positions"], u["padded_positions"]) == (real, positions, positions - real)


# one of each kind: seq_len 0, a bool length, a single boundary, a decreasing boundary, an empty mask
@pytest.mark.parametrize("tokens, match", [REFUSED[0], REFUSED[7], REFUSED[12], REFUSED[17], REFUSED[24]])
def test_useful_work_refuses_a_bad_layout(block, tokens, match):
    with pytest.raises(ValueError, match=match):
        block.useful_work(tokens=tokens)
