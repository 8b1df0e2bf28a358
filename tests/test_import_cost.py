"""What ``import roofline`` loads: the trace reader (roofline._traces) only when ``roofline.load_trace`` is first
used. Each check runs in a fresh interpreter, so nothing an earlier test imported hides a regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules_after(code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_roofline_does_not_import_the_trace_reader():
    got = _modules_after("import json, sys, roofline\n"
                         "print(json.dumps({'file': roofline.__file__,"
                         " 'traces': sorted(m for m in sys.modules if m.startswith('roofline._traces'))}))")
    assert Path(got["file"]).resolve().parent == ROOT / "roofline"  # this checkout's package
    assert got["traces"] == []


def test_load_trace_loads_the_reader_with_the_rank_directories():
    got = _modules_after("import json, sys, roofline\n"
                         "f = roofline.load_trace\n"
                         "from roofline import load_trace\n"
                         "print(json.dumps({'same': f is load_trace, 'module': f.__module__,"
                         " 'ranks': 'roofline._traces._ranks' in sys.modules, 'listed': 'load_trace' in dir(roofline),"
                         " 'all': 'load_trace' in roofline.__all__}))")
    assert got == {"same": True, "module": "roofline._traces._load", "ranks": True, "listed": True, "all": True}


def test_an_unknown_attribute_is_still_an_attribute_error():
    got = _modules_after("import json, roofline\n"
                         "try:\n    roofline.no_such_name\n    r = 'no error'\n"
                         "except AttributeError as e:\n    r = str(e)\n"
                         "print(json.dumps(r))")
    assert got == "module 'roofline' has no attribute 'no_such_name'"


def test_the_trace_command_reads_rank_directories_without_the_package_face():
    """``python -m roofline trace DIR`` imports the reader itself (not through roofline.load_trace): the reader of
    rank directories must be installed there too."""
    got = _modules_after("import json, sys\n"
                         "from roofline import _trace_cmd\n"
                         "from roofline._traces import _load\n"
                         "print(json.dumps({'installed': _load.directory_loader is not None}))")
    assert got == {"installed": True}
