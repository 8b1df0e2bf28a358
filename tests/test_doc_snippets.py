"""Every ```python block of README.md and docs/*.md runs as written, each in a process of its own, and prints what
the text says it prints.

A block is skipped only when the line before it (blank lines aside) is a visible marker
``<!-- skip-test: <reason> -->``; the reason is shown as the skip reason. Use it for GPU-only snippets and nothing
else. Blocks run in a temporary directory (files they write land there) with matplotlib's non-interactive
backend; the ceilings cache is the user's, so a measured machine is not re-measured for every snippet.

Each block runs as ``python -c <block>`` would, in a process forked from an interpreter that has imported torch and
roofline and nothing else (its only thread the main one): importing torch took 2-4 s of each block's run. The block
gets a fresh ``__main__`` module, its own working directory, standard streams and exit status, and the process
exits through the interpreter's normal shutdown; a block that uses a name without importing it fails as it would
in a fresh interpreter. What it cannot notice is whether torch or roofline was imported before its first line, so
a block that sets environment variables or touches ``sys.modules`` (what an import may read) runs in a fresh
interpreter instead.

Stated outputs: a one-line ``print(...)`` whose trailing comment starts with a value (a number, ``~``, ``-``, ``{``,
``[``, ``(``, ``None``, ``True``, ``False``) states its output, up to the first ``": "`` outside brackets and quotes
(the rest is prose), and the test checks it, token by token (whitespace-separated): a token equal to the printed
one; ``~x`` a number within 1% of x; ``x...`` a printed token that starts with x. Comments that start with a word
(``# totals, time, ...``) describe the output and are not checked.
"""

import inspect
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*skip-test:\s*(.*?)\s*-->")
IMPORT = re.compile(r"^\s*(?:import|from)\s+([A-Za-z_][\w]*)", re.M)
OPTIONAL = {"torch", "torchvision", "transformers", "matplotlib", "pandas", "pytorch_lightning"}
# What an import may have read before a block's first line: such a block runs in a fresh interpreter.
IMPORT_STATE = re.compile(r"\bos\.environ\b|\bputenv\b|\bsys\.modules\b")


def _blocks():
    """(id, code, skip reason or None) for each python block, in file order."""
    out = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            if lines[i].strip() == "```python":
                start = i
                j = i + 1
                while j < len(lines) and lines[j].strip() != "```":
                    j += 1
                assert j < len(lines), f"{path.name}:{start + 1}: unterminated ```python block"
                code = "\n".join(lines[start + 1:j]) + "\n"
                k = start - 1
                while k >= 0 and not lines[k].strip():
                    k -= 1
                marker = SKIP.search(lines[k]) if k >= 0 else None
                out.append((f"{path.relative_to(ROOT)}:{start + 1}", code, marker.group(1) if marker else None))
                i = j
            i += 1
    return out


BLOCKS = _blocks()

_STATED = re.compile(r"^(\s*)print\((.*)\)\s+#\s*((?:[~\d\-{\[(]|None\b|True\b|False\b).*)$")


def _stated_value(comment: str) -> str:
    """The value part of a stated-output comment: up to the first ": " outside brackets and quotes."""
    depth, quote = 0, None
    for i, c in enumerate(comment):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ":" and depth == 0 and comment[i + 1:i + 2] in (" ", ""):
            return comment[:i].strip()
    return comment.strip()


def _matches(printed: str, stated: str) -> bool:
    """Whether the printed text is the stated output (see the module docstring for the notation)."""
    got, want = printed.split(), stated.split()
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if w.startswith("~"):
            try:
                x, y = float(w[1:]), float(g)
            except ValueError:
                return False
            if not abs(y - x) <= 0.01 * abs(x):
                return False
        elif w.endswith("...") and len(w) > 3:
            if not g.startswith(w[:-3]):
                return False
        elif g != w:
            return False
    return True


def _check_stated_output(where, stated, *args, **kwargs):
    import io

    buf = io.StringIO()
    print(*args, file=buf, **kwargs)
    printed = buf.getvalue()
    print(printed, end="")
    if not _matches(printed, stated):
        raise AssertionError(f"{where}: the text says this prints {stated!r}, it printed {printed.strip()!r}")


def _with_output_checks(where: str, code: str):
    """``code`` with each stated-output print replaced by a checked one; and the (line, stated value) pairs."""
    lines, checks = [], []
    first = int(where.rsplit(":", 1)[1]) + 1
    for i, line in enumerate(code.splitlines()):
        m = _STATED.match(line)
        if m:
            indent, args, comment = m.groups()
            stated = _stated_value(comment)
            at = f"{where.rsplit(':', 1)[0]}:{first + i}"
            checks.append((at, stated))
            line = f"{indent}_check_stated_output({at!r}, {stated!r}, {args})"
        lines.append(line)
    if not checks:
        return code, checks
    prelude = "\n".join(inspect.getsource(f) for f in (_matches, _check_stated_output))
    return prelude + "\n" + "\n".join(lines) + "\n", checks


def test_blocks_are_found():
    files = {b[0].split(":")[0] for b in BLOCKS}
    assert "README.md" in files and "docs/quickstart.md" in files
    skipped = [b for b in BLOCKS if b[2]]
    assert len(skipped) <= 3, f"skip-test markers are for GPU-only snippets: {[b[0] for b in skipped]}"


# The forking interpreter (see the module docstring). It reads one request per line on stdin (JSON: code, working
# directory, files for stdout and stderr), forks, and answers on stdout "pid <pid>" when the child started and
# "exit <code>" when it ended (a negative code: killed by that signal). The child runs the block in a new __main__
# module; an exception leaving the block ends the process as in `python -c` (the traceback on stderr, exit status 1).
_FORKSERVER = r"""
import gc, importlib.util, json, os, sys

for _name in ("torch", "roofline"):
    if importlib.util.find_spec(_name) is not None:
        __import__(_name)
del _name
gc.freeze()  # what is imported stays out of the children's collections (they would copy every page they touch)


def _child(request):
    import builtins
    import types

    os.chdir(request["cwd"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = open(0, closefd=False)
    sys.argv = ["-c"]
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    exec(compile(request["code"], "<string>", "exec"), main.__dict__)
    raise SystemExit(0)


while True:
    line = sys.stdin.readline()
    if not line:
        break
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        _child(request)  # never returns: the block's end, an exception or sys.exit ends the process
    os.write(1, f"pid {pid}\n".encode())
    os.write(1, f"exit {os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])}\n".encode())
"""


class _ForkServer:
    """Runs Python code as ``python -c`` would, each run in a process forked from one interpreter; ``home`` holds
    the server's working directory and the runs' standard output and error."""

    def __init__(self, home: Path):
        self.home, self.runs = home, 0
        self.proc = subprocess.Popen([sys.executable, "-c", _FORKSERVER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, cwd=home, env=dict(os.environ, MPLBACKEND="Agg"))

    def _line(self, deadline):
        """The server's next line; None at the deadline."""
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
            return None
        line = self.proc.stdout.readline().decode()
        assert line, f"the forking interpreter exited ({self.proc.wait()})"
        return line.split()

    def run(self, code: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
        deadline = time.monotonic() + timeout
        self.runs += 1
        out, err = self.home / f"{self.runs}.stdout", self.home / f"{self.runs}.stderr"
        request = {"code": code, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        started = self._line(deadline)
        assert started and started[0] == "pid", started
        ended = self._line(deadline)
        if ended is None:
            os.kill(int(started[1]), signal.SIGKILL)
            ended = self._line(time.monotonic() + 30)
            raise subprocess.TimeoutExpired(["-c", code], timeout, out.read_text(), err.read_text())
        assert ended[0] == "exit", ended
        return subprocess.CompletedProcess(["-c", code], int(ended[1]), out.read_text(), err.read_text())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def python_c(tmp_path_factory):
    """``python_c(code, cwd, timeout)``: a CompletedProcess, as of ``python -c code`` run in ``cwd``."""
    server = _ForkServer(tmp_path_factory.mktemp("forkserver"))
    yield server.run
    server.close()


def test_a_forked_run_is_what_python_c_gives(python_c, tmp_path):
    """Exit status, standard output and error, working directory, ``__name__`` and a fresh namespace: the same as a
    fresh ``python -c``."""
    programs = [
        "import os, sys\nprint(os.getcwd(), __name__, sys.argv, [k for k in globals() if not k.startswith('__')])",
        "import sys\nprint('out'); print('err', file=sys.stderr); sys.exit(3)",
        "print(torch.ones(1))",  # torch imported by the server, not by this program: a NameError
        "raise ValueError('from the block')",
        "import atexit\natexit.register(lambda: print('at exit'))",
    ]
    for i, code in enumerate(programs):
        cwd = tmp_path / str(i)
        cwd.mkdir()
        want = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd)
        got = python_c(code, cwd, timeout=60)
        assert (got.returncode, got.stdout) == (want.returncode, want.stdout), code
        assert got.stderr.splitlines()[-1:] == want.stderr.splitlines()[-1:], code  # the traceback's last line
    assert [python_c(c, tmp_path, timeout=60).returncode for c in ("pass", "import sys; sys.exit(0)")] == [0, 0]


@pytest.mark.parametrize("where,code,skip", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_snippet_runs(where, code, skip, tmp_path, python_c):
    if skip:
        pytest.skip(skip)
    for module in sorted(set(IMPORT.findall(code)) & OPTIONAL):
        pytest.importorskip(module)
    fresh = bool(IMPORT_STATE.search(code))
    code, _ = _with_output_checks(where, code)
    if fresh:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                             cwd=tmp_path, env=dict(os.environ, MPLBACKEND="Agg"))
    else:
        out = python_c(code, tmp_path, timeout=300)
    assert out.returncode == 0, f"{where} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"


def test_readme_stated_outputs_are_checked():
    """The outputs README states are among the checked ones (the notation cannot silently stop matching them)."""
    stated = {value for where, code, _ in BLOCKS if where.startswith("README.md")
              for _, value in _with_output_checks(where, code)[1]}
    assert {"{}", "137438953472 100663296 1365.33...", "~0.5"} <= stated, stated


def test_stated_output_notation():
    assert _stated_value("{}: every op had a formula") == "{}"
    assert _stated_value("{'demo.scale_add.default': 1}: bytes counted") == "{'demo.scale_add.default': 1}"
    assert _stated_value("~0.5: causal attention does half the work") == "~0.5"
    assert _matches("137438953472 100663296 1365.3333333333333\n", "137438953472 100663296 1365.33...")
    assert not _matches("137438953472 100663296 1365.4\n", "137438953472 100663296 1365.33...")
    assert not _matches("137438953471 100663296 1365.3333\n", "137438953472 100663296 1365.33...")
    assert not _matches("137438953472 100663296\n", "137438953472 100663296 1365.33...")
    assert _matches("0.500244140625\n", "~0.5") and not _matches("0.51\n", "~0.5")
    assert not _matches("{'aten.add.Tensor': 1}\n", "{}") and _matches("{}\n", "{}")
    code, checks = _with_output_checks("X.md:1", "x = 2\nprint(x + 1)  # 4: wrong on purpose\n")
    assert checks == [("X.md:3", "4")]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "X.md:3: the text says this prints '4', it printed '3'" in out.stderr
