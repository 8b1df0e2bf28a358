"""Each recipe of docs/training.md and docs/quickstart.md runs after installing only the extra its page names: the
packages its code imports (and those the library calls it makes need at run time: the Hugging Face Trainer needs
accelerate, ``report_to=["tensorboard"]`` needs tensorboard) are among the extra's requirements or theirs.

Static, no network: the extras are read from pyproject.toml, the code blocks from the pages, and what each
requirement brings with it from the installed packages' metadata (``importlib.metadata``). A requirement this
environment lacks is a failure naming it (the suite's environment installs every extra)."""

from __future__ import annotations

import ast
import functools
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

# The check reads the extras' packages from the installed metadata: the suite's own environment (README's install,
# which brings every extra's packages). CI's second Python installs none of them: nothing to check there.
pytest.importorskip("torch", reason="the extras' packages are not installed (torch-free run): their metadata is read")
packaging_markers = pytest.importorskip("packaging.markers")
packaging_requirements = pytest.importorskip("packaging.requirements")

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]

# The extras each recipe's page tells a user to install: (page, section heading) -> extras. A section not listed
# takes its page's default. tests check that the page names them (the pip line) where the section is listed.
DEFAULT = {"docs/training.md": ("torch",), "docs/quickstart.md": ("torch",)}
SECTIONS = {
    ("docs/training.md", "## Hugging Face Trainer"): ("huggingface",),
    ("docs/training.md", "## Lightning"): ("lightning",),
    ("docs/quickstart.md", "## In a notebook"): ("torch", "pandas"),
    ("docs/quickstart.md", "## Saving, exporting, plotting"): ("torch", "plot", "pandas"),
    ("docs/quickstart.md", "## Costs from shapes alone"): (),
}
# What a call needs at run time beyond its module's own requirements (the library checks it when called)
CALL_NEEDS = {("transformers", "Trainer"): ("accelerate",)}
LOGGERS = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "comet_ml": "comet-ml"}
# what a method of a report needs (its optional dependency)
METHOD_NEEDS = {"plot": ("matplotlib",), "to_dataframe": ("pandas",)}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


@functools.lru_cache(maxsize=None)
def _providers() -> dict:
    return md.packages_distributions()


@functools.lru_cache(maxsize=None)
def _requires(name: str) -> tuple:
    try:
        return tuple(md.requires(name) or ())
    except md.PackageNotFoundError:
        raise AssertionError(f"{name} (required by an extra) is not installed: the check needs its metadata") \
            from None


def _closure(requirements) -> set[str]:
    """Every distribution the requirements bring, following the installed metadata (markers evaluated here,
    requirements of the dependencies' own extras left out)."""
    seen, todo = set(), [r for r in requirements]
    while todo:
        req = packaging_requirements.Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = req.name.lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        todo.extend(r for r in _requires(req.name) if "extra ==" not in r.replace("extra==", "extra =="))
        for r in req.extras:  # an extra of a dependency: its requirements under that extra
            todo.extend(x for x in _requires(req.name)
                        if packaging_requirements.Requirement(x).marker is not None
                        and packaging_requirements.Requirement(x).marker.evaluate({"extra": r}))
    return seen


def _recipes():
    out = []
    for page in DEFAULT:
        text = (ROOT / page).read_text(encoding="utf-8")
        section = None
        for m in re.finditer(r"^(#{1,3} [^\n]*)$|^```python\n(.*?)^```", text, re.M | re.S):
            if m.group(1):
                section = m.group(1).strip() if m.group(1).startswith("## ") else section
                continue
            out.append((page, section, m.group(2), text.count("\n", 0, m.start()) + 1))
    return out


RECIPES = _recipes()


def _needs(code: str) -> set[str]:
    """Top-level modules the code imports (outside the standard library and roofline), and the distributions
    its calls need (as "dist:NAME")."""
    tree = ast.parse(code)
    need = set()
    origin = {}  # name in the code -> the top-level module it was imported from
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module:
            origin.update({(a.asname or a.name): n.module.split(".")[0] for a in n.names})
        elif isinstance(n, ast.Import):
            origin.update({(a.asname or a.name.split(".")[0]): a.name.split(".")[0] for a in n.names})
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            need |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            need.add(n.module.split(".")[0])
        elif isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name):
                called = (origin.get(f.id), f.id)
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                called = (origin.get(f.value.id), f.attr)
            else:
                called = None
            need |= {f"dist:{d}" for d in CALL_NEEDS.get(called, ())}
            if isinstance(f, ast.Attribute):
                need |= {f"dist:{d}" for d in METHOD_NEEDS.get(f.attr, ())}
            for kw in n.keywords:
                if kw.arg == "report_to":
                    values = [c.value for c in ast.walk(kw.value) if isinstance(c, ast.Constant)]
                    need |= {f"dist:{LOGGERS[v]}" for v in values if v in LOGGERS}
    return {m for m in need if m.startswith("dist:") or (m not in sys.stdlib_module_names and m != "roofline")}


@pytest.mark.parametrize("page, section, code, line", RECIPES,
                         ids=[f"{p}:{line}" for p, _, _, line in RECIPES])
def test_a_recipe_runs_with_its_extra_alone(page, section, code, line):
    extras = SECTIONS.get((page, section), DEFAULT[page])
    brought = _closure([r for e in extras for r in EXTRAS[e]])
    providers = _providers()
    missing = []
    for need in sorted(_needs(code)):
        if need.startswith("dist:"):
            ok = need[5:] in brought
        else:
            dists = {d.lower().replace("_", "-") for d in providers.get(need, [])}
            ok = bool(dists & brought)
        if not ok:
            missing.append(need.replace("dist:", ""))
    assert not missing, (f"{page}:{line} ({section}) needs {', '.join(missing)}, which "
                         f"roofline[{','.join(extras)}] does not install")


def test_the_pages_name_the_extras_of_their_recipes():
    for (page, section), extras in SECTIONS.items():
        text = (ROOT / page).read_text(encoding="utf-8")
        body = text.split(section + "\n", 1)[1].split("\n## ", 1)[0]
        named = set(re.findall(r"roofline\[([\w,]+)\]|\"\.\[([\w,]+)\]\"", body))
        named = {e for pair in named for group in pair if group for e in group.split(",")}
        if page == "docs/quickstart.md":  # its extras are named once, in the install section
            install = text.split("## Install\n", 1)[1].split("\n## ", 1)[0]
            named |= {e for g in re.findall(r"\.\[([\w,]+)\]", install) for e in g.split(",")}
        assert set(extras) <= named, f"{page} {section}: name the extras {sorted(set(extras) - named)}"


def test_the_checks_see_what_a_recipe_lacks():
    """The checker fails where it should: a Trainer recipe without accelerate, a Lightning one without it."""
    assert "dist:accelerate" in _needs("from transformers import Trainer\nTrainer(model=None)")
    assert "dist:tensorboard" in _needs("TrainingArguments(report_to=['tensorboard'])")
    assert "accelerate" not in _closure(["transformers>=4.45"]) or "accelerate" in EXTRAS["huggingface"][1]
    assert "pytorch-lightning" in _closure(EXTRAS["lightning"])
    assert {"torch"} <= _closure(EXTRAS["huggingface"])  # through accelerate
