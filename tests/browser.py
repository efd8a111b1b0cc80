"""A real headless browser (Debian's chromium) for the HTML the project writes: a screenshot,
the console, and whether every image decoded."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

CHECK_IMAGES = """<script>
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  const broken = imgs.filter((i) => !(i.complete && i.naturalWidth > 0)).length;
  document.body.setAttribute("data-images", imgs.length + " " + broken);
  const trees = Array.from(document.querySelectorAll("svg.al-tree"));
  const drawn = trees.filter((t) => t.getBBox().width > 0 && t.getBoundingClientRect().height > 0).length;
  const nodes = trees.map((t) => t.querySelectorAll("g.al-node").length).join(",");
  document.body.setAttribute("data-trees", trees.length + " " + drawn + " [" + nodes + "]");
});
</script>"""


@dataclass(frozen=True)
class Rendered:
    screenshot: Path
    console: list[str]  # console messages (a page without scripts should log none)
    images: int
    broken_images: int
    trees: int  # operator tree diagrams (inline SVG)
    drawn_trees: int  # of those, laid out with a non-empty box
    tree_nodes: list[int]  # operator nodes drawn in each diagram


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.skip("chromium is not installed (.ci/run installs it with apt-get)")
    return found


def render(page: Path, screenshot: Path, width: int = 1200, height: int = 2400) -> Rendered:
    """Load ``page`` as a user would (file://, no network) and look at the result."""
    base = [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0"]
    shot = subprocess.run(
        [*base, f"--screenshot={screenshot}", f"--window-size={width},{height}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    checked = page.with_name(f"{page.stem}.checked.html")
    checked.write_text(page.read_text().replace("</body>", f"{CHECK_IMAGES}</body>"))
    dom = subprocess.run(
        [*base, "--virtual-time-budget=5000", "--dump-dom", checked.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = [
        line for line in (shot.stderr + dom.stderr).splitlines() if ":CONSOLE" in line or "Uncaught" in line
    ]
    counts = re.search(r'data-images="(\d+) (\d+)"', dom.stdout)
    assert counts, f"the image check did not run: {dom.stderr[-2000:]}"
    trees = re.search(r'data-trees="(\d+) (\d+) \[([\d,]*)\]"', dom.stdout)
    assert trees, f"the tree check did not run: {dom.stderr[-2000:]}"
    nodes = [int(n) for n in trees[3].split(",") if n]
    return Rendered(screenshot, console, int(counts[1]), int(counts[2]), int(trees[1]), int(trees[2]), nodes)
