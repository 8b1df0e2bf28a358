"""Parameter counts kept per model between blocks are never stale: every change that moves a count (a parameter
replaced, added or removed, a submodule added, replaced or removed, frozen or unfrozen, cast, resized, shared
differently) is seen, and a report keeps the counts of its own block. Expected figures are
``sum(p.numel() for p in model.parameters())`` (torch yields a shared parameter once) and arithmetic written here."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import roofline  # noqa: E402
from roofline._analysis import _parameters  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)             # 40
        self.fc = nn.Linear(4, 3)                  # 12 + 3
        self.head = nn.Linear(4, 10, bias=False)   # 40

    def forward(self, ids):
        x = self.emb(ids)
        return self.head(x) + self.fc(x).sum(-1, keepdim=True)


BASE = 40 + 15 + 40


def numel(m, trainable=None):
    return sum(p.numel() for p in m.parameters() if trainable is None or p.requires_grad == trainable)


def counted(m):
    """The counts, after checking that a second call with no change in between gives the same (a cache hit)."""
    first = _parameters.count(m)
    assert _parameters.count(m) == first
    return first


def test_every_change_that_moves_a_count_is_seen():
    m = Net()
    assert counted(m)["total"] == BASE == numel(m)

    # values written in place: no count moves, the kept counts are returned
    fp = _parameters.fingerprint(m)
    with torch.no_grad():
        m.fc.weight.mul_(3.0)
        m.emb.weight.normal_()
    assert _parameters.fingerprint(m) == fp and counted(m)["total"] == BASE

    # a parameter replaced by one of another shape: fc 4 -> 5 outputs, 20 + 5
    m.fc.weight = nn.Parameter(torch.zeros(5, 4))
    m.fc.bias = nn.Parameter(torch.zeros(5))
    assert counted(m)["total"] == 40 + 25 + 40 == numel(m)

    # added and removed
    m.fc.register_parameter("scale", nn.Parameter(torch.ones(7)))
    assert counted(m)["total"] == 40 + 25 + 7 + 40 == numel(m)
    assert counted(m)["modules"]["Net.fc"]["total"] == 25 + 7
    del m.fc.scale
    m.fc.bias = None  # a slot left empty
    assert counted(m)["total"] == 40 + 20 + 40 == numel(m)

    # frozen, then unfrozen
    m.emb.weight.requires_grad_(False)
    p = counted(m)
    assert (p["frozen"], p["trainable"]) == (40, 60) == (numel(m, False), numel(m, True))
    m.emb.weight.requires_grad_(True)
    assert counted(m)["frozen"] == 0

    # cast: float16 halves the bytes of what is cast (the head: 40 elements, 80 bytes instead of 160)
    m.head.half()
    p = counted(m)
    assert p["bytes"] == 4 * 60 + 2 * 40 and p["by_dtype"] == {"float32": 60, "float16": 40}
    m.head.float()
    assert counted(m)["bytes"] == 4 * 100

    # resized: .data set to a tensor of another shape, and resize_ in place on a frozen parameter
    m.head.weight.data = torch.zeros(10, 6)
    assert counted(m)["total"] == 40 + 20 + 60 == numel(m)
    m.head.weight.requires_grad_(False)
    with torch.no_grad():
        m.head.weight.resize_(10, 2)
    p = counted(m)
    assert p["total"] == 40 + 20 + 20 == numel(m) and p["frozen"] == 20

    # shared differently: the head tied to the embedding (same shape as it: 10 x 4), then untied again
    m.head.weight = m.emb.weight
    p = counted(m)
    assert p["total"] == 40 + 20 == numel(m) and p["tied"] == [["Net.emb.weight", "Net.head.weight"]]
    m.head.weight = nn.Parameter(torch.zeros(10, 4))
    p = counted(m)
    assert p["total"] == 40 + 20 + 40 == numel(m) and p["tied"] == []
    # the same shared parameter under another name: only the names move
    m.fc.register_parameter("shared", m.emb.weight)
    assert counted(m)["tied"] == [["Net.emb.weight", "Net.fc.shared"]]
    del m.fc.shared
    m.fc.register_parameter("other", m.emb.weight)
    p = counted(m)
    assert p["tied"] == [["Net.emb.weight", "Net.fc.other"]] and p["total"] == 100 == numel(m)
    del m.fc.other

    # a submodule added, shared under two names, replaced and emptied
    extra = nn.Linear(2, 2)  # 6
    m.a = extra
    assert counted(m)["total"] == 100 + 6 == numel(m)
    m.b = extra
    p = counted(m)
    assert p["total"] == 106 == numel(m) and p["modules"]["Net.b"]["total"] == 6
    m.b = nn.Linear(3, 3)  # 12: no longer shared
    assert counted(m)["total"] == 106 + 12 == numel(m)
    m.a = None
    p = counted(m)
    assert p["total"] == 100 + 12 == numel(m) and "Net.a" not in p["modules"]
    m.a, m.b = m.b, None  # the same module moved to the other, earlier slot: its name changes
    p = counted(m)
    assert p["total"] == 112 and p["modules"]["Net.a"]["total"] == 12 and "Net.b" not in p["modules"]

    # the root's name is part of what is kept
    assert _parameters.count(m, root="Model")["modules"].keys() >= {"Model", "Model.a"}


def test_the_returned_counts_are_a_copy_and_the_meta_device_is_counted():
    m = Net()
    p = _parameters.count(m)
    p["total"] = -1
    p["modules"]["Net.fc"]["total"] = -1
    p["by_dtype"]["float32"] = -1
    q = _parameters.count(m)
    assert q["total"] == BASE and q["modules"]["Net.fc"]["total"] == 15 and q["by_dtype"] == {"float32": BASE}
    m.to("meta")  # another device: the counts do not depend on it
    assert counted(m)["total"] == BASE == numel(m)


class OwnListing(Net):
    """Lists its parameters its own way: not fingerprinted, counted afresh every time."""

    def named_parameters(self, *args, **kwargs):
        yield from super().named_parameters(*args, **kwargs)


def test_models_the_fingerprint_cannot_see_are_counted_afresh():
    m = OwnListing()
    assert _parameters.fingerprint(m) is None
    assert counted(m)["total"] == BASE
    m.fc.weight = nn.Parameter(torch.zeros(5, 4))
    assert counted(m)["total"] == 40 + 20 + 3 + 40 == numel(m)  # fc weight 4x3 -> 5x4, its bias kept

    cyclic = nn.Sequential(nn.Linear(2, 2))
    cyclic.add_module("again", cyclic)  # holds itself below it: named_modules would never end
    assert _parameters.fingerprint(cyclic) is None
    with pytest.raises(TypeError, match="3 arguments"):
        roofline._core.module_fingerprint(m)

    lazy = nn.Sequential(nn.LazyLinear(4), nn.Linear(4, 2))
    assert _parameters.fingerprint(lazy) is None  # a parameter without a shape yet
    assert counted(lazy)["total"] == 4 * 2 + 2
    lazy(torch.zeros(1, 3))  # initialised: 3*4 + 4 more
    assert counted(lazy)["total"] == 4 * 3 + 4 + 4 * 2 + 2 == numel(lazy)


def test_each_report_keeps_the_counts_of_its_own_block():
    m = Net()
    ids = torch.randint(0, 10, (2, 3))
    with roofline.measure(m) as r1:
        m(ids)
    m.emb.weight.requires_grad_(False)
    m.fc = nn.Linear(4, 6)  # 24 + 6
    with roofline.measure(m) as r2:
        m(ids)
    assert r1.meta["parameters"]["total"] == BASE and r1.meta["parameters"]["frozen"] == 0
    assert r2.meta["parameters"]["total"] == 40 + 30 + 40 == numel(m)
    assert r2.meta["parameters"]["frozen"] == 40
    with roofline.measure(m) as r3:
        m(ids)
    assert r3.meta["parameters"] == r2.meta["parameters"]
    assert r3.meta["parameters"] is not r2.meta["parameters"]
