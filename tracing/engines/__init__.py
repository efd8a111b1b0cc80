"""Where a tracing query runs: the one seam between the tracing rules and an engine.

The rules (:mod:`tracing.queries`, :mod:`tracing.derive`) speak to an :class:`Engine` in a
handful of relational steps (read an input, tag it, evaluate a segment's body, semi-join,
settle, split) and never learn which engine answers. Two do: Spark, which can run anything
(model calls included), and DuckDB in this process over the run's Parquet files, which
answers a small question without a Spark job. :func:`choose_engine` decides, per question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from materialization.compile import ROW_ID
from materialization.duck_expressions import NotInProcess
from materialization.pushdown import Restriction
from materialization.restore import Restorer
from segmenter.operators import Col, Expr, Node
from segmenter.segments import Segment

if TYPE_CHECKING:
    from tracing.lazy_reasons import Tell

ENGINES = ("auto", "in-process", "spark")


@dataclass(frozen=True)
class Settled:
    """An evaluated relation and its row count (``local``: the engine's own copy of the rows,
    when it keeps one)."""

    rows: Any
    count: int
    local: Any = None

    def restricting(self, on: dict[str, str], complete: bool = False, numbered: bool = False) -> Restriction:
        """A restriction to these rows (``on``: their column -> the restricted node's), with
        the copy held in process, which lets Spark test few values as literals."""
        return Restriction(self.rows, on, self.count, complete, numbered, self.local)


class Engine(Protocol):
    name: str

    def targets(self, df: DataFrame, local: pa.Table) -> Any:
        """The chosen output rows (settled by Spark, by column id; ``local``: the same rows,
        or a superset of their columns, collected) as this engine's relation."""

    def leaf_input(self, seg: Segment, leaf: Node, restriction: Restriction | None) -> Any:
        """A segment input: a (restricted) source table or a child segment's output."""

    def output(self, seg: Segment, restriction: Restriction | None) -> Any:
        """``seg``'s output rows in reasoning mode (stored or recomputed), restricted."""

    def reasoned(self, seg: Segment, rows: Any) -> Any:
        """Rows of ``seg``'s output read as another segment's input, with the reasons of
        their model calls (an engine that reads inputs in reasoning mode returns them)."""

    def tagged(self, rel: Any, tag: str, cols: Sequence[Col], key: tuple[str, ...] | None = None) -> Any:
        """``rel`` with a column ``tag`` holding each row's ``cols`` (the paper's Split tags).
        ``key``: columns among them that tell ``rel``'s rows apart, by which an engine may
        find the distinct rows a tag holds (the same rows)."""

    def body(self, node: Node, inputs: dict[int, Any], probes: dict[int, str]) -> Any:
        """The σ/π/⋈/∪ operators down from ``node`` over tagged ``inputs`` (by ``id(leaf)``),
        every operator passing the tags on. A semi-join in ``probes`` (by ``id``) is
        evaluated as one, its kept rows tagged with the probe (a struct of the left columns
        its condition reads); any other semi-join keeps its right side's tags."""

    def matching(self, rel: Any, probes: Settled, condition: Sequence[Expr]) -> Any:
        """The rows of ``rel`` that satisfy ``condition`` with some probe row (a semi-join)."""

    def with_keys(self, rel: Any, keys: Sequence[tuple[Col, Expr]]) -> Any:
        """``rel`` with the grouping keys evaluated as columns."""

    def semi(self, rel: Any, restriction: Restriction, key: tuple[str, ...] | None = None) -> Any:
        """``rel`` ⋉ the restriction's values, null-safely; numbered values: each kept row
        once per target it serves, with that target's ``ROW_ID``. ``key``: columns that
        tell ``rel``'s rows apart, which an engine may compare alone (the same rows)."""

    def numbered(self, targets: Settled) -> Settled:
        """The targets, each with its own ``ROW_ID`` (0, 1, …)."""

    def renumbered(self, rows: Any, start: int) -> tuple[Any, pa.Table]:
        """Numbered ``rows`` with fresh ids (``start``, …) in place of their ``ROW_ID``, and
        the same rows in process with the ids they had as ``PARENT``."""

    def settle(self, rel: Any) -> Settled:
        """``rel`` evaluated once, so that later steps reuse it."""

    def split(self, settled: Settled, tag: str, distinct: bool = True) -> Settled:
        """The distinct rows one tag holds among the settled rows (with their ``ROW_ID``);
        ``distinct`` False where the settled rows hold each at most once already."""

    def absent(self, settled: Settled, tags: Sequence[str]) -> Settled:
        """Of the settled rows, those where one of ``tags`` is NULL (an outer join's padded
        rows): their distinct ``ROW_ID`` where numbered, else at most one row (whether any)."""

    def picked(self, rel: Any, cols: Sequence[str]) -> Any:
        """``rel``'s columns ``cols`` (by id) alone, and its ``ROW_ID``."""

    def named(self, rel: Any, cols: Sequence[Col], distinct: bool) -> Any:
        """``rel``'s ``cols`` under the user's names (and its ``ROW_ID``): an answer's rows."""

    def union_distinct(self, rels: list[Any]) -> Any:
        """Rows found along several paths, each once."""


def choose_engine(
    root: Segment, restorer: Restorer, complete: bool, prefer: str = "auto", tell: Tell | None = None
) -> Engine:
    """The engine that answers a question about ``root``'s run: in process where every
    input is a local file, small enough, and every expression the tracing queries evaluate
    gives the same values in DuckDB; Spark otherwise (or when ``prefer`` says so). ``tell``:
    where the in-process engine says it computes reasons the task did not."""
    from tracing.engines.in_process import DuckEngine, check_in_process
    from tracing.engines.spark_engine import SparkEngine
    from tracing.errors import LineageError

    if prefer not in ENGINES:
        raise LineageError(f"engine must be one of {', '.join(ENGINES)}, not {prefer!r}")
    if prefer != "spark":
        try:
            check_in_process(root, restorer, complete)
            return DuckEngine(restorer, root, tell)
        except NotInProcess as e:
            if prefer == "in-process":
                raise LineageError(f"this question cannot be answered in process: {e}") from None
    return SparkEngine(restorer)


PARENT = "__al_parent"  # a renumbered row's former ROW_ID


def renumber(table: pa.Table, start: int) -> pa.Table:
    """``table`` with ``ROW_ID`` = start, start + 1, … and its former ids as ``PARENT``."""
    fresh = pa.array(range(start, start + table.num_rows), pa.int64())
    at = table.schema.get_field_index(ROW_ID)
    former = pc.cast(table.column(ROW_ID), pa.int64())
    return table.set_column(at, ROW_ID, fresh).append_column(PARENT, former)
