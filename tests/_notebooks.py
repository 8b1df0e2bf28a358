"""Executing the notebooks of notebooks/ for the tests/test_notebooks*.py modules.

Each notebook ends with a cell tagged ``checks`` that prints a JSON object of the figures it computed; the test
modules compare those figures with what the roofline model says they must be (not with flags the notebook set).
Notebooks are executed in memory, in a kernel running this interpreter, each in a temporary working directory of
its own, with a private ceilings cache: nothing is written into the repository.

The notebooks of one test module share one kernel: starting a kernel, importing torch, matplotlib and pandas into
it, measuring the CPU ceilings (not cached on disk while the machine is busy, as it is while the suite runs on two
processes) and shutting it down cost seconds each, the same for every notebook. Before each notebook the kernel is
brought back to what a fresh one would show the notebook: the user namespace and the output history are cleared
(``%reset -f``: a name a notebook uses without defining it fails as in a fresh kernel), the working directory is the
notebook's own, open figures are closed and TorchDynamo's compiled code is dropped. What stays is the modules
imported and the ceilings measured in the kernel, neither of which a notebook's figures depend on.
"""

import contextlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
for _module in ("ipykernel", "torch", "matplotlib", "pandas"):
    pytest.importorskip(_module)

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = {p.stem: p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
# Which test module executes which notebooks, each module's in one kernel; a module executing heavy notebooks of
# its own lets README's two test processes run them side by side.
EXECUTED_BY = {"test_notebooks": ("ceilings", "llm_decode", "llm_train", "resnet", "traces", "vit"),
               "test_notebooks_vlm": ("vlm_train",)}
CELL_TIMEOUT = 900  # seconds per cell; the notebooks take about a minute each on a small CPU

# Run in the module's kernel before each notebook (see the module docstring); prints the working directory and the
# names left in the user namespace.
_RESET = """\
%reset -f
import os as _os, sys as _sys
_os.chdir({workdir!r})
if "matplotlib.pyplot" in _sys.modules:
    _sys.modules["matplotlib.pyplot"].close("all")
if "torch._dynamo" in _sys.modules:
    _sys.modules["torch._dynamo"].reset()
print("RESET", _os.getcwd(), sorted(k for k in globals() if not k.startswith("_")
                                     and k not in ("In", "Out", "exit", "quit", "get_ipython", "open")))
del _os, _sys
"""


@pytest.fixture(scope="session")
def kernel_env(tmp_path_factory):
    """A kernel spec named ``python3`` that starts this interpreter, first on JUPYTER_PATH (so a ``python3`` kernel
    installed for another Python is not picked), and a private ceilings cache."""
    jupyter = tmp_path_factory.mktemp("jupyter")
    spec = jupyter / "kernels" / "python3"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tests)", "language": "python"}))
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [str(jupyter), os.environ.get("JUPYTER_PATH")])))
    mp.setenv("ROOFLINE_CACHE_DIR", str(tmp_path_factory.mktemp("roofline-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def executed(kernel_env, tmp_path_factory):
    """name -> (executed notebook, checks dict, seconds); each notebook runs once, all of a test module's in one
    kernel."""
    runs = {}
    kernel = []  # (client, the ExitStack that shuts its kernel down) while a kernel runs

    def client_for(nb):
        """The module's notebook client, its kernel started on first use, set to execute ``nb`` (it writes each cell
        it executes back into ``nb`` at the cell's index)."""
        if not kernel:
            home = tmp_path_factory.mktemp("kernel")  # the kernel's start directory; not a notebook's (_RESET)
            owner = nbclient.NotebookClient(nb, kernel_name="python3", timeout=CELL_TIMEOUT,
                                            shutdown_kernel="immediate", resources={"metadata": {"path": str(home)}})
            stack = contextlib.ExitStack()
            stack.enter_context(owner.setup_kernel())
            kernel.append((owner, stack))
        client = kernel[0][0]
        client.nb = nb
        client.reset_execution_trackers()
        return client

    def run(name):
        if name not in runs:
            nb = nbformat.read(NOTEBOOKS[name], as_version=4)
            probe = nbformat.v4.new_code_cell("import sys; print('KERNEL-PYTHON', sys.executable)")
            nb.cells.insert(0, probe)
            workdir = tmp_path_factory.mktemp(name)
            reset = nbformat.v4.new_code_cell(_RESET.format(workdir=str(workdir)))
            client_for(nbformat.v4.new_notebook(cells=[reset])).execute_cell(reset, 0, store_history=False)
            # the working directory is the notebook's, and the namespace holds nothing of an earlier notebook
            assert _stdout(reset).split() == ["RESET", str(workdir), "[]"], _stdout(reset)
            client = client_for(nb)
            start = time.perf_counter()
            try:
                for index, cell in enumerate(nb.cells):
                    client.execute_cell(cell, index)  # raises CellExecutionError, with the cell and traceback
            except nbclient.exceptions.DeadKernelError:
                kernel.pop()[1].close()  # the next notebook starts a kernel of its own
                raise
            seconds = time.perf_counter() - start
            assert _stdout(nb.cells[0]).split()[-1] == sys.executable
            checks = [c for c in nb.cells if "checks" in c.metadata.get("tags", [])]
            assert len(checks) == 1, f"{name}: expected one cell tagged 'checks'"
            runs[name] = (nb, json.loads(_stdout(checks[0])), seconds)
        return runs[name]

    yield run
    while kernel:
        kernel.pop()[1].close()


def _stdout(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


def check_runs_without_touching_the_repository(name, executed):
    """The notebook runs, writes nothing into notebooks/, and its checks cell printed figures."""
    before = {p: p.read_bytes() for p in NOTEBOOKS.values()}
    nb, checks, seconds = executed(name)
    assert {p: p.read_bytes() for p in NOTEBOOKS.values()} == before
    assert checks
    print(f"{name}: {seconds:.1f} s")
