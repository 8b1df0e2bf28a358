"""Mutation testing of the C core: how many small faults in csrc/cost.c and csrc/classify.c do the tests catch?

Each mutant changes one token inside a function body (comments, strings, character literals and preprocessor lines
are never touched):

  - operators: + -> - *,  - -> +,  * -> / +,  / -> *,  < -> <= >,  <= -> < >,  > -> >= <,  >= -> > <,
    == -> !=,  != -> ==,  && -> ||,  || -> &&   (binary operators only: unary minus, dereference and pointer
    declarations are left alone);
  - constants: an integer literal n -> n+1 and n-1 (0 -> 1 only), a floating literal 0.0 -> 1.0, 1.0 -> 0.0 2.0.

Mutants run one at a time, cheapest killer first:

  1. csrc/cost.c only: the pure-C unit tests (tests/c/test_cost*.c) linked with the mutated file, built plainly and
     then, if that run passes, with AddressSanitizer + UndefinedBehaviorSanitizer (an out-of-bounds read is a kill);
  2. the extension relinked with the mutated object (the other objects are compiled once) into a private copy of
     the package, and a targeted pytest subset run against it (-x: the first failure kills).

A mutant that does not compile is not counted. A survivor is listed as file:line (function), original -> mutant,
with the source line. Known equivalent mutants (no observable change) can be listed in a file passed with
--equivalent (one mutant key per line, then " # reason"); the score is reported with and without them.

    python bench/mutate_c.py                       # full run over both files
    python bench/mutate_c.py --sample 40 --seed 1  # 40 random mutants, for a quick look
    python bench/mutate_c.py --files classify.c --list   # list the mutants only
    python bench/mutate_c.py --files track_block.c --func Block_enter block_acquire block_release  # part of a file

Slow by nature (seconds per mutant): run it under `nice`, in the background for a full run.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"
CC = os.environ.get("CC", "gcc")

# Per mutated file: the pytest subset of stage 2 (paths relative to the repository root).
STAGE2_TESTS = {
    "cost.c": ["tests/test_cost_table.py", "tests/test_c_exports.py::test_attention_pairs_enumerated",
               "tests/test_c_exports.py::test_attention_pairs_past_32_bits_that_fit_64"],
    "classify.c": ["tests/test_classify_exact.py", "tests/test_rollups_exact.py",
                   "tests/test_report.py::test_bound_flips_exactly_at_the_ridge",
                   "tests/test_report.py::test_zero_flop_ops_are_judged_against_bandwidth_only",
                   "tests/test_report.py::test_zero_time_and_untimed_are_flagged_not_divided",
                   "tests/test_report.py::test_rate_above_the_ceiling_is_flagged_not_clipped",
                   "tests/test_report.py::test_mixed_dtypes_use_their_own_roofs",
                   "tests/test_report.py::test_memory_and_bandwidth_bound_ops_roll_up_as_memory"],
    "link.c": ["tests/test_attribution.py"],
    "attribution.c": ["tests/test_attribution.py"],
    # the measure blocks' driver and mode-stack surgery (not in the default --files: about 40 min for its 261
    # mutants; --func for part of it): a step loop's block nests, a block entered inside another block's step is
    # refused, a failed entry is undone, the block lock is one thread's at a time (and taken over at shutdown)
    # (tests/test_mutants_block3.py first: remove_mode and call_alone over a stack of Python callables, in 2 s; then
    # tests/test_mutants_block2.py: nesting, refusal and the undo that never completes, each scenario in a thread
    # joined with a timeout, so that a mutant that never releases the lock fails in seconds instead of hanging)
    "track_block.c": ["tests/test_mutants_block3.py", "tests/test_mutants_block2.py", "tests/test_mutants_block.py",
                      "tests/test_schedule.py::test_two_cycles_over_fourteen_steps_give_two_reports_of_one_step_counts",
                        "tests/test_hardening_loops.py::test_step_from_on_report_is_refused_and_leaves_no_mode",
                        "tests/test_block_state.py::test_a_steps_interrupted_undo_is_repeated_until_it_completes_then_the_interrupt_propagates",
                        "tests/test_block_state.py::test_blocks_of_two_asyncio_tasks_cannot_interleave_on_one_thread",
                        "tests/test_block_state.py::test_tasks_nested_in_one_block_may_each_open_a_block_in_turn",
                        "tests/test_block_state.py::test_interleaved_blocks_of_generators_raise_at_exit_and_leave_torch_clean",
                        # the lock between threads: blocks of two threads overlapping, a fork while another thread
                        # holds it, a daemon thread frozen holding it at shutdown
                        "tests/test_block_state.py::test_overlapping_blocks_in_two_threads_put_torch_mode_flags_back",
                        "tests/test_block_state.py::test_a_process_forked_while_another_thread_is_entering_a_block_can_enter_blocks",
                        "tests/test_block_state.py::test_a_block_left_during_interpreter_shutdown_does_not_wait_for_a_frozen_daemon_threads_lock"],
}
# Per mutated file: the C unit tests of stage 1 (none for classify.c: its tests go through the extension).
C_UNIT_TESTS = {
    "cost.c": ["tests/c/test_cost.c", "tests/c/test_cost_branches.c"],
    "classify.c": [],
    "link.c": ["tests/c/test_link.c"],
    "attribution.c": ["tests/c/test_attribution.c+csrc/link.c"],  # linked with the unmutated link.c
    "track_block.c": [],
}

OPERATOR_MUTANTS = {
    "+": ["-", "*"], "-": ["+"], "*": ["/", "+"], "/": ["*"],
    "<": ["<=", ">"], "<=": ["<", ">"], ">": [">=", "<"], ">=": [">", "<"],
    "==": ["!="], "!=": ["=="], "&&": ["||"], "||": ["&&"],
}
TYPE_NAMES = {"int", "unsigned", "char", "double", "float", "void", "long", "short", "const", "struct", "signed",
              "uint64_t", "int64_t", "uint32_t", "int32_t", "uint8_t", "int8_t", "size_t", "rl_tensor", "rl_arg",
              "rl_call", "rl_op", "rl_cost", "attn_dims", "rl_class_out"}
KEYWORDS = {"return", "case", "sizeof", "if", "else", "for", "while", "do", "switch", "default", "break", "continue",
            "goto", "static", "typedef"}
PUNCT = ["...", "<<=", ">>=", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=",
         "/=", "%=", "&=", "|=", "^="]


@dataclass
class Token:
    kind: str  # "id", "num", "op"
    text: str
    start: int
    end: int


@dataclass
class Mutant:
    file: str       # "cost.c"
    func: str
    line: int
    start: int      # byte offsets of the replaced token
    end: int
    orig: str
    new: str
    line_text: str
    col: int

    @property
    def key(self) -> str:
        """Stable across edits elsewhere in the file: function, the line's text, the column in it, the change."""
        code = re.sub(r"/\*.*?(\*/|$)|//.*$", "", self.line_text).strip()  # comments do not count
        return f"{self.file}:{self.func}:{code}@{self.col}:{self.orig}->{self.new}"

    def where(self) -> str:
        return f"{self.file}:{self.line} ({self.func}) {self.orig} -> {self.new}   | {self.line_text.strip()}"


def tokenize(src: str) -> list[Token]:
    """C tokens outside comments, string/char literals and preprocessor lines."""
    toks, i, n = [], 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if line_start and c == "#":  # preprocessor line, with continuations
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    i += 2
                    continue
                i += 1
            continue
        line_start = False
        if src.startswith("//", i):
            while i < n and src[i] != "\n":
                i += 1
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        m = re.compile(r"[A-Za-z_]\w*").match(src, i)
        if m:
            toks.append(Token("id", m.group(), i, m.end()))
            i = m.end()
            continue
        m = re.compile(r"(0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+|\d+)[uUlLfF]*").match(src, i)
        if m:
            toks.append(Token("num", m.group(), i, m.end()))
            i = m.end()
            continue
        for p in PUNCT:
            if src.startswith(p, i):
                toks.append(Token("op", p, i, i + len(p)))
                i += len(p)
                break
        else:
            toks.append(Token("op", c, i, i + 1))
            i += 1
    return toks


def _is_binary(prev: Token | None, tok: Token) -> bool:
    if prev is None:
        return False
    if prev.kind == "num" or prev.text in (")", "]"):
        return True
    if prev.kind == "id":
        return prev.text not in KEYWORDS and not (tok.text == "*" and prev.text in TYPE_NAMES)
    return False


def _const_mutants(text: str) -> list[str]:
    m = re.fullmatch(r"(\d+)([uUlL]*)", text)
    if m:
        v, suf = int(m.group(1)), m.group(2)
        return [f"{v + 1}{suf}"] + ([f"{v - 1}{suf}"] if v > 0 else [])
    if text in ("0.0", "0."):
        return ["1.0"]
    if text in ("1.0", "1."):
        return ["0.0", "2.0"]
    return []  # hex masks and other literals are left alone


def find_mutants(path: Path) -> list[Mutant]:
    src = path.read_text()
    toks = tokenize(src)
    lines = src.split("\n")
    line_of = [0] * (len(src) + 1)
    ln = 1
    for k, ch in enumerate(src):
        line_of[k] = ln
        if ch == "\n":
            ln += 1
    out: list[Mutant] = []
    depth, func, cand, paren = 0, None, None, 0
    for k, t in enumerate(toks):
        prev = toks[k - 1] if k else None
        if t.text == "{":
            if depth == 0:
                func = cand if (prev is not None and prev.text == ")") else None
            depth += 1
            continue
        if t.text == "}":
            depth -= 1
            if depth == 0:
                func, cand = None, None
            continue
        if depth == 0:
            if t.text == "(" and paren == 0 and prev is not None and prev.kind == "id" and cand is None:
                cand = prev.text
            if t.text == "(":
                paren += 1
            elif t.text == ")":
                paren -= 1
            elif t.text == ";":
                cand = None
            continue
        if func is None:
            continue  # inside a file-scope initializer or struct: data, not logic
        news: list[str] = []
        if t.kind == "op" and t.text in OPERATOR_MUTANTS:
            if t.text in "+-*/" and not _is_binary(prev, t):
                continue
            news = OPERATOR_MUTANTS[t.text]
        elif t.kind == "num":
            news = _const_mutants(t.text)
        line = line_of[t.start]
        col = t.start - (src.rfind("\n", 0, t.start) + 1)
        for new in news:
            out.append(Mutant(path.name, func, line, t.start, t.end, t.text, new, lines[line - 1], col))
    return out


def apply(path: Path, m: Mutant) -> str:
    src = path.read_text()
    assert src[m.start:m.end] == m.orig
    # keep a space on each side so that e.g. "a - -1" or "x < -y" cannot fuse into another token
    return src[:m.start] + " " + m.new + " " + src[m.end:]


def run(cmd, cwd=None, env=None, timeout=600) -> tuple[int, str]:
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, errors="replace", timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return -999, "timeout"


class Workspace:
    """Objects of the unmutated sources, a private copy of the package, and the mutant builders."""

    def __init__(self, tmp: Path):
        import numpy

        self.tmp = tmp
        self.obj = tmp / "obj"
        self.obj.mkdir()
        self.pkg = tmp / "pkg"
        shutil.copytree(ROOT / "roofline", self.pkg / "roofline",
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        self.ext = self.pkg / "roofline" / ("_core" + sysconfig.get_config_var("EXT_SUFFIX"))
        self.cflags = ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", f"-I{CSRC}", f"-I{numpy.get_include()}",
                       f"-I{sysconfig.get_paths()['include']}"]
        for c in sorted(CSRC.glob("*.c")):
            rc, out = run([CC, *self.cflags, "-c", str(c), "-o", str(self.obj / (c.stem + ".o"))])
            if rc:
                sys.exit(f"cannot compile {c}:\n{out}")
        self.link_extension({})
        self.env = dict(os.environ, PYTHONPATH=str(self.pkg), PYTHONDONTWRITEBYTECODE="1")

    def link_extension(self, replaced: dict[str, Path]) -> tuple[int, str]:
        objs = [str(replaced.get(o.name, o)) for o in sorted(self.obj.glob("*.o"))]
        return run([CC, "-shared", *objs, "-ldl", "-lpthread", "-lm", "-o", str(self.ext)])

    def pytest(self, tests: list[str], timeout: int) -> tuple[int, str]:
        args = [str(ROOT / t) if "::" not in t else str(ROOT / t.split("::")[0]) + "::" + t.split("::", 1)[1]
                for t in tests]
        return run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--rootdir", str(self.pkg),
                    *args], cwd=self.pkg, env=self.env, timeout=timeout)

    def check_import(self) -> str:
        rc, out = run([sys.executable, "-c", "import roofline; print(roofline.__file__)"], cwd=self.pkg, env=self.env)
        return out.strip()


def c_unit_kill(ws: Workspace, src_file: Path, tests: list[str], sanitize: bool) -> tuple[str, str]:
    """('killed'|'survived'|'invalid', detail) of the C unit tests against the mutated source. The test files are
    compiled once per flavour; only the mutated file is compiled per mutant."""
    flags = ["-std=c11", "-g", f"-I{CSRC}"]
    flags += (["-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
              if sanitize else ["-O0"])
    tag = "san" if sanitize else "plain"
    objs = []  # per test: its object and those of the unmutated sources it is linked with ("test.c+other.c")
    for t in tests:
        group = []
        for part in t.split("+"):
            obj = ws.tmp / f"unit_{Path(part).stem}_{tag}.o"
            if not obj.exists():
                rc, out = run([CC, *flags, "-c", str(ROOT / part), "-o", str(obj)], timeout=300)
                if rc:
                    sys.exit(f"cannot compile {part}:\n{out}")
            group.append(str(obj))
        objs.append(group)
    mobj = ws.tmp / f"mutant_{tag}.o"
    rc, out = run([CC, *flags, "-c", str(src_file), "-o", str(mobj)], timeout=120)
    if rc:
        return "invalid", out[-400:]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=0")
    for t, group in zip(tests, objs):
        exe = ws.tmp / f"unit_{Path(t.split('+')[0]).stem}_{tag}"
        rc, out = run([CC, *flags, *group, str(mobj), "-o", str(exe)], timeout=120)
        if rc:
            return "invalid", out[-400:]
        rc, out = run([str(exe)], env=env, timeout=20)
        if rc:
            return "killed", f"{Path(t).name}{' (sanitizers)' if sanitize else ''}: {out.strip()[-200:]}"
    return "survived", ""


def evaluate(ws: Workspace, m: Mutant, args) -> tuple[str, str]:
    path = CSRC / m.file
    mut = ws.tmp / "mut" / m.file
    mut.parent.mkdir(exist_ok=True)
    mut.write_text(apply(path, m))
    units = [t for t in C_UNIT_TESTS.get(m.file, []) if all((ROOT / part).exists() for part in t.split("+"))]
    if units:
        for sanitize in (False, True):
            st, det = c_unit_kill(ws, mut, units, sanitize)
            if st != "survived":
                return st, "C units: " + det
    if args.c_only:
        return "survived", "C units only"
    if m.key in args.eq and not args.check_equivalent:
        return "survived", "listed as equivalent: the extension and pytest stage skipped"
    obj = ws.tmp / "mut" / (path.stem + ".o")  # the real build's flags
    rc, out = run([CC, *ws.cflags, "-c", str(mut), "-o", str(obj)], timeout=120)
    if rc:
        return "invalid", out[-300:]
    rc, out = ws.link_extension({path.stem + ".o": obj})
    if rc:
        return "invalid", out[-300:]
    tests = [t for t in STAGE2_TESTS.get(m.file, []) if (ROOT / t.split("::")[0]).exists()]
    rc, out = ws.pytest(tests, timeout=args.timeout)
    if rc == -999:
        return "killed", "pytest: timeout"
    if rc not in (0, 5):
        lines = [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))]
        return "killed", "pytest: " + (lines[0] if lines else out.strip().splitlines()[-1])
    return "survived", ""


def load_equivalent(path: str | None) -> dict[str, str]:
    eq = {}
    if path:
        for ln in Path(path).read_text().splitlines():
            if ln.strip() and not ln.lstrip().startswith("#"):
                key, _, reason = ln.rpartition(" # ")  # a key may itself hold " # " (a Python comment)
                eq[key.strip()] = reason.strip()
    return eq


def progress(k: int, n: int, m, st: str, det: str, verbose: bool) -> None:
    """One line per survivor (per mutant with --verbose), else a heartbeat every 25 mutants."""
    if verbose or st == "survived":
        print(f"[{k}/{n}] {st:8s} {m.where()}" + (f"\n      {det}" if det and verbose else ""), flush=True)
    elif k % 25 == 0:
        print(f"[{k}/{n}] ...", flush=True)


def report(results, eq: dict[str, str], label: str, t0: float) -> int:
    valid = [(m, st, d) for m, st, d in results if st != "invalid"]
    killed = [r for r in valid if r[1] == "killed"]
    surv = [r for r in valid if r[1] == "survived"]
    surv_eq = [r for r in surv if r[0].key in eq]
    surv_real = [r for r in surv if r[0].key not in eq]
    n_noneq = len(valid) - len(surv_eq)
    print(f"\n== {label}: {len(results)} mutants, {len(results) - len(valid)} not compilable, {len(valid)} run, "
          f"{len(killed)} killed, {len(surv)} survived ({len(surv_eq)} listed as equivalent); "
          f"{time.time() - t0:.0f} s")
    if valid:
        print(f"score: {len(killed)}/{len(valid)} = {100 * len(killed) / len(valid):.1f}% of all mutants; "
              f"{len(killed)}/{n_noneq} = {100 * len(killed) / max(n_noneq, 1):.1f}% of non-equivalent mutants")
    by_file: dict[str, list[int]] = {}
    for m, st, _ in valid:
        k = by_file.setdefault(m.file, [0, 0])
        k[0] += st == "killed"
        k[1] += not (st == "survived" and m.key in eq)
    for f, (k, n) in sorted(by_file.items()):
        print(f"  {f}: {k}/{n} non-equivalent killed ({100 * k / max(n, 1):.1f}%)")
    if surv_real:
        print("survivors:")
        for m, _, _ in surv_real:
            print("  " + m.where())
            print("      key: " + m.key)
    if surv_eq:
        print("equivalent survivors:")
        for m, _, _ in surv_eq:
            print(f"  {m.where()}\n      reason: {eq[m.key]}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="+", default=["cost.c", "classify.c", "link.c", "attribution.c"], help="files under csrc/ to mutate")
    ap.add_argument("--sample", type=int, default=0, help="run N random mutants (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--func", nargs="+", help="only mutants inside these functions")
    ap.add_argument("--line", type=int, nargs=2, metavar=("FROM", "TO"), help="only mutants in these lines")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--c-only", action="store_true", help="stop after the C unit tests (no extension, no pytest)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds for one pytest run")
    ap.add_argument("--equivalent", default=str(ROOT / "bench" / "mutants_equivalent.txt"),
                    help="file of mutant keys known to be equivalent, each followed by ' # reason'")
    ap.add_argument("--check-equivalent", action="store_true",
                    help="run mutants listed as equivalent through every stage (by default they stop after the C units)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every mutant's outcome")
    args = ap.parse_args(argv)

    mutants = [m for f in args.files for m in find_mutants(CSRC / f)]
    if args.func:
        mutants = [m for m in mutants if m.func in args.func]
    if args.line:
        mutants = [m for m in mutants if args.line[0] <= m.line <= args.line[1]]
    if args.sample and args.sample < len(mutants):
        mutants = sorted(random.Random(args.seed).sample(mutants, args.sample), key=lambda m: (m.file, m.start))
    if args.list:
        for m in mutants:
            print(m.where())
        print(f"{len(mutants)} mutants")
        return 0
    eq = load_equivalent(args.equivalent if Path(args.equivalent).exists() else None)
    args.eq = eq
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="rl-mutate-") as d:
        ws = Workspace(Path(d))
        where = ws.check_import()
        if not where.startswith(str(ws.pkg)):
            sys.exit(f"the private package copy is not the one imported: {where}")
        for f in sorted({m.file for m in mutants}):  # the unmutated code must pass what the mutants are judged by
            tests = [t for t in STAGE2_TESTS.get(f, []) if (ROOT / t.split("::")[0]).exists()]
            if not args.c_only:
                rc, out = ws.pytest(tests, timeout=args.timeout)
                if rc not in (0, 5):
                    sys.exit(f"the unmutated package fails the tests mutants of {f} are judged by:\n{out[-3000:]}")
            units = [t for t in C_UNIT_TESTS.get(f, []) if all((ROOT / part).exists() for part in t.split("+"))]
            if units and c_unit_kill(ws, CSRC / f, units, True)[0] != "survived":
                sys.exit(f"the unmutated {f} fails its C unit tests")
        print(f"{len(mutants)} mutants of {', '.join(args.files)}", flush=True)
        results = []
        for k, m in enumerate(mutants, 1):
            st, det = evaluate(ws, m, args)
            results.append((m, st, det))
            progress(k, len(mutants), m, st, det, args.verbose)
    return report(results, eq, "C mutation score", t0)


if __name__ == "__main__":
    sys.exit(main())
