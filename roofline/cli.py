"""Command line interface: ``python -m roofline COMMAND`` (also installed as ``roofline``).

Commands:
  ceilings   measure (or load from the cache) and print the machine's ceilings

Each command is a ``_add_<name>(subparsers)`` function that registers its parser and sets ``func``; a new command
(``profile``, ...) adds one such function and one line in ``build_parser``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from typing import Sequence, TextIO


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="roofline",
        description="Which hardware ceiling binds each PyTorch op: FLOPs, bytes and the machine's ceilings.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_ceilings(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit status (0 ok, 1 failure, 2 usage error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = _show_warning
        try:
            return int(args.func(args) or 0)
        except (RuntimeError, ValueError, TypeError, LookupError) as e:
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
    from roofline.ceilings import ceilings

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
