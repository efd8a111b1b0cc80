"""A real headless browser (Debian's chromium) for the HTML the project writes: a screenshot,
the console, whether every image decoded, and where chosen elements are laid out."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

# The page is loaded in a frame of exactly the screen's size (a headless window is at least
# 500 px wide); the checks run from outside it and write what they find on the outer body.
FRAMED = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" style="border:0;width:{width}px;height:{height}px" srcdoc="{page}"></iframe>
<script>
window.addEventListener("load", () => {{
  const win = document.getElementById("page").contentWindow, doc = win.document;
  const boxes = {{}};  // as the page first shows: folded parts folded
  for (const selector of {measured}) {{
    const found = doc.querySelector(selector);
    if (found) {{ const r = found.getBoundingClientRect(); boxes[selector] = [r.top, r.bottom, r.right]; }}
  }}
  const sizes = [win.innerWidth, win.innerHeight, doc.documentElement.scrollWidth];
  document.body.setAttribute("data-boxes", JSON.stringify({{boxes: boxes, window: sizes}}));
  doc.querySelectorAll("details").forEach((d) => {{ d.open = true; }});  // then everything unfolded
  const imgs = Array.from(doc.images);
  const broken = imgs.filter((i) => !(i.complete && i.naturalWidth > 0)).length;
  document.body.setAttribute("data-images", imgs.length + " " + broken);
  const trees = Array.from(doc.querySelectorAll("svg.al-tree"));
  const drawn = trees.filter((t) => t.getBBox().width > 0 && t.getBoundingClientRect().height > 0).length;
  const nodes = trees.map((t) => t.querySelectorAll("g.al-node").length).join(",");
  const right = Math.max(0, ...trees.map((t) => t.getBoundingClientRect().right));
  document.body.setAttribute("data-trees", trees.length + " " + drawn + " [" + nodes + "] " + right);
}});
</script></body></html>"""


@dataclass(frozen=True)
class Rendered:
    screenshot: Path
    console: list[str]  # console messages (a page without scripts should log none)
    images: int
    broken_images: int
    trees: int  # operator tree diagrams (inline SVG)
    drawn_trees: int  # of those, laid out with a non-empty box
    tree_nodes: list[int]  # operator nodes drawn in each diagram
    tree_right: float  # the right edge of the widest diagram, unfolded (px from the window's left)
    boxes: dict[str, tuple[float, float, float]]  # per measured selector, its first match: top, bottom, right
    window: tuple[int, int, int]  # the window's width and height, the page's width (wider: it scrolls)


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("chromium is not installed (.ci/run installs it with apt-get)")
    return found


def render(
    page: Path, screenshot: Path, width: int = 1200, height: int = 2400, measure: Sequence[str] = ()
) -> Rendered:
    """Load ``page`` as a user would (file://, no network) in a window ``width`` x ``height``
    and look at the result: where the first element of each ``measure`` selector is laid out."""
    base = [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0"]
    shot = subprocess.run(
        [*base, f"--screenshot={screenshot}", f"--window-size={width},{height}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    checked = page.with_name(f"{page.stem}.checked-{width}.html")
    framed = FRAMED.format(
        width=width, height=height, page=html.escape(page.read_text()), measured=json.dumps(list(measure))
    )
    checked.write_text(framed)
    size = f"--window-size={max(width, 500) + 40},{height + 40}"
    dom = subprocess.run(
        [*base, "--virtual-time-budget=5000", size, "--dump-dom", checked.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = [
        line for line in (shot.stderr + dom.stderr).splitlines() if ":CONSOLE" in line or "Uncaught" in line
    ]
    counts = re.search(r'data-images="(\d+) (\d+)"', dom.stdout)
    assert counts, f"the image check did not run: {dom.stderr[-2000:]}"
    trees = re.search(r'data-trees="(\d+) (\d+) \[([\d,]*)\] ([\d.]+)"', dom.stdout)
    assert trees, f"the tree check did not run: {dom.stderr[-2000:]}"
    nodes = [int(n) for n in trees[3].split(",") if n]
    laid = re.search(r'data-boxes="([^"]*)"', dom.stdout)
    assert laid, f"the layout check did not run: {dom.stderr[-2000:]}"
    found = json.loads(html.unescape(laid[1]))
    boxes = {k: tuple(v) for k, v in found["boxes"].items()}
    shown = (int(counts[1]), int(counts[2]), int(trees[1]), int(trees[2]), nodes, float(trees[4]))
    return Rendered(screenshot, console, *shown, boxes, tuple(found["window"]))


# what the engine calls things (a rewrite's columns, column ids, segment numbers): never in a page
INTERNAL = re.compile(r"partition_key|order_key|AL_TASK_TIE_ERROR|\w__u?\d|\bsegments? \d")
SCREENS = {"desktop": (1400, 900), "phone": (412, 915)}  # the first screen an auditor sees
FIRST = ("table.al-values", "ul.al-decisions")  # the row's values and its models' decisions


def first_screens(page: Path, folder: Path) -> dict[str, Rendered]:
    """``page`` on a desktop and a phone screen: its first screen holds the first row's
    values and decisions, nothing makes the page wider than the screen, and the operator
    tree, unfolded, fits the width with its root (top centre) on screen."""

    def on(screen: tuple[int, int]) -> Rendered:
        return render(page, folder / f"{page.stem}-{screen[0]}.png", *screen, FIRST)

    with ThreadPoolExecutor(len(SCREENS)) as pool:  # side by side: each Chromium takes seconds to start
        shown = dict(zip(SCREENS, pool.map(on, SCREENS.values()), strict=True))
    for name, (width, height) in SCREENS.items():
        seen = shown[name]
        assert seen.console == [] and seen.broken_images == 0, name
        for selector in FIRST:
            top, bottom, right = seen.boxes[selector]
            assert 0 < top < bottom <= height and right <= width, (name, selector, seen.boxes)
        assert seen.window[2] <= width, (name, seen.window)  # no sideways scrolling of the page
        assert 0 < seen.tree_right <= width, (name, seen.tree_right)
    return shown
