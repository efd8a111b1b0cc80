"""Compile an operator tree into a Spark DataFrame whose columns are named by column id.

One compiler serves three jobs: running a task (normal or reasoning mode), restoring an
intermediate result, and tracing. ``inputs`` lets the caller substitute any node (a stored
intermediate, a child segment's output, a restricted source). In ``tagged`` mode each leaf
carries a ``__tag_*`` column and every operator passes those tags on, so the tracing query
can split joined rows back into the rows of each input (the paper's Split operator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import NullType
from pyspark.sql.window import Window as SparkWindow

from reasoning_udfs.udf import ReasoningUDF, lookup
from segmenter.operators import (
    ROW_ID_COLUMN,
    Aggregation,
    Difference,
    Expand,
    Expr,
    Function,
    Generate,
    Join,
    Node,
    OuterJoin,
    Projection,
    Selection,
    SortKey,
    Source,
    Task,
    Union,
    Window,
    sql_string,
)
from segmenter.sources import ROW_SHIFT, spark_file_uri

TAG_PREFIX = "__tag_"
PEERS = "__peers"  # a row's peers in a window that must have none
ROW_ID = "__al_row"  # which chosen output row a lineage row belongs to (NULL: every one)
MODES = ("normal", "reasoning")


def sql_col(expr: Expr) -> Column:
    return F.expr(expr.sql)


def ref(col_id: str) -> Column:
    return F.col(ident(col_id))


# Building a select list as SQL text costs one JVM round trip per item (Spark parses it);
# as Column objects it costs four (``F.col``/``F.expr`` look their function up twice, then
# ``alias``): plan building was most of a question's round trips on the Spark engine.


def ident(name: str) -> str:
    """``name`` as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def aliased(sql: str, name: str) -> str:
    """A select item: the expression ``sql`` under ``name``."""
    return f"({sql}) AS {ident(name)}"


def null_safe_match(
    left: DataFrame, right: DataFrame, on: dict[str, str], how: str, carry: Sequence[str] = ()
) -> DataFrame:
    """Join ``left`` to ``right`` where left[k] <=> right[v] for every k: v in ``on``, with
    ``right``'s columns ``carry`` (an inner join) beside ``left``'s.

    Null-safe: a plain ``=`` silently drops rows whose key is null.
    """
    matched = [f"__m{i}" for i in range(len(on))]
    keys = [aliased(ident(v), m) for v, m in zip(on.values(), matched)]
    renamed = right.selectExpr(*keys, *map(ident, carry))
    if not on:
        return left.crossJoin(renamed)
    tested = set(compared(left, list(on)))
    cond = " AND ".join(f"{ident(k)} <=> {ident(m)}" for k, m in zip(on, matched) if k in tested)
    joined = left.join(renamed, F.expr(cond or "TRUE"), how)
    return joined.drop(*matched) if carry else joined


def compared(df: DataFrame, cols: Sequence[str]) -> list[str]:
    """The columns of ``cols`` a null-safe match must compare: not those of type void
    (``SELECT NULL AS z``), NULL in every row, so equal everywhere; Spark's hash join keys
    ``a <=> b`` on them as ``coalesce(a, NULL)``, which matches nothing, so a void column
    compared lost every row (rows= of such an output: "not in the output")."""
    void = {f.name for f in df.schema.fields if isinstance(f.dataType, NullType)}
    return [c for c in cols if c not in void]


def read_columns(spark: SparkSession, path: str, cols: Sequence[tuple[str, str]]) -> DataFrame:
    """The named (column, Spark type) of a Parquet directory: with the schema given, Spark
    runs no job to infer it from the files."""
    schema = ", ".join(f"{ident(name)} {dtype}" for name, dtype in cols)
    return spark.read.schema(schema).parquet(path)


def read_source(spark: SparkSession, source: Source) -> DataFrame:
    """A source's rows with its columns renamed to their ids."""
    return source_rows(spark, source).toDF(*[c.id for c in source.cols])


def source_rows(spark: SparkSession, source: Source) -> DataFrame:
    """A source's rows by its column names: a store snapshot, or the user's files where they
    are, read with the reader's options (a keyless Parquet source's ``_rid`` packs the file's
    place in the list and ``_metadata.row_index``, as DuckDB's ``file_row_number``)."""
    named = [(c.name, c.dtype) for c in source.cols]
    if source.in_store or source.files is None:
        return read_columns(spark, source.snapshot, named)
    files = source.files
    kept = [(n, t) for n, t in named if not (files.row_id and n == ROW_ID_COLUMN)]
    schema = ", ".join(f"{ident(name)} {dtype}" for name, dtype in kept)
    df = spark.read.format(files.format).options(**dict(files.options)).schema(schema).load(list(files.paths))
    if not files.row_id:
        return df
    ordinals = F.create_map(*[F.lit(x) for i, f in enumerate(files.paths) for x in (spark_file_uri(f), i)])
    path = F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "file:/")
    cols = [ref(n) for n, _ in kept]
    if files.format == "parquet":
        rid = F.shiftleft(ordinals[path].cast("bigint"), ROW_SHIFT) + F.col("_metadata.row_index")
        return df.select(*cols, rid.alias(ROW_ID_COLUMN))
    # Spark gives no row position in other formats: the position in its read order of the
    # file, reproducible only as written once, so such a source is read through its copy
    file_no = ordinals[path].cast("bigint").alias("__f")
    seq = df.select(*cols, file_no, F.monotonically_increasing_id().alias("__s"))
    position = F.row_number().over(SparkWindow.partitionBy("__f").orderBy("__s")) - 1
    rid = F.shiftleft(F.col("__f"), ROW_SHIFT) + position
    return seq.select(*cols, rid.alias(ROW_ID_COLUMN))


def tags_of(df: DataFrame) -> list[str]:
    return [c for c in df.columns if c.startswith(TAG_PREFIX)]


@dataclass
class Compiler:
    spark: SparkSession
    mode: str = "normal"
    inputs: Callable[[Node], DataFrame | None] = lambda node: None
    tagged: bool = False
    probes: dict[int, str] = field(default_factory=dict)  # tagged: semi-joins kept as such (tracing)
    checks: bool = True  # a window's tie check (off over candidate rows, which tie by design)
    frames: bool = True  # tagged: a window's rows paired with their frames' tags (else their own)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")

    def compile(self, node: Node) -> DataFrame:
        given = self.inputs(node)
        if given is not None:
            return given
        return getattr(self, f"_{type(node).__name__.lower()}")(node)

    def _source(self, node: Source) -> DataFrame:
        return read_source(self.spark, node)

    def _selection(self, node: Selection) -> DataFrame:
        cond = " AND ".join(f"({e.sql})" for e in node.condition)
        return self.compile(node.child).filter(cond)

    def _projection(self, node: Projection) -> DataFrame:
        df = self.compile(node.child)
        return df.selectExpr(*[aliased(e.sql, c.id) for c, e in node.outputs], *map(ident, tags_of(df)))

    def _join(self, node: Join) -> DataFrame:
        frames = [self.compile(child) for child in node.inputs]
        probe = self.probes.get(id(node))
        if node.semi and (probe or not self.tagged):
            cond = conjunction(node.condition)
            kept = frames[0].join(frames[1], cond if cond is not None else F.lit(True), "left_semi")
            if probe:
                kept = kept.withColumn(probe, struct_of([c.id for c in node.probe_columns()]))
            return kept
        pending = list(node.condition)
        available = {c.id for c in node.inputs[0].columns}
        df = frames[0]
        for child, frame in zip(node.inputs[1:], frames[1:]):
            available |= {c.id for c in child.columns}
            usable = [e for e in pending if e.refs <= available]
            pending = [e for e in pending if e not in usable]
            cond = conjunction(usable)
            df = df.join(frame, cond, "inner") if cond is not None else df.crossJoin(frame)
        if node.semi:  # tagged: keep the right input's tags, not its columns
            keep = [c.id for c in node.inputs[0].columns] + tags_of(df)
            df = df.selectExpr(*map(ident, keep))
        return df

    def _outerjoin(self, node: OuterJoin) -> DataFrame:
        """One Spark outer join, its inputs' tags passed on (a padded row's other tags NULL).
        An existence join: Spark's own, by EXISTS in a SELECT list, each left row once; over
        tagged inputs (tracing), the left join of the pairs, flagged where a right tag is set."""
        sides = []
        for child in node.children:
            df = self.compile(child)
            kept = [ident(c.id) for c in child.match_columns()]
            sides.append(df.selectExpr(*kept, *map(ident, tags_of(df))))
        cond = conjunction(node.condition)
        on = cond if cond is not None else F.lit(True)
        if node.flag is None:
            return sides[0].join(sides[1], on, node.kind)
        right_tags = tags_of(sides[1])
        if not right_tags:
            tested = " AND ".join(f"({e.sql})" for e in node.condition) or "TRUE"
            tested = tested.replace("{", "{{").replace("}", "}}")  # spark.sql formats the text
            exists = f"EXISTS (SELECT 1 FROM {{right}} WHERE {tested}) AS {ident(node.flag.id)}"
            return self.spark.sql(f"SELECT *, {exists} FROM {{left}}", left=sides[0], right=sides[1])
        joined = sides[0].join(sides[1], on, "left")
        matched = " OR ".join(f"{ident(t)} IS NOT NULL" for t in right_tags)
        shown = [ident(c.id) for c in node.left.match_columns()]
        flag = f"({matched}) AS {ident(node.flag.id)}"
        return joined.selectExpr(*shown, flag, *map(ident, tags_of(joined)))

    def _generate(self, node: Generate) -> DataFrame:
        df = self.compile(node.child)
        names = ", ".join(ident(c.id) for c in node.outputs)
        aliases = names if len(node.outputs) == 1 else f"({names})"
        return df.selectExpr("*", f"{node.generator.sql} AS {aliases}")

    def _expand(self, node: Expand) -> DataFrame:
        """One pass over the child: each row becomes an array of its grouping sets' rows."""
        df = self.compile(node.child)
        fields = [", ".join(f"'{c.id}', {e.sql}" for c, e in zip(node.outputs, p)) for p in node.projections]
        sets = ", ".join(f"named_struct({f})" for f in fields)
        expanded = df.selectExpr(*map(ident, tags_of(df)), f"inline(array({sets}))")
        return expanded.selectExpr(*[ident(c.id) for c in node.outputs], *map(ident, tags_of(df)))

    def _window(self, node: Window) -> DataFrame:
        """ω by Spark's own window operator. Tracing (a probe): each row also carries its
        frame's keys, by which its frame is found in the input. Tagged (a capture): each row
        once per row of its frame, with that row's tags (its lineage); without ``frames``
        (boolean lineage) with its own: a window's row exists where its input row does."""
        df = self.compile(node.child)
        if node.peers is not None and self.checks:  # a filter: checked even where no value is read
            failed = f"raise_error({sql_string(node.tie_error)})"
            df = df.withColumn(PEERS, F.expr(node.peers.sql))
            df = df.filter(f"CASE WHEN {PEERS} > 1 THEN {failed} ELSE TRUE END").drop(PEERS)
        functions = [aliased(e.sql, c.id) for c, e in node.functions]
        probe = self.probes.get(id(node))
        tags = tags_of(df)
        if probe:
            keys = ", ".join(f"'{c.id}', {e.sql}" for c, e in node.keys)
            return df.selectExpr("*", *functions, f"named_struct({keys}) AS {ident(probe)}")
        if not (self.tagged and tags and self.frames):
            return df.selectExpr("*", *functions)
        rows = df.drop(*tags).selectExpr("*", *functions, *[aliased(e.sql, c.id) for c, e in node.keys])
        frame = df.selectExpr(*[aliased(e.sql, c.id) for c, e in node.frame_keys], *map(ident, tags))
        paired = rows.join(frame, conjunction(node.frame), "inner") if node.frame else rows.crossJoin(frame)
        return paired.selectExpr(*[ident(c.id) for c in node.columns], *map(ident, tags))

    def _aggregation(self, node: Aggregation) -> DataFrame:
        df = self.compile(node.child)
        keys = [aliased(e.sql, c.id) for c, e in node.keys]
        aggs = [aliased(e.sql, c.id) for c, e in node.aggregates]
        return grouped(df, keys, aggs).selectExpr(*[ident(c.id) for c in node.columns])

    def _union(self, node: Union) -> DataFrame:
        frames = []
        for child in node.inputs:
            df = self.compile(child)
            pairs = zip(child.match_columns(), node.outputs)
            renamed = [aliased(ident(s.id), o.id) for s, o in pairs]
            frames.append(df.selectExpr(*renamed, *map(ident, tags_of(df))))
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=self.tagged), frames)

    def _difference(self, node: Difference) -> DataFrame:
        left_cols = [c.id for c in node.left.match_columns()]
        native = self._native_anti(node)
        if native is not None:
            return native.selectExpr(*map(ident, left_cols))
        left = self.compile(node.left).selectExpr(*map(ident, left_cols))
        right = self.compile(node.right)
        pairs = zip(node.right.match_columns(), left_cols)
        right = right.selectExpr(*[aliased(ident(s.id), t) for s, t in pairs])
        if node.kind == "all":
            return left.exceptAll(right)
        if node.kind == "distinct":
            return left.subtract(right)
        return null_safe_match(left, right, {c: c for c in left_cols}, "left_anti")

    def _native_anti(self, node: Difference) -> DataFrame | None:
        """T₁ ▷ T₂ as Spark's own anti-join where untagged (:func:`runs_as_anti_join`)."""
        if self.tagged or not runs_as_anti_join(node) or id(node.right) in self.probes:
            return None
        semi = node.right
        assert isinstance(semi, Join)
        cond = conjunction(semi.condition)
        right = self.compile(semi.inputs[1])
        return self.compile(node.left).join(right, cond if cond is not None else F.lit(True), "left_anti")

    def _function(self, node: Function) -> DataFrame:
        df = self.compile(node.child)
        udf = lookup(node.udf)
        args = [sql_col(a) for a in node.args]
        if self.mode == "normal":
            return df.withColumns(
                {
                    node.value.id: pinned(udf, "normal")(*args),
                    node.reason.id: F.lit(None).cast(udf.reason_type),
                }
            )
        tmp = f"__call_{node.value.id}"
        df = df.withColumn(tmp, pinned(udf, "reasoning")(*args))
        return df.withColumns(
            {node.value.id: F.col(f"{tmp}.value"), node.reason.id: F.col(f"{tmp}.reason")}
        ).drop(tmp)


def runs_as_anti_join(node: Node) -> bool:
    """Whether the untagged plan of ``node``, T₁ ▷ T₂'s rewrite T₁ − (T₁ ⋉ T₂) (the
    definition tracing follows), is Spark's own anti-join of T₁ and T₂: the rewrite computes
    T₁ twice and compares whole rows (TPC-H Q21 at SF 1: 3.7x plain Spark), and its right
    input, T₁ ⋉ T₂, is then never computed. Not where T₂ calls a model, which a stored
    T₁ ⋉ T₂ may already have called."""
    if not isinstance(node, Difference) or node.kind != "anti":
        return False
    semi = node.right
    if not (isinstance(semi, Join) and semi.semi and semi.inputs[0] == node.left):
        return False
    return not any(isinstance(n, Function) for n in semi.inputs[1].walk())


def pinned(udf: ReasoningUDF, mode: str) -> Any:
    """The UDF marked non-deterministic, so Spark's optimizer evaluates it exactly where φ sits
    in the operator tree: otherwise a filter on its value is pushed below joins and the model
    runs on many more rows than the task (and the stored intermediates) account for."""
    return udf.spark_udf(mode).asNondeterministic()


def grouped(df: DataFrame, keys: Sequence[str], aggs: Sequence[str]) -> DataFrame:
    """``df`` grouped by the select items ``keys`` with the aggregate items ``aggs`` (none:
    the distinct keys)."""
    if not aggs:
        return df.selectExpr(*keys).distinct()
    return df.groupBy(*map(F.expr, keys)).agg(*map(F.expr, aggs))


def struct_of(col_ids: Sequence[str]) -> Column:
    """A struct of the columns ``col_ids`` (its fields named by them)."""
    return F.expr(f"struct({', '.join(map(ident, col_ids))})")


def conjunction(exprs: list[Expr] | tuple[Expr, ...]) -> Column | None:
    if not exprs:
        return None
    return F.expr(" AND ".join(f"({e.sql})" for e in exprs))


def finish(task: Task, df: DataFrame) -> DataFrame:
    """Apply the task's ORDER BY and LIMIT to the root's rows."""
    if task.order:
        df = df.orderBy(*[_sort_column(k) for k in task.order])
    if task.limit is not None:
        df = df.limit(task.limit)
    return df


def _sort_column(key: SortKey) -> Column:
    col = sql_col(key.expr)
    if key.ascending:
        return col.asc_nulls_first() if key.nulls_first else col.asc_nulls_last()
    return col.desc_nulls_first() if key.nulls_first else col.desc_nulls_last()


def visible(task: Task, df: DataFrame) -> DataFrame:
    """The user's view of a root result: the task's output columns under their own names."""
    return df.selectExpr(*[aliased(ident(c.id), c.name) for c in task.output])
