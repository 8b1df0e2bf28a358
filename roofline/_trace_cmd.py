"""``python -m roofline trace PATH``: the roofline report of a PyTorch profiler (Kineto) trace."""

from __future__ import annotations

import argparse
import os
import sys

from roofline._profile_cmd import PLOT_EXTENSIONS, check_output
from roofline.report import Report
from roofline._traces import _ranks  # noqa: F401  (installs the reader of rank directories into load_trace)
from roofline._traces._load import load_trace
from roofline._util._format import dur


def add_trace(subparsers: argparse._SubParsersAction, func) -> None:
    """Register the ``trace`` sub-command."""
    p = subparsers.add_parser(
        "trace", help="the roofline of a PyTorch profiler trace (Kineto JSON, .json or .json.gz)",
        description="Read a trace written by torch.profiler (record_shapes=True; tensorboard_trace_handler or "
        "export_chrome_trace), count every recorded op's FLOPs and bytes from its shapes, take its GPU time from "
        "the kernels it launched, and place it on the roofline of the device the trace names (docs/traces.md). "
        "No GPU and no torch are needed.")
    p.add_argument("path", help="the trace file (.json or .json.gz), or a directory of rank traces")
    p.add_argument("--device", metavar="NAME", help="judge the ops against this datasheet device instead of the "
                   "one the trace names, e.g. 'H100 SXM' (python -m roofline devices lists them)")
    p.add_argument("--steps", default=None, metavar="STEPS", help="'median' (default: the ProfilerStep of median "
                   "duration), 'all' (every step in one report), a step number, or step numbers separated by commas "
                   "(one report each; --json, --html and --plot then write the first)")
    p.add_argument("--html", metavar="PATH", help="write the report as a self-contained HTML page")
    p.add_argument("--json", metavar="PATH", help="write the report as JSON (roofline.load reads it back); '-': "
                   "to stdout, the tables then go to stderr")
    p.add_argument("--plot", metavar="PATH", help="write the roofline chart (.png, .svg or .pdf)")
    p.add_argument("--project", metavar="DEVICE", help="also project the trace's ops onto a datasheet device, "
                   "e.g. 'B200'")
    p.add_argument("--top", type=int, default=15, help="rows in the op table (default 15)")
    p.set_defaults(func=func)


def _steps(value):
    if value is None or value in ("median", "all"):
        return value
    try:
        if "," in value:
            return [int(v) for v in value.split(",")]
        return int(value)
    except ValueError:
        raise ValueError(f"--steps must be 'median', 'all', a step number or step numbers separated by commas, "
                         f"got {value!r}") from None


def trace_lines(r) -> str:
    """Where the GPU time of a trace report went (``meta["trace"]``), as a few lines."""
    t = r.meta.get("trace") or {}
    total = t.get("kernel_time") or 0.0

    def share(x):
        return f"{dur(x)} ({x / total:.1%})" if total else dur(x)

    lines = [f"trace {t.get('source', '')}: {t.get('step_choice', '')}; device {t.get('device') or 'none'} "
             f"({t.get('device_note', '')})",
             f"  GPU kernel time {dur(total)} in {t.get('kernels', 0)} activities: ops with FLOPs and bytes "
             f"{share(t.get('attributed_time', 0.0))}, collectives {share(t.get('collective_time', 0.0))}, "
             f"ops without a formula {share(t.get('unknown_op_time', 0.0))}, ops not counted "
             f"{share(t.get('uncounted_op_time', 0.0))}, ops of no cost {share(t.get('zero_cost_op_time', 0.0))}, "
             f"launched by no op {share(t.get('unattributed_time', 0.0))}"]
    un = t.get("unattributed") or {}
    for name, u in list(un.items())[:5]:
        lines.append(f"    {dur(u['time'])} in {u['calls']} x {name}")
    if len(un) > 5:
        lines.append(f"    ... {len(un) - 5} more kernel names (r.meta['trace']['unattributed'])")
    before = (t.get("before_trace") or {}).get("time", 0.0)
    if before or t.get("outside_step_time"):
        lines.append(f"  outside the report: {dur(t.get('outside_step_time', 0.0))} outside the step, "
                     f"{dur(before)} launched before the trace began")
    for p in t.get("problems") or ():
        lines.append(f"  note: {p}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """The ``trace`` command."""
    steps = _steps(args.steps)
    if args.plot:
        check_output("--plot", args.plot, PLOT_EXTENSIONS)
    if args.json:
        check_output("--json", args.json)
    if args.html:
        check_output("--html", args.html)
    if args.top < 1:
        raise ValueError(f"--top must be at least 1, got {args.top}")
    if os.path.isdir(args.path) and (args.json or args.html or args.plot or args.project):
        raise ValueError(f"{args.path} is a directory of rank traces: --json, --html, --plot and --project apply to "
                         "one trace file")
    reports = load_trace(args.path, device=args.device, steps=steps)
    if not isinstance(reports, (list, Report)):  # a directory of rank traces: its summary over the ranks
        print(reports)
        return 0
    reports = reports if isinstance(reports, list) else [reports]
    out = sys.stderr if args.json == "-" else sys.stdout
    for i, r in enumerate(reports):
        if i:
            print(file=out)
        print(trace_lines(r), file=out)
        print(r.summary(top=args.top), file=out)
    r = reports[0]
    report = r
    if args.project:
        report = r.project(args.project)
        print(file=out)
        print(report.summary(top=args.top), file=out)
    if args.json == "-":
        print(r.to_json())
    elif args.json:
        r.to_json(args.json)
        print(f"report written to {args.json}", file=sys.stderr)
    if args.html:
        r.to_html(args.html, title=f"roofline: {os.path.basename(args.path)}")
        print(f"HTML written to {args.html}", file=sys.stderr)
    if args.plot:
        report.plot(args.plot)
        print(f"roofline chart written to {args.plot}", file=sys.stderr)
    return 0
