"""Mutation testing of the package's Python formulas and analyses: how many small faults do the tests catch?

The modules mutated (TARGETS, each with the functions whose bodies are mutated, and TESTS, the pytest subset that
judges its mutants): the report roll-ups and the classification (roofline/_analysis/_rollup.py, roofline/_analysis/_classification.py
and what roofline/report.py still computes itself), the Python cost formulas (_formulas.py), ``roofline.cost``'s
argument handling and shape inference (_spec.py), the dataflow and fusion opportunities (_dataflow.py), the cache
model (_cache_model.py), the hints (_hints.py), the steady-state profile (_steady.py), the collectives' counts and
the merged distributed report (_collectives.py, distributed.py), the LLM formulas (llm.py), the projection's
assumptions (_assumptions.py), the contention reading (_contention.py), the compiled-kernel views
(_fusion_compiled.py, _compiled_view.py), the SDPA backend rules (_sdpa.py), the padding analysis and the token
masks it reads (_padding.py, _tokens.py), the report document's writer and reader (_export.py), the module tree and
groups of the tables and charts (_groups.py), the network view (_network.py), and the step loops: the monitor
(_monitor.py), the profiler and its schedule (_schedule.py), the trainer callbacks' shared run
(integrations/_run.py) and the Hugging Face and Lightning callbacks (integrations/huggingface.py,
integrations/lightning.py), every method of the report (report.py), the text, HTML, SVG and trace views and the chart
model, advice and summary they share (render/*), the recovery of graphs compiled before a block
(_compiled/_recover.py) and the capture session (_capture/: the session, its op table, recording, dispatch modes,
module tracking and stack of open blocks).

Each mutant changes one node of the syntax tree inside one of the functions of TARGETS:

  - arithmetic: + -> - *,  - -> +,  * -> / +,  / -> *,  // -> *,  & -> |,  | -> &  (also in augmented assignments);
  - comparisons: < -> <= >,  <= -> < >,  > -> >= <,  >= -> > <,  == -> !=,  != -> ==,  in <-> not in,
    is <-> is not;  and <-> or;  a unary minus or `not` removed;
  - constants: an integer n -> n+1 and n-1 (0 -> 1 only), 0.0 -> 1.0, 1.0 -> 0.0 2.0, another float x -> x +- 0.1,
    True <-> False (strings and None are left alone).

One parent process imports NumPy, pytest, torch (when installed) and the package once; each mutant runs in a
forked child that executes the mutated module in a scratch module and gives every function and method of the loaded
one the mutated code (swapped in the function objects, so names imported elsewhere, inherited methods and
registries all run it; a wrapper's wrapped function included), then runs the tests of its file that reach it (-x: the first failure kills; POSIX only), in a scratch working
directory (files a mutant writes to relative paths do not land in the source tree).
Which tests reach a mutant is found once per test subset: the subset runs on the unmutated modules it judges with a
line tracer, and a mutant is judged by the tests that execute a line of its statement, or by every test that uses a
module-, class- or session-scoped fixture whose setup or teardown executes one (such a fixture runs in the setup of
the first test that uses it, for all of them, in any file); a test that sets a trace function of its own (an interrupt
on a chosen line) has it chained after the line tracer, which goes on recording; a mutant no test reaches survives
without a run; --all-tests judges each by the whole subset. A function the module runs only on import (a constant
computed once) is swapped too, but the module keeps the value computed on import: its mutants are judged through the
tests that call it. A name defined twice (a function that a ``functools.wraps`` wrapper of the same name replaces,
a property's getter) has each definition mutated: the earlier ones as ``name#1``, ``name#2``. Survivors are listed with their file, function, line and
change; known equivalent mutants can be listed in the same file as bench/mutate_c.py's (--equivalent).

    python bench/mutate_py.py                                # all mutants of every target (hours)
    python bench/mutate_py.py --sample 30 --seed 2           # a quick look
    python bench/mutate_py.py --files _classification.py    # one file
    python bench/mutate_py.py --files _hints.py --sample 40  # a sample of one file
    python bench/mutate_py.py --func roofline_row --list     # list the mutants of one function
    python bench/mutate_py.py --files _hints.py --keys run.log  # rerun the survivors an earlier run printed

A full run takes a few seconds per mutant (a fork and a pytest run of the file's TESTS): run one file at a time,
under `nice`, in the background. Build the extension in place first (python setup.py build_ext --inplace).
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import signal
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutate_c import ROOT, load_equivalent, progress, report  # noqa: E402

# file under roofline/ -> the functions (qualified names) whose bodies are mutated; "*" stands for every function and
# method of the module (module level and one class level deep)
ALL = "*"
TARGETS = {
    "_analysis/_rollup.py": ["exact_sum", "count_totals", "times", "unknown_ops", "errors", "phase_mask", "module_members",
                   "group_masks", "counts_by", "counts_by_phase", "peak_time", "group_bound", "roofline_row",
                   "roofline_by", "roofline_totals", "flop_counter_counts"],
    "_analysis/_classification.py": ["resolve_ceilings", "peaks", "classify", "Classifier.__init__", "Classifier.resolve",
                           "Classifier.classification"],
    "report.py": [ALL],
    "_datamodel/_records.py": ["DerivedCounts.bytes", "DerivedCounts.intensity", "intensity"],
    "_counting/_formulas.py": [ALL],
    "_counting/_formula_base.py": [ALL],
    "_counting/_formulas_values.py": [ALL],
    "_counting/_formulas_nn.py": [ALL],
    "_counting/_formulas_products.py": [ALL],
    "_counting/_formulas_linalg.py": [ALL],
    "_counting/_cost.py": [ALL],
    "_analysis/_dataflow.py": [ALL],
    "_analysis/_cache_model.py": [ALL],
    "_analysis/_hints.py": [ALL],
    "_loops/_steady.py": [ALL],
    "_capture/_collectives.py": [ALL],
    "distributed.py": [ALL],
    # the closed-form counts and the step counting; not the functions that run a transformers model (prefill,
    # repeat_cache, decode_step, time_step, _cuda_sync, _model_device, _cache_argument: device work, no formula)
    "llm.py": ["DecoderConfig.__post_init__", "DecoderConfig.from_hf", "DecoderConfig.of", "DecoderConfig.q_dim",
               "DecoderConfig.kv_dim", "DecoderConfig.mlp_matrices", "DecoderConfig.layer_matmul_params",
               "DecoderConfig.layer_other_params", "DecoderConfig._norm_params", "DecoderConfig.lm_head_params",
               "DecoderConfig.embedding_params", "_is_module", "param_count", "matmul_param_count", "_pairs",
               "_sequences", "attention_flops", "forward_flops", "training_flops", "_itemsize", "kv_cache_bytes",
               "decode_step_bytes", "decode_step_flops", "tokens_per_second", "CrossCheck.ok", "CrossCheck.__bool__",
               "CrossCheck.__str__", "cross_check", "predict_decode", "_hf_config", "count_step",
               "step_utilization"],
    "_analysis/_assumptions.py": [ALL],
    "_hardware/_contention.py": [ALL],
    "_analysis/_fusion_compiled.py": [ALL],
    "_analysis/_compiled_view.py": [ALL],
    "_capture/_sdpa.py": [ALL],
    "_analysis/_padding.py": [ALL],
    "_datamodel/_tokens.py": [ALL],
    "_io/_export.py": [ALL],
    "_analysis/_groups.py": [ALL],
    "_analysis/_network.py": [ALL],
    "_loops/_monitor.py": [ALL],
    "_loops/_schedule.py": [ALL],
    "integrations/_run.py": [ALL],
    "render/_render.py": [ALL],
    "render/_svg.py": [ALL],
    "render/_tables.py": [ALL],
    "render/_trace.py": [ALL],
    "render/_style.py": [ALL],
    "render/_chart.py": [ALL],
    "render/_advice.py": [ALL],
    "render/_text.py": [ALL],
    "render/_assumptions.py": [ALL],
    "render/_devices_table.py": [ALL],
    "render/_ceilings_table.py": [ALL],
    "render/_formats.py": [ALL],
    "_compiled/_recover.py": [ALL],
    "_capture/_session.py": [ALL],
    "_capture/_optable.py": [ALL],
    "_capture/_recording.py": [ALL],
    "_capture/_modes.py": [ALL],
    "_capture/_tracking.py": [ALL],
    "_capture/_modestack.py": [ALL],
    "render/_plotly.py": [ALL],
    "render/_kernels.py": [ALL],
    "render/_merged.py": [ALL],
    "render/_matplotlib.py": [ALL],
    "integrations/huggingface.py": [ALL],
    "integrations/lightning.py": [ALL],
}
_ROLLUP_TESTS = ["tests/test_mutants_rollup.py", "tests/test_rollups_exact.py", "tests/test_classify_exact.py"]
# file under roofline/ -> the tests its mutants are judged by (paths or pytest node ids from the repository root),
# the quick killers first (-x stops at the first failure)
K = "tests/test_mutant_killers.py::"
_FORMULA_TESTS = [K + "TestAttentionPairs", "tests/test_coverage_formulas.py", "tests/test_formulas_sweep.py",
                  "tests/test_quantized.py", "tests/test_mutants_formulas.py"]
# the capture session (the op table, the recording, the dispatch modes, the module tracking, the stack of open blocks)
_HT = "tests/test_hardening_tokens.py::"
_CAPTURE_TESTS = ["tests/test_step_time_ops.py", "tests/test_step_load.py", "tests/test_cuda_untouched.py", "tests/test_mutants_capture3.py", "tests/test_mutants_capture2.py", "tests/test_mutants_capture.py",
                  "tests/test_measure.py",
                  "tests/test_recorder_capture.py", "tests/test_hardening_capture.py", "tests/test_block_state.py", "tests/test_tracking.py",
                  # a collective's marker on the Python path (an FSDP copy, without a process group)
                  "tests/test_mutants_collectives.py::test_fsdp_copy_counts_bytes_not_flops",
                  # the token layout a block reads from its model's attention_mask or cu_seq_lens_q
                  _HT + "test_attention_mask_detection_records_none_of_its_own_ops",
                  _HT + "test_packed_batch_detection_records_none_of_its_own_ops",
                  _HT + "test_a_mask_changed_in_place_in_the_block_is_read_as_it_was_passed",
                  _HT + "test_fake_and_meta_masks_of_the_model_give_no_layout_and_say_why",
                  "tests/test_padding.py::test_attention_mask_seen_on_the_models_first_call"]
TESTS = {
    "_analysis/_rollup.py": _ROLLUP_TESTS,
    "_analysis/_classification.py": _ROLLUP_TESTS,
    "report.py": ["tests/test_mutants_rerun_c.py", "tests/test_mutants_report_api.py", "tests/test_mutants_report.py"] + _ROLLUP_TESTS + ["tests/test_output.py"],
    "_datamodel/_records.py": _ROLLUP_TESTS,
    "_counting/_formulas.py": _FORMULA_TESTS,
    "_counting/_formula_base.py": _FORMULA_TESTS,
    "_counting/_formulas_values.py": _FORMULA_TESTS,
    "_counting/_formulas_nn.py": _FORMULA_TESTS,
    "_counting/_formulas_products.py": _FORMULA_TESTS + ["tests/test_scaled_products.py"],
    "_counting/_formulas_linalg.py": _FORMULA_TESTS,
    "_counting/_cost.py": [K + "TestSpec", "tests/test_cost_table.py", "tests/test_cost_branches.py", "tests/test_cost_reentry.py",
                 "tests/test_arguments.py"],
    "_analysis/_dataflow.py": [K + "TestDataflow", "tests/test_dataflow.py", "tests/test_hints.py", K + "TestHints",
                              "tests/test_mutants_hints.py"],
    "_analysis/_cache_model.py": [K + "TestCacheModel", "tests/test_dataflow.py"],
    "_analysis/_hints.py": [K + "TestHints", "tests/test_hints.py", "tests/test_dataflow.py", "tests/test_mutants_hints.py"],
    "_loops/_steady.py": [K + "TestSteady", "tests/test_steady.py", "tests/test_mutants_steady.py",
                   "tests/test_mutants_loops.py::TestSteadyLoaded", "tests/test_step_time.py",
                   "tests/test_step_time_spin.py", "tests/test_loops_formulas.py", "tests/test_mutants_rerun_d.py",
                   "tests/test_step_time_ops.py", "tests/test_steady_seconds.py", "tests/test_step_load.py"],
    "_capture/_collectives.py": ["tests/test_mutants_collectives.py", "tests/test_distributed.py"],
    "distributed.py": ["tests/test_mutants_distributed.py", "tests/test_distributed.py"],
    "llm.py": [K + "TestLLM", "tests/test_mutants_llm.py", "tests/test_llm.py"],
    "_analysis/_assumptions.py": [K + "TestAssumptions", "tests/test_sdpa_rules.py", "tests/test_sdpa_redirect.py"],
    "_hardware/_contention.py": [K + "TestContention", "tests/test_mutants_contention.py", "tests/test_contention.py",
                                 "tests/test_step_time_ops.py", "tests/test_step_load.py", "tests/test_step_time.py"],
    "_analysis/_fusion_compiled.py": [K + "TestFusionCompiled", "tests/test_fusion_compiled.py"],
    "_analysis/_compiled_view.py": [K + "TestCompiledView", "tests/test_mutants_compiled_view.py", "tests/test_compiled.py"],
    "_capture/_sdpa.py": ["tests/test_mutants_sdpa.py", "tests/test_sdpa_rules.py", "tests/test_sdpa_redirect.py"],
    "_analysis/_padding.py": ["tests/test_mutants_padding.py", "tests/test_padding.py", "tests/test_hardening_tokens.py"],
    "_datamodel/_tokens.py": ["tests/test_mutants_tokens.py", "tests/test_hardening_tokens.py", "tests/test_padding.py"],
    "_io/_export.py": ["tests/test_mutants_rerun_c.py", "tests/test_hardening_export.py", "tests/test_hardening_tokens.py", "tests/test_documents.py",
                      "tests/test_report.py"],
    "_analysis/_groups.py": ["tests/test_mutants_groups.py", "tests/test_one_definition.py", "tests/test_html.py", "tests/test_rollups_exact.py",
                            "tests/test_report.py"],
    "_analysis/_network.py": ["tests/test_mutants_network.py", "tests/test_one_definition.py", "tests/test_distributed.py"],
    "_loops/_monitor.py": ["tests/test_monitor.py", "tests/test_hardening_loops.py", "tests/test_loops_formulas.py",
                           "tests/test_mutants_rerun_d.py"],
    "_loops/_schedule.py": ["tests/test_mutants_schedule.py", "tests/test_schedule.py", "tests/test_monitor.py",
                            "tests/test_hardening_loops.py"],
    "integrations/_run.py": ["tests/test_mutants_loops.py", "tests/test_hardening_loops.py",
                              "tests/test_integrations_hf.py", "tests/test_integrations_lightning.py",
                              "tests/test_step_time_spin.py", "tests/test_logged_yardstick.py",
                              "tests/test_mutants_rerun_d.py"],
    "integrations/huggingface.py": ["tests/test_mutants_hf.py", "tests/test_integrations_hf.py",
                                    "tests/test_hardening_loops.py"],
    "integrations/lightning.py": ["tests/test_mutants_lightning.py", "tests/test_integrations_lightning.py",
                                  "tests/test_hardening_loops.py"],
    "render/_render.py": ["tests/test_mutants_render.py", "tests/test_mutants_rerun_c.py", "tests/test_output.py",
                          "tests/test_steady_seconds.py"],
    "render/_svg.py": ["tests/test_mutants_svg.py", "tests/test_mutants_chart.py", "tests/test_output.py"],
    "render/_tables.py": ["tests/test_mutants_render.py"],
    "render/_trace.py": ["tests/test_mutants_trace.py", "tests/test_output.py"],
    "render/_style.py": ["tests/test_mutants_render.py"],
    "render/_chart.py": ["tests/test_mutants_chart.py", "tests/test_mutants_svg.py", "tests/test_render_chart.py",
                         "tests/test_output.py"],
    "render/_advice.py": ["tests/test_mutants_advice.py", "tests/test_mutants_hints.py", "tests/test_hints.py",
                          "tests/test_dataflow.py", "tests/test_one_definition.py"],
    "render/_text.py": ["tests/test_mutants_advice.py", "tests/test_output.py", "tests/test_mutants_report_api.py"],
    "render/_assumptions.py": ["tests/test_mutants_render_a.py", K + "TestAssumptions", "tests/test_steady.py"],
    "render/_devices_table.py": ["tests/test_mutants_render_a.py", "tests/test_devices.py"],
    "render/_ceilings_table.py": ["tests/test_mutants_render_a.py", "tests/test_ceilings_cpu.py"],
    "render/_formats.py": ["tests/test_mutants_render_a.py", "tests/test_save_formats.py"],
    "_compiled/_recover.py": ["tests/test_mutants_recover.py", "tests/test_mutants_recover_backend.py",
                              "tests/test_hardening_capture.py::test_a_recompilation_that_differs_names_what_was_tried",
                              "tests/test_hardening_capture.py::test_compiled_before_the_block_under_autocast_is_recovered",
                              "tests/test_compiled_before.py"],
    "_capture/_session.py": _CAPTURE_TESTS,
    "_capture/_optable.py": _CAPTURE_TESTS,
    "_capture/_recording.py": _CAPTURE_TESTS,
    "_capture/_modes.py": _CAPTURE_TESTS,
    "_capture/_tracking.py": _CAPTURE_TESTS,
    "_capture/_modestack.py": _CAPTURE_TESTS,
    "render/_plotly.py": ["tests/test_mutants_render_b.py", "tests/test_render_chart.py", "tests/test_html.py"],
    "render/_kernels.py": ["tests/test_mutants_render_b.py", "tests/test_mutants_compiled_view.py",
                           "tests/test_mutants_report_api.py", "tests/test_compiled.py"],
    # (not tests/test_distributed.py: its module fixture runs a two-process job, which would judge every mutant)
    "render/_merged.py": ["tests/test_mutants_render_b.py", "tests/test_mutants_distributed.py"],
    "render/_matplotlib.py": ["tests/test_mutants_render_b.py", "tests/test_render_chart.py", "tests/test_html.py"],
}

BINOPS = {ast.Add: [ast.Sub, ast.Mult], ast.Sub: [ast.Add], ast.Mult: [ast.Div, ast.Add], ast.Div: [ast.Mult],
          ast.FloorDiv: [ast.Mult], ast.BitAnd: [ast.BitOr], ast.BitOr: [ast.BitAnd]}
CMPOPS = {ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.Gt], ast.Gt: [ast.GtE, ast.Lt],
          ast.GtE: [ast.Gt, ast.Lt], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.In: [ast.NotIn],
          ast.NotIn: [ast.In], ast.Is: [ast.IsNot], ast.IsNot: [ast.Is]}
BOOLOPS = {ast.And: [ast.Or], ast.Or: [ast.And]}
SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.BitAnd: "&",
          ast.BitOr: "|", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
          ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.And: "and", ast.Or: "or",
          ast.USub: "-", ast.Not: "not"}


@dataclass
class PyMutant:
    file: str
    func: str
    line: int
    col: int
    index: int      # position of the node in ast.walk order of the module
    what: str       # "binop", "cmp:<k>", "boolop", "unary", "const"
    orig: str
    new: str
    line_text: str
    new_value: object = None
    target: str = ""  # the TARGETS key: the file's path under roofline/ (``file`` is its name, as the keys show it)
    # lines of which a test must execute one for the mutated node to run: from its innermost enclosing statement's
    # first line to the node's last line; None when the node is outside the function's body (a default value, a
    # decorator: evaluated at import), so that every test judges it
    reach: tuple | None = None

    @property
    def key(self) -> str:
        return f"{self.file}:{self.func}:{self.line_text.strip()}@{self.col}:{self.orig}->{self.new}"

    def where(self) -> str:
        return f"{self.file}:{self.line} ({self.func}) {self.orig} -> {self.new}   | {self.line_text.strip()}"


def _const_mutants(v):
    if isinstance(v, bool):
        return [not v]
    if isinstance(v, int):
        return [v + 1] + ([v - 1] if v > 0 else [])
    if isinstance(v, float):
        if v == 0.0:
            return [1.0]
        if v == 1.0:
            return [0.0, 2.0]
        return [round(v + 0.1, 12), round(v - 0.1, 12)]
    return []


def _functions(tree):
    """qualname -> FunctionDef node, for module-level functions and methods of module-level classes. A name defined
    more than once in one namespace (a function that a ``functools.wraps`` wrapper of the same name replaces, a
    property's getter before its setter) keeps every definition: the last under the plain name, the earlier ones as
    ``name#1``, ``name#2``, ... in order (the substitution reaches them through the wrapper's ``__wrapped__`` or the
    property)."""
    out = {}

    def add(qual, node):
        if qual in out:
            earlier = [out.pop(qual)] + [out.pop(k) for k in [k for k in out if k.startswith(qual + "#")]]
            for k, n in enumerate(sorted(earlier, key=lambda n: n.lineno), 1):
                out[f"{qual}#{k}"] = n
        out[qual] = node

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            add(node.name, node)
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    add(f"{node.name}.{sub.name}", sub)
    return out


def _statements(fn) -> dict:
    """id(node) -> the innermost statement of ``fn``'s body that contains it (nodes of nested functions' default
    values included, which run when the enclosing statement runs); nodes outside the body are absent."""
    out = {}

    def visit(node, stmt):
        for child in ast.iter_child_nodes(node):
            own = child if isinstance(child, ast.stmt) else stmt
            out[id(child)] = own
            visit(child, own)

    for st in fn.body:
        out[id(st)] = st
        visit(st, st)
    return out


def find_mutants(path: Path, functions, target: str = "") -> list[PyMutant]:
    src = path.read_text()
    lines = src.split("\n")
    tree = ast.parse(src)
    index = {id(n): i for i, n in enumerate(ast.walk(tree))}
    funcs = _functions(tree)
    if ALL in functions:
        functions = list(funcs)
    out = []
    for qual in functions:
        fn = funcs.get(qual)
        if fn is None:
            raise SystemExit(f"no function {qual} in {path}")
        skip = set()
        annotations = [a.annotation for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs,
                                               fn.args.vararg, fn.args.kwarg) if a is not None and a.annotation]
        annotations += [fn.returns] if fn.returns else []
        annotations += [n.annotation for n in ast.walk(fn) if isinstance(n, ast.AnnAssign)]
        for a in annotations:  # type annotations: not evaluated at run time here
            skip.update(id(n) for n in ast.walk(a))
        for node in ast.walk(fn):
            if isinstance(node, ast.JoinedStr):  # f-strings: text, not logic
                skip.update(id(n) for n in ast.walk(node))
            if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                skip.add(id(node.value))
        stmt_of = _statements(fn)
        for node in ast.walk(fn):
            if id(node) in skip or not hasattr(node, "lineno"):
                continue
            st = stmt_of.get(id(node))
            reach = (st.lineno, max(node.end_lineno or node.lineno, st.lineno)) if st is not None else None
            base = dict(file=path.name, target=target or path.name, func=qual, line=node.lineno, col=node.col_offset, index=index[id(node)],
                        line_text=lines[node.lineno - 1], reach=reach)
            if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOPS:
                for new in BINOPS[type(node.op)]:
                    out.append(PyMutant(what="binop", orig=SYMBOL[type(node.op)], new=SYMBOL[new], new_value=new,
                                        **base))
            elif isinstance(node, ast.Compare):
                for k, op in enumerate(node.ops):
                    for new in CMPOPS.get(type(op), []):
                        out.append(PyMutant(what=f"cmp:{k}", orig=SYMBOL[type(op)], new=SYMBOL[new], new_value=new,
                                            **base))
            elif isinstance(node, ast.BoolOp):
                for new in BOOLOPS[type(node.op)]:
                    out.append(PyMutant(what="boolop", orig=SYMBOL[type(node.op)], new=SYMBOL[new], new_value=new,
                                        **base))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
                out.append(PyMutant(what="unary", orig=SYMBOL[type(node.op)] + " x", new="x", **base))
            elif isinstance(node, ast.Constant) and not isinstance(node.value, (str, bytes)) and node.value is not None:
                for new in _const_mutants(node.value):
                    out.append(PyMutant(what="const", orig=repr(node.value), new=repr(new), new_value=new, **base))
    return out


class _Replace(ast.NodeTransformer):
    def __init__(self, target, replacement):
        self.target, self.replacement = target, replacement

    def visit(self, node):
        if node is self.target:
            return self.replacement
        return super().visit(node)


def apply(path: Path, m: PyMutant) -> str:
    tree = ast.parse(path.read_text())
    node = list(ast.walk(tree))[m.index]
    if m.what in ("binop", "boolop"):
        node.op = m.new_value()
    elif m.what.startswith("cmp:"):
        node.ops[int(m.what[4:])] = m.new_value()
    elif m.what == "const":
        node.value = m.new_value
    elif m.what == "unary":
        tree = _Replace(node, node.operand).visit(tree)
    ast.fix_missing_locations(tree)
    return ast.unparse(tree)


def _plain(f):
    """The function objects behind a module or class attribute (a staticmethod's, classmethod's or property's
    functions, a wrapper and the function it wraps, an lru_cache's wrapped function), as a list."""
    if isinstance(f, (staticmethod, classmethod)):
        return _plain(f.__func__)
    if isinstance(f, property):
        return [g for h in (f.fget, f.fset, f.fdel) if h is not None for g in _plain(h)]
    wrapped = getattr(f, "__wrapped__", None)
    if isinstance(f, types.FunctionType):
        # a wrapper function (functools.wraps: contextlib.contextmanager's, torch's around a dispatch mode's
        # __torch_dispatch__) is followed to the function it wraps, whose code is the module's
        return [f] + (_plain(wrapped) if wrapped is not None and wrapped is not f else [])
    return _plain(wrapped) if wrapped is not None else []


def _swap(old_ns, new_ns, filename, seen) -> None:
    """Give each function of ``old_ns`` (a module's or a class's namespace, classes recursively) the code and
    default values of its namesake in ``new_ns``."""
    for k, nv in list(new_ns.items()):
        ov = old_ns.get(k)
        if ov is None or ov is nv or id(ov) in seen:
            continue
        seen.add(id(ov))
        if isinstance(nv, type) and isinstance(ov, type):
            if getattr(nv, "__module__", None) == getattr(ov, "__module__", None):
                _swap(vars(ov), vars(nv), filename, seen)
            continue
        for of, nf in zip(_plain(ov), _plain(nv)):
            if of.__code__.co_filename != filename or nf.__code__.co_filename != filename:
                continue  # generated code (a dataclass's __init__), not the file's
            of.__code__ = nf.__code__
            of.__defaults__, of.__kwdefaults__ = nf.__defaults__, nf.__kwdefaults__


def substitute(path: Path, text: str) -> types.ModuleType:
    """Make the package run `text` (the module of `path`, roofline/<name>.py, mutated) in place of the module's
    code: `text` is executed once in a scratch module, and every function and method of the loaded module (and of
    its classes) takes the code and default values of its namesake there. Code is swapped in the function objects
    themselves, so every reference to them sees the mutant: names imported elsewhere, a subclass's inherited
    methods, registries. The loaded module stays in sys.modules; what its module-level code does on import (a
    registry filled) is done once more by the scratch module."""
    import importlib

    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    old = importlib.import_module(name)
    scratch = types.ModuleType(name)
    scratch.__file__ = str(path)
    scratch.__package__ = name.rpartition(".")[0]
    exec(compile(text, str(path), "exec"), scratch.__dict__)
    _swap(vars(old), vars(scratch), str(path), set())
    return old


class _Select:
    """pytest plugin: keep only the tests whose node ids are in ``wanted`` (the tests that reach a mutant)."""

    def __init__(self, wanted):
        self.wanted = wanted

    def pytest_collection_modifyitems(self, config, items):
        keep = [it for it in items if it.nodeid in self.wanted]
        config.hook.pytest_deselected(items=[it for it in items if it.nodeid not in self.wanted])
        items[:] = keep


class _Lines:
    """pytest plugin: the lines of some files (``filenames``) each test executes, setup and teardown included:
    ``{file: {node id: [line, ...]}}``, written as JSON to ``out`` at the end of the session (one traced run serves
    every target judged by the same tests).

    A fixture wider than a function (module, class, session scope) runs once, in the setup of the first test that
    asks for it and the teardown of the last; every other test that uses it depends on what it did all the same, in
    whatever file it is (a session fixture of conftest.py). So the lines a test's setup and teardown execute when it
    uses such fixtures are written apart, for each of those fixtures (``shared``), and credited to every test that
    uses one of them (``users``; ``reaching``).

    A test that sets a trace function of its own (an interrupt raised on a chosen line, a line counter) would switch
    the line tracer off for what it runs, and the mutants of those lines would never be judged by it: while a test
    runs, ``sys.settrace`` and ``sys.gettrace`` are wrapped, so that the test's function runs after the line tracer
    (which goes on recording) and the test reads back its own function (None when it set none)."""

    def __init__(self, filenames, out):
        import threading

        self.files = {f: k for k, f in enumerate(filenames)}
        self.out, self.lines, self.current = out, {}, None  # lines: node id -> {(file index, line)}
        self.shared = {}  # wide fixture -> what the setup or teardown of a test that uses it runs
        self.users = {}   # wide fixture -> the tests that use it
        self.failed = set()  # tests that fail under the tracer (Dynamo, for one, compiles nothing while it runs)
        self._locals = [self._local_for(k) for k in range(len(self.files))]
        self._settrace, self._gettrace, self._theirs = sys.settrace, sys.gettrace, threading.local()

    def _local_for(self, k):
        def local(frame, event, arg):
            if event == "line":
                self.current.add((k, frame.f_lineno))
            return local
        return local

    def _global(self, frame, event, arg):
        k = self.files.get(frame.f_code.co_filename)
        if k is None:
            return None
        self.current.add((k, frame.f_lineno))  # the first line of the code object (a def's body on one line)
        return self._locals[k]

    def _chained(self, theirs):
        """A global trace function that runs the line tracer's, then ``theirs`` (a test's own), each frame getting
        both local functions (a local function that returns None keeps its place, as CPython's does)."""
        def pair(a, b):
            if a is None or b is None:
                return b if a is None else a

            def local(frame, event, arg):
                na = a(frame, event, arg)
                nb = b(frame, event, arg)  # may raise (an interrupt): then CPython unsets tracing, as without us
                na, nb = a if na is None else na, b if nb is None else nb
                return local if na is a and nb is b else pair(na, nb)
            return local

        return lambda frame, event, arg: pair(self._global(frame, event, arg), theirs(frame, event, arg))

    def _test_settrace(self, fn):
        self._theirs.fn = fn
        self._settrace(self._global if fn is None else self._chained(fn))

    def _test_gettrace(self):
        return getattr(self._theirs, "fn", None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        import threading

        self.current = self.lines.setdefault(item.nodeid, set())
        self._theirs.fn = None
        sys.settrace, sys.gettrace = self._test_settrace, self._test_gettrace
        self._settrace(self._global)
        threading.settrace(self._global)
        try:
            yield
        finally:
            self._settrace(None)
            threading.settrace(None)
            sys.settrace, sys.gettrace = self._settrace, self._gettrace

    def _fixture_phase(self, item):
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
        wide = sorted({f"{getattr(d, 'baseid', '')}::{name}" for name, ds in defs.items() for d in ds
                       if getattr(d, "scope", "function") != "function"})
        if wide:
            for k in wide:
                self.users.setdefault(k, set()).add(item.nodeid)
            return _Both([self.shared.setdefault(k, set()) for k in wide])
        return self.lines.setdefault(item.nodeid, set())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        own, self.current = self.current, self._fixture_phase(item)
        try:
            yield
        finally:
            self.current = own

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item, nextitem):
        own, self.current = self.current, self._fixture_phase(item)
        try:
            yield
        finally:
            self.current = own

    def pytest_runtest_logreport(self, report):
        if report.failed:
            self.failed.add(report.nodeid)

    def pytest_sessionfinish(self, session):
        import json

        def per_file(table):
            return {f: {t: sorted(ln for kk, ln in v if kk == k) for t, v in table.items()}
                    for f, k in self.files.items()}

        Path(self.out).write_text(json.dumps({"lines": per_file(self.lines), "shared": per_file(self.shared),
                                              "users": {k: sorted(v) for k, v in self.users.items()},
                                              "failed": sorted(self.failed)}))


class _Both:
    """What a setup or teardown phase executes, added to each of several sets (one per wide fixture of the test)."""

    __slots__ = ("sets",)

    def __init__(self, sets):
        self.sets = sets

    def add(self, x):
        for s in self.sets:
            s.add(x)


# Targets whose tests run the code in interpreters of their own (tests/test_distributed.py starts its ranks with
# subprocess): a child also hands the mutant to those (`_SITECUSTOMIZE`), and judges it by the file's whole test
# subset (the line tracer sees only this process).
SUBPROCESS_TARGETS = {"_capture/_collectives.py", "distributed.py"}

# Imported at the start of every interpreter that finds it on sys.path (the tests pass PYTHONPATH on to the processes
# they start): it makes `import <name>` execute the mutated text instead of the file.
_SITECUSTOMIZE = """\
import importlib.abc, importlib.util, sys
_NAME, _PATH, _SRC = {name!r}, {path!r}, {src!r}
class _Mutant(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.util.spec_from_loader(name, self, origin=_PATH) if name == _NAME else None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module.__file__ = _PATH
        exec(compile(open(_SRC).read(), _PATH, "exec"), module.__dict__)
sys.meta_path.insert(0, _Mutant())
"""


def _hand_to_subprocesses(path: Path, text: str) -> None:
    """In a child: the processes the tests start import the mutated module too (a sitecustomize on PYTHONPATH)."""
    d = tempfile.mkdtemp(prefix="mutant-")
    src = os.path.join(d, "mutant.py")
    Path(src).write_text(text)
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    Path(d, "sitecustomize.py").write_text(_SITECUSTOMIZE.format(name=name, path=str(path), src=src))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [d, os.environ.get("PYTHONPATH")]))


def run_in_child(path: Path, text: str, tests: list[str], timeout: int, plugins=(), first_failure=True) -> tuple[int, str]:
    """Fork; in the child, execute `text` in place of the module at `path` and run pytest on `tests` (with
    `plugins`; stopping at the first failure unless `first_failure` is false). (exit code, output)."""
    with tempfile.TemporaryFile(mode="w+") as log, tempfile.TemporaryDirectory(prefix="mutant-cwd-") as cwd:
        pid = os.fork()
        if pid == 0:  # child
            rc = 3
            try:
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
                # a scratch working directory: what a mutant makes the code write to a relative path (a report's
                # files) lands there, not in the source tree
                os.chdir(cwd)
                import pytest

                if str(path.relative_to(ROOT / "roofline")) in SUBPROCESS_TARGETS:
                    _hand_to_subprocesses(path, text)
                substitute(path, text)
                # no plugins found through entry points (loading them costs a second a run; the parent sets
                # PYTEST_DISABLE_PLUGIN_AUTOLOAD), no cache, and no gc.collect() of the large heap at the end
                rc = int(pytest.main(["-q", "--rootdir", str(ROOT), *(["-x"] if first_failure else []), "-p", "no:cacheprovider", "-p", "no:unraisableexception",
                                      "-p", "no:threadexception", *tests], plugins=list(plugins)))
            except BaseException as e:  # noqa: BLE001 - a mutant that does not even import is killed
                print(f"{type(e).__name__}: {e}", flush=True)
                rc = 4
            finally:
                sys.stdout.flush()
                os._exit(rc)
        deadline = time.time() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.time() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                rc = -999
                break
            time.sleep(0.02)
        log.seek(0)
        return rc, log.read()


def reaching(traced: dict, m: PyMutant) -> set | None:
    """The node ids of the tests that execute a line of the mutant's reach (every test that uses a wide fixture
    whose setup or teardown executes one), and those the tracer could not follow (`traced` as _Lines writes it);
    None: every test (no reach known)."""
    if m.reach is None:
        return None
    lo, hi = m.reach
    users = traced.get("users", {})
    via = {t for k, lines in traced.get("shared", {}).items() if any(lo <= ln <= hi for ln in lines)
           for t in users.get(k, ())}
    return ({t for t, lines in traced["lines"].items() if any(lo <= ln <= hi for ln in lines)} | via
            | set(traced["failed"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="+", default=list(TARGETS), help="files under roofline/ to mutate")
    ap.add_argument("--func", nargs="+", help="only these functions (qualified names, e.g. roofline_row)")
    ap.add_argument("--sample", type=int, default=0, help="run N random mutants (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keys", help="only the mutants whose keys this file lists (one per line, or the 'key: ...' lines "
                                   "of an earlier run's output: rerun its survivors)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=int, default=120, help="seconds for one pytest run")
    ap.add_argument("--all-tests", action="store_true",
                    help="judge every mutant by the whole test subset of its file (default: only the tests that "
                         "execute the mutated line, found by one traced run of the subset on the unmutated module; a "
                         "mutant no test reaches survives without a run)")
    ap.add_argument("--equivalent", default=str(ROOT / "bench" / "mutants_equivalent.txt"))
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)

    mutants = []
    for f in args.files:
        if f not in TARGETS:  # a file's name alone names its target when no other target has that name
            named = [t for t in TARGETS if Path(t).name == f]
            if len(named) != 1:
                sys.exit(f"{f} is not a target; the targets are {', '.join(TARGETS)}")
            f = named[0]
        funcs = TARGETS[f]
        if args.func:
            if ALL in funcs:
                funcs = list(_functions(ast.parse((ROOT / "roofline" / f).read_text())))
            funcs = [q for q in funcs if q in args.func]
        mutants += find_mutants(ROOT / "roofline" / f, funcs, f) if funcs else []
    if args.keys:
        wanted = {ln.strip().removeprefix("key: ").strip() for ln in Path(args.keys).read_text().splitlines()}
        mutants = [m for m in mutants if m.key in wanted]
    if args.sample and args.sample < len(mutants):
        mutants = sorted(random.Random(args.seed).sample(mutants, args.sample), key=lambda m: (m.file, m.line, m.col))
    if args.list:
        for m in mutants:
            print(m.where())
            if args.verbose:
                print(f"      key: {m.key}")
        print(f"{len(mutants)} mutants")
        return 0
    if not sorted((ROOT / "roofline").glob("_core*.so")):
        sys.exit("build the extension first: python setup.py build_ext --inplace")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no BLAS threads across fork()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the tests use no plugin of an installed package
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    import numpy  # noqa: F401  (imported once, shared by every child)

    try:
        import torch  # noqa: F401  (tests that use it then find it loaded)
    except ImportError:
        pass
    import importlib

    import roofline

    for f in TARGETS:  # every target loaded once, so that substitute() finds each reference to it
        importlib.import_module("roofline." + f[:-3].replace("/", "."))
    # what every child would import again otherwise (seconds each): hypothesis (pytest's plugin imports it at the end
    # of a session) and the test modules of the files mutated, imported under the names pytest gives them (the tests
    # directory first on sys.path, as its default import mode does); the functions they imported from the package
    # are the ones whose code a mutant replaces
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        pass
    sys.path.insert(0, str(ROOT / "tests"))
    for t in sorted({t.split("::")[0] for m in mutants for t in TESTS[m.target]}):
        if (ROOT / t).exists():
            importlib.import_module(Path(t).stem)

    if not roofline.__file__.startswith(str(ROOT)):
        sys.exit(f"roofline imported from {roofline.__file__}, not from {ROOT}")
    eq = load_equivalent(args.equivalent if Path(args.equivalent).exists() else None)
    tests = {f: [str(ROOT / t) for t in TESTS[f] if (ROOT / t.split("::")[0]).exists()] for f in TARGETS}
    t0 = time.time()
    covered = {}  # target -> {test node id: lines of the target it executes}
    # the unmutated modules, substituted the same way, must pass; one traced run per set of tests (the targets judged
    # by the same tests are traced together)
    by_tests: dict = {}
    for f in sorted({m.target for m in mutants}):
        by_tests.setdefault(tuple(tests[f]), []).append(f)
    for group in by_tests.values():
        paths = [ROOT / "roofline" / f for f in group]
        with tempfile.TemporaryDirectory() as tmp:
            traced = not args.all_tests and not any(f in SUBPROCESS_TARGETS for f in group)
            trace = _Lines([str(p) for p in paths], os.path.join(tmp, "lines.json")) if traced else None
            rc, out = run_in_child(paths[0], paths[0].read_text(), tests[group[0]],
                                   args.timeout * (1 if trace is None else 10), [trace] if trace else [],
                                   first_failure=trace is None)
            if rc != 0 and trace is not None:  # a test that fails only under the tracer is run for every mutant
                rc, out = run_in_child(paths[0], paths[0].read_text(), tests[group[0]], args.timeout)
            if rc != 0:
                sys.exit(f"the unmutated {', '.join(group)} fail the tests the mutants are judged by:\n{out[-3000:]}")
            if trace is not None:
                import json

                data = json.loads(Path(trace.out).read_text())
                for f, p in zip(group, paths):
                    covered[f] = {"lines": data["lines"][str(p)], "shared": data["shared"][str(p)],
                                  "users": data["users"], "failed": data["failed"]}
                n_failed = len(data["failed"])
                untraced = f" ({n_failed} fail under the tracer: run for every mutant)" if n_failed else ""
                reached = ", ".join(f"{f} {len({ln for v in covered[f]['lines'].values() for ln in v})}" for f in group)
                print(f"{len(next(iter(data['lines'].values()), {}))} tests, traced{untraced}; lines run: {reached}",
                      flush=True)
    print(f"{len(mutants)} mutants of {', '.join(args.files)}", flush=True)
    results = []
    for k, m in enumerate(mutants, 1):
        path = ROOT / "roofline" / m.target
        try:
            text = apply(path, m)
        except Exception as e:  # noqa: BLE001 - a mutant that cannot be written is not counted
            results.append((m, "invalid", str(e)))
            continue
        wanted = reaching(covered[m.target], m) if m.target in covered else None
        if wanted is not None and not wanted:
            results.append((m, "survived", "no test executes the line"))
            progress(k, len(mutants), m, "survived", "no test executes the line", args.verbose)
            continue
        rc, out = run_in_child(path, text, tests[m.target], args.timeout, [] if wanted is None else [_Select(wanted)])
        if rc == -999:
            st, det = "killed", "timeout"
        elif rc != 0:
            lines = [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))]
            st, det = "killed", (lines[0] if lines else (out.strip().splitlines() or ["exit %d" % rc])[-1])
        else:
            st, det = "survived", ""
        results.append((m, st, det))
        progress(k, len(mutants), m, st, det, args.verbose)
    return report(results, eq, "Python formulas and analyses mutation score", t0)


if __name__ == "__main__":
    sys.exit(main())
