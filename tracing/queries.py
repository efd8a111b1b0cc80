"""Tracing queries (paper §5.3), written once for every engine.

Non-D segment: ∪ᵢ Split(σ_Cᵢ(T₁ ⋈ … ⋈ Tₘ) ⋉ Ō). The segment's σ/π/⋈/∪ body is evaluated
over its inputs with a tag per input; the α chain's grouping keys are evaluated on those rows;
the rows that agree with a target (on the top grouping keys, or on the body's columns when
there is no aggregation) are kept; each input's tag then gives its rows (Split). φ appends
values that are functions of the row, so it never needs to be re-evaluated here.

D segment T₁ − T₂: {Ō, T₂}.
"""

from __future__ import annotations

from dataclasses import dataclass

from materialization.compile import TAG_PREFIX
from materialization.pushdown import Restriction, push_to_leaves
from segmenter.operators import Node
from segmenter.segments import Segment
from tracing.engines import Engine, Settled


@dataclass(frozen=True)
class LeafLineage:
    """The part of one segment input that belongs to the intermediate lineage: ``rows``
    (source rows or child-segment output rows, by column id, settled), or for the inputs of
    a difference the ``targets`` to trace in the child (None there means all of it)."""

    leaf: Node
    child: Segment | None
    rows: Settled | None = None
    targets: Restriction | None = None


def trace_non_d(seg: Segment, targets: Restriction | None, engine: Engine) -> list[LeafLineage]:
    """Split(σ_C(T₁ ⋈ … ⋈ Tₘ) ⋉ Ō) for a Non-D segment; ``targets`` None means ALL."""
    pushed = push_to_leaves(seg.top, seg.leaves, targets)
    inputs = {}
    tags: dict[int, str] = {}
    for j, leaf in enumerate(seg.leaves):
        tags[id(leaf)] = tag = f"{TAG_PREFIX}{j}"
        rel = engine.leaf_input(seg, leaf, pushed[id(leaf)])
        inputs[id(leaf)] = engine.tagged(rel, tag, leaf.columns)
    joined = engine.body(seg.body_top, inputs)
    for agg in reversed(seg.aggregations):
        joined = engine.with_keys(joined, agg.keys)
    if targets is not None:
        if seg.aggregations:
            match = {c.id for c, _ in seg.aggregations[0].keys}
        else:
            match = {c.id for c in seg.body_top.match_columns()}
        on = {v: n for v, n in targets.on.items() if n in match}
        joined = engine.semi(joined, Restriction(targets.values, on, targets.rows))
    settled = engine.settle(joined)  # evaluated once; each input's split reads it
    return [
        LeafLineage(leaf, seg.child_for(leaf), rows=engine.split(settled, tags[id(leaf)]))
        for leaf in seg.leaves
    ]


def trace_d(seg: Segment, targets: Restriction | None, engine: Engine) -> list[LeafLineage]:
    """{Ō, T₂} for a D segment T₁ − T₂: the targets themselves in T₁, all of T₂.

    Asked for all of its output (as the subtrahend of another difference is), Ō is the
    whole output T₁ − T₂, not all of T₁."""
    left, right = seg.leaves
    if targets is None:
        everything = engine.settle(engine.output(seg, None))
        targets = Restriction(everything.rows, {c.id: c.id for c in seg.top.columns}, everything.count)
    if targets.rows == 0:  # SL(∅) = ∅: not even T₂ contributes to no row
        return []
    out = []
    for leaf, r in ((left, targets), (right, None)):
        narrowed = r.narrowed({c.id: c.id for c in leaf.match_columns()}) if r else None
        child = seg.child_for(leaf)
        if child is None:
            rows = engine.settle(engine.leaf_input(seg, leaf, narrowed))
            out.append(LeafLineage(leaf, None, rows=rows))
        else:
            out.append(LeafLineage(leaf, child, targets=narrowed))
    return out
