"""Module names when the step calls the model's submodules without the root's forward (a VAE's encode() then decode()).

``measure(model)`` names the modules from the model's root (``"VAE.encoder.fc"``) whichever method the step calls;
FlopCounterMode names a module from the first module entered (``"Encoder.fc"`` when ``vae(x)`` is never called).
``Report.flop_counter_compatible()`` gives FlopCounterMode's keys; the expected dicts come from FlopCounterMode, run on
the same step in the test."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import roofline  # noqa: E402


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.mu = nn.Linear(16, 4)

    def forward(self, x):
        return self.mu(torch.relu(self.fc(x)))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)

    def forward(self, z):
        return self.fc(z)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Encoder()
        self.decoder = Decoder()

    def encode(self, x):
        return self.encoder(x)

    def decode(self, z):
        return self.decoder(z)

    def forward(self, x):
        return self.decode(self.encode(x))


def _vae_step(m, x):
    m.decode(m.encode(x)).sum().backward()


def _full_step(m, x):
    m(x).sum().backward()


def _fc_then_encoder(m, x):
    # the encoder's fc called on its own first (FlopCounterMode: "Linear"), then the encoder (it renames fc "Encoder.fc")
    m.encoder.fc(x).sum().backward()
    _vae_step(m, x)


def _fcm(step, m, x):
    with FlopCounterMode(display=False) as f:
        step(m, x)
    return {k: {op: int(n) for op, n in v.items()} for k, v in f.get_flop_counts().items()}


def _roofline(step, m, x):
    with roofline.measure(m) as r:
        step(m, x)
    return r


def _at_depth(counts, depth):  # FlopCounterMode's display depth: a name with d dots is d + 1 deep
    return {k: v for k, v in counts.items() if k.count(".") + 1 <= depth}


@pytest.fixture(scope="module")
def vae():
    torch.manual_seed(0)
    return VAE(), torch.randn(2, 8)


def test_root_not_called_keys_are_flop_counter_modes(vae):
    m, x = vae
    expected = _fcm(_vae_step, m, x)
    r = _roofline(_vae_step, m, x)
    assert set(expected) == {"Global", "Encoder", "Encoder.fc", "Encoder.mu", "Decoder", "Decoder.fc"}
    assert r.flop_counter_compatible() == expected
    for depth in (1, 2, 3):
        assert _at_depth(r.flop_counter_compatible(), depth) == _at_depth(expected, depth)
    # the report itself keeps the names from the root (docs/concepts.md, "Module names")
    names = {n for s in r.module_sets for n in s}
    assert names == {"Global", "VAE.encoder", "VAE.encoder.fc", "VAE.encoder.mu", "VAE.decoder", "VAE.decoder.fc"}
    assert r.meta["attribution"]["flop_counter_names"] == {
        "VAE.encoder": "Encoder", "VAE.encoder.fc": "Encoder.fc", "VAE.encoder.mu": "Encoder.mu",
        "VAE.decoder": "Decoder", "VAE.decoder.fc": "Decoder.fc"}
    assert "names_note" not in r.meta["attribution"]
    # the mapping travels with the document
    assert roofline.load(r.to_json()).flop_counter_compatible() == expected


def test_root_called_names_unchanged(vae):
    m, x = vae
    expected = _fcm(_full_step, m, x)
    r = _roofline(_full_step, m, x)
    assert "VAE.encoder.fc" in expected
    assert r.flop_counter_compatible() == expected
    assert "flop_counter_names" not in r.meta["attribution"]


def test_without_model_names_are_flop_counter_modes(vae):
    m, x = vae
    expected = _fcm(_vae_step, m, x)
    with roofline.measure() as r:
        _vae_step(m, x)
    assert r.flop_counter_compatible() == expected
    assert {n for s in r.module_sets for n in s} == set(expected)


def test_renamed_during_block_is_said(vae):
    m, x = vae
    expected = _fcm(_fc_then_encoder, m, x)
    # FlopCounterMode keys the first fc call under "Linear", the later ones under "Encoder.fc"
    assert {"Linear", "Encoder.fc"} <= set(expected)
    r = _roofline(_fc_then_encoder, m, x)
    got = r.flop_counter_compatible()
    assert got["Global"] == expected["Global"]
    a = r.meta["attribution"]
    assert a["flop_counter_names"]["VAE.encoder.fc"] == "Linear"  # the first name kept
    assert "VAE.encoder.fc" in a["names_note"]
    # the calls under both of FlopCounterMode's names are under the first one
    fc = {op: expected["Linear"].get(op, 0) + expected["Encoder.fc"].get(op, 0)
          for op in set(expected["Linear"]) | set(expected["Encoder.fc"])}
    assert got["Linear"] == fc
