"""Parameter counts: total, trainable, frozen, bytes, per module, a shared (tied) parameter counted once; the
counts a report holds shown by print(r), the module table and the HTML module tree. Expected figures are
``sum(p.numel() for p in model.parameters())`` (torch yields a shared parameter once) and arithmetic written here."""

from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import roofline  # noqa: E402
from roofline._analysis import _parameters  # noqa: E402

V, D, H = 50, 8, 16  # vocabulary, width, MLP width


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(D)
        self.fc = nn.Linear(D, H)
        self.proj = nn.Linear(H, D)

    def forward(self, x):
        return x + self.proj(torch.relu(self.fc(self.ln(x))))


class TinyGPT(nn.Module):
    """GPT-2's layout: token and position embeddings, blocks, a final norm and a head tied to the embedding."""

    def __init__(self, tie=True):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.wpe = nn.Embedding(12, D)
        self.h = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)
        if tie:
            self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


# one block: LayerNorm 2D, fc D*H + H, proj H*D + D
BLOCK = 2 * D + (D * H + H) + (H * D + D)
# the model: wte V*D, wpe 12*D, two blocks, ln_f 2D; the tied head adds nothing
TIED_TOTAL = V * D + 12 * D + 2 * BLOCK + 2 * D


def test_a_tied_head_is_counted_once():
    m = TinyGPT()
    p = _parameters.count(m)
    assert p["total"] == TIED_TOTAL == sum(q.numel() for q in m.parameters())
    assert p["trainable"] == TIED_TOTAL and p["frozen"] == 0
    assert p["bytes"] == 4 * TIED_TOTAL  # float32
    assert p["tied"] == [["TinyGPT.wte.weight", "TinyGPT.lm_head.weight"]]
    mods = p["modules"]
    assert mods["TinyGPT"]["total"] == TIED_TOTAL
    # the head holds the shared weight: its subtree counts it (V*D), as the embedding's does
    assert mods["TinyGPT.lm_head"]["total"] == V * D == mods["TinyGPT.wte"]["total"]
    assert mods["TinyGPT.h"]["total"] == 2 * BLOCK and mods["TinyGPT.h.0"]["total"] == BLOCK
    assert mods["TinyGPT.h.1.fc"] == {"total": D * H + H, "trainable": D * H + H, "frozen": 0,
                                      "bytes": 4 * (D * H + H)}
    untied = TinyGPT(tie=False)
    assert _parameters.count(untied)["total"] == TIED_TOTAL + V * D == sum(q.numel() for q in untied.parameters())
    assert _parameters.count(untied)["tied"] == []


def test_frozen_dtypes_shared_modules_and_lazy_parameters():
    m = TinyGPT()
    m.wpe.weight.requires_grad_(False)
    m.h[0].half()
    shared = nn.Linear(D, D)  # one module registered under two names
    m.extra_a, m.extra_b = shared, shared
    p = _parameters.count(m)
    total = TIED_TOTAL + D * D + D
    assert p["total"] == total == sum(q.numel() for q in m.parameters())
    assert p["frozen"] == 12 * D and p["trainable"] == total - 12 * D
    assert p["bytes"] == 4 * (total - BLOCK) + 2 * BLOCK  # block 0 in float16
    assert p["by_dtype"] == {"float32": total - BLOCK, "float16": BLOCK}
    assert ["TinyGPT.extra_a.weight", "TinyGPT.extra_b.weight"] in p["tied"]
    assert p["modules"]["TinyGPT.extra_b"]["total"] == D * D + D
    assert p["modules"]["TinyGPT.h.0"]["bytes"] == 2 * BLOCK

    lazy = nn.Sequential(nn.LazyLinear(4), nn.Linear(4, 2))
    q = _parameters.count(lazy)
    assert q["total"] == 4 * 2 + 2 and q["uninitialized"] == ["Sequential.0.weight", "Sequential.0.bias"]
    named = _parameters.count(lazy, root="Net")["modules"]
    assert named.keys() == {"Net", "Net.0", "Net.1"} and named["Net.0"]["total"] == 0  # holds only a lazy one
    with pytest.raises(TypeError, match="nn.Module"):
        _parameters.count([torch.zeros(2)])


@pytest.mark.parametrize("bad", [None, 3, {"total": 1}, {"total": 2, "trainable": 1, "frozen": 0, "bytes": 8},
                                 {"total": -1, "trainable": 0, "frozen": -1, "bytes": 0},
                                 {"total": 1, "trainable": 1, "frozen": 0, "bytes": 4, "modules": {"a": {"total": "x"}}},
                                 {"total": 1, "trainable": 1, "frozen": 0, "bytes": 4, "tied": [[1]]},
                                 {"total": True, "trainable": 1, "frozen": 0, "bytes": 4}])
def test_malformed_counts_are_not_read(bad):
    assert _parameters.checked(bad) is None


@pytest.fixture(scope="module")
def report():
    m = TinyGPT()
    ids = torch.randint(0, V, (2, 6))
    fixed = roofline.Ceilings(device="cpu", name="fixed", fingerprint="fixed",
                              peaks={("vector", "float32"): roofline.Ceiling(1e10),
                                     ("matrix", "float32"): roofline.Ceiling(1e11)},
                              bandwidths={"DRAM": roofline.Ceiling(1e10)})
    with roofline.measure(m, ceilings=fixed) as r:
        m(ids)
    # what measure() stores at exit (the one call it makes)
    r.meta["parameters"] = _parameters.count(m)
    return r


def test_the_report_shows_them_in_its_summary_module_table_and_html(report):
    r = report
    assert r.parameters["total"] == TIED_TOTAL
    text = str(r)
    line = next(x for x in text.splitlines() if x.strip().startswith("parameters"))
    assert f"({TIED_TOTAL:,})" in line and "1 shared parameter counted once" in line
    assert "TinyGPT.wte.weight = TinyGPT.lm_head.weight" in line
    table = r.table("module", top=None).splitlines()
    assert table[0].split()[-1] == "params"
    row = next(x for x in table if x.strip().startswith("TinyGPT.h.0 "))
    assert row.split()[-1] == f"{BLOCK}"  # 304 parameters, shown as the number itself
    html = r.to_html()
    assert "<b>params</b>" in html
    assert f'title="{BLOCK:,} parameters ({BLOCK:,} trainable)' in html
    assert re.search(r'<td class="k">parameters</td><td>[^<]*' + re.escape(f"({TIED_TOTAL:,})"), html)
    # kept by a save and a load, and by a projection
    back = roofline.load(r.to_json())
    assert back.parameters == json.loads(json.dumps(r.parameters))
    assert r.project("H100 SXM").parameters["total"] == TIED_TOTAL


def test_a_report_without_counts_shows_none_and_a_malformed_one_says_so(report):
    r = roofline.load(report.to_json())
    r.meta.pop("parameters")
    assert r.parameters is None and "parameters" not in str(r) and "<b>params</b>" not in r.to_html()
    r.meta["parameters"] = {"total": "many"}
    assert r.parameters is None and 'unreadable (meta["parameters"] is malformed)' in str(r)
    assert "<b>params</b>" not in r.to_html()
