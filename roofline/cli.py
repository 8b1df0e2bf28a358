"""Command line interface: ``python -m roofline COMMAND`` (also installed as ``roofline``).

Commands (every option is described in docs/cli.md):

* ``ceilings``: measure (or load from the cache) and print the machine's ceilings;
* ``profile``: count, time and classify a built-in model or your own callable, and print the report.
* ``merge``: the per-rank reports of a distributed job (``Report.to_json`` files) as one merged table.

Each command is a ``_add_<name>(subparsers)`` function that registers its parser and sets ``func``; a new command
adds one such function and one line in ``build_parser``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Sequence, TextIO


def build_parser() -> argparse.ArgumentParser:
    """The ``argparse`` parser of ``python -m roofline``, with one sub-command per ``_add_<name>`` function."""
    parser = argparse.ArgumentParser(
        prog="roofline",
        description="Which hardware ceiling binds each PyTorch op: FLOPs, bytes and the machine's ceilings.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_ceilings(subparsers)
    _add_profile(subparsers)
    _add_merge(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the process exit status: 0 ok,
    1 when the command failed (the error is printed on stderr), 130 when interrupted. A usage error exits
    through argparse (``SystemExit`` with status 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args) or 0)
        except (RuntimeError, ValueError, TypeError, LookupError, OSError, ImportError) as e:
            print(f"roofline {args.command}: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"roofline {args.command}: interrupted", file=sys.stderr)
            return 130


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"roofline: warning: {message}", file=file or sys.stderr)


# ---- ceilings ----


def _add_ceilings(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ceilings",
        help="measure and print the machine's ceilings (peak FLOP/s per unit and dtype, bandwidth per level)",
        description="Measure the ceilings of a device, or load them from the cache, and print them next to the "
        "datasheet figures (for a CPU: the theoretical peak from clock x SIMD width x FMA units).",
    )
    p.add_argument("--device", default="cpu", help="'cpu' (default), 'cuda' or 'cuda:N'")
    p.add_argument("--json", action="store_true", help="print the ceilings as JSON instead of a table")
    p.add_argument("--refresh", action="store_true", help="re-measure even when cached ceilings exist")
    p.add_argument("--thorough", action="store_true", help="more sizes and repeats (slower) instead of the quick run")
    p.add_argument("--methods", action="store_true", help="also print how each ceiling was measured")
    p.set_defaults(func=_cmd_ceilings)


class _Progress:
    """Progress lines on stderr while measuring, with the elapsed time."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.start = time.perf_counter()
        self.used = False

    def __call__(self, message: str) -> None:
        self.used = True
        print(f"[{time.perf_counter() - self.start:5.1f} s] {message}", file=self.stream, flush=True)


def _cmd_ceilings(args: argparse.Namespace) -> int:
    from roofline._ceilings import ceilings

    progress = _Progress(sys.stderr)
    c = ceilings(args.device, refresh=args.refresh, quick=not args.thorough, progress=progress)
    if progress.used:
        progress(f"done in {c.duration_s:.2f} s")
    else:
        print(
            f"cached ceilings measured {c.timestamp} ({'quick' if c.quick else 'thorough'}); "
            "--refresh re-measures",
            file=sys.stderr,
        )
    if args.json:
        print(c.to_json())
    else:
        print(c.table(methods=args.methods))
    return 0


# ---- profile ----

BUILTIN_MODELS = ("resnet50", "vit_b_16", "gpt2", "llama")


def _add_profile(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "profile",
        help="count, time and classify a model's ops and print the roofline report",
        description="Run a built-in model (random weights from torchvision / transformers configs, nothing "
        "downloaded) or your own callable under roofline.measure and print the report. MODEL is one of "
        f"{', '.join(BUILTIN_MODELS)}, or 'module:callable' naming a function that takes (device, batch, seq, "
        "train) and returns (model, step) where step() runs the work.",
    )
    p.add_argument("model", help=f"{' | '.join(BUILTIN_MODELS)} | module:callable")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: 1; 8 for vision inference)")
    p.add_argument("--seq", type=int, default=128, help="sequence length of the language models (default 128)")
    p.add_argument("--train", action="store_true", help="a training step (forward, backward, AdamW) instead of "
                   "inference")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda[:N] or meta (count only; use --project)")
    p.add_argument("--timing", choices=("op", "model", "none"), default="op", help="time every op (default), the "
                   "whole step, or nothing")
    p.add_argument("--project", metavar="DEVICE", help="also project the run onto a datasheet device, e.g. 'H100 "
                   "SXM' (see roofline.devices)")
    p.add_argument("--ceilings", default="measured", help="'measured' (default), 'datasheet' or a device name")
    p.add_argument("--plot", metavar="PATH", help="write the roofline chart (PNG/SVG by extension)")
    p.add_argument("--json", metavar="PATH", help="write the report as JSON (roofline.load reads it back)")
    p.add_argument("--top", type=int, default=15, help="rows in the op table (default 15)")
    p.add_argument("--by-module", type=int, metavar="DEPTH", help="also print the per-module table to DEPTH")
    p.set_defaults(func=_cmd_profile)


def _builtin(name: str, device: str, batch: int | None, seq: int, train: bool):
    import torch

    torch.manual_seed(0)
    if name in ("resnet50", "vit_b_16"):
        try:
            import torchvision
        except ImportError:
            raise RuntimeError(f"{name} needs torchvision: pip install torchvision") from None
        b = batch or (1 if train else 8)
        with torch.device(device):
            model = getattr(torchvision.models, name)()
            x = torch.randn(b, 3, 224, 224)
        model.train(train)

        def step():
            out = model(x)
            if train:
                out.float().mean().backward()
                opt.step()
    else:
        try:
            import transformers
        except ImportError:
            raise RuntimeError(f"{name} needs transformers: pip install transformers") from None
        b = batch or 1
        if name == "gpt2":
            cfg = transformers.GPT2Config()
            cls = transformers.GPT2LMHeadModel
        else:  # a small Llama-architecture model with grouped-query attention
            cfg = transformers.LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                                           num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                           max_position_embeddings=max(seq, 2048))
            cls = transformers.LlamaForCausalLM
        with torch.device(device):
            model = cls(cfg)
            ids = torch.randint(0, cfg.vocab_size, (b, seq))
        model.train(train)

        def step():
            if train:
                model(ids, labels=ids).loss.backward()
                opt.step()
            else:
                with torch.no_grad():
                    model(ids)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if train else None
    if not train and name in ("resnet50", "vit_b_16"):
        inner = step

        def step():  # noqa: F811
            with torch.no_grad():
                inner()
    return model, step


def _load_callable(spec: str):
    import importlib

    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise ValueError(f"model {spec!r}: expected one of {', '.join(BUILTIN_MODELS)} or 'module:callable'")
    try:
        obj = importlib.import_module(mod_name)
    except ImportError as e:
        raise ValueError(f"model {spec!r}: cannot import {mod_name!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"model {spec!r}: {mod_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"model {spec!r}: {attr} is not callable")
    return obj


def _cmd_profile(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise RuntimeError("profile needs torch: pip install torch") from None
    import roofline

    for flag in ("batch", "seq", "top"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise ValueError(f"--{flag} must be >= 1, got {v}")
    if args.model in BUILTIN_MODELS:
        model, step = _builtin(args.model, args.device, args.batch, args.seq, args.train)
    else:
        made = _load_callable(args.model)(args.device, args.batch, args.seq, args.train)
        if not (isinstance(made, tuple) and len(made) == 2 and callable(made[1])):
            raise ValueError(f"{args.model} must return (model, step) with step callable")
        model, step = made
    timing = None if args.timing == "none" else args.timing
    if args.device == "meta" and timing is not None:
        timing = None  # nothing runs on meta: only counts
    print(f"profiling {args.model} ({'training step' if args.train else 'inference'}) on {args.device}...",
          file=sys.stderr)
    with roofline.measure(model, timing=timing, ceilings=args.ceilings) as r:
        step()
    report = r
    print(r.summary(top=args.top))
    if args.by_module is not None:
        print()
        print(r.table("module", depth=args.by_module, top=None) if r.ceilings is not None else r.by_module(args.by_module))
    if args.project:
        report = r.project(args.project)
        print()
        print(report.summary(top=args.top))
    if args.json:
        r.to_json(args.json)
        print(f"report written to {args.json}", file=sys.stderr)
    if args.plot:
        report.plot(args.plot)
        print(f"roofline chart written to {args.plot}", file=sys.stderr)
    return 0


# ---- merge ----


def _add_merge(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "merge",
        help="merge the per-rank reports of a distributed job",
        description="Read the reports each rank saved with Report.to_json and print the per-rank table (compute "
        "and communication), the totals over the ranks and the slowest rank (see docs/distributed.md).",
    )
    p.add_argument("reports", nargs="+", help="report files, one per rank (e.g. rank*.json)")
    p.add_argument("-o", "--output", default=None, help="also write the merged reports as JSON to this path")
    p.set_defaults(func=_cmd_merge)


def _cmd_merge(args: argparse.Namespace) -> int:
    import json

    from roofline import distributed

    merged = distributed.merge(args.reports)
    print(merged.table())
    if args.output:
        with open(args.output, "w") as f:
            json.dump(merged.to_dict(), f)
    return 0
