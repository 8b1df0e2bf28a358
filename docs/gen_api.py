"""Generate docs/api.md, the API reference, from the package's docstrings and signatures.

    python docs/gen_api.py            # rewrite docs/api.md
    python docs/gen_api.py --check    # exit 1 if docs/api.md is not what this script would write

tests/test_api_doc.py runs the check, so a docstring change without a regenerated api.md fails the suite. The
list of what is documented (``SECTIONS``) is the public API; tests/test_docstrings.py checks that each of those
objects has a docstring.
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

import roofline
import roofline.cli
import roofline.devices
import roofline.distributed
import roofline.llm
import roofline.plot
from roofline import Monitor, PeakChoice, Profiler, Schedule
from roofline.report import BaseReport, Comparison

OUT = Path(__file__).resolve().parent / "api.md"

# Classes listed without a constructor signature: users receive them, they do not build them.
NOT_CONSTRUCTED = {BaseReport, roofline.Report, roofline.SteadyReport, Comparison, PeakChoice, roofline.CeilingNotAvailable,
                   Schedule, Profiler, Monitor, roofline.Measure, roofline.ProfilerAction}

# Module-level constants, which carry no docstring of their own.
CONSTANTS = {
    "roofline.__version__": "The package version, a string (``\"%s\"``: ``version`` in pyproject.toml, read from "
                            "the package metadata; semantic versioning, changes in CHANGELOG.md). Saved in every report "
                            "(``meta[\"version\"]``) and in the ceilings cache, whose entries of another version are "
                            "re-measured." % roofline.__version__,
    "roofline.devices.DEVICES": "Read-only mapping of canonical device name -> :class:`DeviceSpec`, in table order "
                                "(the order of :func:`names`).",
    "roofline.devices.UNITS": "The execution units a peak can belong to: ``%r``." % (roofline.devices.UNITS,),
    "roofline.devices.DTYPES": "The dtype names a datasheet peak can have: ``%r``." % (roofline.devices.DTYPES,),
}

# (heading, module, [(display name, object or constant name)]) in reading order.
SECTIONS = [
    ("roofline", roofline, [
        ("measure", roofline.measure),
        ("steady", roofline.steady),
        ("profile", roofline.profile),
        ("schedule", roofline.schedule),
        ("monitor", roofline.monitor),
        ("profiler", roofline.profiler),
        ("cost", roofline.cost),
        ("load", roofline.load),
        ("load_trace", roofline.load_trace),
        ("register", roofline.register),
        ("unregister", roofline.unregister),
        ("gather", roofline.gather),
        ("ceilings", roofline.ceilings),
        ("report.BaseReport", BaseReport),
        ("Report", roofline.Report),
        ("SteadyReport", roofline.SteadyReport),
        ("Measure", roofline.Measure),
        ("Profiler", Profiler),
        ("Schedule", Schedule),
        ("ProfilerAction", roofline.ProfilerAction),
        ("Monitor", Monitor),
        ("report.Comparison", Comparison),
        ("Cost", roofline.Cost),
        ("TensorSpec", roofline.TensorSpec),
        ("Ceilings", roofline.Ceilings),
        ("Ceiling", roofline.Ceiling),
        ("PeakChoice", PeakChoice),
        ("CeilingNotAvailable", roofline.CeilingNotAvailable),
        ("__version__", "roofline.__version__"),
    ]),
    ("roofline.devices", roofline.devices, [
        ("lookup", roofline.devices.lookup),
        ("get", roofline.devices.get),
        ("names", roofline.devices.names),
        ("DeviceSpec", roofline.devices.DeviceSpec),
        ("DEVICES", "roofline.devices.DEVICES"),
        ("UNITS", "roofline.devices.UNITS"),
        ("DTYPES", "roofline.devices.DTYPES"),
    ]),
    ("roofline.llm", roofline.llm, [(name, getattr(roofline.llm, name)) for name in roofline.llm.__all__]),
    ("roofline.distributed", roofline.distributed,
     [(name, getattr(roofline.distributed, name)) for name in roofline.distributed.__all__]),
    ("roofline.plot", roofline.plot, [("plot_report", roofline.plot.plot_report)]),
    ("roofline.cli", roofline.cli, [("main", roofline.cli.main), ("build_parser", roofline.cli.build_parser)]),
]

# The names that changed, written here (not generated): what a user of 0.4 reads first.
CHANGED = """## What changed in 0.5

New names (the old spellings still work in 0.5 and 0.6, with a `DeprecationWarning`, and go in 0.7):

| 0.4 | 0.5 | why |
|---|---|---|
| `roofline.profile(step, model, warmup=, repeat=)` | `roofline.steady(step, model, warmup=, repeat=)` | the steady repeat of a step function is not what torch calls a profile |
| `roofline.profiler(model, schedule=...)` | `roofline.profile(model, schedule=...)` | the name and arguments of `torch.profiler.profile`: code ported from torch runs |
| `Monitor.step(tokens=n)` | `Monitor.step(token_count=n)` | `tokens` is which positions are real (`measure(tokens=...)`, `useful_work(tokens=...)`) |
| the monitor's per-step `metrics["tokens"]` | `metrics["token_count"]` (both present in 0.5) | the same |
| `meta["trainer"]["tokens"]` | `meta["trainer"]["token_counts"]` (both present in 0.5) | the same |
| `RooflineCallback(tokens=...)` (both trainers) | `RooflineCallback(token_count=...)` | the same |

`roofline.profile` tells the two forms apart by their arguments: a step function (not an `nn.Module`) first, a second
positional argument, `warmup` or `repeat` is the 0.4 form. Arguments of `torch.profiler.profile` that have no
meaning here (`activities`, `on_trace_ready`, ...) are a `TypeError` saying what to use instead. The command line
keeps `python -m roofline profile MODEL`: a command that profiles a model by name, as `nsys profile` does (it runs
`roofline.steady`).

Types that public functions return, now importable from `roofline` and documented here: `Measure` (what `measure`
returns), `Profiler`, `Schedule`, `ProfilerAction` (what a schedule returns: an enum whose values are
`torch.profiler.ProfilerAction`'s names in lower case, `"none"`, `"warmup"`, `"record"`, `"record_and_save"`, each equal
to its string), `Monitor`, `PeakChoice`. Before, `Profiler`, `Schedule` and `Monitor` were documented at private paths.

The subpackages are private: `roofline._analysis`, `_capture`, `_compiled`, `_counting`, `_datamodel` (0.4's
`model` folder), `_hardware`, `_io`, `_traces`, `_util`, and the step loops' `roofline._loops`; their modules were
never part of the API, and some were renamed for what they hold (`_counting._cost`, `_capture._session`,
`_compiled._collector`, `_compiled._tracker_replay`, `integrations._run`). `roofline.devices` stays the public name
of the datasheet table (`python -m roofline.devices` too); `import roofline` no longer shows `model`, `io`, `util`
or `annotations` as attributes."""

_ROLE = re.compile(r":(?:func|meth|class|attr|data|mod|exc):`~?([^`]+)`")


def markdown(doc: str) -> str:
    """A docstring as Markdown: reST roles and double backticks become code spans, doctest lines a code block."""
    doc = inspect.cleandoc(doc or "")
    doc = _ROLE.sub(r"`\1`", doc)
    doc = doc.replace("``", "`")
    out, in_example = [], False
    for line in doc.splitlines():
        # an example runs from a ">>>" line to the next blank line (its expected output included)
        example = line.lstrip().startswith(">>>") or (in_example and line.strip() != "")
        if example and not in_example:
            out.append("```pycon")
        elif not example and in_example:
            out.append("```")
        in_example = example
        out.append(re.sub(r"\s*# doctest:.*$", "", line) if example else line)
    if in_example:
        out.append("```")
    return "\n".join(out).strip()


class _Text:
    """An annotation shown as written (string annotations would otherwise be quoted)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _plain(annotation):
    if annotation is inspect.Parameter.empty:
        return annotation
    text = annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)
    return _Text(re.sub(r"""['"](\w+)['"]""", r"\1", text))  # "Report" (a forward reference) -> Report


def signature(obj, drop_first: bool = False) -> str:
    """``(a, b: int = 1, *, c=None) -> str`` with annotations as written in the source."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    params = list(sig.parameters.values())
    if drop_first and params:
        params = params[1:]
    params = [p.replace(annotation=_plain(p.annotation)) for p in params]
    return str(sig.replace(parameters=params, return_annotation=_plain(sig.return_annotation)))


def _members(cls):
    """Public methods and properties defined by ``cls`` itself, in source order."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            yield name, "property", value
        elif isinstance(value, classmethod):
            yield name, "classmethod", value.__func__
        elif isinstance(value, staticmethod):
            yield name, "staticmethod", value.__func__
        elif inspect.isfunction(value):
            yield name, "method", value


def _entry(prefix: str, name: str, obj) -> list[str]:
    lines = []
    if isinstance(obj, str):
        value_doc = CONSTANTS[obj]
        lines += [f"### `{prefix}.{name}`", "", markdown(value_doc), ""]
        return lines
    if inspect.isclass(obj):
        sig = "" if obj in NOT_CONSTRUCTED or issubclass(obj, Exception) else signature(obj)
        sig = sig.removesuffix(" -> None")
        kind = "exception" if issubclass(obj, Exception) else "class"
        lines += [f"### {kind} `{prefix}.{name}{sig}`", "", markdown(obj.__doc__), ""]
        short = obj.__name__
        for mname, mkind, member in _members(obj):
            if mkind == "property":
                ret = signature(member.fget, drop_first=True).split(" -> ", 1)
                ret = f" -> {ret[1]}" if len(ret) == 2 else ""
                head = f"#### property `{short}.{mname}{ret}`"
                doc = member.fget.__doc__
            else:
                head = f"#### {'' if mkind == 'method' else mkind + ' '}`{short}.{mname}" \
                       f"{signature(member, drop_first=mkind != 'staticmethod')}`"
                doc = member.__doc__
            lines += [head, "", markdown(doc), ""]
        return lines
    lines += [f"### `{prefix}.{name}{signature(obj)}`", "", markdown(obj.__doc__), ""]
    return lines


def render() -> str:
    lines = [
        "# API reference",
        "",
        "<!-- Generated by `python docs/gen_api.py` from the docstrings; edit those, then regenerate. "
        "tests/test_api_doc.py fails when this file is stale. -->",
        "",
        "Every public function, class, method and property, with its signature (annotations as written in the "
        "source) and its docstring. Counting conventions and the definitions of MFU and MBU are in "
        "[concepts.md](concepts.md); a guided tour is in [quickstart.md](quickstart.md); the command line is in "
        "[cli.md](cli.md). The GPU benchmark module `roofline._hardware._gpu` is described in [gpu.md](gpu.md).",
        "",
        "Contents: [What changed in 0.5](#what-changed-in-05), " +
        ", ".join(f"[`{heading}`](#{heading.replace('.', '')})" for heading, _, _ in SECTIONS),
        "",
        CHANGED,
        "",
    ]
    for heading, module, entries in SECTIONS:
        lines += [f"## {heading}", "", markdown(module.__doc__), ""]
        for name, obj in entries:
            lines += _entry(heading, name, obj)
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Generate docs/api.md from the docstrings.")
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/api.md is out of date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
