"""Regenerate docs/img/notebook.png, the notebook view shown in docs/quickstart.md.

Runs a small notebook in a Jupyter kernel (this interpreter; needs nbformat, nbclient, ipykernel, torch and
matplotlib), lays its cells and outputs out as one HTML page, and photographs the page with headless Chromium
(Debian's ``chromium`` package; ``CHROMIUM=/path/to/binary`` picks another). Also writes the page itself to
docs/img/notebook.html, to open in a browser (the module tree folds and unfolds, points show their tooltips).

    python docs/gen_notebook_png.py
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "img"

CELLS = [
    """import torch, roofline

class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))
    def forward(self, x):
        return x + self.mlp(self.norm(x))

class Net(torch.nn.Module):
    def __init__(self, d=256, n=2):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(n))
        self.head = torch.nn.Linear(d, 10)
    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)

torch.manual_seed(0)
model, x = Net(), torch.randn(64, 256)
with roofline.measure():  # warm-up
    model(x).sum().backward()
with roofline.measure(model, timing="op") as r:
    model(x).sum().backward()""",
    "r",
    "r.plot(by=\"module\", depth=3)",
]


def run_notebook(workdir: Path):
    import nbclient
    import nbformat

    spec = workdir / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(workdir / "jupyter")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                            resources={"metadata": {"path": str(workdir)}}).execute()
    return nb


def page(nb) -> str:
    """The executed notebook as one HTML page, laid out like Jupyter's: each cell's code, then its outputs."""
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>roofline in a notebook</title><style>"
             "body{font-family:sans-serif;margin:16px;max-width:1150px}"
             ".in{background:#f7f7f7;border:1px solid #e0e0e0;padding:6px 10px;font:12px monospace;"
             "white-space:pre;margin:10px 0 4px 0}.n{color:#888}"
             "</style></head><body>"]
    for i, cell in enumerate(nb.cells, 1):
        parts.append(f"<div class='in'><span class='n'>In [{i}]:</span> {html.escape(cell.source)}</div>")
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if "text/html" in data:
                parts.append(f"<div>{data['text/html']}</div>")
            elif "image/png" in data:
                parts.append(f"<img src='data:image/png;base64,{data['image/png']}'>")
            elif o.get("output_type") == "stream" and o.get("name") == "stdout":
                parts.append(f"<pre>{html.escape(o['text'])}</pre>")
    parts.append("</body></html>")
    return "".join(parts)


def screenshot(page_path: Path, png: Path, width: int = 1180, height: int = 2600):
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("headless Chromium is needed: apt-get install chromium (or set CHROMIUM)")
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={width},{height}", f"--screenshot={png}", page_path.as_uri()],
                   check=True, timeout=120, capture_output=True)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        nb = run_notebook(Path(tmp))
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1, f"the plot cell should draw one image, it drew {len(images)}"
    out_html = OUT / "notebook.html"
    out_html.write_text(page(nb))
    screenshot(out_html, OUT / "notebook.png")
    print(f"wrote {out_html.relative_to(ROOT)} and docs/img/notebook.png "
          f"({(OUT / 'notebook.png').stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
