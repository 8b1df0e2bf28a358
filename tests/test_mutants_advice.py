"""The advice lines a report prints (roofline/render/_advice.py), word for word: a fusion opportunity's line (its
chain, where it ran, what fusing saves, what a compiled run did with it) and the hints' messages, from hand-made
findings whose figures are chosen here (the analyses that find them are tests/test_dataflow.py's and
tests/test_hints.py's). Sizes print in decimal units (2048 B is 2.05 KB)."""

import math

from roofline._analysis._dataflow import FusionOpportunity
from roofline._analysis._hints import Hint
from roofline.render import _advice


def _chain(modules, saved_s=0.002, compiled=None, compiled_saved=None):
    return FusionOpportunity(records=[0, 1], ops=["aten.mm.default", "aten.add.Tensor"], modules=modules,
                             kind="epilogue", intermediates=1, bytes=4096, saved_bytes=2048, t_before=0.003,
                             t_after=0.001, saved_s=saved_s, compiled=compiled, compiled_saved_bytes=compiled_saved)


def test_a_chain_in_one_module_names_it_once():
    assert _advice.describe(_chain(["Net.fc", "Net.fc"])) == ("mm -> add in Net.fc: saves 2.05 KB of 4.10 KB, "
                                                              "2.0 ms at the roof")
    # a chain of one call (one module): named once too
    one = _chain(["Net.fc"])
    assert _advice.describe(one).startswith("mm -> add in Net.fc: ")


def test_a_chain_across_modules_names_the_first_and_the_last():
    f = _chain(["Net.fc", "Net.mid", "Net.act"], saved_s=math.nan)  # no ceilings: no time
    assert _advice.describe(f) == "mm -> add in Net.fc .. Net.act: saves 2.05 KB of 4.10 KB"


def test_what_a_compiled_run_did_with_the_chain():
    assert _advice.describe(_chain(["A"], compiled="taken")) == ("mm -> add in A: saves 2.05 KB of 4.10 KB, 2.0 ms at "
                                                                 "the roof; compiled: taken")
    assert _advice.describe(_chain(["A"], compiled="partly", compiled_saved=1024)) == (
        "mm -> add in A: saves 2.05 KB of 4.10 KB, 2.0 ms at the roof; compiled: partly (keeps 1.02 KB of 2.05 KB on "
        "chip)")
    # kept bytes without a verdict are not shown (a compiled run's verdict comes with them)
    assert _advice.describe(_chain(["A"], compiled_saved=1024)) == ("mm -> add in A: saves 2.05 KB of 4.10 KB, 2.0 ms "
                                                                    "at the roof")


def _hint(kind, evidence, saved_s=0.001, saved_bytes=0, ops=()):
    return Hint(kind=kind, message="", saved_s=saved_s, saved_bytes=saved_bytes, evidence=evidence, ops=list(ops))


def test_layout_copies_list_the_four_largest_ops_largest_first():
    by_op = {"copy_": 1000, "clone": 5000, "cat": 3000, "contiguous": 2000, "permute": 4000}
    h = _hint("layout_copies", {"bytes": 15000, "share_of_bytes": 0.25, "by_op": by_op})
    assert _advice.message(h).startswith("layout copies move 15.00 KB, 25% of all bytes (clone 5.00 KB, permute "
                                         "4.00 KB, cat 3.00 KB, contiguous 2.00 KB): keep tensors")


def test_op_overhead_says_how_much_wall_time_is_outside_the_ops():
    # 3 ms of wall time, 1 ms of it in the ops: 2 ms outside them
    h = _hint("op_overhead", {"calls": 100, "median_t_min_s": 3e-6, "wall_s": 0.003, "ops_time_s": 0.001,
                              "overhead_per_call_s": 2e-5})
    assert _advice.message(h) == ("100 op calls with a median roofline time of 3.00 us take 3.0 ms of wall time "
                                  "(instrumentation removed), of which 2.0 ms is outside the ops' measured times: "
                                  "~20.0 us per call goes to launch and framework overhead; fewer, larger ops (a "
                                  "larger batch, torch.compile, CUDA graphs) recover it")


def _group(i, modules):
    return {"count": 1, "ops": ["aten.mm", "aten.add"], "kind": "epilogue", "phase": "forward",
            "saved_bytes": 1000, "saved_s": 0.001, "modules": modules}


def test_print_shows_the_five_largest_groups_and_hints_and_three_modules_of_each(monkeypatch):
    from test_mutants_render import timed

    mods = [["A"], ["A", "B", "C"], ["A", "B", "C", "D"], ["A"], ["A"], ["A"]]
    groups = [_group(i, m) for i, m in enumerate(mods)]  # six groups: five shown
    hints = [Hint(kind="k", message=f"m{i}", saved_s=0.0, saved_bytes=0, evidence={}) for i in range(6)]
    monkeypatch.setattr(_advice, "_advice_parts", lambda report: (groups, hints, []))
    text = str(timed())
    advice = text[text.index("fusion opportunities:"):].splitlines()
    # 6 chains of 1,000 B and 1 ms each: 6.00 KB and 6.0 ms in all
    assert advice[0] == "fusion opportunities: 6 chains could each run as one kernel, avoiding 6.00 KB and 6.0 ms at the roof"
    line = "     1 x mm -> add (epilogue, forward): saves 1.00 KB, 1.0 ms; in "
    assert advice[1:6] == [line + "A", line + "A, B, C", line + "A, B, C, ...", line + "A", line + "A"]
    assert advice[6:] == ["", "hints (most time saved first):"] + [f"  - [k] m{i}" for i in range(5)]
    # the notebook view: three of each, two modules
    html = timed()._repr_html_()
    assert html.count("<b>fuse</b>") == 3 and "; in A, B, ...</li>" in html and "; in A</li>" in html
    assert "[k] m2</li>" in html and "[k] m3" not in html
