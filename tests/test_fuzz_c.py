"""The coverage-guided fuzzer of the C cost model (tests/fuzz/fuzz_cost.c), run briefly.

Builds the libFuzzer harness with clang (-fsanitize=fuzzer,address,undefined), writes the seed corpus
(bench/fuzz_seeds.py), replays the seeds, shows that the harness's reference catches a wrong formula, and fuzzes for
FUZZ_SECONDS seconds. bench/fuzz.sh runs the long version. Skipped when clang or its libFuzzer runtime is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, sanitizer_report

FUZZ_SECONDS = int(os.environ.get("ROOFLINE_FUZZ_C_SECONDS", "20"))
FLAGS = ["-g", "-O1", "-Wall", "-Wextra", "-Werror", "-fsanitize=fuzzer,address,undefined",
         "-fno-sanitize-recover=all", f"-I{ROOT / 'csrc'}"]


def _clang() -> str | None:
    for name in (os.environ.get("FUZZ_CC"), "clang", "clang-14", "clang-15", "clang-16", "clang-17", "clang-18"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@pytest.fixture(scope="module")
def fuzz_build(tmp_path_factory):
    """(directory, clang) with the harness built against csrc/cost.c and the seed corpus written."""
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
    build = subprocess.run([clang, *FLAGS, str(ROOT / "tests" / "fuzz" / "fuzz_cost.c"), str(ROOT / "csrc" / "cost.c"),
                            "-o", str(d / "fuzz_cost")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    seeds = subprocess.run([sys.executable, str(ROOT / "bench" / "fuzz_seeds.py"), str(d / "seeds")],
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert seeds.returncode == 0, seeds.stdout + seeds.stderr
    return d, clang


def _evaluations(text: str) -> int:
    m = re.search(r"cost-model evaluations: (\d+)", text)
    assert m, text[-3000:]
    return int(m.group(1))


def test_seed_corpus_covers_every_kind(fuzz_build):
    """The seeds decode to calls of every cost kind, and most evaluate without error (they are real calls)."""
    d, _ = fuzz_build
    files = sorted(str(p) for p in (d / "seeds").iterdir())
    assert len(files) >= 60  # 40-odd table cases + about 50 analytic calls
    p = subprocess.run([str(d / "fuzz_cost"), *files], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, ROOFLINE_FUZZ_PRINT="1"))
    assert p.returncode == 0, p.stderr[-5000:]
    assert sanitizer_report(p.stderr) is None, p.stderr[-5000:]
    kinds = {int(k) for k in re.findall(r"^op: kind=(\d+)", p.stderr, re.M)}
    import roofline._registry as reg

    assert kinds == set(reg.KIND_NAMES), sorted(set(reg.KIND_NAMES) - kinds)
    statuses = re.findall(r"^status=(\d+)", p.stderr, re.M)
    assert len(statuses) == len(files)
    assert statuses.count("0") >= len(files) - 5  # a few seeds overflow on purpose (sizes near 2**32 and 2**63)
    assert _evaluations(p.stderr) == len(files) * 2 * (reg.MHA + 3)  # every kind, an unknown one, twice each


def test_harness_catches_a_wrong_formula(fuzz_build, tmp_path):
    """A check that cannot fail proves nothing: the harness built against a cost model whose matrix products drop
    the factor 2 fails on the seeds, naming the count."""
    d, clang = fuzz_build
    src = (ROOT / "csrc" / "cost.c").read_text()
    wrong = "*flops = mul(mul(u(a->size[0]), u(b->size[1]), ov), u(a->size[1]), ov);"
    mutant = re.sub(r"\*flops = mul\(mul\(mul\(2, u\(a->size\[0\]\), ov\), u\(b->size\[1\]\), ov\), "
                    r"u\(a->size\[1\]\), ov\);", lambda _: wrong, src)
    assert mutant != src, "the mm formula in csrc/cost.c changed: update this test's mutant"
    (tmp_path / "cost.c").write_text(mutant)
    exe = tmp_path / "fuzz_mutant"
    b = subprocess.run([clang, *FLAGS, str(ROOT / "tests" / "fuzz" / "fuzz_cost.c"), str(tmp_path / "cost.c"),
                        "-o", str(exe)], capture_output=True, text=True)
    assert b.returncode == 0, b.stderr
    files = sorted(str(p) for p in (d / "seeds").iterdir())
    p = subprocess.run([str(exe), *files], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0
    assert "invariant violated: matrix = " in p.stderr, p.stderr[-3000:]


def test_fuzz_cost_model_briefly(fuzz_build, tmp_path):
    """FUZZ_SECONDS of coverage-guided fuzzing from the seeds: no sanitizer report, no invariant violated."""
    d, _ = fuzz_build
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    p = subprocess.run([str(d / "fuzz_cost"), f"-max_total_time={FUZZ_SECONDS}", "-timeout=10", "-rss_limit_mb=2048",
                        "-print_final_stats=1", f"-artifact_prefix={tmp_path}/", str(corpus), str(d / "seeds")],
                       capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    crashes = [f.name for f in tmp_path.iterdir() if f.name.startswith(("crash-", "leak-", "timeout-", "oom-"))]
    tail = p.stderr[-6000:]
    assert p.returncode == 0 and not crashes, f"{crashes}\n{tail}"
    assert sanitizer_report(p.stderr) is None, tail
    runs = int(re.search(r"stat::number_of_executed_units:\s*(\d+)", p.stderr).group(1))
    assert runs > 0 and _evaluations(p.stderr) >= runs * 2 * 20
