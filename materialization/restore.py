"""Deploy intermediate results for tracing: read what the run stored, rerun the rest.

A segment's output is read from the store when the strategy kept it, otherwise recomputed
in reasoning mode from its inputs, with the targets' semi-join pushed down so only the rows
that can matter are recomputed (and only they reach an expensive UDF).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from materialization.compile import Compiler, ident, read_columns, read_source
from materialization.pushdown import Restriction, push_to_leaves
from segmenter.operators import Node, Source
from segmenter.segments import Segment


class Restorer:
    def __init__(self, spark: SparkSession, run_dir: str, stored: dict[str, Any]) -> None:
        self.spark = spark
        self.run_dir = run_dir
        self.stored = stored

    def stored_path(self, seg: Segment) -> str | None:
        """Where a usable (reasoning-mode) copy of ``seg``'s output is, if any."""
        info = self.stored.get(str(seg.id))
        if info and info["mode"] == "reasoning":
            return f"{self.run_dir}/{info['dir']}"
        return None

    def output(self, seg: Segment, restriction: Restriction | None) -> DataFrame:
        """``seg``'s output rows in reasoning mode, restricted to ``restriction``."""
        path = self.stored_path(seg)
        if path is not None:  # an eager run stores lineage columns beside the segment's own
            cols = seg.top.columns
            df = read_columns(self.spark, path, [(c.id, c.dtype) for c in cols]).selectExpr(
                *[ident(c.id) for c in cols]
            )
        else:
            pushed = push_to_leaves(seg.top, seg.leaves, restriction)
            inputs = {id(leaf): self.leaf_input(seg, leaf, pushed[id(leaf)]) for leaf in seg.leaves}
            df = Compiler(self.spark, "reasoning", inputs=lambda n: inputs.get(id(n))).compile(seg.top)
        return restriction.apply(df) if restriction is not None else df

    def leaf_input(self, seg: Segment, leaf: Node, restriction: Restriction | None) -> DataFrame:
        """A segment input: a (restricted) source table or a child segment's output."""
        child = seg.child_for(leaf)
        if child is not None:
            return self.output(child, restriction)
        assert isinstance(leaf, Source)
        df = read_source(self.spark, leaf)
        return restriction.apply(df) if restriction is not None else df
