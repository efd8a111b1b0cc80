"""Segmentation (paper §5.1-5.2): split an operator tree into Non-D and D segments.

Non-D pattern, top to bottom: ``φ* α* (∪|π|σ)* (π|σ|⋈)*`` with nested grouping keys for
stacked aggregations; D: a single difference; outer: a single outer join, whose padded rows
carry a difference's check (docs/semantics.md). Longest match, top-down from the root, the
operator order left exactly as given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from segmenter.operators import (
    Aggregation,
    Difference,
    Expand,
    Function,
    Generate,
    Join,
    Node,
    OuterJoin,
    Projection,
    Selection,
    Source,
    Union,
    Window,
    shape_key,
)


@dataclass(frozen=True)
class Segment:
    id: int
    kind: str  # "non-d", "d" or "outer"
    top: Node
    functions: tuple[Function, ...]  # φ chain, top first
    aggregations: tuple[Aggregation, ...]  # α chain, top first
    body: Node | None  # top of the (∪|π|σ)*(π|σ|⋈)* part; None if the α/φ chain reads a leaf
    operators: tuple[Node, ...]  # every operator of the segment, pre-order
    leaves: tuple[Node, ...]  # inputs: source tables or tops of child segments
    children: tuple[Segment, ...]  # child segments, in leaf order

    @property
    def is_d(self) -> bool:
        return self.kind == "d"

    @property
    def windowed(self) -> bool:
        """Whether a window is among its operators: its tagged rows are then each row paired
        with the rows of its frame, a row repeated once per frame row."""
        return any(isinstance(op, Window) for op in self.operators)

    @property
    def calls_models(self) -> bool:
        """Whether a model is called in this segment or below it."""
        return any(s.functions for s in self.walk())

    @property
    def one_row(self) -> bool:
        """At most one output row, whatever the data: a global aggregate (an uncorrelated
        scalar subquery), with φ, σ or π above it. Every row joined with it shares its whole
        lineage, which an eager capture therefore stores once (materialization/indexes.py)."""
        if self.kind != "non-d":
            return False
        if self.aggregations:
            return not self.aggregations[0].key_ids
        child = self.child_for(self.leaves[0]) if len(self.leaves) == 1 else None
        kept = (Function, Selection, Projection)
        return child is not None and child.one_row and all(isinstance(op, kept) for op in self.operators)

    @property
    def check_id(self) -> int:
        """The label of the rows an outer join's check reads (its matched rows, control for
        its padded rows), apart from its own id, which labels the rows its output rows were
        made of: the same input is read both ways."""
        return -1 - self.id

    def walk(self) -> Iterator[Segment]:
        """Pre-order over this segment and all segments below it."""
        yield self
        for child in self.children:
            yield from child.walk()

    def routes(self, above: tuple[int, ...] = ()) -> dict[int, tuple[int, ...]]:
        """Each segment's path from this one down to it (segment ids): which subquery or
        branch a source row entered the lineage by."""
        path = (*above, self.id)
        found = {self.id: path}
        if self.kind == "outer":
            found[self.check_id] = path
        for child in self.children:
            found |= child.routes(path)
        return found

    def entries(self) -> dict[str, list[int]]:
        """Per source table, the segments that read it as an input (a table read by two
        needs its rows' segment recorded; one read by one is placed by the plan, and by the
        outer join's check whose control lineage holds them)."""
        found: dict[str, list[int]] = {}
        for seg in self.walk():
            for leaf in seg.leaves:
                if isinstance(leaf, Source) and seg.id not in found.get(leaf.table, []):
                    found.setdefault(leaf.table, []).append(seg.id)
        return found

    def post_order(self) -> list[Segment]:
        """Children before parents: the order segments are run (and captured) in."""
        return [s for child in self.children for s in child.post_order()] + [self]

    def firsts(self) -> dict[int, Segment]:
        """Each segment's first equal one in post-order (itself if none): segments whose
        subtrees are equal up to column ids (:func:`shape_key`) compute the same rows and
        lineage. A window's rewrite reads its input three times, a CTE is read per reference."""
        first: dict[str, Segment] = {}
        return {s.id: first.setdefault(shape_key(s.top), s) for s in self.post_order()}

    @property
    def body_top(self) -> Node:
        """Where the φ/α chain reads its rows: the body's top, or the single leaf."""
        return self.body if self.body is not None else self.leaves[0]

    def pattern(self) -> str:
        return "-".join(op.symbol for op in self.operators)

    def child_for(self, leaf: Node) -> Segment | None:
        """The child segment whose top is ``leaf`` (None for a source table)."""
        for child in self.children:
            if child.top is leaf:
                return child
        return None


def nested_keys(upper: Aggregation, lower: Aggregation) -> bool:
    """G_upper ⊆ G_lower: the upper grouping keys read only the lower grouping keys."""
    lower_keys = {c.id for c, _ in lower.keys}
    return all(expr.refs <= lower_keys for _, expr in upper.keys)


def segment(root: Node) -> Segment:
    """Segment the tree below ``root``; returns the root segment (children hang below). A
    node the tree holds twice starts a segment of its own (:func:`paths_to`), which
    :meth:`Segment.firsts` then computes once."""
    counter = iter(range(1 << 30))
    return _segment(root, counter, paths_to(root))


def paths_to(root: Node) -> Counter[Node]:
    """How many paths from ``root`` reach each operator (equal by value, column ids
    included). A node reached by more paths than its parent is held twice: an anti-join's
    rewrite T₁ − (T₁ ⋉ T₂) holds T₁ in both inputs. Inside another segment it would be
    computed again there, and captured again (TPC-H Q21's T₁, a four-way join of line
    items: 22 s of an eager run's 59 s at SF 1)."""
    return Counter(node for node in root.walk() if not isinstance(node, Source))


def _segment(top: Node, counter: Iterator[int], paths: Counter[Node]) -> Segment:
    seg_id = next(counter)
    if isinstance(top, Difference):
        leaves: tuple[Node, ...] = (top.left, top.right)
        return _make(seg_id, "d", top, (), (), None, (top,), leaves, counter, paths)
    if isinstance(top, OuterJoin):  # with the σ/π/⋈ below each input, as below an inner join
        joined: list[Node] = []
        inputs: list[Node] = []
        _collect_body(top, True, joined, inputs, paths)
        return _make(seg_id, "outer", top, (), (), top, tuple(joined), tuple(inputs), counter, paths)

    operators: list[Node] = []
    node = top
    functions: list[Function] = []
    while isinstance(node, Function):
        functions.append(node)
        operators.append(node)
        node = node.child
    aggregations: list[Aggregation] = []
    while isinstance(node, Aggregation) and (not aggregations or nested_keys(aggregations[-1], node)):
        aggregations.append(node)
        operators.append(node)
        node = node.child
    leaves: list[Node] = []
    body = None
    if _is_body(node, below_join=False):
        body = node
        _collect_body(node, False, operators, leaves, paths)
    elif operators:
        leaves.append(node)
    else:
        raise ValueError(f"cannot start a segment at {type(top).__name__}")
    return _make(
        seg_id,
        "non-d",
        top,
        tuple(functions),
        tuple(aggregations),
        body,
        tuple(operators),
        tuple(leaves),
        counter,
        paths,
    )


def _make(
    seg_id: int,
    kind: str,
    top: Node,
    functions: tuple[Function, ...],
    aggregations: tuple[Aggregation, ...],
    body: Node | None,
    operators: tuple[Node, ...],
    leaves: tuple[Node, ...],
    counter: Iterator[int],
    paths: Counter[Node],
) -> Segment:
    children = tuple(_segment(leaf, counter, paths) for leaf in leaves if not isinstance(leaf, Source))
    return Segment(seg_id, kind, top, functions, aggregations, body, operators, leaves, children)


def _is_body(node: Node, below_join: bool, below_window: bool = False) -> bool:
    """Whether ``node`` continues the body above it. A window below another window starts a
    segment of its own: a capture pairs each row of a window with its frame's rows, which a
    window above would count as rows."""
    if isinstance(node, (Projection, Selection, Join, Generate, Expand)):
        return True
    if isinstance(node, Window):
        return not below_window
    return isinstance(node, Union) and not below_join


def _collect_body(
    node: Node,
    below_join: bool,
    operators: list[Node],
    leaves: list[Node],
    paths: Counter[Node],
    below_window: bool = False,
) -> None:
    operators.append(node)
    below = below_join or isinstance(node, Join)
    windowed = below_window or isinstance(node, Window)
    for child in node.children:
        if paths[child] <= paths[node] and _is_body(child, below, windowed):
            _collect_body(child, below, operators, leaves, paths, windowed)
        else:
            leaves.append(child)


def render_segments(root: Segment) -> str:
    """One line per segment: id, kind, operator pattern, inputs."""
    lines = []
    for seg in root.walk():
        inputs = []
        for leaf in seg.leaves:
            child = seg.child_for(leaf)
            inputs.append(f"segment {child.id}" if child else f"table {leaf.table}")  # type: ignore[attr-defined]
        kind = {"d": "D", "non-d": "Non-D", "outer": "Outer"}[seg.kind]
        lines.append(f"segment {seg.id} [{kind}] {seg.pattern()}  <- {', '.join(inputs)}")
    return "\n".join(lines)


_OUTER_CHECKS = {"exists": "existence join (EXISTS under OR or in a SELECT list; for its rows flagged false)"}
_CHECKS = {"anti": "anti-join (NOT EXISTS, NOT IN, an outer join's unmatched row)", "distinct": "EXCEPT"}


def control_reads(root: Segment) -> dict[str, dict[int, tuple[str, int]]]:
    """Where source rows are only checked, not used (docs/semantics.md, "Contributing and
    control lineage"): per table, each segment whose reads of it are control rows, with what
    checks them. A difference's right input is tested for the absence of a match (the D rule
    gives all of it): every row read below it is control. A difference that reads one table
    on both sides cannot tell its reads apart: they count as contributing. An outer join's
    check (the matched rows of both inputs, for its padded rows) is read under its
    :attr:`Segment.check_id`."""
    found: dict[str, dict[int, tuple[str, int]]] = {}
    for seg in root.walk():
        if seg.kind == "outer":  # its check's reads are labelled apart (Segment.check_id)
            kind = seg.top.kind  # type: ignore[attr-defined]
            check = (_OUTER_CHECKS.get(kind, f"{kind} outer join (for its unmatched rows)"), seg.id)
            for inner in seg.walk():
                for leaf in inner.leaves:
                    if isinstance(leaf, Source):
                        found.setdefault(leaf.table, {})[seg.check_id] = check
        if not seg.is_d:
            continue
        assert isinstance(seg.top, Difference)
        check = (_CHECKS.get(seg.top.kind, "EXCEPT ALL"), seg.id)
        left, right = seg.leaves
        if isinstance(right, Source):
            if not (isinstance(left, Source) and left.table == right.table):
                found.setdefault(right.table, {}).setdefault(seg.id, check)
            continue
        below = seg.child_for(right)
        assert below is not None
        for inner in below.walk():
            for leaf in inner.leaves:
                if isinstance(leaf, Source):
                    found.setdefault(leaf.table, {}).setdefault(inner.id, check)
    return found
