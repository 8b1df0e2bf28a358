"""The ``profile`` command of ``python -m roofline`` (registered by :mod:`roofline.cli`; options in docs/cli.md).

Every option is checked by :func:`plan` before anything is built or run: numbers, the device, dtypes, the
attention backend, output paths (writable, a known chart extension), datasheet device names and the model name
(with close matches when it is unknown). Then :func:`run` builds the model, runs the warm-up steps uncounted and the
measured steps under :func:`roofline.steady`, and prints the report.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import math
import os
import re
import site
import sys
import sysconfig
import traceback
from dataclasses import dataclass, field

from roofline._hardware import _devices as devices
from roofline import llm
from roofline._hardware._ceilings_model import FIGURE_SOURCES
from roofline._util import _output
from roofline._util._format import fmt

BUILTIN_MODELS = ("resnet50", "vit_b_16", "gpt2", "llama")
LLMS = ("gpt2", "llama")
PLOT_EXTENSIONS = (".png", ".svg", ".pdf")
ATTENTION = ("flash", "efficient", "math")
# roofline.steady's step_time choices (roofline._loops._steady.STEP_TIMES), spelled out here so that the options
# are checked before torch is imported
STEP_TIMES = ("median", "min", "unwaited", "unwaited_min", "ops_min")
_DTYPES = {"float32": "float32", "fp32": "float32", "float": "float32", "float64": "float64", "fp64": "float64",
           "double": "float64", "bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
           "half": "float16"}
_AUTOCAST = ("bfloat16", "float16")
# what a count on meta assumes unless told: a GPU's dtype and attention kernel, as every projection does
META_DEFAULTS = llm.PROJECTION_DEFAULTS


def add_profile(subparsers: argparse._SubParsersAction, func) -> None:
    """Register ``profile`` and its options on ``subparsers``; ``func`` runs it."""
    p = subparsers.add_parser(
        "profile",
        help="count, time and classify a model's ops and print the roofline report",
        description="Build a model (random weights, nothing downloaded) or your own callable, run warm-up steps "
        "uncounted, then measure steps under roofline.steady and print the report of the median step. MODEL is "
        f"one of {', '.join(BUILTIN_MODELS)}, a torchvision or timm classification model name (e.g. resnet18, "
        "mobilenetv3_small_100), 'module:callable' or 'path/to/file.py:callable' naming a function that takes "
        "(device, batch, seq, train) and returns (model, step) where step() runs the work. Every option is "
        "checked before anything runs.",
    )
    p.add_argument("model", help=f"{' | '.join(BUILTIN_MODELS)} | torchvision/timm name | module:callable | "
                   "file.py:callable")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: 1; 8 for vision inference)")
    p.add_argument("--seq", type=int, default=128, help="sequence length of the language models (default 128)")
    p.add_argument("--train", action="store_true", help="a training step (forward, backward, AdamW) instead of "
                   "inference")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda[:N] or meta (count only; use --project)")
    p.add_argument("--dtype", metavar="DTYPE", help="build the model and its inputs in DTYPE (float32, bfloat16, "
                   "float16, float64; bf16/fp16 accepted). Default: float32, or bfloat16 on meta")
    p.add_argument("--autocast", metavar="DTYPE", help="run the step under torch.autocast in DTYPE (bfloat16 or "
                   "float16); not on meta")
    p.add_argument("--attention", choices=ATTENTION, help="on meta: the scaled_dot_product_attention kernel counted "
                   "(default flash); elsewhere the kernel that runs is counted")
    p.add_argument("--warmup", type=int, default=1, help="steps run uncounted first (default 1: optimizer state "
                   "creation and lazy initialisation stay out of the measured step); 0 measures the first step")
    p.add_argument("--repeat", type=int, default=None, help="measured steps; the report is the median step (default "
                   "3; 1 on meta, where nothing is timed)")
    p.add_argument("--seconds", type=float, default=None, help="keep measuring steps, past --repeat, until they "
                   "have taken this much wall time (on a shared host, 15 spreads them over the machine's phases of "
                   "speed: the least times are then comparable between runs)")
    p.add_argument("--plain", action="store_true", help="after each measured step, run the step once more outside "
                   "roofline and time it: the report compares the least of those with the least measured step (what "
                   "the instrumentation adds)")
    p.add_argument("--step-time", choices=STEP_TIMES, default="median", help="the step time the MFU and roofline "
                   "figures divide by: the median wall time of the measured steps (default), the least, or "
                   "'unwaited' (each step's wall time with its threads' waits for a CPU held by other processes "
                   "taken out: for a shared machine; median over the steps), 'unwaited_min' (the least of those) or "
                   "'ops_min' (each op's least time over the steps plus the least time between ops: the steadiest on "
                   "a shared machine; needs --timing op); the report's first line says which")
    p.add_argument("--decode", action="store_true", help="language models: measure one decode step (one new token "
                   "per sequence) against a KV cache of --kv-len tokens, and print tokens/s and bytes per token "
                   "against the bandwidth roof")
    p.add_argument("--kv-len", type=int, metavar="N", help="tokens in the KV cache for --decode")
    p.add_argument("--timing", choices=("op", "model", "none"), default="op", help="time every op (default), the "
                   "whole step, or nothing")
    p.add_argument("--project", metavar="DEVICE", help="also project the run onto a datasheet device, e.g. 'H100 "
                   "SXM' (see roofline.devices)")
    p.add_argument("--ceilings", default="measured", help="'measured' (default), 'datasheet' or a device name")
    p.add_argument("--plot", metavar="PATH", help="write the roofline chart (.png, .svg or .pdf)")
    p.add_argument("--json", metavar="PATH", help="write the report as JSON (roofline.load reads it back); '-': "
                   "to stdout, the tables then go to stderr")
    p.add_argument("--top", type=int, default=15, help="rows in the op table (default 15)")
    p.add_argument("--by-module", type=int, metavar="DEPTH", help="also print the per-module table to DEPTH")
    p.set_defaults(func=func)


@dataclass
class Plan:
    """What :func:`run` will do, decided (and checked) before anything runs."""

    model: str
    source: str  # "builtin", "torchvision", "timm", "callable"
    builder: object = None  # the user's callable, for source "callable"
    device: str = "cpu"
    dtype: str | None = None
    autocast: str | None = None
    attention: str | None = None
    warmup: int = 1
    repeat: int = 3
    seconds: float | None = None
    plain: bool = False
    timing: str | None = "op"
    step_time: str = "median"
    notes: list = field(default_factory=list)


# ---- checks ---------------------------------------------------------------------------------------------------


def _positive(args, name: str, lo: int = 1) -> None:
    v = getattr(args, name.replace("-", "_"))
    if v is not None and v < lo:
        raise ValueError(f"--{name} must be >= {lo}, got {v}")


def _dtype(flag: str, value: str | None, allowed=None) -> str | None:
    if value is None:
        return None
    name = _DTYPES.get(value.lower())
    if name is None or (allowed and name not in allowed):
        ok = allowed or sorted(set(_DTYPES.values()))
        raise ValueError(f"{flag} {value!r}: expected one of {', '.join(ok)}")
    return name


def check_device(device: str) -> str:
    """``cpu``, ``meta``, ``cuda`` or ``cuda:N`` (a CUDA device that exists); ValueError otherwise."""
    if device in ("cpu", "meta"):
        return device
    m = re.fullmatch(r"cuda(?::(\d+))?", device)
    if not m:
        raise ValueError(f"--device {device!r}: expected cpu, cuda, cuda:N or meta")
    import torch

    if not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available (torch {torch.__version__}, "
                         f"{'no CUDA build' if torch.version.cuda is None else 'no GPU or driver found'})")
    if m.group(1) is not None and int(m.group(1)) >= torch.cuda.device_count():
        raise ValueError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s)")
    return device


def check_output(flag: str, path: str, extensions=None) -> None:
    """``path`` can be written (:func:`roofline._util._output.check_writable`, which never creates, truncates or opens
    the file itself: a FIFO's reader sees no end of file, a dangling link stays a link): its folder exists and takes
    a new file, it is not a folder, an existing file, FIFO or device is writable, and (for a chart) its extension is
    one of ``extensions``. ``-`` (stdout) is accepted where there are no ``extensions``."""
    if path == "-" and extensions is None:
        return
    if extensions is not None:
        ext = os.path.splitext(path)[1].lower()
        if path == "-":
            raise ValueError(f"{flag} -: a chart is not written to stdout; give a file name ending in "
                             f"{', '.join(extensions)}")
        if ext not in extensions:
            raise ValueError(f"{flag} {path!r}: the extension must be one of {', '.join(extensions)} "
                             f"(got {ext or 'none'})")
    if not path:
        raise ValueError(f"{flag}: the file name is empty")
    _output.check_writable(path, flag)


def _device_name(flag: str, name: str) -> None:
    """``name`` names a datasheet device (:func:`roofline.devices.lookup`); ValueError otherwise, offering close
    matches among the devices' names and aliases, each given by its device's name: every name offered is in the
    list of known devices that follows, and is accepted as it is written."""
    if devices.lookup(name) is not None:
        return
    canonical: dict[str, str] = {}
    for spec in devices.DEVICES.values():
        for alias in (spec.name, *spec.aliases):
            canonical.setdefault(" ".join(alias.casefold().split()), spec.name)
    query = " ".join(str(name).casefold().split())
    close = list(dict.fromkeys(canonical[c] for c in difflib.get_close_matches(query, list(canonical), n=8,
                                                                                cutoff=0.5)))[:3]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(f"{flag}: no datasheet entry for device {name!r}{hint} Known devices: "
                     f"{', '.join(devices.names())} (python -m roofline devices lists them with their figures)")


_REGISTERED = re.compile(r"^@register_model\b.*?^def\s+(\w+)\s*\(", re.M | re.S)


def registered_names(package: str, folder: str, recursive: bool) -> list[str] | None:
    """The model names an installed ``package`` (torchvision, timm) registers with ``@register_model`` in the
    sources under ``folder``, read from the files without importing the package (importing torchvision or timm
    takes seconds: a misspelled name is rejected before that). None when the package is not installed, or when
    its sources could not be read or register nothing (a layout this reading does not know: the caller then asks
    the package itself)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    names: list[str] = []
    for base in spec.submodule_search_locations:
        for root, dirs, files in os.walk(os.path.join(base, folder)):
            dirs.sort()
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                try:
                    with open(os.path.join(root, f), encoding="utf-8") as fh:
                        names.extend(_REGISTERED.findall(fh.read()))
                except (OSError, UnicodeDecodeError):
                    return None
            if not recursive:
                break
    return list(dict.fromkeys(names)) or None


def _model_names(package: str, recursive: bool, listed) -> list[str]:
    """The model names of ``package``: those registered in its ``models`` folder, else ``listed(package module)``
    (what the package itself lists); [] when it is not installed."""
    names = registered_names(package, "models", recursive=recursive)
    if names is not None:
        return names
    try:
        module = importlib.import_module(package)
    except ImportError:
        return []
    return list(listed(module))


def _torchvision_names() -> list[str]:
    """torchvision's classification models (``torchvision.models.list_models(module=torchvision.models)``): the
    registered names of torchvision/models/*.py, else asked of torchvision; [] when it is not installed."""
    return _model_names("torchvision", False, lambda tv: tv.models.list_models(module=tv.models))


def _timm_names() -> list[str]:
    """timm's models (``timm.list_models()``): the registered names of timm/models/, else asked of timm; [] when it
    is not installed."""
    return _model_names("timm", True, lambda timm: timm.list_models())


def _load_callable(spec: str):
    """The callable named by ``module:callable`` or ``path/to/file.py:callable`` (the file is imported, the
    callable is not called)."""
    target, _, attr = spec.rpartition(":")
    if not target or not attr:
        raise ValueError(f"model {spec!r}: expected a model name, 'module:callable' or 'file.py:callable'")
    if target.endswith(".py") or os.sep in target or "/" in target:
        if not os.path.isfile(target):
            raise ValueError(f"model {spec!r}: no such file {target!r}")
        name = "_roofline_user_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(target))[0])
        mspec = importlib.util.spec_from_file_location(name, target)
        if mspec is None or mspec.loader is None:
            raise ValueError(f"model {spec!r}: cannot load {target!r} as Python")
        obj = importlib.util.module_from_spec(mspec)
        sys.modules[name] = obj
        try:
            mspec.loader.exec_module(obj)
        except Exception as e:
            sys.modules.pop(name, None)

            where = user_frame(e.__traceback__)
            raise ValueError(f"model {spec!r}: importing {target} failed: {type(e).__name__}: {e}"
                             + (f"\n  at {where}" if where else "")) from e
        where = target
    else:
        try:
            obj = importlib.import_module(target)
        except ImportError as e:
            raise ValueError(f"model {spec!r}: cannot import {target!r}: {e}") from None
        where = target
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"model {spec!r}: {where} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"model {spec!r}: {attr} is not callable")
    return obj


def resolve_model(name: str) -> tuple[str, object]:
    """``(source, builder)`` for a model name; ValueError with close matches for an unknown name."""
    if name in BUILTIN_MODELS:
        return "builtin", None
    if ":" in name:
        return "callable", _load_callable(name)
    tv = _torchvision_names()
    if name in tv:
        return "torchvision", None
    tm = _timm_names()
    if name in tm:
        return "timm", None
    close = difflib.get_close_matches(name, list(dict.fromkeys(list(BUILTIN_MODELS) + tv + tm)), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    have = [x for x, ok in (("torchvision", tv), ("timm", tm)) if ok]
    raise ValueError(f"unknown model {name!r}: not one of {', '.join(BUILTIN_MODELS)}, nor a "
                     f"{' or '.join(have) or 'torchvision or timm (neither installed)'} model name, nor "
                     f"'module:callable'{hint}")


def plan(args: argparse.Namespace) -> Plan:
    """Check every option (nothing is built or run) and decide what :func:`run` does."""
    if importlib.util.find_spec("torch") is None:  # found, not imported: a bad option is refused in a blink
        raise RuntimeError("profile needs torch: pip install torch")
    for flag in ("batch", "seq", "top", "by-module", "repeat", "kv-len"):
        _positive(args, flag)
    _positive(args, "warmup", 0)
    seconds = getattr(args, "seconds", None)
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"--seconds must be a finite number of seconds > 0, got {seconds:g}")
    device = check_device(args.device)
    dtype = _dtype("--dtype", args.dtype)
    autocast = _dtype("--autocast", args.autocast, _AUTOCAST)
    if autocast and device == "meta":
        raise ValueError("--autocast does not apply on meta (autocast has no meta device): use --dtype")
    if args.attention and device != "meta":
        raise ValueError(f"--attention chooses the kernel counted on --device meta; on {device} the kernel that "
                         "runs is counted")
    if args.kv_len is not None and not args.decode:
        raise ValueError("--kv-len is for --decode")
    if args.decode:
        if args.model not in LLMS:
            raise ValueError(f"--decode needs a language model: {', '.join(LLMS)}")
        if args.kv_len is None:
            raise ValueError("--decode needs --kv-len N (tokens already in the KV cache)")
        if args.train:
            raise ValueError("--decode measures inference: drop --train")
    if args.model == "gpt2":
        longest = args.kv_len + 1 if args.decode else args.seq
        if longest > 1024:
            raise ValueError(f"gpt2 has 1024 positions: {'--kv-len' if args.decode else '--seq'} is too long")
    if args.project:
        _device_name("--project", args.project)
    if args.ceilings not in FIGURE_SOURCES:
        _device_name("--ceilings", args.ceilings)
    if args.plot is not None:
        check_output("--plot", args.plot, PLOT_EXTENSIONS)
        if device == "meta" and not args.project:
            raise ValueError("--plot on meta needs --project DEVICE: a run on meta has no ceilings to draw")
        if importlib.util.find_spec("matplotlib") is None:
            raise ValueError("--plot needs matplotlib: pip install matplotlib")
    if args.json is not None:
        check_output("--json", args.json)
    source, builder = resolve_model(args.model)
    p = Plan(model=args.model, source=source, builder=builder, device=device, dtype=dtype, autocast=autocast,
             attention=args.attention, warmup=args.warmup, repeat=3 if args.repeat is None else args.repeat,
             timing=None if args.timing == "none" else args.timing,
             step_time=getattr(args, "step_time", "median"), seconds=getattr(args, "seconds", None),
             plain=bool(getattr(args, "plain", False)))
    if p.plain and p.timing is None and device != "meta":
        p.notes.append("--plain ignored: nothing is timed (--timing none) to compare the plain steps with")
        p.plain = False
    if p.step_time != "median" and (device == "meta" or p.timing is None):
        p.notes.append(f"--step-time {p.step_time} ignored: nothing is timed"
                       + (" on meta" if device == "meta" else " (--timing none)"))
        p.step_time = "median"
    elif p.step_time == "ops_min" and p.timing != "op":
        raise ValueError(f"--step-time ops_min composes the step from each op's time: it needs --timing op, got "
                         f"--timing {args.timing}")
    if device == "meta":
        p.timing = None  # nothing runs on meta: only counts
        if p.repeat != 1 and args.repeat is not None:
            p.notes.append(f"--repeat {p.repeat} ignored: nothing is timed on meta")
        p.repeat = 1
        if p.seconds is not None:
            p.notes.append(f"--seconds {p.seconds:g} ignored: nothing is timed on meta")
            p.seconds = None
        if p.plain:
            p.notes.append("--plain ignored: nothing is timed on meta")
            p.plain = False
        if p.attention is None:
            p.attention = META_DEFAULTS["attention"]
            p.notes.append(f"attention counted as {p.attention} (--attention to change)")
        if p.dtype is None:
            p.dtype = META_DEFAULTS["dtype"]
            p.notes.append(f"model built in {p.dtype} (--dtype to change)")
    return p


# ---- building -------------------------------------------------------------------------------------------------


def _vision_step(model, x, train):
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None
    model.train(train)

    def step():
        if train:
            model(x).float().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                model(x)

    return step


def _lm(name: str, seq: int):
    import transformers

    if name == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config())
    # a small Llama-architecture model with grouped-query attention
    cfg = transformers.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                                   num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                   max_position_embeddings=max(seq, 2048))
    return transformers.LlamaForCausalLM(cfg)


def build(p: Plan, args):
    """``(model, step)`` for the plan, built on its device in its dtype."""
    import torch

    torch.manual_seed(0)
    train, batch, seq = args.train, args.batch, args.seq
    if p.source == "callable":
        made = p.builder(p.device, batch, seq, train)
        if not (isinstance(made, tuple) and len(made) == 2 and callable(made[1])):
            raise ValueError(f"{p.model} must return (model, step) with step callable")
        return made
    if p.model in ("resnet50", "vit_b_16") or p.source in ("torchvision", "timm"):
        need = "timm" if p.source == "timm" else "torchvision"
        try:
            lib = importlib.import_module(need)
        except ImportError:
            raise RuntimeError(f"{p.model} needs {need}: pip install {need}") from None
        with torch.device(p.device):
            if need == "timm":
                model = lib.create_model(p.model, pretrained=False)
                size = tuple(model.pretrained_cfg.get("input_size", (3, 224, 224)))
            else:
                model = lib.models.get_model(p.model)
                size = (3, 224, 224)
                try:
                    crop = lib.models.get_model_weights(p.model).DEFAULT.transforms().crop_size
                    size = (3, crop[0], crop[0])
                except Exception:  # no weights entry or no crop size: the usual 224
                    pass
            x = torch.randn(batch or (1 if train else 8), *size)
        return model, _vision_step(model, x, train)
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise RuntimeError(f"{p.model} needs transformers: pip install transformers") from None
    with torch.device(p.device):
        model = _lm(p.model, seq)
        ids = torch.randint(0, model.config.vocab_size, (batch or 1, seq))
    model.train(train)
    if args.decode:
        cache = llm.repeat_cache(llm.prefill(model, args.kv_len), batch or 1)

        def step():
            llm.decode_step(model, cache, batch or 1)

        return model, step
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None

    def step():  # noqa: F811
        if train:
            model(ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        else:
            with torch.no_grad():
                model(ids)

    return model, step


# ---- running --------------------------------------------------------------------------------------------------


def _what(p: Plan, args) -> str:
    kind = ("decode step (KV cache of %d tokens)" % args.kv_len if args.decode else
            "training step" if args.train else "inference")
    prec = []
    if p.dtype:
        prec.append(p.dtype)
    if p.autocast:
        prec.append(f"autocast {p.autocast}")
    steps = (f"{p.warmup} warm-up step{'s' if p.warmup != 1 else ''} uncounted, then "
             + (f"median of {p.repeat} measured steps" if p.repeat > 1 else "1 measured step")
             + (f", more until they have taken {p.seconds:g} s" if p.seconds is not None else "")
             + (", each followed by one outside roofline (timed)" if p.plain else ""))
    if p.warmup == 0:
        steps += " (the first step is measured: it includes one-off work such as optimizer state creation)"
    if p.step_time != "median":
        steps += f"; step time: {p.step_time}"
    return (f"profiling {p.model} ({kind}) on {p.device}" + (f" in {', '.join(prec)}" if prec else "")
            + f": {steps}" + "".join(f"; {n}" for n in p.notes) + "...")


def run(args: argparse.Namespace) -> int:
    """The ``profile`` command: :func:`plan`, then build, warm up, measure and print."""
    p = plan(args)
    import torch

    import roofline

    print(_what(p, args), file=sys.stderr, flush=True)
    out = sys.stderr if args.json == "-" else sys.stdout  # with --json -, stdout carries the JSON alone
    old = torch.get_default_dtype()
    if p.dtype:
        torch.set_default_dtype(getattr(torch, p.dtype))
    try:
        model, step = build(p, args)
    finally:
        torch.set_default_dtype(old)
    if p.autocast:
        inner, dev_type = step, torch.device(p.device).type

        def step():  # noqa: F811
            with torch.autocast(dev_type, dtype=getattr(torch, p.autocast)):
                inner()

    r = roofline.steady(step, model, warmup=p.warmup, repeat=p.repeat, timing=p.timing, ceilings=args.ceilings,
                        attention=p.attention, step_time=p.step_time, seconds=p.seconds, plain=p.plain)
    if p.dtype:
        r.meta["dtype"] = p.dtype
    report = r
    print(r.summary(top=args.top), file=out)
    if args.by_module is not None:
        print(file=out)
        print(r.table("module", depth=args.by_module, top=None) if r.ceilings is not None
              else r.by_module(args.by_module), file=out)
    if args.project:
        report = r.project(args.project)
        print(file=out)
        print(report.summary(top=args.top), file=out)
    if args.decode:
        print(file=out)
        print(decode_summary(r, report if args.project else None, model, args.batch or 1, args.kv_len,
                             p.dtype or str(old).replace("torch.", "")), file=out)
    if args.json == "-":
        print(r.to_json())
    elif args.json is not None:
        r.to_json(args.json)
        print(f"report written to {args.json}", file=sys.stderr)
    if args.plot:
        report.plot(args.plot)
        print(f"roofline chart written to {args.plot}", file=sys.stderr)
    return 0


def decode_summary(r, projected, model, batch: int, kv_len: int, dtype: str) -> str:
    """Tokens/s and bytes per token of a decode step, against the bandwidth roof (bytes / DRAM bandwidth)."""
    lines = [f"decode: {batch} new token{'s' if batch != 1 else ''} per step against a KV cache of {kv_len} tokens"]
    ideal = llm.decode_step_bytes(llm.DecoderConfig.from_hf(model.config), batch, kv_len, dtype)["total"]
    lines.append(f"  bytes per token  {fmt(r.bytes / batch, 'B')} counted (compulsory); "
                 f"{fmt(ideal / batch, 'B')} ideal (weights + KV cache read once, roofline.llm.decode_step_bytes)")
    sides = [("measured", r)] + ([(f"projected onto {projected.meta.get('projected_to')}", projected)]
                                 if projected is not None else [])
    for label, rep in sides:
        if rep.ceilings is None:
            continue
        bw = float(rep.classification()["bw"][0]) if len(rep.records) else float("nan")
        roof = batch * bw / r.bytes if r.bytes else float("nan")
        line = (f"  {label}: DRAM {fmt(bw, 'B/s')}; bandwidth roof {roof:,.1f} tokens/s at the counted bytes "
                f"({batch * bw / ideal:,.1f} at the ideal bytes)")
        if rep.wall_time:
            line += f"; step {rep.wall_time * 1e3:.3f} ms = {batch / rep.wall_time:,.1f} tokens/s " \
                    f"({batch / rep.wall_time / roof:.0%} of the roof)"
        lines.append(line)
    return "\n".join(lines)


def _library_dirs() -> tuple[str, ...]:
    """Folders whose code is not the user's: this package, the standard library, installed packages."""
    dirs = {os.path.dirname(os.path.abspath(__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.abspath(path))
    try:
        dirs.update(os.path.abspath(p) for p in site.getsitepackages() + [site.getusersitepackages()])
    except (AttributeError, TypeError):  # a virtualenv's old site module
        pass
    return tuple(d.rstrip(os.sep) + os.sep for d in dirs)


def user_frame(tb) -> str | None:
    """``"file:line, in function"`` of the innermost frame of traceback ``tb`` in the user's own code (a file
    outside this package, the standard library and installed packages: a ``file.py:callable`` of ``profile`` or
    what it imports); None when the traceback never enters such a file."""
    libs = _library_dirs()
    found = None
    for fs in traceback.extract_tb(tb):
        name = fs.filename
        if name.startswith("<") or os.path.abspath(name).startswith(libs):
            continue
        found = f"{name}:{fs.lineno}, in {fs.name}"
    return found
