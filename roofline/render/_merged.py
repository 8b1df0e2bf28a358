"""Views of a merged report (:class:`roofline.distributed.MergedReport`, the ranks of one job): the per-rank table as
text and HTML, the notebook view and the full page. The job's ops (every rank's records in one report) are drawn by
the report views of :mod:`roofline.render._render`."""

from __future__ import annotations

import html
import math

from roofline.render import _render

_COLUMNS = ("rank", "wall s", "GFLOP", "mem MB", "colls", "msg MB", "bus MB", "t_comp ms", "t_comm ms", "comm %")


def _f(v, scale, fmt) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return format(v / scale, fmt)


def _cells(r: dict) -> list[str]:
    return [str(r["rank"]), _f(r["wall_time"], 1, ".4f"), _f(r["flops"], 1e9, ".3f"), _f(r["bytes"], 1e6, ".2f"),
            str(r["collectives"]), _f(r["message_bytes"], 1e6, ".3f"), _f(r["bus_bytes"], 1e6, ".3f"),
            _f(r["t_compute"], 1e-3, ".3f"), _f(r["t_comm"], 1e-3, ".3f"), _f(r["comm_share"], 0.01, ".1f")]


def _head(merged) -> str:
    return (f"{len(merged.ranks)} ranks" + (f", world size {merged.world_size}" if merged.world_size else "")
            + (f", backend {merged.backend}" if merged.backend else ""))


def _total_line(t: dict, incomplete: bool) -> str:
    low = " [INCOMPLETE: a lower bound]" if incomplete else ""
    return (f"total: {t['flops'] / 1e9:.3f} GFLOP, {t['bytes'] / 1e6:.2f} MB memory, {t['collectives']} "
            f"collectives, {t['message_bytes'] / 1e6:.3f} MB messages, {t['bus_bytes'] / 1e6:.3f} MB bus{low}")


def table(merged) -> str:
    """The per-rank table, the totals, why the counts are incomplete (when they are) and the slowest rank."""
    lines = [_head(merged), " ".join(f"{c:>10}" for c in _COLUMNS)]
    lines += [" ".join(f"{c:>10}" for c in _cells(r)) for r in merged.per_rank()]
    lines.append(_total_line(merged.totals(), bool(merged.incomplete)))
    lines.extend(f"INCOMPLETE: {why}" for why in merged.incomplete)
    lines.append(f"slowest rank: {merged.slowest_rank()}")
    return "\n".join(lines)


def to_html(merged, job, note: str = "", top: int = 15) -> str:
    """The notebook view: the per-rank table, the totals and the slowest rank, then ``job`` (the report of every
    rank's ops, or None when it cannot be judged: ``note`` says why) as the report view shows it."""
    e = html.escape
    out = [f'<div class="rl-merged"><h3>roofline merged report: {e(_head(merged))}</h3>',
           '<table class="rl-ranks"><tr>' + "".join(f"<th>{e(c)}</th>" for c in _COLUMNS) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in _cells(r)) + "</tr>" for r in merged.per_rank()]
    out.append("</table>")
    out.append(f"<p>{e(_total_line(merged.totals(), bool(merged.incomplete)))}; slowest rank: "
               f"{merged.slowest_rank()}</p>")
    out += [f'<p class="rl-incomplete">INCOMPLETE: {e(why)}</p>' for why in merged.incomplete]
    if note:
        out.append(f"<p>{e(note)}</p>")
    if job is not None:
        out.append(f"<div><b>every rank's ops together</b> (each op's time summed over the ranks)</div>"
                   f"{_render.to_html(job, top=top)}")
    out.append("</div>")
    return "".join(out)


def page(merged, job, title: str | None = None, note: str = "", top: int = 15) -> str:
    """A full, self-contained HTML page of :func:`to_html`."""
    title = title if title is not None else f"roofline merged report ({len(merged.ranks)} ranks)"
    return _render.document(title, to_html(merged, job, note, top))
