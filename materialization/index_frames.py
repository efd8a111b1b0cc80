"""Where the lineage indexes are composed: the relational steps :mod:`materialization.indexes`
takes (read a captured table, follow tags, join through a child segment, write sorted pairs),
by Spark or by DuckDB in this process.

The captured tables are small next to the task's input (ids and lineage ids, not rows), and
composing them in Spark costs a job per broadcast and per write: tens of jobs, seconds each
run. Where the results store is a local file system and what the capture staged is small,
DuckDB composes and writes the same pairs in process, without a Spark job. The builder does
not know which one runs.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import reduce
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from materialization import duck
from materialization.capture import (
    LID,
    MATCHED,
    SIDE,
    Capturer,
    derived_tags,
    flat_fields,
    lid_columns,
    traced_leaves,
)
from materialization.compile import TAG_PREFIX, read_source, ref
from materialization.duck_expressions import register_functions
from materialization.duck_plan import DuckPlan, Rel, column_types, duck_literal, quoted, source_scan
from materialization.locations import local_path, parquet_scan, sql_string
from materialization.store import ResultsStore
from segmenter.operators import OuterJoin, Source
from segmenter.segments import Segment

REF = "__ref"
ROW_GROUP_BYTES = 1 << 20  # small row groups: a point lookup decompresses little
IN_PROCESS_BYTES = 256 << 20  # staged capture up to this size is composed by DuckDB (local store)
MAX_SQL_CHARS = 20_000  # a composed relation's text longer than this is computed into a table


class Frames(Protocol):
    """Relations of (``__lid``, …) pairs and the steps the index builder composes them by."""

    in_process: bool  # composes in this process over a local store, as a question can

    def read(self, path: str) -> Any:
        """A Parquet directory of the store."""

    def source(self, leaf: Source, attrs: Sequence[str]) -> Any:
        """A source table's ``attrs`` (by their names), all rows."""

    def columns(self, rel: Any) -> list[str]: ...

    def derived(
        self, seg: Segment, plan: Mapping[str, Sequence[str]], output: Any, children: Mapping[int, Any]
    ) -> Any:
        """The lineage of ``seg`` (:func:`capture.derivable`), which the capture left to the
        builder: for every row its body keeps, the __lid of its output row in ``output`` (the
        segment's stored output), and per input j (:func:`capture.traced_leaves`) the tag
        the capture would have carried: the ``__lid`` of a child segment's row (``children``:
        input j -> the child's stored output), or the attributes of a source row whose table
        ``plan`` captures, as the flat columns :func:`capture.flat_fields` names."""

    def recomputed(
        self, seg: Segment, plan: Mapping[str, Sequence[str]], children: Mapping[int, Any]
    ) -> tuple[Any, Any, dict[str, dict[str, Any]]]:
        """A segment the capture did not store (:func:`execute._recomputed`: its parent's
        lineage is derived here), evaluated again over the source snapshots and ``children``
        (input j -> the child's output): its output rows with their lineage ids, its rows'
        tags (with ``MATCHED`` for an outer join) under the same ids, and how to read each
        tag. The ids are hashes of the values naming a row, made by this builder alone."""

    def lids(self, rel: Any) -> Any:
        """The distinct ``__lid`` of ``rel``."""

    def select(self, rel: Any, cols: Sequence[tuple[str, str]]) -> Any:
        """(column, alias) pairs of ``rel``."""

    def with_value(self, rel: Any, column: str, value: Any, dtype: str = "int") -> Any:
        """``rel`` with a constant column (``value`` None: a typed NULL)."""

    def tag_pairs(self, lineage: Any, tag: str, array: bool, expand: bool) -> Any:
        """(__lid, __ref) of each non-null tag (each item of a list of tags); ``expand``: the
        tag is a struct of a source row's attributes, as (__lid, attrs...)."""

    def unpacked(self, pairs: Any, layout: Sequence[Sequence[Any]]) -> Any:
        """(__lid, __ref) of keys packed into a bigint (:func:`capture.packing`'s ``layout``)
        as (__lid, attrs...), each attribute of its own type again."""

    def through(self, pairs: Any, below: Any, distinct: bool = False) -> Any:
        """(__lid, __ref) ⋈ (__ref as the child's __lid, x...) -> distinct (__lid, x...), over
        each side's distinct rows: a capture lists a child row once per input row that
        carried it (all of a group's rows name the one subquery row they were probed
        against), and joining those repeats with the child's pairs squared TPC-DS q70's to
        billions of rows; two children's rows may share a source row (rollup levels).
        ``distinct``: ``below``'s rows are distinct as they are (not made so again)."""

    def semi(self, rel: Any, lids: Any) -> Any:
        """The rows of ``rel`` whose ``__lid`` is in ``lids``."""

    def where_equal(self, rel: Any, column: str, value: Any) -> Any: ...

    def drop(self, rel: Any, *cols: str) -> Any: ...

    def distinct(self, rel: Any) -> Any: ...

    def union(self, rels: Sequence[Any], fill: bool = False) -> Any:
        """By column name (``fill``: columns one lacks are NULL)."""

    def renumbered(self, rel: Any, column: str, ids: dict[int, int]) -> Any:
        """``rel`` with the segment ids in ``column`` mapped by ``ids``."""

    def keep(self, rel: Any) -> Any:
        """``rel``'s distinct rows, computed once for the several relations that read it."""

    def values(self, rel: Any, column: str) -> list[Any]:
        """The distinct values of a column, on the driver."""

    def arrow(self, rel: Any) -> pa.Table: ...

    def write(self, rel: Any, path: str, order: Sequence[str], distinct: bool) -> None:
        """Write ``rel`` (its distinct rows) as Parquet with small row groups, sorted by
        ``order`` within each file: a lookup prunes row groups by min/max."""

    def run(self, jobs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        """Independent writes, each job's result by its name."""

    def release(self) -> None:
        """Drop what :meth:`keep` held."""


class SparkFrames:
    """Spark DataFrames: any store, any size."""

    in_process = False

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._kept: dict[int, tuple[DataFrame, DataFrame]] = {}

    def read(self, path: str) -> DataFrame:
        return self.spark.read.parquet(path)

    def source(self, leaf: Source, attrs: Sequence[str]) -> DataFrame:
        names = {c.name: c.id for c in leaf.cols}
        return read_source(self.spark, leaf).select(*[ref(names[a]).alias(a) for a in attrs])

    def columns(self, rel: DataFrame) -> list[str]:
        return list(rel.columns)

    def derived(
        self,
        seg: Segment,
        plan: Mapping[str, Sequence[str]],
        output: DataFrame,
        children: Mapping[int, DataFrame],
    ) -> DataFrame:
        """The tagged body evaluated again, its output rows' lineage ids hashed from the values
        that name them (as the capture hashes them)."""
        capturer = Capturer(self.spark, {t: tuple(a) for t, a in plan.items()}, "normal")
        inputs = {
            id(leaf): capturer.leaf_input(leaf, j, children.get(j))
            for j, leaf in enumerate(traced_leaves(seg))
        }
        return capturer.lineage_table(seg, inputs)[0]

    def recomputed(
        self, seg: Segment, plan: Mapping[str, Sequence[str]], children: Mapping[int, DataFrame]
    ) -> tuple[DataFrame, DataFrame, dict[str, dict[str, Any]]]:
        """The segment captured as the task would have, by Spark (its lineage ids Spark's)."""
        capturer = Capturer(self.spark, {t: tuple(a) for t, a in plan.items()}, "normal")
        inputs = {
            id(leaf): capturer.leaf_input(leaf, j, children.get(j)) for j, leaf in enumerate(seg.leaves)
        }
        found = capturer.segment(seg, inputs)
        output = found.output.select(*[ref(c.id) for c in seg.top.columns], ref(LID))
        rows = found.lineage if found.lineage is not None else found.output
        return self.keep(output), self.keep(rows), found.tags

    def lids(self, rel: DataFrame) -> DataFrame:
        return rel.select(LID).distinct()

    def select(self, rel: DataFrame, cols: Sequence[tuple[str, str]]) -> DataFrame:
        return rel.select(*[ref(c).alias(a) for c, a in cols])

    def with_value(self, rel: DataFrame, column: str, value: Any, dtype: str = "int") -> DataFrame:
        return rel.withColumn(column, F.lit(value).cast(dtype))

    def tag_pairs(self, lineage: DataFrame, tag: str, array: bool, expand: bool) -> DataFrame:
        column = F.explode(ref(tag)) if array else ref(tag)
        pairs = lineage.select(ref(LID), column.alias(REF)).where(F.col(REF).isNotNull())
        return pairs.select(LID, f"{REF}.*") if expand else pairs

    def unpacked(self, pairs: DataFrame, layout: Sequence[Sequence[Any]]) -> DataFrame:
        return pairs.select(
            ref(LID),
            *[
                F.expr(f"CAST((shiftright({REF}, {shift}) & {(1 << bits) - 1}) + {lo} AS {dtype})").alias(a)
                for a, shift, bits, lo, dtype in layout
            ],
        )

    def through(self, pairs: DataFrame, below: DataFrame, distinct: bool = False) -> DataFrame:
        rows = below if distinct else below.distinct()
        return pairs.distinct().join(rows.withColumnRenamed(LID, REF), REF).drop(REF).distinct()

    def semi(self, rel: DataFrame, lids: DataFrame) -> DataFrame:
        return rel.join(lids, LID, "left_semi")

    def where_equal(self, rel: DataFrame, column: str, value: Any) -> DataFrame:
        return rel.where(ref(column) == value)

    def drop(self, rel: DataFrame, *cols: str) -> DataFrame:
        return rel.drop(*cols)

    def distinct(self, rel: DataFrame) -> DataFrame:
        return rel.distinct()

    def union(self, rels: Sequence[DataFrame], fill: bool = False) -> DataFrame:
        return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=fill), rels)

    def renumbered(self, rel: DataFrame, column: str, ids: dict[int, int]) -> DataFrame:
        mapping = F.create_map(*[F.lit(v) for pair in ids.items() for v in pair])
        return rel.withColumn(column, F.element_at(mapping, ref(column)))

    def keep(self, rel: DataFrame) -> DataFrame:
        kept = self._kept.get(id(rel))
        if kept is None:  # the key's frame is held beside its copy, so an id names one frame
            kept = self._kept[id(rel)] = (rel, rel.distinct().persist())
        return kept[1]

    def values(self, rel: DataFrame, column: str) -> list[Any]:
        return [r[0] for r in rel.select(column).distinct().collect()]

    def arrow(self, rel: DataFrame) -> pa.Table:
        return rel.toArrow()

    def write(self, rel: DataFrame, path: str, order: Sequence[str], distinct: bool) -> None:
        """Distinct rows, hash-partitioned on all their columns (balanced even when a few
        output rows own most pairs; the distinct needs no second shuffle); without
        ``distinct`` as the rows are partitioned (one stage, no shuffle)."""
        if distinct:
            rel = rel.repartition(*[ref(c) for c in rel.columns]).distinct()
        (
            rel.sortWithinPartitions(*[ref(c) for c in order])
            .write.mode("error")
            .option("compression", "zstd")
            .option("parquet.block.size", ROW_GROUP_BYTES)
            .parquet(path)
        )

    def run(self, jobs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        # independent Spark jobs: submitted together they overlap their scheduling latency
        with ThreadPoolExecutor(max_workers=4) as pool:
            return dict(zip(jobs, pool.map(lambda job: job(), jobs.values())))

    def release(self) -> None:
        for _, df in self._kept.values():
            df.unpersist()


_DUCK_TYPES = {
    "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER", "bigint": "BIGINT", "long": "BIGINT",
    "string": "VARCHAR",
}  # fmt: skip


SPILL_PREFIX = "al-index-build-"  # + the building process's id


def spill_folder() -> str:
    """A fresh folder for an index build's spill, named for this process. Those of processes
    that are gone (killed mid-build: TPC-DS q70's left 26 GB) are removed first."""
    for old in Path(tempfile.gettempdir()).glob(f"{SPILL_PREFIX}*"):
        pid = old.name[len(SPILL_PREFIX) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{SPILL_PREFIX}{os.getpid()}-")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class DuckFrames:
    """DuckDB in this process over the store's local files: a relation is a SELECT's text,
    run when written or read back (DuckDB plans the whole composition at once)."""

    in_process = True

    def __init__(self) -> None:
        # a build that outgrows memory spills here, not into the working folder; removed
        # with the frames, or by the next build if this process is killed
        spill = spill_folder()
        weakref.finalize(self, shutil.rmtree, spill, True)
        self.con = register_functions(duck.connect(temp_directory=spill))  # Spark's decimal division
        self._tables = itertools.count()
        self._kept: dict[str, str] = {}

    def _computed(self, rel: str) -> str:
        """``rel`` computed into a temporary table. A relation's text nests its inputs' texts,
        and the copies of a subtree (a window's input read three times, a CTE) nest it
        again: without this a deep segment tree's text grows exponentially (TPC-DS q70's
        never finished binding)."""
        name = f"__al_part_{next(self._tables)}"
        self.con.execute(f"CREATE TEMP TABLE {name} AS {rel}")
        return f"SELECT * FROM {name}"

    @staticmethod
    def _local(path: str) -> str:
        local = local_path(path)
        assert local is not None, path
        return local

    def read(self, path: str) -> str:
        return f"SELECT * FROM {parquet_scan(self._local(path))}"

    def source(self, leaf: Source, attrs: Sequence[str]) -> str:
        scanned = source_scan(leaf, lambda uri: f"({self.read(uri)})")
        return f"SELECT {', '.join(map(quoted, attrs))} FROM {scanned}"

    def columns(self, rel: str) -> list[str]:
        return list(self.con.sql(f"SELECT * FROM ({rel}) LIMIT 0").columns)

    def derived(
        self, seg: Segment, plan: Mapping[str, Sequence[str]], output: str, children: Mapping[int, str]
    ) -> str:
        """The body in DuckDB over the source snapshots (every expression on the allow-list:
        :func:`duck_plan.exact_in_duckdb`), each kept row joined to its output row's lineage id
        by the values that name it, grouping keys or the body's columns (DuckDB has no Spark
        hash to compute the id with)."""
        duck = DuckPlan(self.con, column_types(seg), lambda uri: f"({self.read(uri)})")
        inputs, fields = {}, []
        for j, leaf in enumerate(traced_leaves(seg)):
            tag = f"{TAG_PREFIX}{j}"
            if not isinstance(leaf, Source):
                ids = [c.id for c in leaf.columns]
                picked = ", ".join([*map(quoted, ids), f"{quoted(LID)} AS {quoted(tag)}"])
                inputs[id(leaf)] = Rel(f"SELECT {picked} FROM ({children[j]})", (*ids, tag))
                fields.append(tag)
                continue
            scanned = duck.source(leaf)
            attrs = plan.get(leaf.table)
            if attrs is None:
                inputs[id(leaf)] = scanned
                continue
            by_name = {c.name: c.id for c in leaf.cols}
            named = flat_fields(tag, attrs)
            tags = ", ".join(f"{quoted(by_name[a])} AS {quoted(c)}" for c, a in named)
            columns = [c for c, _ in named]
            inputs[id(leaf)] = Rel(f"SELECT *, {tags} FROM ({scanned.sql})", (*scanned.cols, *columns))
            fields += columns
        body = duck.compile(seg.body_top, inputs, tagged=True)
        for agg in reversed(seg.aggregations):
            body = duck.with_keys(body, agg.keys)
        keys = lid_columns(seg)
        groups = f"SELECT DISTINCT {', '.join(map(quoted, [*keys, LID]))} FROM ({output})"
        on = " AND ".join(f"b.{quoted(k)} IS NOT DISTINCT FROM o.{quoted(k)}" for k in keys) or "TRUE"
        picked = ", ".join([f"o.{quoted(LID)}", *(f"b.{quoted(c)}" for c in fields)])
        return f"SELECT {picked} FROM ({body.sql}) b JOIN ({groups}) o ON {on}"

    def recomputed(
        self, seg: Segment, plan: Mapping[str, Sequence[str]], children: Mapping[int, str]
    ) -> tuple[str, str, dict[str, dict[str, Any]]]:
        """The tagged body in DuckDB, a source row's tag a struct of its captured attributes,
        a child's its lineage id; each row's id DuckDB's hash of the values that name it. A
        difference or an aggregation (whose lineage is derived): its output, then the rows
        of its body that each output row's values name (:meth:`derived`). Computed
        once, as bags: the output is read as a stored one is, whose rows repeat as the task
        made them, and every pair is made distinct where it is written (TPC-H Q13 at SF 1:
        without DISTINCT over its outer join's 1.5 M tagged rows and again over its output,
        the index build 7.1-7.5 → 5.2-5.6 s)."""
        duck = DuckPlan(self.con, column_types(seg), lambda uri: f"({self.read(uri)})")
        if seg.is_d or seg.aggregations:
            return self._derived_again(seg, plan, children, duck)
        inputs, tags = {}, {}
        for j, leaf in enumerate(seg.leaves):
            tag = f"{TAG_PREFIX}{j}"
            if not isinstance(leaf, Source):
                ids = [c.id for c in leaf.columns]
                picked = ", ".join([*map(quoted, ids), f"{quoted(LID)} AS {quoted(tag)}"])
                inputs[id(leaf)] = Rel(f"SELECT {picked} FROM ({children[j]})", (*ids, tag))
            elif (attrs := plan.get(leaf.table)) is not None:
                by_name = {c.name: c.id for c in leaf.cols}
                scanned = duck.source(leaf)
                fields = ", ".join(f"{quoted(a)} := {quoted(by_name[a])}" for a in attrs)
                struct = f"struct_pack({fields}) AS {quoted(tag)}"
                inputs[id(leaf)] = Rel(f"SELECT *, {struct} FROM ({scanned.sql})", (*scanned.cols, tag))
            else:
                continue
            tags[tag] = {"leaf": j, "array": False}
        columns = [quoted(c.id) for c in seg.top.columns]
        picked = [*columns, _hashed_lid(seg), *map(quoted, tags)]
        if isinstance(seg.top, OuterJoin):  # each input marked, so a padded row is told apart
            markers = [f"{SIDE}{k}" for k in range(2)]
            marked = {}
            for side, marker in zip(seg.top.children, markers, strict=True):
                rel = duck.compile(side, inputs, tagged=True)
                sql = f"SELECT *, TRUE AS {quoted(marker)} FROM ({rel.sql})"
                marked[id(side)] = Rel(sql, (*rel.cols, marker))
            body = duck.compile(seg.top, marked, tagged=True)
            both = " AND ".join(f"{quoted(m)} IS NOT NULL" for m in markers)
            picked.append(f"{both} AS {quoted(MATCHED)}")
        else:
            body = duck.compile(seg.body_top, inputs, tagged=True)
        rows = self._computed(f"SELECT {', '.join(picked)} FROM ({body.sql})")
        return f"SELECT {', '.join(columns)}, {quoted(LID)} FROM ({rows})", rows, tags

    def _derived_again(
        self, seg: Segment, plan: Mapping[str, Sequence[str]], children: Mapping[int, str], duck: DuckPlan
    ) -> tuple[str, str, dict[str, dict[str, Any]]]:
        inputs = {  # a child segment's rows; a source table is scanned
            id(leaf): Rel(f"SELECT * FROM ({children[j]})", tuple(c.id for c in leaf.columns))
            for j, leaf in enumerate(seg.leaves)
            if j in children
        }
        kept = duck.compile(seg.top, inputs, tagged=False)
        output = self._computed(f"SELECT *, {_hashed_lid(seg)} FROM ({kept.sql})")
        return output, self._computed(self.derived(seg, plan, output, children)), derived_tags(seg, plan)

    def lids(self, rel: str) -> str:
        return f"SELECT DISTINCT {quoted(LID)} FROM ({rel})"

    def select(self, rel: str, cols: Sequence[tuple[str, str]]) -> str:
        return f"SELECT {', '.join(f'{quoted(c)} AS {quoted(a)}' for c, a in cols)} FROM ({rel})"

    def with_value(self, rel: str, column: str, value: Any, dtype: str = "int") -> str:
        kept = [c for c in self.columns(rel) if c != column]
        picked = "".join(f"{quoted(c)}, " for c in kept)
        value_sql = f"CAST({duck_literal(value)} AS {_DUCK_TYPES[dtype]})"
        return f"SELECT {picked}{value_sql} AS {quoted(column)} FROM ({rel})"

    def tag_pairs(self, lineage: str, tag: str, array: bool, expand: bool) -> str:
        value = f"UNNEST({quoted(tag)})" if array else quoted(tag)
        pairs = f"SELECT {quoted(LID)}, {value} AS {quoted(REF)} FROM ({lineage})"
        pairs = f"SELECT * FROM ({pairs}) WHERE {quoted(REF)} IS NOT NULL"
        return f"SELECT {quoted(LID)}, UNNEST({quoted(REF)}) FROM ({pairs})" if expand else pairs

    def unpacked(self, pairs: str, layout: Sequence[Sequence[Any]]) -> str:
        value = f"(({quoted(REF)} >> {{}}) & {{}}) + {{}}"
        attrs = [
            f"CAST({value.format(shift, (1 << bits) - 1, lo)} AS {_DUCK_TYPES[dtype]}) AS {quoted(a)}"
            for a, shift, bits, lo, dtype in layout
        ]
        return f"SELECT {quoted(LID)}, {', '.join(attrs)} FROM ({pairs})"

    def through(self, pairs: str, below: str, distinct: bool = False) -> str:
        """Where ``below`` is distinct and each ``__lid`` of ``pairs`` refers to one row, the
        join repeats no row and is not made distinct: a ROLLUP's 3 M (group, order) pairs
        under a projection of its 7 groups were made distinct twice, 0.3 s of a 0.8 s index
        build (1 M orders)."""
        if distinct and self._one_ref_each(pairs):
            picked, rows = "", below
        else:
            picked, rows = "DISTINCT ", below if distinct else self.distinct(below)
        refs = self.keep(pairs) if distinct else self.distinct(pairs)
        return (
            f"SELECT {picked}p.{quoted(LID)}, b.* EXCLUDE ({quoted(LID)}) FROM ({refs}) p "
            f"JOIN ({rows}) b ON p.{quoted(REF)} = b.{quoted(LID)}"
        )

    def _one_ref_each(self, pairs: str) -> bool:
        """Whether no ``__lid`` of ``pairs``' distinct rows has two references (computed
        once: the join reads the same rows)."""
        lid = quoted(LID)
        counted = f"SELECT count(*) = count(DISTINCT {lid}) FROM ({self.keep(pairs)})"
        return bool(self.con.sql(counted).fetchall()[0][0])

    def semi(self, rel: str, lids: str) -> str:
        return f"SELECT * FROM ({rel}) WHERE {quoted(LID)} IN (SELECT {quoted(LID)} FROM ({lids}))"

    def where_equal(self, rel: str, column: str, value: Any) -> str:
        return f"SELECT * FROM ({rel}) WHERE {quoted(column)} = {duck_literal(value)}"

    def drop(self, rel: str, *cols: str) -> str:
        gone = [c for c in cols if c in self.columns(rel)]
        return f"SELECT * EXCLUDE ({', '.join(map(quoted, gone))}) FROM ({rel})" if gone else rel

    def distinct(self, rel: str) -> str:
        return f"SELECT DISTINCT * FROM ({rel})"

    def union(self, rels: Sequence[str], fill: bool = False) -> str:
        united = rels[0] if len(rels) == 1 else " UNION ALL BY NAME ".join(f"({r})" for r in rels)
        return self._computed(united) if len(united) > MAX_SQL_CHARS else united

    def renumbered(self, rel: str, column: str, ids: dict[int, int]) -> str:
        cases = " ".join(f"WHEN {a} THEN {b}" for a, b in ids.items())
        return f"SELECT * REPLACE (CASE {quoted(column)} {cases} END AS {quoted(column)}) FROM ({rel})"

    def keep(self, rel: str) -> str:
        if rel not in self._kept:
            self._kept[rel] = self._computed(self.distinct(rel))
        return self._kept[rel]

    def values(self, rel: str, column: str) -> list[Any]:
        return [r[0] for r in self.con.sql(f"SELECT DISTINCT {quoted(column)} FROM ({rel})").fetchall()]

    def arrow(self, rel: str) -> pa.Table:
        return self.con.sql(rel).to_arrow_table()

    def write(self, rel: str, path: str, order: Sequence[str], distinct: bool) -> None:
        local = self._local(path)
        os.makedirs(local)
        rows = self.distinct(rel) if distinct else rel
        target = sql_string(f"{local}/part-00000.zstd.parquet")
        self.con.execute(
            f"COPY ({rows} ORDER BY {', '.join(map(quoted, order))}) TO {target} "
            f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE_BYTES {ROW_GROUP_BYTES})"
        )

    def run(self, jobs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
        return {name: job() for name, job in jobs.items()}

    def release(self) -> None:
        self.con.close()


def _hashed_lid(seg: Segment) -> str:
    """A recomputed row's lineage id: DuckDB's hash of the values that name it, as a
    non-negative bigint (no one else reads these ids; its parent joins to it by values)."""
    named = lid_columns(seg)  # none: a one-row aggregation's
    hashed = f"hash({', '.join(map(quoted, named))}) >> 1" if named else "0"
    return f"CAST({hashed} AS BIGINT) AS {quoted(LID)}"


def frames_for(spark: SparkSession, store: ResultsStore, staging: str, sources: Sequence[Source]) -> Frames:
    """DuckDB where the staged capture and the sources a control reads are small local
    files; Spark otherwise."""
    local = staging.startswith("file:") and all(store.source_size(s) is not None for s in sources)
    if local and store.size(staging) <= IN_PROCESS_BYTES:
        return DuckFrames()
    return SparkFrames(spark)
