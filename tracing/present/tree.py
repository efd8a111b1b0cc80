"""The operator tree and its segments as an inline SVG diagram (no script, no fonts or files
fetched): what the audit report and ``Run._repr_html_`` show, so a person sees at a glance
where the model calls sit and which parts of the task are D (difference) segments.

Each operator is a node labelled by its symbol (σ π ⋈ α ∪ − φ; φ with its UDF), each source
table a box with its name; each segment a coloured band along its operators' edges, D
segments red and dashed, with a legend."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from segmenter.operators import Function, Node, Source, display_names, pretty
from segmenter.segments import Segment

ROW = 70  # vertical distance between tree levels
SLOT = 84  # least width of a leaf's column
CHAR = 7.5  # width of a label character (12 px sans-serif, roughly)
RADIUS = 17  # of an operator's circle
HALO = RADIUS + 7  # of a segment's band round an operator
MARGIN = 24
LEGEND = 40  # height of the legend strip
LEGEND_WIDTH = 480
LABEL_ROOM = 80  # right of the rightmost node: its segment's label
NON_D = ("#4a7bd0", "#2e9e6a", "#8a5cc2", "#c98a1b", "#1f9aa8", "#7a8b2a")  # Non-D segment colours
D = "#c62828"


@dataclass(frozen=True)
class _Placed:
    node: Node
    x: float
    y: float
    label: str
    width: float  # of a source's box; 0 for a circle


def tree_svg(root: Node, segments: Segment, steps: dict[int, str] | None = None) -> str:
    """An ``<svg>`` of the tree below ``root`` with the segments of ``segments`` (its root
    segment) drawn over it, each titled by its ``steps`` words: one ``<g class='al-node'>``
    per operator and source. It scales down to the page's width (CSS), the root on top."""
    placed: list[_Placed] = []
    _place(root, 0, [MARGIN], placed)
    where = {id(p.node): p for p in placed}
    owner = {id(op): seg for seg in segments.walk() for op in seg.operators}
    udfs = [p.x + RADIUS + 4 + len(p.node.udf) * CHAR for p in placed if isinstance(p.node, Function)]
    width = max(LEGEND_WIDTH, max(p.x + max(p.width / 2, RADIUS) for p in placed) + LABEL_ROOM, *udfs)
    depth = max(p.y for p in placed)
    height = depth + HALO + MARGIN + LEGEND
    said = steps or {}
    parts = [_segment_band(seg, where, said.get(seg.id, seg.pattern())) for seg in segments.walk()]
    parts += [_edge(where[id(p.node)], where[id(c)]) for p in placed for c in p.node.children]
    names = display_names(root)
    parts += [_node(p, owner.get(id(p.node)), names) for p in placed]
    parts.append(_legend(depth + HALO + MARGIN / 2, any(seg.is_d for seg in segments.walk())))
    return (
        f"<svg class='al-tree' xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
        f"viewBox='0 0 {width:.0f} {height:.0f}' role='img' font-family='system-ui, sans-serif' "
        f"font-size='12'><title>operator tree with {sum(1 for _ in segments.walk())} segment(s)</title>"
        f"{''.join(parts)}</svg>"
    )


def _label(node: Node) -> str:
    if isinstance(node, Source):
        return node.table
    return node.symbol


def _place(node: Node, level: int, cursor: list[float], out: list[_Placed]) -> float:
    """Leaves left to right, each as wide as its label; a parent centred over its children.
    Returns the node's x."""
    label = _label(node)
    y = MARGIN + HALO + level * ROW
    if not node.children:
        width = len(label) * CHAR + 16 if isinstance(node, Source) else 0
        column = max(SLOT, width + 12)
        x = cursor[0] + column / 2
        cursor[0] += column
        out.append(_Placed(node, x, y, label, width))
        return x
    xs = [_place(child, level + 1, cursor, out) for child in node.children]
    x = (xs[0] + xs[-1]) / 2
    out.append(_Placed(node, x, y, label, 0))
    if isinstance(node, Function):  # its model's name, right of it, keeps the next column away
        cursor[0] = max(cursor[0], x + RADIUS + 4 + len(node.udf) * CHAR + SLOT / 2)
    return x


def _colour(seg: Segment) -> str:
    return D if seg.is_d else NON_D[seg.id % len(NON_D)]


def _segment_band(seg: Segment, where: dict[int, _Placed], said: str) -> str:
    """A wide translucent stroke along the segment's edges and round its operators, so the
    band follows the tree (boxes of neighbouring segments would overlap)."""
    ops = {id(op) for op in seg.operators}
    colour = _colour(seg)
    dash = " stroke-dasharray='6 4'" if seg.is_d else ""
    shapes = []
    for op in seg.operators:
        a = where[id(op)]
        shapes.append(f"<circle cx='{a.x:.1f}' cy='{a.y:.1f}' r='{HALO}' stroke='none'/>")
        for child in op.children:
            if id(child) in ops:
                b = where[id(child)]
                shapes.append(f"<line x1='{a.x:.1f}' y1='{a.y:.1f}' x2='{b.x:.1f}' y2='{b.y:.1f}'/>")
    top = where[id(seg.top)]
    kind = "D" if seg.is_d else "Non-D"
    return (
        f"<g class='al-seg' data-segment='{seg.id}' data-kind='{kind}'>"
        f"<title>S{seg.id} [{kind}] {escape(said)}</title>"
        f"<g fill='{colour}' opacity='0.2' stroke='{colour}' "
        f"stroke-width='{2 * HALO}' stroke-linecap='round'>{''.join(shapes)}</g>"
        f"<circle cx='{top.x:.1f}' cy='{top.y:.1f}' r='{HALO}' fill='none' stroke='{colour}' "
        f"stroke-width='2'{dash}/>"
        f"<text x='{top.x + HALO + 2:.1f}' y='{top.y - RADIUS + 2:.1f}' fill='{colour}' font-weight='bold'>"
        f"S{seg.id}{' D' if seg.is_d else ''}</text></g>"
    )


def _edge(a: _Placed, b: _Placed) -> str:
    return (
        f"<line x1='{a.x:.1f}' y1='{a.y + RADIUS:.1f}' x2='{b.x:.1f}' y2='{b.y - RADIUS:.1f}' "
        "stroke='#555' stroke-width='1.5'/>"
    )


def _node(p: _Placed, seg: Segment | None, names: dict[str, str]) -> str:
    tip = f"{p.node.symbol} {type(p.node).__name__}: {pretty(p.node.describe(), names)}"
    where = f" (S{seg.id})" if seg is not None else " (source table)"
    head = f"<g class='al-node' data-op='{escape(p.node.symbol)}'><title>{escape(tip + where)}</title>"
    if isinstance(p.node, Source):
        return (
            f"{head}<rect x='{p.x - p.width / 2:.1f}' y='{p.y - 13:.1f}' width='{p.width:.1f}' height='26' "
            f"rx='4' fill='#f2f2f2' stroke='#555'/>"
            f"<text x='{p.x:.1f}' y='{p.y + 4:.1f}' text-anchor='middle'>{escape(p.label)}</text></g>"
        )
    colour = _colour(seg) if seg is not None else "#555"
    symbol = escape(p.label)
    text = f"<text x='{p.x:.1f}' y='{p.y + 6:.1f}' text-anchor='middle' font-size='17'>{symbol}</text>"
    if isinstance(p.node, Function):  # the model's name beside its φ
        udf = escape(p.node.udf)
        text += f"<text x='{p.x + RADIUS + 4:.1f}' y='{p.y + 26:.1f}' font-style='italic'>{udf}</text>"
    return (
        f"{head}<circle cx='{p.x:.1f}' cy='{p.y:.1f}' r='{RADIUS}' fill='white' stroke='{colour}' "
        f"stroke-width='2'/>{text}</g>"
    )


def _legend(y: float, with_d: bool) -> str:
    """Non-D band, D band (dashed; only when the tree has a difference), source table box."""
    band = "rx='8' fill='{0}' fill-opacity='0.25' stroke='{0}' stroke-width='2'"
    keys = [
        (band.format(NON_D[0]), "Non-D segment"),
        (band.format(D) + " stroke-dasharray='6 4'", "D segment (difference)"),
        ("rx='4' fill='#f2f2f2' stroke='#555'", "source table"),
    ]
    if not with_d:
        del keys[1]
    items, x = [], float(MARGIN)
    for style, text in keys:
        items.append(
            f"<rect x='{x:.0f}' y='{y + 6}' width='26' height='16' {style}/>"
            f"<text x='{x + 32:.0f}' y='{y + 19}'>{text}</text>"
        )
        x += 32 + len(text) * CHAR + 24
    return f"<g class='al-legend'>{''.join(items)}</g>"
