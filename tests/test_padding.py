"""Useful and padded work (Report.useful_work, measure(tokens=...)): the FLOPs spent on padded token positions and
real tokens per second, with the expected shares written as arithmetic."""

import json

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.nn import functional as F  # noqa: E402

import roofline  # noqa: E402

B, S, D, H, HEADS = 2, 48, 64, 160, 4


class Block(nn.Module):
    """Linear layers over every position, and attention over (B, heads, S, S) scores."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.up = nn.Linear(D, H)
        self.down = nn.Linear(H, D)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, s, D)
        return self.down(torch.relu(self.up(x + a)))


def _linear_share(u):
    rows = [v for k, v in u["by_op"].items() if k.split(".")[1] in ("addmm", "mm")]
    return sum(r["padding_flops"] for r in rows) / sum(r["flops"] for r in rows)


@pytest.fixture(scope="module")
def padded():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(B, S, D)
    mask = torch.ones(B, S, dtype=torch.long)
    mask[1, S // 2:] = 0  # the second sequence right-padded to half
    with roofline.measure(model, tokens=mask) as r:
        model(x).sum().backward()
    return r


def test_padded_batch_shares(padded):
    u = padded.useful_work()
    assert u["real_tokens"] == 48 + 24 == 72 and u["positions"] == 96 and u["padded_positions"] == 24
    assert _linear_share(u) == pytest.approx(24 / 96, rel=1e-12)
    # attention runs over S x S scores per sequence: the padded second sequence wastes 48^2 - 24^2 of them
    att = u["by_kind"]["attention"]
    assert att["calls"] > 0 and att["padding_flops"] / att["flops"] == pytest.approx(1 - (48**2 + 24**2) / (2 * 48**2))
    assert u["padding_flops"] == pytest.approx(u["by_kind"]["token"]["padding_flops"] + att["padding_flops"])
    assert u["useful_flops"] == pytest.approx(u["executed_flops"] - u["padding_flops"])
    assert u["executed_flops"] == padded.total_flops
    assert u["real_tokens_per_s"] == pytest.approx(72 / padded.wall_time)
    assert u["ambiguous"] == []
    assert "72 real of 96 positions" in str(padded) and "ran on padding" in str(padded)
    assert "72 real of 96 positions" in padded._repr_html_()


def test_the_same_tokens_packed_show_no_padding():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(1, 72, D)  # the 48 + 24 real tokens, one row
    with roofline.measure(model, tokens={"cu_seqlens": [0, 48, 72]}) as r:
        model(x).sum().backward()
    u = r.useful_work()
    assert u["real_tokens"] == 72 == u["positions"] and u["padding_flops"] == 0 and u["padding_share"] == 0


def test_layout_given_later_and_the_forms_agree(padded):
    by_mask = padded.useful_work([[1] * 48, [1] * 24 + [0] * 24])
    by_lengths = padded.useful_work({"lengths": [48, 24], "seq_len": 48})
    assert by_mask["padding_flops"] == by_lengths["padding_flops"] == padded.useful_work()["padding_flops"]
    causal = padded.useful_work(causal=True)["by_kind"]["attention"]
    assert causal["padding_flops"] / causal["flops"] == pytest.approx(
        1 - (48 * 49 + 24 * 25) / (2 * 48 * 49))


def test_tokens_survive_the_document_and_a_bad_one_is_refused(padded):
    back = roofline.load(padded.to_json())
    assert back.meta["tokens"] == padded.meta["tokens"]
    assert back.useful_work()["padding_flops"] == padded.useful_work()["padding_flops"]
    d = json.loads(padded.to_json())
    d["meta"]["tokens"]["lengths"] = [48, 60]
    with pytest.raises(ValueError, match=r"meta\.tokens\.lengths"):
        roofline.load(json.dumps(d))


@pytest.mark.parametrize("tokens, match", [
    (torch.ones(2, 3, 4), "2-D"),
    ([[1, 2, 0]], "0 \\(padding\\) and 1"),
    ({"lengths": [5], "seq_len": 4}, "<= seq_len"),
    ({"lengths": [3]}, "both 'lengths' and 'seq_len'"),
    ({"cu_seqlens": [0, 5, 3]}, "not decrease"),
    ({"cu_seqlens": [1, 5]}, "start at 0"),
    ({"mask": 1}, "unknown keys"),
    ("abc", "2-D"),
])
def test_bad_token_layouts_are_refused_at_the_boundary(tokens, match):
    with pytest.raises(ValueError, match=match):
        roofline.measure(tokens=tokens)


def test_useful_work_needs_a_layout():
    with roofline.measure() as r:
        torch.ones(3) + 1
    with pytest.raises(ValueError, match="which tokens are real"):
        r.useful_work()
    with pytest.raises(TypeError, match="causal"):
        r.useful_work({"lengths": [3], "seq_len": 3}, causal="yes")


def test_attention_mask_seen_on_the_models_first_call():
    """A Hugging Face model called with ``attention_mask=``: the block reads it from the call's keyword arguments
    (the package's global forward hook), without adding a hook to the model."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    ids = torch.randint(0, 64, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[0, 10:] = 0
    with roofline.measure(model) as r:
        assert not model._forward_pre_hooks and not model._forward_hooks
        model(input_ids=ids, attention_mask=mask)
    assert r.meta["tokens"] == {"batch": 2, "seq_len": 16, "lengths": [10, 16], "packed": False}
    assert 0 < r.useful_work()["padding_share"] < 1
    # an explicit layout wins; a model called without a mask gives none
    with roofline.measure(model, tokens={"lengths": [16, 16], "seq_len": 16}) as given:
        model(input_ids=ids, attention_mask=mask)
    assert given.meta["tokens"]["lengths"] == [16, 16]
    with roofline.measure(model) as none:
        model(input_ids=ids)
    assert "tokens" not in none.meta


def test_calls_over_other_sequences_and_integer_dims():
    """A vision tower's attention over its patches (not the batch's token sequence) has no padding; an integer
    position vector of length S is no weight, so S is not ambiguous."""
    from roofline._analysis import _padding

    b, s = 4, 56
    tower = _padding.shapes("f32[4,2,16,16], f32[4,2,16,16], f32[4,2,16,16]")
    assert _padding.classify("aten._scaled_dot_product_flash_attention_for_cpu.default", tower, b, s) == "other"
    lm = _padding.shapes("f32[4,2,56,16], f32[4,2,56,16], f32[4,2,56,16]")
    assert _padding.classify("aten._scaled_dot_product_flash_attention_for_cpu.default", lm, b, s) == "attention"
    assert _padding.classify("aten.addmm.default", _padding.shapes("f32[64], f32[224,32], f32[32,64]"), b, s) \
        == "token"
    assert _padding.classify("aten.mm.default", _padding.shapes("f32[64,224], f32[224,32]"), b, s) == "token"
    assert _padding.classify("aten.add_.Tensor", _padding.shapes("f32[64,32], f32[64,32]"), b, s) == "other"
    assert _padding.shapes("i64[56], f32[3,4], bf16[2], b8[5]", floating=True) == [(3, 4), (2,)]


def test_attention_written_out_and_the_optimizer():
    """Q K^T as a product of (.., S, d) and (.., d, S), the softmax over the scores and P V take the attention
    share; an optimizer step has no padding, and a weight dim equal to B x S is said to be ambiguous."""
    b, s, heads, d = 2, 8, 4, 32
    lengths = [8, 4]
    q = torch.randn(b, heads, s, d)
    with roofline.measure(timing=None, tokens={"lengths": lengths, "seq_len": s}) as r:
        torch.softmax(q @ q.transpose(-1, -2), dim=-1) @ q
    u = r.useful_work()
    share = 1 - sum(n * n for n in lengths) / (b * s * s)
    assert u["by_kind"]["attention"]["padding_flops"] == pytest.approx(share * u["executed_flops"])
    assert u["by_op"]["aten.bmm.default"]["padding_flops"] == pytest.approx(
        share * u["by_op"]["aten.bmm.default"]["flops"])
    assert u["by_op"]["aten._softmax.default"]["padding_flops"] == pytest.approx(
        share * u["by_op"]["aten._softmax.default"]["flops"])

    torch.manual_seed(0)
    lin = nn.Linear(32, b * s)  # its weight has the dim B x S = 16
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    with roofline.measure(lin, timing=None, tokens={"lengths": [8, 2], "seq_len": s}) as r:
        lin(torch.randn(b * s, 32)).sum().backward()
        opt.step()
    u = r.useful_work()
    assert u["by_op"]["aten.add_.Tensor"]["padding_flops"] == 0 and u["ambiguous"] == [b * s]
