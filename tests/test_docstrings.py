"""Every public function, class, method and property has a docstring, and so does every CLI option.

Public means: what ``roofline.__all__`` exports; the public methods and properties of the classes users handle
(reports, ceilings, device specs, cost specs, the LLM helpers' classes); everything in ``roofline.llm.__all__`` and
``roofline.devices.__all__``; ``roofline.plot.plot_report``; and the command line (``roofline.cli``). A missing
docstring fails here with the object's qualified name.
"""

import inspect

import pytest

import roofline
import roofline.cli
import roofline.devices
import roofline.llm
import roofline.plot
from roofline.report import Comparison

# Classes whose public methods and properties are part of the API (beyond the classes exported by __all__ lists).
MEMBER_CLASSES = [
    roofline.Report, Comparison, roofline.Ceilings, roofline.Ceiling, roofline.PeakChoice, roofline.devices.DeviceSpec,
    roofline.TensorSpec, roofline.Cost, roofline.llm.DecoderConfig, roofline.llm.CrossCheck,
]
MODULES = [roofline, roofline.llm, roofline.devices, roofline.plot, roofline.cli, roofline.report]


def _doc(obj) -> str:
    return (obj.__doc__ or "").strip()


def _public_name(module) -> str:
    """The name users import ``module`` by (``roofline.devices`` is ``roofline._hardware._devices``)."""
    return "roofline.devices" if module is roofline.devices else module.__name__


def _exported(module):
    """(qualified name, object) for each function or class in ``module.__all__``."""
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj):
            yield f"{_public_name(module)}.{name}", obj


def _members(cls):
    """(qualified name, function or property) for each public member defined by ``cls`` itself (inherited
    members of object, tuple or dataclass machinery are not the class's own API)."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            yield f"{cls.__module__}.{cls.__qualname__}.{name}", value


def public_objects():
    seen, out = set(), []

    def add(name, obj):
        if id(obj) not in seen:
            seen.add(id(obj))
            out.append((name, obj))

    for module in MODULES:
        add(_public_name(module), module)
    for module in (roofline, roofline.llm, roofline.devices):
        for name, obj in _exported(module):
            add(name, obj)
    add("roofline.plot.plot_report", roofline.plot.plot_report)
    add("roofline.cli.main", roofline.cli.main)
    add("roofline.cli.build_parser", roofline.cli.build_parser)
    classes = MEMBER_CLASSES + [obj for _, obj in out if inspect.isclass(obj)]
    for cls in dict.fromkeys(classes):
        add(f"{cls.__module__}.{cls.__qualname__}", cls)
        for name, member in _members(cls):
            add(name, member)
    return out


OBJECTS = public_objects()


def test_the_walk_finds_the_api():
    names = {name for name, _ in OBJECTS}
    for expected in ("roofline.measure", "roofline.cost", "roofline.report.Report.analysis",
                     "roofline._hardware._ceilings_model.Ceilings.peak", "roofline.devices.lookup", "roofline.llm.forward_flops",
                     "roofline.llm.DecoderConfig.from_hf", "roofline.plot.plot_report", "roofline.cli.main"):
        assert expected in names
    assert len(OBJECTS) > 100


@pytest.mark.parametrize("name,obj", OBJECTS, ids=[name for name, _ in OBJECTS])
def test_public_object_has_a_docstring(name, obj):
    assert _doc(obj), f"{name} has no docstring"


def _subcommands():
    parser = roofline.cli.build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    helps = {c.dest: c.help for c in sub._choices_actions}
    return [(name, p, helps.get(name)) for name, p in sub.choices.items()]


@pytest.mark.parametrize("name,parser,help_text", _subcommands(), ids=[c[0] for c in _subcommands()])
def test_cli_command_and_options_are_documented(name, parser, help_text):
    assert help_text, f"`roofline {name}` has no help line"
    assert parser.description, f"`roofline {name}` has no description"
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help, f"`roofline {name}` option {action.option_strings or action.dest} has no help"
