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
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from materialization.compile import TAG_PREFIX, Compiler, ref
from materialization.pushdown import Restriction, push_to_leaves
from materialization.restore import Restorer
from materialization.settle import settle
from segmenter.operators import Node
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
        df = restorer.leaf_input(seg, leaf, pushed[id(leaf)])
        inputs[id(leaf)] = df.withColumn(tag, F.struct(*[ref(c.id) for c in leaf.columns]))
        tags[id(leaf)] = tag
    body_top = seg.body_top
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
    joined, _, local = settle(joined)  # evaluated once; each input's split reads it
    return [
        LeafLineage(leaf, seg.child_for(leaf), rows=_split(joined, local, tags[id(leaf)]))
        for leaf in seg.leaves
    ]


def _split(joined: DataFrame, local: list[Row] | None, tag: str) -> DataFrame:
    """One input's distinct rows (its tag) among the joined rows; on the driver when small."""
    schema = joined.schema[tag].dataType
    if local is None:
        return joined.where(F.col(tag).isNotNull()).select(f"{tag}.*").distinct()
    unique = {_frozen(r[tag]): r[tag] for r in local if r[tag] is not None}
    return joined.sparkSession.createDataFrame(list(unique.values()), schema)  # type: ignore[arg-type]


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a row value (structs and arrays become tuples)."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    return value


def trace_d(seg: Segment, targets: Restriction | None, restorer: Restorer) -> list[LeafLineage]:
    """{Ō, T₂} for a D segment T₁ − T₂: the targets themselves in T₁, all of T₂.

    Asked for all of its output (as the subtrahend of another difference is), Ō is the
    whole output T₁ − T₂, not all of T₁."""
    left, right = seg.leaves
    if targets is None:
        everything, count, _ = settle(restorer.output(seg, None))
        targets = Restriction(everything, {c.id: c.id for c in seg.top.columns}, count)
    if targets.rows == 0:  # SL(∅) = ∅: not even T₂ contributes to no row
        return []
    out = []
    for leaf, r in ((left, targets), (right, None)):
        narrowed = r.narrowed({c.id: c.id for c in leaf.match_columns()}) if r else None
        child = seg.child_for(leaf)
        if child is None:
            out.append(LeafLineage(leaf, None, rows=restorer.leaf_input(seg, leaf, narrowed)))
        else:
            out.append(LeafLineage(leaf, child, targets=narrowed))
    return out
