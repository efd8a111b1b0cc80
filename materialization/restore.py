"""Deploy intermediate results for tracing: read what the run stored, rerun the rest.

A segment's output is read from the store when the strategy kept it, otherwise recomputed
in reasoning mode from its inputs, with the targets' semi-join pushed down so only the rows
that can matter are recomputed (and only they reach an expensive UDF).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from materialization.compile import Compiler, aliased, ident, read_columns, read_source
from materialization.pushdown import Restriction, push_to_leaves
from materialization.spark import SparkOf
from segmenter.errors import LineageError
from segmenter.operators import Node, Source
from segmenter.segments import Segment


def stored_columns(info: dict[str, Any], seg: Segment, firsts: dict[int, Segment]) -> list[tuple[str, str]]:
    """(column in the files, column id) of ``seg``'s stored output (``info``; ``firsts``: the
    run's :meth:`Segment.firsts`): a segment equal to an earlier one shares that one's files
    (``same_as``), whose columns carry that one's ids. The record names the segment; the tree
    says whether ``seg`` equals it, and gives the columns."""
    ids = [c.id for c in seg.top.columns]
    if "same_as" not in info:
        return list(zip(ids, ids))
    first = firsts[seg.id]
    if first is seg or first.id != info["same_as"]:
        raise LineageError(
            f"the run's record stores segment {seg.id} as segment {info['same_as']!r}'s output, "
            "which it does not equal: edited or damaged"
        )
    return [(a.id, b) for a, b in zip(first.top.columns, ids, strict=True)]


def read_stored(spark: SparkSession, path: str, pairs: list[tuple[str, str]], seg: Segment) -> DataFrame:
    """``seg``'s stored output at ``path``, its (file column, column id) ``pairs`` under the ids."""
    types = {c.id: c.dtype for c in seg.top.columns}
    df = read_columns(spark, path, [(f, types[c]) for f, c in pairs])
    return df.selectExpr(*[ident(f) if f == c else aliased(ident(f), c) for f, c in pairs])


class Restorer:
    def __init__(self, spark_of: SparkOf, run_dir: str, stored: dict[str, Any], root: Segment) -> None:
        """``spark_of``: the session, started only where a segment is read by Spark (the
        in-process engine reads the same files with DuckDB)."""
        self.spark_of = spark_of
        self.run_dir = run_dir
        self.stored = stored
        self.root = root

    @cached_property
    def _firsts(self) -> dict[int, Segment]:
        return self.root.firsts()

    def stored_columns(self, seg: Segment) -> list[tuple[str, str]]:
        """(column in the stored files, column id) of ``seg``'s stored output."""
        return stored_columns(self.stored[str(seg.id)], seg, self._firsts)

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
            df = read_stored(self.spark_of(), path, self.stored_columns(seg), seg)
        else:
            pushed = push_to_leaves(seg.top, seg.leaves, restriction)
            inputs = {id(leaf): self.leaf_input(seg, leaf, pushed[id(leaf)]) for leaf in seg.leaves}
            df = Compiler(self.spark_of(), "reasoning", inputs=lambda n: inputs.get(id(n))).compile(seg.top)
        return restriction.apply(df) if restriction is not None else df

    def leaf_input(self, seg: Segment, leaf: Node, restriction: Restriction | None) -> DataFrame:
        """A segment input: a (restricted) source table or a child segment's output."""
        child = seg.child_for(leaf)
        if child is not None:
            return self.output(child, restriction)
        assert isinstance(leaf, Source)
        df = read_source(self.spark_of(), leaf)
        return restriction.apply(df) if restriction is not None else df
