"""docs/comparison.md cannot go stale silently: its ResNet-50 forward numbers for roofline and FlopCounterMode are
recomputed here (the fvcore and ptflops rows are not: those tools are optional)."""

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import roofline  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "comparison.md"


def _table():
    """{(tool, phase): {column: cell}} from the first text block whose first line is the table header."""
    for block in re.findall(r"```text\n(.*?)```", DOC.read_text(), flags=re.S):
        lines = block.strip("\n").splitlines()
        if lines and lines[0].startswith("tool "):
            head = re.split(r"\s{2,}", lines[0].strip())
            rows = {}
            for line in lines[2:]:
                cells = re.split(r"\s{2,}", line.strip())
                assert len(cells) == len(head), line
                row = dict(zip(head, cells))
                rows[row["tool"], row["phase"]] = row
            return rows
    raise AssertionError("no comparison table in docs/comparison.md")


def _count(cell):
    return int(cell.replace(",", ""))


def test_resnet50_forward_numbers_in_the_doc_are_current():
    rows = _table()
    # the same setting as bench/compare_counters.py: batch 1, 224x224, eval mode, autograd enabled
    torch.manual_seed(0)
    model, x = torchvision.models.resnet50().eval(), torch.randn(1, 3, 224, 224)
    with FlopCounterMode(display=False) as fcm:
        model(x)
    with roofline.measure(model) as r:
        model(x)
    assert _count(rows["FlopCounterMode", "forward"]["ResNet-50"]) == fcm.get_total_flops()
    assert _count(rows["roofline matrix FLOPs", "forward"]["ResNet-50"]) == r.matrix_flops
    assert _count(rows["roofline vector FLOPs", "forward"]["ResNet-50"]) == r.vector_flops
    assert _count(rows["roofline bytes", "forward"]["ResNet-50"]) == r.bytes
    # and the published figure the doc quotes: 4.09 GMACs = 8.18 GFLOPs
    assert round(r.matrix_flops / 2e9, 2) == 4.09
