"""The coverage-guided fuzzer of the C cost model (tests/fuzz/fuzz_cost.c), run briefly.

Builds the libFuzzer harness with clang (-fsanitize=fuzzer,address,undefined), writes the seed corpus
(bench/fuzz_seeds.py: torch-free, plus the table cases when torch is installed), replays the seeds, shows that the
harness's reference catches wrong formulas and a wrong refusal, and fuzzes for FUZZ_SECONDS seconds (5 unless
ROOFLINE_FUZZ_C_SECONDS says otherwise). bench/fuzz.sh runs the long version (10**7 cost-model evaluations or more).
Skipped when clang or its libFuzzer runtime is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, sanitizer_report

FUZZ_SECONDS = int(os.environ.get("ROOFLINE_FUZZ_C_SECONDS", "5"))
FLAGS = ["-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=fuzzer,address,undefined",
         "-fno-sanitize-recover=all", f"-I{ROOT / 'csrc'}"]


def _clang() -> str | None:
    for name in (os.environ.get("FUZZ_CC"), "clang", "clang-14", "clang-15", "clang-16", "clang-17", "clang-18"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _kinds() -> list[str]:
    """The cost kinds in code order (roofline._core.kind_table(), the table of csrc/cost.h)."""
    from roofline._counting import _registry

    return [_registry.KIND_NAMES[code] for code in sorted(_registry.KIND_NAMES)]


@pytest.fixture(scope="module")
def fuzz_build(tmp_path_factory):
    """(directory, clang, seed-script output) with the harness built against csrc/cost.c and the seeds written; the
    directory also holds the harness's object file (fuzz_cost.o), which the mutants of cost.c are linked with."""
    clang = _clang()
    if clang is None:
        pytest.skip("clang is not installed (the C fuzzer needs clang's libFuzzer: apt install clang libclang-rt-dev)")
    d = tmp_path_factory.mktemp("fuzz")
    probe = d / "probe.c"
    probe.write_text("#include <stdint.h>\n#include <stddef.h>\n"
                     "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n")
    p = subprocess.run([clang, "-fsanitize=fuzzer,address,undefined", str(probe), "-o", str(d / "probe")],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"{clang} cannot link libFuzzer (install libclang-rt-dev): {p.stderr.strip()[:300]}")
    _build(clang, ROOT / "csrc" / "cost.c", d / "fuzz_cost", harness=d / "fuzz_cost.o")
    path = os.pathsep.join([str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
    seeds = subprocess.run([sys.executable, str(ROOT / "bench" / "fuzz_seeds.py"), str(d / "seeds")],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=path), timeout=300)
    assert seeds.returncode == 0, seeds.stdout + seeds.stderr
    return d, clang, seeds.stdout


def _build(clang, cost_c, exe, harness):
    """Build the fuzzer ``exe`` from ``cost_c`` and the harness: its object file ``harness``, compiled from
    tests/fuzz/fuzz_cost.c first if it is not there yet."""
    if not harness.exists():
        source = ROOT / "tests" / "fuzz" / "fuzz_cost.c"
        compiled = subprocess.run([clang, *FLAGS, "-c", str(source), "-o", str(harness)], capture_output=True,
                                  text=True)
        assert compiled.returncode == 0, compiled.stderr
    build = subprocess.run([clang, *FLAGS, str(harness), str(cost_c), "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr


def _evaluations(text: str) -> int:
    m = re.search(r"cost-model evaluations: (\d+)", text)
    assert m, text[-3000:]
    return int(m.group(1))


def _seed_files(d) -> list[str]:
    return sorted(str(p) for p in (d / "seeds").iterdir())


def test_seed_corpus_covers_every_kind(fuzz_build):
    """The seeds decode to calls of every cost kind, each kind with at least one call it evaluates (RL_OK); the few
    seeds that are refused or overflow are the ones written to be (with or without torch)."""
    d, _, out = fuzz_build
    m = re.search(r"(\d+) seeds written to .* \((\d+) analytic calls, (\d+) table cases", out)
    assert m, out
    files = _seed_files(d)
    assert len(files) == int(m.group(1)) and int(m.group(2)) >= 60
    p = subprocess.run([str(d / "fuzz_cost"), *files], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, ROOFLINE_FUZZ_PRINT="1"))
    assert p.returncode == 0, p.stderr[-5000:]
    assert sanitizer_report(p.stderr) is None, p.stderr[-5000:]
    # print_each writes "status=S ..." then "op: kind=K (name) ..." each time a seed runs, under the seed's own kind.
    # libFuzzer may run a seed twice (its leak check repeats an input whose mallocs and frees differ), so the pairs
    # are read per "Running: <file>" block, the first pair of each block.
    blocks = re.split(r"^Running: (\S+)\n", p.stderr, flags=re.M)[1:]
    by_file = {}
    for name, text in zip(blocks[0::2], blocks[1::2]):
        first = re.search(r"^status=(\d+) .*\nop: kind=(\d+) ", text, re.M)
        assert first, (name, text[:2000])
        by_file[name] = first.groups()
    assert sorted(by_file) == files
    pairs = list(by_file.values())
    runs = len(re.findall(r"^status=\d+ .*\nop: kind=\d+ ", p.stderr, re.M))
    assert len(files) <= runs <= 2 * len(files)
    kinds = _kinds()
    evaluated = {int(k) for st, k in pairs if st == "0"}
    assert evaluated == set(range(len(kinds))), sorted(kinds[k] for k in set(range(len(kinds))) - evaluated)
    statuses = [int(st) for st, _ in pairs]
    # by design: 2 windows/paddings out of range (RL_E_VALUE = 6), mismatched channels and an FFT dimension named
    # twice (RL_E_SHAPE = 3), and three calls with sizes near 2**32 / 2**63 whose counts overflow (RL_E_OVERFLOW = 1);
    # the table cases all evaluate
    assert statuses.count(6) == 2 and statuses.count(3) == 2 and statuses.count(1) == 3, statuses
    assert statuses.count(0) == len(files) - 7
    assert _evaluations(p.stderr) == runs * 2 * (len(kinds) + 2)  # every kind, two unknown ones, twice each per run


# Wrong cost models the harness must reject on the seeds alone: (name, text of csrc/cost.c, replacement, a pattern of
# the message; the first seed that shows the defect stops the run).
MUTANTS = [
    ("mm without the factor 2",
     "*flops = mul(mul(mul(2, u(a->size[0]), ov), u(b->size[1]), ov), u(a->size[1]), ov);",
     "*flops = mul(mul(u(a->size[0]), u(b->size[1]), ov), u(a->size[1]), ov);",
     "invariant violated: matrix = "),
    ("outputs written again after an in-place update",
     "if (!op->write_mask || (op->flags & RL_OPF_FRESH_OUTS)) {", "if (1) {",
     "invariant violated: bytes_written = "),
    ("grouped convolution backward counted as FlopCounterMode does",
     "real = add(real, mul(mul(n, cin_all / groups, ov), cother, ov), ov);",
     "real = add(real, mul(mul(n, cin_all, ov), cother, ov), ov);",
     r"invariant violated: (matrix = |every count fits in 64 bits but .* \(false overflow\))"),
    ("causal attention with one key too few per row",
     "return triangle(sq, ov);", "return triangle(sq - 1, ov);",
     "invariant violated: matrix = "),
    ("a pooling window of 0 accepted",
     "if (!intlist_at_least(c, ki, 1) ||", "if (!intlist_at_least(c, ki, 0) ||",
     r"invariant violated: status RL_OK, the reference answers RL_E_VALUE"),
]


@pytest.mark.python_independent  # the harness and cost.c only (tests/conftest.py)
@pytest.mark.parametrize("mutant", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_harness_catches_a_wrong_model(fuzz_build, tmp_path, mutant):
    """A check that cannot fail proves nothing: the harness built against a cost model with one formula or one
    refusal changed fails on the seeds, naming the count or the status."""
    d, clang, _ = fuzz_build
    _, text, replacement, message = mutant
    src = (ROOT / "csrc" / "cost.c").read_text()
    assert src.count(text) == 1, f"csrc/cost.c changed: update this test's mutant ({text})"
    (tmp_path / "cost.c").write_text(src.replace(text, replacement))
    exe = tmp_path / "fuzz_mutant"
    _build(clang, tmp_path / "cost.c", exe, harness=d / "fuzz_cost.o")
    p = subprocess.run([str(exe), *_seed_files(d)], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert re.search(message, p.stderr), p.stderr[-3000:]


@pytest.mark.python_independent  # the harness and cost.c only (tests/conftest.py)
def test_fuzz_cost_model_briefly(fuzz_build, tmp_path):
    """FUZZ_SECONDS of coverage-guided fuzzing from the seeds: no sanitizer report, no invariant violated."""
    d, _, _ = fuzz_build
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # No RSS limit: Linux keeps a process's peak RSS across exec, so the fuzzer started from a large pytest process
    # (models loaded and compiled by earlier tests) reads the parent's footprint as its own and stops "out of
    # memory" at once. The cost model allocates nothing; a single allocation over 2 GiB still fails the run.
    p = subprocess.run([str(d / "fuzz_cost"), f"-max_total_time={FUZZ_SECONDS}", "-timeout=10", "-rss_limit_mb=0",
                        "-malloc_limit_mb=2048",
                        "-print_final_stats=1", f"-artifact_prefix={tmp_path}/", str(corpus), str(d / "seeds")],
                       capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    crashes = [f.name for f in tmp_path.iterdir() if f.name.startswith(("crash-", "leak-", "timeout-", "oom-"))]
    tail = p.stderr[-6000:]
    assert p.returncode == 0 and not crashes, f"{crashes}\n{tail}"
    assert sanitizer_report(p.stderr) is None, tail
    runs = int(re.search(r"stat::number_of_executed_units:\s*(\d+)", p.stderr).group(1))
    assert runs > 0 and _evaluations(p.stderr) >= runs * 2 * len(_kinds())
