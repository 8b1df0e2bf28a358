"""The public names of 0.5 (docs/api.md, "What changed in 0.5"): ``roofline.profile`` is torch's
``torch.profiler.profile`` (a schedule over the user's loop), ``roofline.steady`` the steady repeat of a step
function, ``token_count`` the number of tokens a step processed; the 0.4 spellings still work, each with a
DeprecationWarning naming the caller's line; every type a public function returns is importable from ``roofline``;
the subpackages are private."""

import inspect
import warnings

import pytest

torch = pytest.importorskip("torch")

import roofline  # noqa: E402
from roofline.integrations import _run  # noqa: E402

CEIL = "datasheet"


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return torch.nn.Linear(8, 4)


X = torch.randn(3, 8)


def _counts(r):
    return r.matrix_flops, r.vector_flops, r.bytes, sorted(r.op_names)


def test_profile_in_its_0_4_form_warns_and_is_steady(model):
    step = lambda: model(X).sum().backward()  # noqa: E731
    new = roofline.steady(step, model, warmup=1, repeat=2, timing=None, ceilings=CEIL)
    with pytest.warns(DeprecationWarning, match=r"roofline\.steady\(step, model") as caught:
        old = roofline.profile(step, model, warmup=1, repeat=2, timing=None, ceilings=CEIL)
    assert caught[0].filename == __file__  # the caller's line, not the package's
    assert type(old) is type(new) is roofline.SteadyReport
    assert _counts(old) == _counts(new)
    # Linear(8, 4) on a batch of 3, forward: 2*3*8*4 = 192 matrix FLOPs (+ 12 bias adds); the step's backward too
    assert old.matrix_flops >= 2 * 3 * 8 * 4
    for call in (lambda: roofline.profile(step), lambda: roofline.profile(step, model=model, repeat=1),
                 lambda: roofline.profile(step=step, warmup=0, repeat=1)):
        with pytest.warns(DeprecationWarning):
            assert isinstance(call(), roofline.SteadyReport)


def test_profile_with_a_schedule_is_torchs_and_does_not_warn(model):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no DeprecationWarning, no other warning
        prof = roofline.profile(model, schedule=roofline.schedule(warmup=1, active=2), ceilings=CEIL)
        with prof:
            for _ in range(4):
                model(X)
                prof.step()
    assert isinstance(prof, roofline.Profiler)
    assert len(prof.reports) == 1 and prof.reports[0].steps == [1, 2]
    # forward only: 2*3*8*4 matrix FLOPs per step, the median step's
    assert prof.reports[0].matrix_flops == 2 * 3 * 8 * 4
    # no model at all is the new form too
    assert isinstance(roofline.profile(schedule=roofline.schedule(), ceilings=CEIL), roofline.Profiler)


def test_profiler_is_the_deprecated_name_of_profile(model):
    with pytest.warns(DeprecationWarning, match=r"roofline\.profiler is deprecated.*use roofline\.profile") as caught:
        prof = roofline.profiler(model, schedule=roofline.schedule(warmup=0, active=1), ceilings=CEIL)
    assert caught[0].filename == __file__
    assert isinstance(prof, roofline.Profiler)
    with prof:
        model(X)
        prof.step()
    assert prof.reports[0].matrix_flops == 2 * 3 * 8 * 4


@pytest.mark.parametrize("name, hint", [("on_trace_ready", "use on_report="), ("activities", "every op"),
                                        ("record_shapes", "signatures"), ("with_flops", "always counted")])
def test_torch_only_arguments_say_what_to_use(model, name, hint):
    with pytest.raises(TypeError, match=rf"profile: {name} is an argument of torch\.profiler\.profile .*{hint}"):
        roofline.profile(model, **{name: None})


def test_profile_documents_its_own_signature():
    params = list(inspect.signature(roofline.profile).parameters)
    assert params == ["model", "schedule", "on_report", "timing", "ceilings", "attention", "step_time", "formulas"]
    assert list(inspect.signature(roofline.steady).parameters)[:4] == ["step", "model", "warmup", "repeat"]


def test_schedule_actions_are_an_enum_with_torchs_members():
    from torch.profiler import ProfilerAction as TorchAction

    A = roofline.ProfilerAction
    # torch's members a schedule returns, in torch's order (torch also has DEVICE_STOPPED, its own state)
    assert [a.name for a in A] == [a.name for a in TorchAction][:4]
    ts = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    assert {ts(n).name for n in range(8)} <= {a.name for a in A}
    assert [a.value for a in A] == ["none", "warmup", "record", "record_and_save"]
    s = roofline.schedule(wait=1, warmup=1, active=2)
    got = [s(n) for n in range(4)]
    assert got == [A.NONE, A.WARMUP, A.RECORD, A.RECORD_AND_SAVE]
    assert all(type(a) is A for a in got)
    assert got == ["none", "warmup", "record", "record_and_save"]  # equal to their strings, as before
    assert f"{got[2]}" == str(got[2]) == "record"
    # torch's own schedule drives roofline.profile: its actions map by name
    from roofline._loops._schedule import _action

    assert _action(torch.profiler.schedule(wait=0, warmup=1, active=1), 1) is A.RECORD_AND_SAVE
    assert _action(lambda n: "warmup", 0) is A.WARMUP
    with pytest.raises(ValueError, match="roofline.ProfilerAction"):
        _action(lambda n: "recording", 0)


def test_monitor_step_token_count_and_its_deprecated_name(model):
    seen = []
    with roofline.monitor(model, on_step=seen.append, ceilings=CEIL, warmup=0) as mon:
        model(X)
        mon.step(inputs=X, token_count=6)
        model(X)
        with pytest.warns(DeprecationWarning, match=r"Monitor\.step\(tokens=n\) is deprecated.*token_count=n") as w:
            mon.step(inputs=X, tokens=6)
        assert w[0].filename == __file__
        with pytest.raises(TypeError, match="give token_count only"), pytest.warns(DeprecationWarning):
            mon.step(token_count=1, tokens=1)
        with pytest.raises(ValueError, match=r"monitor.step: token_count must be an int in \[0, 9223372036854775807\], got -1"):
            mon.step(token_count=-1)
        with pytest.raises(ValueError, match=r"monitor.step: tokens must be an int in \[0, "), \
                pytest.warns(DeprecationWarning):
            mon.step(tokens=-1)  # the error names the keyword the caller used
    assert [m["token_count"] for m in seen] == [6, 6]
    assert [m["tokens"] for m in seen] == [6, 6]  # the 0.4 key, kept for 0.5
    assert all(m["tokens_per_s"] == 6 / m["time_s"] for m in seen)


def test_the_callbacks_token_count_option_and_its_deprecated_name():
    fn = lambda batch: 3  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _run.token_count_option("cb", fn, _run.NOT_GIVEN) is fn
        assert _run.token_count_option("cb", None, _run.NOT_GIVEN) is None
    with pytest.warns(DeprecationWarning, match=r"cb\(tokens=\.\.\.\) is deprecated.*token_count="):
        assert _run.token_count_option("cb", None, False) is False
    with pytest.raises(TypeError, match="give token_count only"), pytest.warns(DeprecationWarning):
        _run.token_count_option("cb", fn, fn)
    with pytest.raises(TypeError, match="cb: token_count must be None"):
        _run.Options("cb", steps=(2, 3), schedule=None, monitor=False, output_dir=None, tokens=3, timing="model",
                     ceilings=CEIL, attention=None, gather_timeout=1.0, log=False)


def test_every_returned_type_is_public_and_documented(model):
    """What each public function returns is a ``roofline.<Name>`` (or a name of the public module that returns it),
    and docs/api.md documents it at that path."""
    from pathlib import Path

    api = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    ceil = roofline.Ceilings.from_datasheet(roofline.devices.get("H100 SXM"))
    returned = {
        "measure": roofline.measure(model, ceilings=CEIL),
        "profile": roofline.profile(model, ceilings=CEIL),
        "schedule": roofline.schedule(),
        "schedule()(0)": roofline.schedule()(0),
        "monitor": roofline.monitor(model, ceilings=CEIL),
        "steady": roofline.steady(lambda: model(X), model, warmup=0, repeat=1, timing=None, ceilings=CEIL),
        "cost": roofline.cost("mm", [(2, 3), (3, 4)]),
        "Ceilings.resolve_peak": ceil.resolve_peak("matrix", "bfloat16", source="datasheet"),
        "devices.get": roofline.devices.get("H100 SXM"),
    }
    for where, value in returned.items():
        cls = type(value)
        public = [f"roofline.{cls.__name__}", f"roofline.devices.{cls.__name__}"]
        found = [p for p in public if p.startswith("roofline.devices.") and
                 getattr(roofline.devices, cls.__name__, None) is cls or
                 not p.startswith("roofline.devices.") and getattr(roofline, cls.__name__, None) is cls]
        assert found, f"{where} returns {cls.__module__}.{cls.__qualname__}, not importable from a public path"
        assert f"class `{found[0]}" in api, f"{found[0]} ({where}) is not documented in docs/api.md"


PUBLIC_MODULES = {"devices", "distributed", "llm", "report", "plot", "render", "integrations", "cli"}
DEPRECATED = {"profiler"}


def test_only_the_api_is_public_on_the_package():
    """After everything is imported (the torch side, the command line, the LLM helpers), the names of ``roofline``
    without an underscore are ``__all__``, the public modules and the deprecated spellings: no subpackage
    (``model``, ``io``, ``util``, ...) and no ``annotations`` (a ``from __future__`` import)."""
    import roofline.cli  # noqa: F401
    import roofline.llm  # noqa: F401

    with roofline.measure() as r:
        torch.ones(2) + 1
    assert len(r.records)
    public = {n for n in dir(roofline) if not n.startswith("_")}
    assert public - set(roofline.__all__) - PUBLIC_MODULES - DEPRECATED == set()
    for gone in ("model", "io", "util", "annotations", "analysis", "capture", "compiled", "counting", "hardware",
                 "traces"):
        assert not hasattr(roofline, gone), gone
    assert DEPRECATED.isdisjoint(roofline.__all__)


def test_devices_is_one_module_under_its_public_name():
    import roofline.devices as public
    from roofline._hardware import _devices

    assert public is _devices is roofline.devices
    assert public.get("H100 SXM").name == "H100 SXM"
