"""The HTML the package writes, opened in a real browser (Debian's headless Chromium, driven over the DevTools
protocol by tests/_cdp.py): a report page (``Report.to_html``) and a trainer callback's page load without a console
message, the roofline chart is drawn (its screenshot is not blank), the module tree opens on a click, and a chart
point under the mouse carries its tooltip.

Chromium is installed by .ci/run (apt-get) when missing; in CI (``CI`` set) a missing browser fails, elsewhere the
tests are skipped, saying why."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
Image = pytest.importorskip("PIL.Image")

import roofline  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import _cdp  # noqa: E402

CHROMIUM = _cdp.find_chromium()
if CHROMIUM is None:
    why = "needs Debian's chromium (apt-get install chromium; .ci/run installs it) or $CHROMIUM"
    if os.environ.get("CI"):
        pytest.fail(f"CI: {why}", pytrace=False)
    print(f"\ntests/test_browser.py skipped: {why}", file=sys.stderr)
    pytest.skip(why, allow_module_level=True)


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(torch.nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(d), Block(d)])
        self.head = torch.nn.Linear(d, 10)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


FIXED = roofline.Ceilings(device="cpu", name="fixed", fingerprint="fixed",
                          peaks={("vector", "float32"): roofline.Ceiling(2e10),
                                 ("matrix", "float32"): roofline.Ceiling(1e11)},
                          bandwidths={"DRAM": roofline.Ceiling(1e10)})


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """file:// URLs of the pages: a measured report (per-op times) and a callback's page (timing="model")."""
    from roofline.integrations import _run as callbacks

    torch.manual_seed(0)
    model, x = Net(), torch.randn(16, 64)
    d = tmp_path_factory.mktemp("pages")
    out = {}
    for timing in ("op", "model"):
        with roofline.measure(model, timing=timing, ceilings=FIXED) as r:
            model(x).sum().backward()
        if timing == "op":
            r.to_html(d / "report.html", title="report")
            out["report"] = (d / "report.html").as_uri()
        else:
            (d / "callback.html").write_text(callbacks._page(r, "roofline: steps5-7"), encoding="utf-8")
            out["callback"] = (d / "callback.html").as_uri()
    return out


@pytest.fixture(scope="module")
def browser():
    b = _cdp.Browser(CHROMIUM)
    yield b
    b.close()


def _rect(browser, selector: str) -> dict:
    return browser.eval(f"""(() => {{ const e = document.querySelector({selector!r});
        if (!e) return null; e.scrollIntoView({{block: "center"}});
        const r = e.getBoundingClientRect(); return {{x: r.x, y: r.y, width: r.width, height: r.height}}; }})()""")


@pytest.mark.parametrize("page", ["report", "callback"])
def test_a_page_loads_cleanly_and_draws_its_chart(page, pages, browser):
    browser.open(pages[page])
    assert browser.problems() == []
    assert browser.eval("document.title") == ("report" if page == "report" else "roofline: steps5-7")
    box = _rect(browser, "svg.rl-roofline")
    assert box and box["width"] > 400 and box["height"] > 200
    png = browser.screenshot({"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"]})
    img = Image.open(io.BytesIO(png)).convert("RGB")
    colors = img.getcolors(maxcolors=1 << 16) or []
    drawn = sum(n for n, c in colors if c != (255, 255, 255))
    # not blank: a share of the chart's pixels is drawn (axes, grid, roofs, points, labels), in several colors
    assert drawn > 0.03 * img.width * img.height and len(colors) > 20, (drawn, len(colors))
    # the tables are there and visible
    assert browser.eval("document.querySelectorAll('table').length") >= 2
    assert browser.eval("document.querySelector('.rl-tree').getBoundingClientRect().height") > 50
    if page == "callback":  # timing="model": the page says the op times are not measured, and how to get them
        text = browser.eval("document.body.innerText")
        assert "op times not measured" in text and 'timing="op"' in text


def test_the_module_tree_opens_on_a_click(pages, browser):
    browser.open(pages["report"])
    closed = browser.eval("document.querySelectorAll('.rl-tree details:not([open])').length")
    assert closed >= 1
    box = browser.eval("""(() => { const s = document.querySelector('.rl-tree details:not([open]) > summary');
        s.setAttribute('data-probe', '1'); s.scrollIntoView({block: "center"});
        const r = s.getBoundingClientRect(); return {x: r.x + 20, y: r.y + r.height / 2}; })()""")
    browser.click(box["x"], box["y"])
    assert browser.eval("document.querySelector('[data-probe]').parentElement.open") is True
    # its children are now shown
    assert browser.eval("document.querySelector('[data-probe]').parentElement.children[1]"
                        ".getBoundingClientRect().height") > 0
    assert browser.problems() == []


def test_a_chart_point_under_the_mouse_has_its_tooltip(pages, browser):
    browser.open(pages["report"])
    pt = browser.eval("""(() => { const c = document.querySelector('svg.rl-roofline circle.rl-point');
        c.scrollIntoView({block: "center"}); const r = c.getBoundingClientRect();
        return {x: r.x + r.width / 2, y: r.y + r.height / 2}; })()""")
    browser.mouse("mouseMoved", pt["x"], pt["y"])
    hovered = browser.eval(f"""(() => {{ const e = document.elementFromPoint({pt['x']}, {pt['y']});
        const t = e && e.querySelector(':scope > title');
        return {{hover: e.matches(':hover'), tag: e.tagName, title: t ? t.textContent : null}}; }})()""")
    assert hovered["tag"] == "circle" and hovered["hover"] is True
    assert hovered["title"] and "aten." in hovered["title"] and "FLOP" in hovered["title"]
    # the module tree's names carry their full path as a tooltip too
    assert browser.eval("document.querySelector('.rl-tree [title^=\"Net.blocks\"]') !== null")
