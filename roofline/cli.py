"""Command line interface: ``python -m roofline COMMAND`` (also installed as ``roofline``).

Commands (every option is described in docs/cli.md):

* ``ceilings``: measure (or load from the cache) and print the machine's ceilings;
* ``profile``: count, time and classify a built-in, torchvision or timm model or your own callable in its steady
  state (warm-up steps uncounted), and print the report; ``--decode`` for a language model's decode step.
* ``merge``: the per-rank reports of a distributed job (``Report.to_json`` files) as one merged table;
* ``trace``: the roofline of a PyTorch profiler (Kineto) trace (``roofline/_trace_cmd.py``);
* ``devices``: the datasheet table (the names ``--project`` and ``ceilings=`` accept, with their figures).

``--traceback`` (before or after the command) prints the full traceback of an error instead of one line.

Each command is a ``_add_<name>(subparsers)`` function that registers its parser and sets ``func`` (most through
``_add_command``); a new command adds one such function and one line in ``build_parser``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
import warnings
from typing import Sequence, TextIO

from roofline import _profile_cmd, _trace_cmd, distributed
from roofline._hardware import _devices as devices
from roofline._profile_cmd import BUILTIN_MODELS, user_frame  # noqa: F401  (BUILTIN_MODELS: the built-in model names)
from roofline._hardware import _ceilings as _ceil
from roofline._hardware._ceilings import ceilings
from roofline._util import _output


def build_parser() -> argparse.ArgumentParser:
    """The ``argparse`` parser of ``python -m roofline``, with one sub-command per ``_add_<name>`` function."""
    parser = argparse.ArgumentParser(
        prog="roofline",
        description="Which hardware ceiling binds each PyTorch op: FLOPs, bytes and the machine's ceilings.",
    )
    parser.add_argument("--traceback", action="store_true", help=_TRACEBACK_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_ceilings(subparsers)
    _add_profile(subparsers)
    _add_merge(subparsers)
    _trace_cmd.add_trace(subparsers, _trace_cmd.run)
    _add_devices(subparsers)
    for sub in subparsers.choices.values():  # accepted after the command too
        if "--traceback" not in sub._option_string_actions:
            sub.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS, help=_TRACEBACK_HELP)
    return parser


_TRACEBACK_HELP = "on an error, print the full traceback (of your own file.py:callable included), not one line"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); returns the process exit status: 0 ok,
    1 when the command failed (the error is printed on stderr; an exception raised in the user's own code, such as
    the ``file.py:callable`` of ``profile``, is printed with its type and the innermost line of the user's files it
    passed through; with ``--traceback`` every error is printed with its full traceback), 130 when interrupted. A usage error exits through argparse (``SystemExit`` with status 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args) or 0)
        except KeyboardInterrupt:
            print(f"roofline {args.command}: interrupted", file=sys.stderr)
            return 130
        except Exception as e:
            if getattr(args, "traceback", False):
                traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
                print(f"roofline {args.command}: error: {type(e).__name__}: {e}", file=sys.stderr)
                return 1
            where = user_frame(e.__traceback__)
            if where is not None:  # raised in (or through) the user's own code: its type and where
                print(f"roofline {args.command}: error: {type(e).__name__}: {e}\n  at {where}\n"
                      f"  (--traceback prints the full traceback)", file=sys.stderr)
                return 1
            if isinstance(e, (RuntimeError, ValueError, TypeError, LookupError, OSError, ImportError)):
                print(f"roofline {args.command}: error: {e}", file=sys.stderr)
                return 1
            raise


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    text = str(message)
    text = text[len("roofline: "):] if text.startswith("roofline: ") else text  # one prefix, not two
    print(f"roofline: warning: {text}", file=file or sys.stderr)


# ---- ceilings ----


def _add_command(subparsers: argparse._SubParsersAction, name: str, func, summary: str, description: str,
                 options: Sequence[tuple[tuple[str, ...], dict]]) -> None:
    """Register the sub-command ``name``: its one-line ``summary`` (``roofline --help``), ``description``
    (``roofline NAME --help``), its ``options`` as (flags, ``add_argument`` keywords) and the function it runs."""
    p = subparsers.add_parser(name, help=summary, description=description)
    for flags, kwargs in options:
        p.add_argument(*flags, **kwargs)
    p.set_defaults(func=func)


_FLAG = {"action": "store_true"}


def _add_ceilings(subparsers: argparse._SubParsersAction) -> None:
    _add_command(
        subparsers, "ceilings", _cmd_ceilings,
        "measure and print the machine's ceilings (peak FLOP/s per unit and dtype, bandwidth per level)",
        "Measure the ceilings of a device, or load them from the cache, and print them next to the "
        "datasheet figures (for a CPU: the theoretical peak from clock x SIMD width x FMA units).",
        [(("--device",), {"default": "cpu", "help": "'cpu' (default), 'cuda' or 'cuda:N'"}),
         (("--json",), {**_FLAG, "help": "print the ceilings as JSON instead of a table"}),
         (("--refresh",), {**_FLAG, "help": "re-measure even when cached ceilings exist"}),
         (("--thorough",), {**_FLAG, "help": "more sizes and repeats (slower) instead of the quick run"}),
         (("--methods",), {**_FLAG, "help": "also print how each ceiling was measured"}),
         (("--save",), {"nargs": "?", "const": "", "default": None, "metavar": "PATH",
                        "help": "measure now and keep the result as this machine's yardstick, used by every report "
                        "whose own measurement is under contention (refused when this one is); PATH: write it "
                        "there instead, for ceilings=PATH"}),
         (("--theoretical",), {**_FLAG, "help": "print the CPU's theoretical ceilings (cores x clock x SIMD "
                               "width x FMA units; DRAM from the memory table where readable) without measuring"})],
    )


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
    if args.theoretical:
        c = _ceil.theoretical()
        print(c.to_json() if args.json else c.table(methods=args.methods))
        return 0
    if args.save:
        _output.check_writable(args.save, "--save")  # before seconds of measuring
    progress = _Progress(sys.stderr)
    c = ceilings(args.device, refresh=args.refresh or args.save is not None, quick=not args.thorough,
                 progress=progress)
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
    if args.save is not None:
        where = _ceil.save_idle(c, args.save or None)  # ValueError (exit 1) when measured under contention
        print(f"saved as this machine's yardstick: {where}" if not args.save else
              f"saved to {where} (ceilings={where!r} uses it)", file=sys.stderr)
    return 0


# ---- profile ----
# options, checks (all made before anything runs) and the run itself: roofline/_profile_cmd.py


def _add_profile(subparsers: argparse._SubParsersAction) -> None:

    _profile_cmd.add_profile(subparsers, _cmd_profile)


def _cmd_profile(args: argparse.Namespace) -> int:

    return _profile_cmd.run(args)


# ---- merge ----


def _add_merge(subparsers: argparse._SubParsersAction) -> None:
    _add_command(
        subparsers, "merge", _cmd_merge,
        "merge the per-rank reports of a distributed job",
        "Read the reports each rank saved with Report.to_json and print the per-rank table (compute "
        "and communication), the totals over the ranks and the slowest rank (see docs/distributed.md).",
        [(("reports",), {"nargs": "+", "help": "report files, one per rank (e.g. rank*.json)"}),
         (("-o", "--output"), {"default": None, "metavar": "PATH",
                               "help": "also write the merged reports as JSON to PATH ('-': to stdout, the table "
                               "then goes to stderr)"})],
    )


def _cmd_merge(args: argparse.Namespace) -> int:

    if args.output is not None and args.output != "-":
        _output.check_writable(args.output, "-o")  # before the reports are read
    merged = distributed.merge(args.reports)
    print(merged.table(), file=sys.stderr if args.output == "-" else sys.stdout)
    if args.output == "-":
        print(json.dumps(merged.to_dict()))
    elif args.output is not None:
        _output.write(args.output, json.dumps(merged.to_dict()), where="merge -o")
    return 0


# ---- devices ----


def _add_devices(subparsers: argparse._SubParsersAction) -> None:
    _add_command(
        subparsers, "devices", _cmd_devices,
        "list the datasheet devices (names for --project and ceilings=) with their peaks and bandwidth",
        "Print the datasheet table: each device's name (what --project, --ceilings and Report.project accept; "
        "--aliases adds the other spellings accepted), vendor, DRAM bandwidth and dense peaks in TFLOP/s "
        "(TOP/s for int8). docs/devices.md gives the source of every figure.",
        [(("--json",), {**_FLAG, "help": "print the table as JSON (figures in FLOP/s and bytes/s)"}),
         (("--aliases",), {**_FLAG, "help": "also list the other names each device is found by"})],
    )


# (column, unit, dtypes tried in order) of the devices table
_DEVICE_PEAKS = (("FP64", "vector", ("float64",)), ("FP32", "vector", ("float32",)),
                 ("TF32", "matrix", ("tfloat32",)), ("BF16", "matrix", ("bfloat16",)),
                 ("FP16", "matrix", ("float16",)), ("FP8", "matrix", ("float8_e4m3fn", "float8_e4m3fnuz")),
                 ("INT8", "matrix", ("int8",)))


def _cmd_devices(args: argparse.Namespace) -> int:
    specs = list(devices.DEVICES.values())
    if args.json:
        print(json.dumps([{"name": d.name, "vendor": d.vendor, "aliases": list(d.aliases),
                           "memory_bandwidth": d.memory_bandwidth, "memory_bytes": d.memory_bytes,
                           "interconnect": d.interconnect, "interconnect_bandwidth": d.interconnect_bandwidth,
                           "peaks": {f"{u}/{t}": v for (u, t), v in d.peaks.items()}} for d in specs], indent=1))
        return 0

    def peak(d, unit, dtypes):
        v = next((d.peaks[(unit, t)] for t in dtypes if (unit, t) in d.peaks), None)
        return "-" if v is None else f"{v / 1e12:g}"

    header = ["Device", "Vendor", "DRAM TB/s", "Memory GiB"] + [f"{c} TFLOP/s" if c != "INT8" else "INT8 TOP/s"
                                                               for c, _, _ in _DEVICE_PEAKS]
    rows = [[d.name, d.vendor, "-" if d.memory_bandwidth is None else f"{d.memory_bandwidth / 1e12:g}",
             "-" if d.memory_bytes is None else f"{d.memory_bytes / 2**30:g}"]
            + [peak(d, u, t) for _, u, t in _DEVICE_PEAKS] for d in specs]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    if args.aliases:
        print()
        for d in specs:
            print(f"{d.name}: {', '.join(d.aliases) or '-'}")
    print(f"\n{len(specs)} devices; dense peaks (vector units for FP64/FP32, tensor/matrix units otherwise); "
          "sources in docs/devices.md", file=sys.stderr)
    return 0
