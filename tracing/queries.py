"""Tracing queries (paper §5.3).

Non-D segment: ∪ᵢ Split(σ_Cᵢ(T₁ ⋈ … ⋈ Tₘ) ⋉ Ō). The segment's σ/π/⋈/∪ body is evaluated
over its inputs with a tag per input; the α chain's grouping keys are evaluated on those rows;
the rows that agree with a target (on the top grouping keys, or on the body's columns when
there is no aggregation) are kept; each input's tag then gives its rows (Split). φ appends
values that are functions of the row, so it never needs to be re-evaluated here.

D segment T₁ − T₂: {Ō, T₂}.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from materialization.compile import TAG_PREFIX, Compiler, ref
from materialization.pushdown import Restriction, push_to_leaves
from materialization.restore import Restorer
from materialization.settle import settle
from segmenter.operators import Node, Source
from segmenter.segments import Segment


@dataclass(frozen=True)
class LeafLineage:
    """The part of one segment input that belongs to the intermediate lineage: ``rows``
    (source rows or child-segment output rows, by column id), or for the inputs of a
    difference the ``targets`` to trace in the child (None there means all of it)."""

    leaf: Node
    child: Segment | None
    rows: DataFrame | None = None
    targets: Restriction | None = None


def trace_non_d(seg: Segment, targets: Restriction | None, restorer: Restorer) -> list[LeafLineage]:
    """Split(σ_C(T₁ ⋈ … ⋈ Tₘ) ⋉ Ō) for a Non-D segment; ``targets`` None means ALL."""
    pushed = push_to_leaves(seg.top, seg.leaves, targets)
    inputs: dict[int, DataFrame] = {}
    tags: dict[int, str] = {}
    for j, leaf in enumerate(seg.leaves):
        tag = f"{TAG_PREFIX}{j}"
        identity = leaf.key if isinstance(leaf, Source) else [c.id for c in leaf.columns]
        df = restorer.leaf_input(seg, leaf, pushed[id(leaf)])
        inputs[id(leaf)] = df.withColumn(tag, F.struct(*[ref(c) for c in identity]))
        tags[id(leaf)] = tag
    body_top = seg.body if seg.body is not None else seg.leaves[0]
    joined = Compiler(restorer.spark, tagged=True, inputs=lambda n: inputs.get(id(n))).compile(body_top)
    for agg in reversed(seg.aggregations):
        joined = joined.withColumns({c.id: F.expr(e.sql) for c, e in agg.keys})
    if targets is not None:
        if seg.aggregations:
            match = {c.id for c, _ in seg.aggregations[0].keys}
        else:
            match = {c.id for c in body_top.match_columns()}
        on = {v: n for v, n in targets.on.items() if n in match}
        joined = Restriction(targets.values, on, targets.rows).apply(joined)
    joined = settle(joined)[0]  # evaluated once; each input's split reads it
    out = []
    for leaf in seg.leaves:
        tag = tags[id(leaf)]
        rows = joined.where(F.col(tag).isNotNull()).select(f"{tag}.*").distinct()
        rows = _rows_of(leaf, rows, inputs[id(leaf)], tag)
        out.append(LeafLineage(leaf, seg.child_for(leaf), rows=rows))
    return out


def _rows_of(leaf: Node, ids: DataFrame, tagged_input: DataFrame, tag: str) -> DataFrame:
    """Whole rows for a split: sources are carried by key only, so look the rows up."""
    if not isinstance(leaf, Source):
        return ids
    on = {k: k for k in leaf.key}
    return Restriction(ids, on, rows=1 << 62).apply(tagged_input.drop(tag))


def trace_d(seg: Segment, targets: Restriction | None, restorer: Restorer) -> list[LeafLineage]:
    """{Ō, T₂} for a D segment T₁ − T₂: the targets themselves in T₁, all of T₂."""
    left, right = seg.leaves
    out = []
    for leaf, r in ((left, targets), (right, None)):
        narrowed = r.narrowed({c.id: c.id for c in leaf.match_columns()}) if r else None
        child = seg.child_for(leaf)
        if child is None:
            out.append(LeafLineage(leaf, None, rows=restorer.leaf_input(seg, leaf, narrowed)))
        else:
            out.append(LeafLineage(leaf, child, targets=narrowed))
    return out
