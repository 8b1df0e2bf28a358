"""The command line: `python -m roofline profile` and `ceilings`."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("matplotlib")

from roofline import cli  # noqa: E402


def tiny(device, batch, seq, train):
    """A user callable for `profile module:callable`: returns (model, step)."""
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device)
    x = torch.randn(batch or 4, 32, device=device)

    def step():
        out = m(x)
        if train:
            out.sum().backward()

    return m, step


def test_profile_user_callable_with_plot_json_and_projection(tmp_path, capsys):
    png, js = tmp_path / "out.png", tmp_path / "r.json"
    rc = cli.main(["profile", "test_cli:tiny", "--train", "--plot", str(png), "--json", str(js),
                   "--project", "H100 SXM", "--by-module", "2"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "aten.addmm.default" in out and "projected onto H100 SXM" in out and "Sequential.0" in out
    assert png.read_bytes()[:4] == b"\x89PNG"
    data = json.loads(js.read_text())
    assert data["n_records"] > 0


def test_profile_bad_arguments_are_clear_errors(capsys):
    assert cli.main(["profile", "no_such_module:f"]) == 1
    assert "cannot import" in capsys.readouterr().err
    assert cli.main(["profile", "test_cli:tiny", "--batch", "0"]) == 1
    assert "--batch must be >= 1" in capsys.readouterr().err
    assert cli.main(["profile", "test_cli:tiny", "--project", "No Such GPU"]) == 1


def test_profile_resnet50_as_in_readme(tmp_path):
    """README's quickstart command, as a user runs it (one measured step after the default warm-up, to keep the
    suite short)."""
    out = tmp_path / "out.png"
    p = subprocess.run([sys.executable, "-m", "roofline", "profile", "resnet50", "--batch", "2", "--repeat", "1",
                        "--plot", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert "aten.convolution.default" in p.stdout and "compute" in p.stdout
    assert "1 warm-up step uncounted, then 1 measured step" in p.stderr
    assert out.stat().st_size > 10_000
