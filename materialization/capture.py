"""Eager lineage capture: run a task with lineage ids carried through the plan (Smoke's rid
indexes, the forward paper's DL sets), one segment at a time.

Every output row of a segment gets a lineage id ``__lid``: a 64-bit hash of the values that
identify it for lineage (the top grouping keys of an aggregation segment, the body's columns
otherwise, the row itself for a difference). Lineage is defined on values, so rows that are
equal there share an id and their lineage, exactly as the tracing queries treat them.

Each input (leaf) of a segment carries a tag column ``__tag_<j>``: for a source table the
attributes lineage is kept on (its key, or a coarser attribute set), for a child segment the
child's ``__lid``. σ π ⋈ ∪ pass tags on (the compiler's tagged mode); an aggregation collects
them into lists. Where that is done in the pass that computes the output, the tags are stored
as columns of the segment's output; otherwise (see :meth:`Capturer._separate`), and for a
difference, a separate ``lineage-<id>`` table of (``__lid``, tags) is written.

A difference T1 − T2 keeps its left rows' tags (data lineage); its dependence on all of T2
(control lineage, forward paper §3.4) is recorded by the index builder, not per row. An outer
join is captured as one join (:meth:`Capturer._outer`): each output row with the tags of the
rows it joined, and whether it was matched; its padded rows' check, T₁ ⋉ T₂, is the lineage
of its matched rows, which the index builder records once, as a difference's right input.

An aggregation, a semi-join, a window or a difference (:func:`derivable`) carries no tags
where the index builder can derive its lineage in process after the task, from the source snapshots and
the children's stored rows: the task then writes its output with the lineage ids alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from sqlglot import exp

from materialization.compile import (
    TAG_PREFIX,
    Compiler,
    aliased,
    conjunction,
    grouped,
    ident,
    read_source,
    ref,
    sql_col,
    tags_of,
)
from segmenter.errors import LineageError
from segmenter.operators import (
    Aggregation,
    Expand,
    Expr,
    Function,
    Join,
    Node,
    OuterJoin,
    Projection,
    Selection,
    Source,
    Task,
    Union,
    Window,
    sql_string,
)
from segmenter.segments import Segment

LID = "__lid"
MATCHED = "__matched"  # an outer join's row made of a row of each input (else a padded row)
SIDE = f"{TAG_PREFIX}side"  # + 0 or 1: set on every row of that input of an outer join
KEY_MARKER = "AL_KEY_RECORD_ERROR"  # brackets the raise_error message of a key unlike its record
DIRECTIONS = ("backward", "forward")
STORAGES = ("pairs", "provrc")  # Parquet (id, attributes) pairs; ProvRC-compressed relations


class CaptureError(LineageError):
    """The capture declaration does not fit the task (unknown table, attribute or direction)."""


@dataclass(frozen=True)
class Capture:
    """What to capture (Smoke's workload-aware pruning, the forward paper's granularity).

    ``tables``: source tables whose lineage is kept (None: all of the task's).
    ``directions``: index orientations to build, ``backward`` and/or ``forward``.
    ``granularity``: per table, the attributes lineage is kept on instead of its key (e.g.
    ``{"lineitem": ["l_suppkey"]}``: per supplier rather than per line item).
    ``functions``: keep the reasoning lineage (which model calls each output row used). Without
    it the models run in normal mode (no reasons computed: often much cheaper).
    ``storage``: how the indexes are kept: ``pairs`` (Parquet, backend="eager"), ``provrc``
    (range-compressed, backend="compressed"), or both (answers from either, for comparisons).
    ``compose``: ProvRC keeps one relation per index, the segments composed at capture time
    (True: one in-situ step per question), or one relation per segment step, composed by
    walking the path of segments in situ at query time (False: the DSLog way; nothing is
    joined per pair when capturing).
    """

    tables: tuple[str, ...] | None = None
    directions: tuple[str, ...] = DIRECTIONS
    granularity: Mapping[str, Sequence[str]] = field(default_factory=dict)
    functions: bool = True
    storage: tuple[str, ...] | None = None  # None: the backend's own
    compose: bool = True

    def __post_init__(self) -> None:
        if self.storage is not None and (not self.storage or any(s not in STORAGES for s in self.storage)):
            raise CaptureError(f"capture storage must be some of {STORAGES}, not {list(self.storage)}")
        if not self.compose and self.storage is not None and "provrc" not in self.storage:
            raise CaptureError("compose=False keeps ProvRC relations per segment: it needs storage 'provrc'")

    @property
    def backend(self) -> str:
        """The run's backend name: what its answers come from by default."""
        return "compressed" if self.storage == ("provrc",) else "eager"

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": None if self.tables is None else list(self.tables),
            "directions": list(self.directions),
            "granularity": {t: list(a) for t, a in self.granularity.items()},
            "functions": self.functions,
            "storage": list(self.storage or ("pairs",)),
            "compose": self.compose,
        }

    @property
    def mode(self) -> str:
        """The UDF mode the task runs in under this capture."""
        return "reasoning" if self.functions else "normal"

    def resolve(self, task: Task) -> dict[str, tuple[str, ...]]:
        """Captured table -> attribute names lineage is kept on; errors name what is wrong."""
        sources: dict[str, Source] = {}
        for node in task.root.walk():
            if isinstance(node, Source):
                sources.setdefault(node.table, node)
        known = ", ".join(sorted(sources)) or "none"
        bad = [d for d in self.directions if d not in DIRECTIONS]
        if bad or not self.directions:
            raise CaptureError(
                f"capture directions must be some of {DIRECTIONS}, not {list(self.directions)}"
            )
        if self.tables is not None and not self.tables:
            raise CaptureError("capture tables= is empty; leave it out to capture every table the task reads")
        tables = list(sources) if self.tables is None else list(self.tables)
        for table in [*tables, *self.granularity]:
            if table not in sources:
                raise CaptureError(f"capture names table {table!r}, which the task does not read ({known})")
        out = {}
        for table in tables:
            source = sources[table]
            names = {c.name.lower(): c.name for c in source.cols}
            wanted = self.granularity.get(table)
            if wanted is None:
                out[table] = source.key_names
                continue
            missing = [a for a in wanted if a.lower() not in names]
            if missing or not wanted:
                raise CaptureError(
                    f"granularity of {table!r}: no column(s) {missing or '(none given)'}; "
                    f"it has {[c.name for c in source.cols]}"
                )
            out[table] = tuple(names[a.lower()] for a in wanted)
        return out


def lid_of(col_ids: Sequence[str]) -> Column:
    """The lineage id of a row: a hash of its identifying values, nulls told apart (Spark's
    hash skips nulls, so (NULL, 1) and (1, NULL) would collide without the null flags)."""
    cols = [ident(c) for c in col_ids]
    return F.expr(f"xxhash64({', '.join(['0', *cols, *(f'{c} IS NULL' for c in cols)])})")


def distinct_as_captured(seg: Segment, plan: Mapping[str, Sequence[str]]) -> frozenset[str]:
    """The source tables whose (__lid, key) pairs ``seg`` captures each once, so that their
    index needs no DISTINCT (TPC-H Q1 at SF 1: 6 M pairs, whose DISTINCT was 0.6 of the index
    build's 1.1 s; a ROLLUP over orders ⋈ customers at 1 M orders: 3 M pairs, 0.4 s of 0.7):
    a table read once, captured at its key (unique: checked when it was registered), under
    operators that never repeat a row (σ π φ α ⋈, and ε whose sets α tells apart by their
    grouping id), where every other input is joined on its whole key to columns of inputs
    so determined: a row of the table then meets at most one row of each. Above child
    segments alone, a table that one segment below reads comes by one child's pairs composed
    with this segment's (``Frames.through``, whose rows are distinct), each row with that
    segment (TPC-H Q13's counts of counts, the reconcile job's statuses over its outer
    join)."""
    leaves = seg.leaves
    if seg.is_d:
        return frozenset()
    if not any(isinstance(leaf, Source) for leaf in leaves):
        return frozenset(t for t, readers in seg.entries().items() if len(readers) == 1)
    if not all(isinstance(leaf, Source) for leaf in leaves):
        return frozenset()
    kept = (Selection, Projection, Function, Aggregation, Join, Expand)
    if not all(isinstance(op, kept) and not getattr(op, "semi", False) for op in seg.operators):
        return frozenset()
    aggregations = [op for op in seg.operators if isinstance(op, Aggregation)]
    grouped_by = {r for op in aggregations for _, e in op.keys for r in e.refs}
    expands = [op for op in seg.operators if isinstance(op, Expand)]
    set_ids = {c.id for op in expands for c in op.outputs if c.name == GROUPING_ID}
    if aggregations and not set_ids <= grouped_by:
        return frozenset()
    equal: dict[str, set[str]] = {}
    types = {c.id: c.dtype for node in seg.top.walk() for c in node.columns}
    for op in seg.operators:
        for a, b in (equated_columns(e, types) for e in op.condition) if isinstance(op, Join) else ():
            if a is not None and b is not None:
                equal.setdefault(a, set()).add(b)
                equal.setdefault(b, set()).add(a)
    owner = {c.id: j for j, leaf in enumerate(leaves) for c in leaf.columns}
    tables = [leaf.table for leaf in leaves]  # type: ignore[attr-defined]
    found = set()
    for i, leaf in enumerate(leaves):
        assert isinstance(leaf, Source)
        if tables.count(leaf.table) > 1 or not at_key(leaf, plan.get(leaf.table, ())):
            continue
        determined, grew = {i}, True
        while grew:
            grew = False
            for j, other in enumerate(leaves):
                assert isinstance(other, Source)
                on_key = all(any(owner.get(b) in determined for b in equal.get(k, ())) for k in other.key)
                if j not in determined and other.key and on_key:
                    determined.add(j)
                    grew = True
        if len(determined) == len(leaves):
            found.add(leaf.table)
    return frozenset(found)


GROUPING_ID = "spark_grouping_id"  # ε's number of each row's grouping set


_WIDTH = {"tinyint": 1, "smallint": 2, "int": 4, "bigint": 8}  # Spark's integral types, in bytes


def equated_columns(expr: Expr, types: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The two column ids of an equality ``a = b`` between columns; else (None, None). A
    column widened by a cast to a larger integral type counts as itself (equal casts, equal
    values): Spark joins an int key to a bigint column as ``CAST(k AS BIGINT)``."""
    found = sqlglot.parse_one(expr.sql, read="spark")
    while isinstance(found, exp.Paren):
        found = found.this
    if not isinstance(found, exp.EQ):
        return None, None
    a, b = (_column(side, types) for side in (found.this, found.expression))
    return (a, b) if a is not None and b is not None else (None, None)


def _column(node: exp.Expression, types: Mapping[str, str]) -> str | None:
    """The column id ``node`` reads as it is, or widened to a larger integral type."""
    if isinstance(node, exp.Cast) and isinstance(node.this, exp.Column):
        width = _WIDTH.get(types.get(node.this.name, ""))
        to = _WIDTH.get(node.to.sql(dialect="spark").lower())
        return node.this.name if width is not None and to is not None and to >= width else None
    return node.name if isinstance(node, exp.Column) else None


def at_key(source: Source, attrs: Sequence[str]) -> bool:
    """Whether ``attrs`` are ``source``'s key: lineage kept row by row."""
    return tuple(attrs) == source.key_names


def derivable(seg: Segment) -> bool:
    """α, ⋉ or ω over σ π ⋈ γ (no union), or a difference: every row of its tagged body holds
    one row of each input, a source table's or a child segment's stored output (a
    semi-join's right rows as an inner join's; a window's rows each paired with a row of its
    frame; a difference's body is its left input), and its lineage is a function of those
    rows alone (kept or not, and the output row its values name), so it can be derived from
    the inputs after the task: no tags in the task, and no second pass over the body for a
    semi-join, a window, a scan aggregation or a difference. Also σ π ⋈ over a child
    segment, with no model call: derived, its children need not be stored
    (``execute._recomputed``; TPC-H Q2's and Q11's projections over their subqueries)."""
    if seg.is_d:
        return True
    if seg.kind == "outer":  # a padded row's NULL tags, and its check: captured in the task
        return False
    semi = any(isinstance(op, Join) and op.semi for op in seg.operators)
    if seg.aggregations or semi or seg.windowed:
        return not any(isinstance(op, Union) for op in seg.operators)
    plain = all(isinstance(op, (Selection, Projection, Join)) for op in seg.operators)
    return plain and bool(seg.children) and not seg.functions


def traced_leaves(seg: Segment) -> tuple[Node, ...]:
    """The inputs whose rows a segment's output rows are derived from (data lineage): a
    difference's left one only (its right one is control lineage, recorded per segment)."""
    return seg.leaves[:1] if seg.is_d else seg.leaves


def packing(
    attrs: Sequence[str], ranges: Mapping[str, tuple[int, int]], types: Mapping[str, str]
) -> list[list[Any]] | None:
    """How a key of several integer columns (``ranges``: each one's min and max in the
    snapshot) fits one bigint: per attribute [name, shift, bits, min, Spark type], each value
    less its column's min in bits of its own; None where they need more than 63 bits. A
    bigint tag costs the capture's shuffle and ``collect_list`` less than a struct of the
    columns (as a one-column key's plain value does)."""
    layout: list[list[Any]] = []
    shift = 0
    for a in reversed(attrs):
        lo, hi = ranges[a]
        bits = max(1, (hi - lo).bit_length())
        layout.insert(0, [a, shift, bits, lo, types[a]])
        shift += bits
    return layout if shift <= 63 else None


def flat_fields(tag: str, attrs: Sequence[str]) -> list[list[str]]:
    """The flat columns a source row's tag is written as: [column, attribute] pairs."""
    return [[f"{tag}:{a}", a] for a in attrs]


def derived_tags(seg: Segment, plan: Mapping[str, Sequence[str]]) -> dict[str, dict[str, Any]]:
    """How to read the tags of a lineage the index builder derives (:func:`derivable`): per
    traced input, a child segment's row by its lineage id, a captured source's row by the
    flat columns :func:`flat_fields` names."""
    tags: dict[str, dict[str, Any]] = {}
    for j, leaf in enumerate(traced_leaves(seg)):
        tag = f"{TAG_PREFIX}{j}"
        if not isinstance(leaf, Source):
            tags[tag] = {"leaf": j, "array": False}
        elif leaf.table in plan:
            tags[tag] = {"leaf": j, "array": False, "fields": flat_fields(tag, plan[leaf.table])}
    return tags


def lid_columns(seg: Segment) -> list[str]:
    """The columns whose values identify a segment's output row for lineage."""
    if seg.is_d:
        return [c.id for c in seg.top.columns]
    if seg.aggregations:
        return list(seg.aggregations[0].key_ids)
    return [c.id for c in seg.body_top.match_columns()]


@dataclass(frozen=True)
class SegmentCapture:
    """A segment's output with ``__lid`` (and its tag columns when they rode along), plus the
    separately computed lineage table when they could not."""

    output: DataFrame
    lineage: DataFrame | None
    # tag column -> {"leaf": j, "array": bool}, and for a source's tag "attr" (a plain key
    # value, not a struct), "packed" (a key packed into a bigint: :func:`packing`) or
    # "fields" ([column, attribute] pairs written flat)
    tags: dict[str, dict[str, Any]]
    derived: bool = False  # the lineage is derived when the indexes are built (Frames.derived)
    # the lineage made from the output once stored (read back): :meth:`Capturer._by_output`
    from_output: Callable[[DataFrame], DataFrame] | None = None


class Capturer:
    """Builds the capture DataFrames of each segment; the caller writes and reads them back."""

    def __init__(
        self,
        spark: SparkSession,
        plan: dict[str, tuple[str, ...]],
        mode: str,
        plain: frozenset[str] = frozenset(),
        derived: frozenset[int] = frozenset(),
        packed: Mapping[str, list[list[Any]]] | None = None,
    ) -> None:
        self.spark = spark
        self.plan = plan  # captured table -> attribute names
        self.mode = mode
        # segments (by id, :func:`derivable`) whose lineage the index builder derives in
        # process after the task: the task carries no tags for them
        self.derived = derived
        # tables tagged by their one key column's value itself, not a struct of it: a key
        # with no NULL (recorded when the table was registered), so a NULL tag only ever
        # means "no row", as `collect_list`, which drops NULLs, needs. A struct costs the
        # aggregation more: TPC-H Q3's capture at SF 1, +31 % with structs, +21 % without
        self.plain = plain
        # tables tagged by their key of several integer columns packed into a bigint
        # (:func:`packing`): the same reasons, for keys like TPC-H line items'
        self.packed = packed or {}

    def leaf_input(self, leaf: Node, j: int, child_output: DataFrame | None) -> DataFrame:
        """A segment input with its tag: the attributes of a captured source row, or the
        lineage id of a child segment's row (read back from where the child was stored)."""
        tag = f"{TAG_PREFIX}{j}"
        if child_output is not None:
            return child_output.selectExpr(*[ident(c.id) for c in leaf.columns], aliased(ident(LID), tag))
        assert isinstance(leaf, Source)
        df = read_source(self.spark, leaf)
        attrs = self.plan.get(leaf.table)
        if attrs is None:
            return df
        by_name = {c.name: c.id for c in leaf.cols}
        if leaf.table in self.plain:
            return df.withColumn(tag, F.expr(self._plain(leaf.table, by_name[attrs[0]])))
        if leaf.table in self.packed:
            return df.withColumn(tag, F.expr(self._packed(leaf.table, by_name)))
        fields = ", ".join(f"{sql_string(a)}, {ident(by_name[a])}" for a in attrs)
        return df.withColumn(tag, F.expr(f"named_struct({fields})"))

    def _plain(self, table: str, column: str) -> str:
        """The key value itself as Spark SQL; a NULL there (the record, which says the key
        holds none, was changed) fails the task in one line: ``collect_list`` would drop the
        row from its group's lineage."""
        error = _record_error(table, "a key value is NULL, which its record says it never is")
        return f"CASE WHEN {ident(column)} IS NOT NULL THEN {ident(column)} ELSE {error} END"

    def _packed(self, table: str, by_name: dict[str, str]) -> str:
        """The packed key of a row (:func:`packing`) as Spark SQL; a value outside its
        recorded range (a changed store) fails the task in one line, never a wrong tag."""
        offsets = [
            (f"CAST({ident(by_name[a])} AS BIGINT) - CAST({lo} AS BIGINT)", shift, bits)
            for a, shift, bits, lo, _ in self.packed[table]
        ]
        packed = " | ".join(f"shiftleft({v}, {shift})" for v, shift, _ in offsets)
        fits = " AND ".join(f"{v} BETWEEN 0 AND {(1 << bits) - 1}" for v, _, bits in offsets)
        error = _record_error(table, "a key value lies outside the range recorded when it was registered")
        return f"CASE WHEN {fits} THEN {packed} ELSE {error} END"

    def _info(self, seg: Segment, tag: str, array: bool) -> dict[str, Any]:
        """How the index builder reads ``seg``'s tag column ``tag``: which input it is, whether
        it holds lists, and (``attr``) the attribute a plain value stands for."""
        j = _leaf_index(tag)
        leaf = seg.leaves[j]
        info: dict[str, Any] = {"leaf": j, "array": array}
        if isinstance(leaf, Source) and leaf.table in self.plain:
            info["attr"] = self.plan[leaf.table][0]
        if isinstance(leaf, Source) and leaf.table in self.packed:
            info["packed"] = self.packed[leaf.table]
        return info

    def segment(self, seg: Segment, inputs: dict[int, DataFrame], stored: bool = False) -> SegmentCapture:
        """``seg``'s capture; ``stored``: its output is written and read back before its
        lineage is (a window's frame pairs may then be made from it)."""
        if seg.id in self.derived:
            return self._derived(seg, inputs)
        if seg.is_d:
            return self._difference(seg, inputs)
        if seg.kind == "outer":
            return self._outer(seg, inputs)
        joins = [op for op in seg.operators if isinstance(op, Join)]
        found = self._by_output(seg, inputs) if seg.windowed and stored else None
        if found is not None:
            return found
        if seg.windowed or any(j.semi for j in joins) or (seg.aggregations and not joins):
            return self._separate(seg, inputs)
        return self._inline(seg, inputs)

    def _compiler(self, inputs: dict[int, DataFrame], tagged: bool = False) -> Compiler:
        return Compiler(self.spark, self.mode, inputs=lambda n: inputs.get(id(n)), tagged=tagged)

    def _inline(self, seg: Segment, inputs: dict[int, DataFrame]) -> SegmentCapture:
        """One pass: tags ride along the body's rows and are collected by the aggregations."""
        df = self._compiler(inputs, tagged=True).compile(seg.body_top)
        tags = tags_of(df)
        above: Node = seg.body_top
        for depth, agg in enumerate(reversed(seg.aggregations)):
            df = _aggregate_carrying(df, agg, tags, collected=depth > 0)
            above = agg
        df = df.withColumn(LID, lid_of(lid_columns(seg)))
        out = self._compiler({id(above): df}).compile(seg.top)
        arrays = bool(seg.aggregations)
        return SegmentCapture(out, None, {t: self._info(seg, t, arrays) for t in tags})

    def _separate(self, seg: Segment, inputs: dict[int, DataFrame]) -> SegmentCapture:
        """The output from the plain plan and the lineage, keyed by the same lineage ids, from
        the tagged body in a second pass. Used where carrying tags would cost more than
        evaluating the body twice: a semi-join multiplies tagged rows, and an aggregation
        over a join-free body (a scan) tends to have few, huge groups whose tag lists would
        be built in a handful of tasks; flat (lineage id, tag) rows are written in parallel."""
        lineage, tags = self.lineage_table(seg, inputs)
        return SegmentCapture(self.output(seg, inputs), lineage, tags)

    def _by_output(self, seg: Segment, inputs: dict[int, DataFrame]) -> SegmentCapture | None:
        """Where a window's lineage is not derived in process (sources or store off the local
        file system; a value DuckDB does not compute as Spark does), its frame pairs made
        from the segment's stored output: each kept row's lineage id and window keys, read
        back, joined with its frame's rows (the window's tagged input), where only σ sits
        between the window and the body's top and every key is a column the output keeps.
        The tagged body would evaluate the window a second time over every input row, with
        every column its lineage id hashes, and pair rows that σ then drops (bench_jobs'
        retail job at 1 M orders, alternating with plain Spark: eager run 8.0-8.3 → 6.1-6.7 s,
        its lineage pass 2.7 → 0.8 s, before its window was derived in process)."""
        window = seg.body_top
        while isinstance(window, Selection):
            window = window.child
        kept = {c.id for c in seg.top.columns}
        named = [(c.id, e.is_column()) for c, e in window.keys] if isinstance(window, Window) else []
        if seg.aggregations or not named or not all(r in kept for _, r in named):
            return None
        assert isinstance(window, Window)
        frame = self._compiler(inputs, tagged=True).compile(window.child)
        tags = tags_of(frame)
        if not tags:
            return None
        frame = frame.selectExpr(*[aliased(e.sql, c.id) for c, e in window.frame_keys], *map(ident, tags))
        condition = conjunction(window.frame)

        def paired(stored: DataFrame) -> DataFrame:
            rows = stored.select(ref(LID), *[ref(r).alias(c) for c, r in named])  # type: ignore[arg-type]
            joined = rows.join(frame, condition, "inner") if condition is not None else rows.crossJoin(frame)
            return joined.select(ref(LID), *map(ref, tags))

        output = self.output(seg, inputs)
        infos = self._lineage_table(seg, paired(output))[1]
        return SegmentCapture(
            output, None, infos, from_output=lambda stored: self._lineage_table(seg, paired(stored))[0]
        )

    def output(self, seg: Segment, inputs: dict[int, DataFrame]) -> DataFrame:
        """``seg``'s output from the plain plan (no tags), with its rows' lineage ids."""
        return self._compiler(_untagged(inputs)).compile(seg.top).withColumn(LID, lid_of(lid_columns(seg)))

    def lineage_table(
        self, seg: Segment, inputs: dict[int, DataFrame]
    ) -> tuple[DataFrame, dict[str, dict[str, Any]]]:
        """(__lid, tags) of every row of the tagged body, under its group's lineage id (the
        aggregations' keys evaluated on it), and how to read each tag."""
        body = self._compiler(inputs, tagged=True).compile(seg.body_top)
        for agg in reversed(seg.aggregations):
            body = body.withColumns({c.id: sql_col(e) for c, e in agg.keys})
        rows = body.select(lid_of(lid_columns(seg)).alias(LID), *tags_of(body))
        return self._lineage_table(seg, rows)

    def _derived(self, seg: Segment, inputs: dict[int, DataFrame]) -> SegmentCapture:
        """The output alone: the index builder derives the lineage, (``__lid``, the lineage id
        of each child segment's row, and the attributes of each captured source's row as the
        flat columns :func:`flat_fields` names) of every row the body keeps."""
        return SegmentCapture(self.output(seg, inputs), None, derived_tags(seg, self.plan), derived=True)

    def _difference(self, seg: Segment, inputs: dict[int, DataFrame]) -> SegmentCapture:
        """Data lineage of T1 − T2: the left rows equal to each output row. The control
        lineage (all of T2) is attached by the index builder."""
        left = seg.leaves[0]
        tagged = inputs[id(left)]
        lineage, tags = self._lineage_table(
            seg, tagged.select(lid_of([c.id for c in left.match_columns()]).alias(LID), *tags_of(tagged))
        )
        return SegmentCapture(self.output(seg, inputs), lineage, tags)

    def _outer(self, seg: Segment, inputs: dict[int, DataFrame]) -> SegmentCapture:
        """T₁ ⟕ T₂ (⟖ ⟗, an existence join) as the one join the task runs: (__lid, tags,
        ``MATCHED``) of every joined row of its tagged inputs, a padded row's other tags NULL.
        Each input is marked (``SIDE``) before the join, so a matched row is told from a
        padded one where an input carries no tag (a table not captured). Its rewrite would
        run T₁ two or three times and store T₁ ▷ T₂ as a segment of its own.
        Where each joined row is an output row (⟕ ⟖ ⟗ over inputs whose tagged rows are
        their rows: no window's frame pairs, no semi-join's matches), the join runs once, its
        output written with the tags (the reconcile job's full outer join of 1 M orders:
        8.1-8.9 s in one pass, 6.0 + 3.4 s writing the lineage and the output apart; single
        runs on a loaded machine)."""
        join = seg.top
        assert isinstance(join, OuterJoin)
        compiler = self._compiler(inputs, tagged=True)
        markers = [f"{SIDE}{k}" for k in range(2)]
        sides = {
            id(side): compiler.compile(side).withColumn(marker, F.lit(True))
            for side, marker in zip(join.children, markers, strict=True)
        }
        body = self._compiler(sides, tagged=True).compile(join)
        matched = F.expr(" AND ".join(f"{ident(m)} IS NOT NULL" for m in markers)).alias(MATCHED)
        tags = [t for t in tags_of(body) if t not in markers]
        repeats = seg.windowed or any(isinstance(op, Join) and op.semi for op in seg.operators)
        if join.flag is None and not repeats:
            out = body.select(*[ref(c.id) for c in join.columns], *map(ref, tags), matched)
            infos = {t: self._info(seg, t, False) for t in tags}
            return SegmentCapture(out.withColumn(LID, lid_of(lid_columns(seg))), None, infos)
        rows = body.select(lid_of(lid_columns(seg)).alias(LID), *map(ref, tags), matched)
        lineage, infos = self._lineage_table(seg, rows, kept=(MATCHED,))
        return SegmentCapture(self.output(seg, inputs), lineage, infos)

    def _lineage_table(
        self, seg: Segment, rows: DataFrame, kept: Sequence[str] = ()
    ) -> tuple[DataFrame, dict[str, dict[str, Any]]]:
        """(__lid, tags, ``kept`` columns) rows to write, and how to read each tag. Where a tag
        is a source row's and never NULL (the only input of a segment, every input of a
        :func:`derivable` body, a difference's left one among them: no outer join or union
        puts NULLs there), its attributes are written as flat columns: Spark then never builds
        the struct and Parquet writes and reads them faster (TPC-H Q1 at SF 1: 6 M rows,
        1.35 → 1.05 s to write)."""
        flat = len(seg.leaves) == 1 or derivable(seg)
        columns: list[Column] = [ref(LID)]
        tags: dict[str, dict[str, Any]] = {}
        for tag in tags_of(rows):
            info = self._info(seg, tag, False)
            leaf = seg.leaves[info["leaf"]]
            if not (flat and isinstance(leaf, Source)) or "packed" in info:  # packed: one column
                columns.append(ref(tag))
                tags[tag] = info
                continue
            fields = flat_fields(tag, self.plan[leaf.table])
            if "attr" in info:  # the value itself
                columns.append(ref(tag).alias(fields[0][0]))
            else:
                columns += [F.expr(f"{ident(tag)}.{ident(a)}").alias(c) for c, a in fields]
            tags[tag] = {"leaf": info["leaf"], "array": False, "fields": fields}
        return rows.select(*columns, *map(ref, kept)), tags


def _aggregate_carrying(df: DataFrame, agg: Aggregation, tags: list[str], collected: bool) -> DataFrame:
    """α with every tag collected into its group's list of tags (DL sets); an upper
    aggregation of a chain concatenates the lists of the groups below it. Lists, not sets:
    hashing every id costs more than the duplicates (a join repeats a dimension row's tag)
    that the index builder removes anyway."""
    keys = [aliased(e.sql, c.id) for c, e in agg.keys]
    aggs = [aliased(e.sql, c.id) for c, e in agg.aggregates]
    listed = "flatten(collect_list({}))" if collected else "collect_list({})"
    carried = [aliased(listed.format(ident(t)), t) for t in tags]
    out = grouped(df, keys, [*aggs, *carried])
    return out.selectExpr(*[ident(c.id) for c in agg.columns], *map(ident, tags))


def _record_error(table: str, what: str) -> str:
    """Spark SQL that fails the task with one line (:data:`KEY_MARKER`) saying that ``table``'s
    rows are not as its record says."""
    message = f"source {table!r}: {what} (was the store changed?); register the table again"
    return f"raise_error({sql_string(KEY_MARKER + message + KEY_MARKER)})"


def _untagged(inputs: dict[int, DataFrame]) -> dict[int, DataFrame]:
    return {k: v.drop(*tags_of(v)) for k, v in inputs.items()}


def _leaf_index(tag: str) -> int:
    return int(tag[len(TAG_PREFIX) :])
