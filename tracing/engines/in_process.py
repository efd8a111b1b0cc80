"""The in-process engine: tracing queries as DuckDB SQL over the run's Parquet files (stored
intermediates and source snapshots) and Arrow tables, without a Spark job.

It answers only what it can answer exactly as Spark would (:func:`check_in_process` says
so before a question starts): every file local, every expression on the allow-list of
:mod:`materialization.duck_expressions`, and every model call to rerun a registered UDF.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from itertools import count
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import to_arrow_schema

from materialization import duck
from materialization.compile import ROW_ID
from materialization.duck_expressions import (
    NotInProcess,
    output_predicate,
    register_functions,
    to_duckdb,
)
from materialization.duck_plan import DuckPlan, Rel, column_types, duck_literal, evaluated, source_scan
from materialization.duck_plan import quoted as q
from materialization.locations import local_path, parquet_scan
from materialization.pushdown import Restriction, push_to_leaves
from materialization.restore import Restorer
from reasoning_udfs.udf import ReasoningUDF, lookup, registered
from segmenter.operators import (
    Col,
    Expr,
    Function,
    Node,
    Source,
)
from segmenter.row_keys import row_key
from segmenter.segments import Segment
from tracing.arrow_rows import distinct_flat, exact_key, first_rows
from tracing.engines import PARENT, Settled, renumber
from tracing.lazy_reasons import Tell, argument_columns, arguments, arrow_type, with_reasons
from tracing.sample import in_duck

MAX_CALLS = 50_000  # model calls a question may rerun in process (more: Spark's executors)
ARROW_SPLIT_ROWS = 1_000  # rows up to which a tag is split in Arrow, not by a query
_HELD = re.compile(r"__settled_\d+")  # the names of rows held in process (DuckEngine._register)


def _local(uri: str) -> str:
    path = local_path(uri)
    if path is None:
        raise NotInProcess(f"{uri} is not on the local file system")
    return path


def _parquet(uri: str) -> str:
    return parquet_scan(_local(uri))


def check_in_process(root: Segment, restorer: Restorer, complete: bool) -> None:
    """Raise :class:`NotInProcess` unless every tracing query of a question about ``root``
    can run in process with Spark's answers: local files (of any size: DuckDB spills beyond
    its memory bound, and a question that still outgrows it goes to Spark), every model call to
    rerun a registered UDF, and every expression the queries evaluate on DuckDB's allow-list."""
    if local_path(restorer.run_dir) is None:
        raise NotInProcess("the results store is not on the local file system")
    types = column_types(root)
    for seg in root.walk():
        recomputed = restorer.stored_path(seg) is None and (seg is not root or not complete)
        for node in seg.operators:
            if isinstance(node, Function):
                if recomputed:
                    _callable(node)
                    for a in node.args:
                        to_duckdb(a, types)
                continue
            for e in evaluated(node, aggregates=recomputed):
                to_duckdb(e, types)
        for leaf in seg.leaves:
            if isinstance(leaf, Source):
                source_scan(leaf, _parquet)  # NotInProcess where DuckDB cannot read it


def _callable(node: Function) -> ReasoningUDF:
    """The UDF of ``node``, if this process can call it as Spark's workers would (they
    import it by module; here it must be registered already)."""
    if not registered(node.udf):
        raise NotInProcess(f"UDF {node.udf} is not registered in this process")
    return lookup(node.udf)


def _split_in_arrow(
    table: pa.Table, tag: str, cols: tuple[str, ...], key: tuple[str, ...] | None
) -> pa.Table | None:
    """The distinct rows the struct column ``tag`` holds (with their ``ROW_ID``), taken apart
    in Arrow where there are few: a query each was 2-5 ms of a question's fixed cost (CDA Q9:
    8 of its 33 queries). Rows with a nested field (a model's reason) are told apart by the
    tag's ``key`` (Arrow groups no nested column; CDA Q9's stored model segments). None
    where DuckDB is faster (many rows: 2.4× on Q21's 57 k line items, as filtering wide rows
    costs), or where a nested field has no key beside it that Arrow groups exactly (flat, not
    floating: NaN; no NULL)."""
    if table.num_rows > ARROW_SPLIT_ROWS:
        return None
    rows = _tag_rows(table, tag, cols)
    names = rows.column_names
    if not any(pa.types.is_nested(f.type) for f in table.column(tag).type):
        return distinct_flat(rows)
    if not key or not all(exact_key(rows.column(k)) for k in key):
        return None
    return first_rows(rows, [*key, *[ROW_ID] * (ROW_ID in names)])


def _tag_rows(table: pa.Table, tag: str, cols: tuple[str, ...]) -> pa.Table:
    """The rows the struct column ``tag`` holds, one per row of ``table`` where it is set
    (with their ``ROW_ID``): its fields are the rows' columns."""
    kept = table.select([tag, *[ROW_ID] * (ROW_ID in table.column_names)])
    kept = kept.filter(pc.is_valid(kept.column(tag)))  # the tag's column alone, not every one
    rows = pa.Table.from_arrays(kept.column(tag).flatten(), names=list(cols))
    if ROW_ID in table.column_names:
        rows = rows.append_column(ROW_ID, kept.column(ROW_ID))
    return rows


def _distinct_already(table: pa.Table) -> bool:
    """Whether no two rows of ``table`` are equal, as their columns that Arrow groups
    exactly tell apart (a model call's rows: its arguments and ``ROW_ID``, beside a nested
    reason); a query each was 2-3 ms of CDA Q9's question."""
    if table.num_rows < 2:
        return True
    names = table.column_names
    flat = [n for n, c in zip(names, table.columns) if exact_key(c)]
    if not flat or len(set(names)) < len(names):
        return False
    return distinct_flat(table.select(flat)).num_rows == table.num_rows


def _by_key(restriction: Restriction, key: tuple[str, ...] | None) -> Restriction:
    """A restriction on the ``key`` of the rows it restricts alone, where it covers the key
    and no value of it is NULL: the same rows (a source's key is unique, checked when the
    table was registered; :func:`row_key` carries it up), one comparison per row in place of
    one per column (CDA Q9: the comments and an image)."""
    if not key:
        return restriction
    on = {v: n for v, n in restriction.on.items() if n in key}
    if set(on.values()) != set(key) or not set(on) <= restriction.values.nonnull:
        return restriction  # a NULL: an outer join's padding, or a key value of its own
    return replace(restriction, on=on)


def _looked_up(restriction: Restriction, on: dict[str, str]) -> str:
    """A test of literals that every row the semi-join with ``restriction``'s values keeps
    passes (``on``: restricted column -> values' column), where the values may be literals
    (:meth:`Restriction.literal_values`); "TRUE" otherwise. The join still decides; the
    literals let DuckDB push the targets down through projections, unions and joins into the
    scans (the rollup job at 1 M orders: one grouping set's rows of one segment, not three
    sets' copies of every order joined with the target)."""
    found = restriction.literal_values(on)
    if found is None:
        return "TRUE"
    tests = []
    for n, xs in found.items():
        values = dict.fromkeys(xs)
        literals = [duck_literal(x) for x in values if x is not None]
        test = f"x.{q(n)} IN ({', '.join(literals)})" if literals else "FALSE"
        tests.append(f"({test} OR x.{q(n)} IS NULL)" if None in values else test)
    return " AND ".join(tests) or "TRUE"


class DuckEngine(DuckPlan):
    name = "in-process"

    def __init__(self, restorer: Restorer, root: Segment, tell: Tell | None = None) -> None:
        super().__init__(duck.cursor("questions", register_functions), column_types(root), _parquet)
        self.restorer = restorer
        self.tell = tell
        self._names = count()
        self._held: dict[str, Settled] = {}  # rows held in process, by the SQL that reads them
        self._unregistered: dict[str, pa.Table] = {}  # held, not yet read by a query
        self._values: dict[str, dict[str, Any]] = {}  # each model's values, by its arguments

    # --- the engine's steps ---------------------------------------------------------------------
    def targets(self, df: DataFrame, local: pa.Table) -> Rel:
        return self._register(local.select(df.columns).cast(to_arrow_schema(df.schema))).rows

    def chosen(
        self,
        path: str,
        root: Sequence[Col],
        output: Sequence[Col],
        where: str | None = None,
        rows: list[dict[str, Any]] | None = None,
        drawn: pa.Table | None = None,
    ) -> Settled:
        """Stored output rows (``root`` columns by id) that match the Spark SQL predicate
        ``where`` over the ``output`` columns' names, equal one of ``rows`` (dicts by column
        id), or stand at the places ``drawn`` (:mod:`tracing.sample`); :class:`NotInProcess`
        where DuckDB might judge a row otherwise."""
        ids = ", ".join(q(c.id) for c in root)
        rel = Rel(f"SELECT {ids} FROM {_parquet(path)}", tuple(c.id for c in root))
        if drawn is not None:
            picked = ", ".join(f"t.{q(c.id)}" for c in root)
            rel = Rel(in_duck(_local(path), picked, self._register(drawn).rows.sql), rel.cols)
        if where is not None:
            test = output_predicate(where, output)
            views = ", ".join(f"{q(c.id)} AS {q(c.name)}" for c in output)
            rel = Rel(f"SELECT {ids} FROM (SELECT *, {views} FROM ({rel.sql})) WHERE {test}", rel.cols)
        if rows is None:
            return self.settle(rel)
        given = self._register(self._given(rows, {c.id: c for c in output})).rows
        on = " AND ".join(f"x.{q(c)} IS NOT DISTINCT FROM g.{q(c)}" for c in given.cols)
        missing = f"SELECT count(*) FROM ({given.sql}) g ANTI JOIN ({rel.sql}) x ON {on}"
        found = f"SELECT x.*, ({missing}) AS __missing FROM ({rel.sql}) x SEMI JOIN ({given.sql}) g ON {on}"
        table = self.con.sql(self._ready(found)).to_arrow_table()  # one query, not two: 2 ms
        if table.num_rows == 0 or table.column("__missing")[0].as_py():
            raise NotInProcess("a given row is not in the output")  # Spark names it
        return self._register(table.drop_columns(["__missing"]))

    @staticmethod
    def _given(rows: list[dict[str, Any]], by_id: dict[str, Col]) -> pa.Table:
        """Rows given by a person, as Arrow columns of the output's Spark types."""
        cols = [n for n in by_id if any(n in r for r in rows)]
        try:
            return pa.table(
                {
                    c: pa.array([r.get(c) for r in rows], type=arrow_type(by_id[c].dtype))
                    for c in cols
                }
            )
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise NotInProcess(f"given rows do not convert to the output's types: {e}") from None

    def leaf_input(self, seg: Segment, leaf: Node, restriction: Restriction | None) -> Rel:
        child = seg.child_for(leaf)
        if child is not None:  # an input: its model values only (reasons for the calls traced)
            return self.output(child, restriction, reasons=False)
        assert isinstance(leaf, Source)
        return self._restricted(self.source(leaf), restriction and _by_key(restriction, leaf.key))

    def output(self, seg: Segment, restriction: Restriction | None, reasons: bool = True) -> Rel:
        """``seg``'s output rows, restricted; with ``reasons``, each model call's reason
        (else only its value: a segment read as another's input needs no reasons, and the
        calls its rows hold are not all in the lineage)."""
        path = self.restorer.stored_path(seg)
        info = self.restorer.stored.get(str(seg.id))
        ids = [c.id for c in seg.top.columns]
        files = self.restorer.stored_columns(seg) if info is not None else []
        picked = ", ".join(q(f) if f == c else f"{q(f)} AS {q(c)}" for f, c in files)
        if path is not None:  # an eager run stores lineage columns beside the segment's own
            rel = Rel(f"SELECT {picked} FROM {_parquet(path)}", tuple(ids))
        elif info is not None and seg.functions:  # values stored, reasons computed lazily
            rel = Rel(f"SELECT {picked} FROM {_parquet(self._in_run(info['dir']))}", tuple(ids))
        else:
            pushed = push_to_leaves(seg.top, seg.leaves, restriction)
            inputs = {id(leaf): self.leaf_input(seg, leaf, pushed[id(leaf)]) for leaf in seg.leaves}
            rel = self.compile(seg.top, inputs, tagged=False)
        rel = self._restricted(rel, restriction and _by_key(restriction, row_key(seg.top)))
        return self.reasoned(seg, rel) if reasons else rel

    def reasoned(self, seg: Segment, rows: Rel) -> Rel:
        if seg.functions and self.restorer.stored_path(seg) is None:
            return self._with_reasons(seg, rows)
        return rows  # stored in reasoning mode: the reasons are there

    def body(self, node: Node, inputs: dict[int, Rel], probes: dict[int, str]) -> Rel:
        return self.compile(node, inputs, tagged=True, probes=probes)

    def matching(self, rel: Rel, probes: Settled, condition: Sequence[Expr]) -> Rel:
        cond = " AND ".join(f"({self._expr(e)})" for e in condition)
        if ROW_ID not in probes.rows.cols:
            return Rel(f"SELECT x.* FROM ({rel.sql}) x SEMI JOIN ({probes.rows.sql}) y ON {cond}", rel.cols)
        sql = f"SELECT x.*, y.{q(ROW_ID)} FROM ({rel.sql}) x JOIN ({probes.rows.sql}) y ON {cond}"
        return Rel(sql, (*rel.cols, ROW_ID))

    def semi(self, rel: Rel, restriction: Restriction, key: tuple[str, ...] | None = None) -> Rel:
        restriction = _by_key(restriction, key)
        if not restriction.numbered:
            return self._restricted(rel, restriction)
        values: Rel = restriction.values
        on = {n: v for v, n in restriction.on.items() if n in rel.cols}
        picked = ", ".join(map(q, dict.fromkeys([*on.values(), ROW_ID])))
        cond = " AND ".join(f"x.{q(n)} IS NOT DISTINCT FROM v.{q(v)}" for n, v in on.items()) or "TRUE"
        distinct = f"SELECT DISTINCT {picked} FROM ({values.sql})"
        kept = f"SELECT * FROM ({rel.sql}) x WHERE {_looked_up(restriction, on)}"
        sql = f"SELECT x.*, v.{q(ROW_ID)} FROM ({kept}) x JOIN ({distinct}) v ON {cond}"
        return Rel(sql, (*rel.cols, ROW_ID))

    def numbered(self, targets: Settled) -> Settled:
        if targets.local is not None:  # held here: numbered in Arrow, not by a query
            ids = pa.array(range(targets.local.num_rows), pa.int64())
            return self._register(targets.local.append_column(ROW_ID, ids))
        rel: Rel = targets.rows
        sql = f"SELECT *, CAST(row_number() OVER () - 1 AS BIGINT) AS {q(ROW_ID)} FROM ({rel.sql})"
        return self.settle(Rel(sql, (*rel.cols, ROW_ID)))

    def renumbered(self, rows: Rel, start: int) -> tuple[Rel, pa.Table]:
        fresh = renumber(self.settle(rows).local, start)
        return self._register(fresh.drop_columns([PARENT])).rows, fresh

    def settle(self, rel: Rel) -> Settled:
        held = self._held.get(rel.sql)
        if held is not None:  # settled already: not evaluated again
            return held
        return self._register(self.con.sql(self._ready(rel.sql)).to_arrow_table())

    def split(self, settled: Settled, tag: str, distinct: bool = True) -> Settled:
        if settled.local is not None:
            if not distinct:  # each row once already: the tag's fields, taken in Arrow
                return self._register(_tag_rows(settled.local, tag, self._tag_cols[tag]))
            rows = _split_in_arrow(settled.local, tag, self._tag_cols[tag], self._tag_keys.get(tag))
            if rows is not None:
                return self._register(rows)
        cols = self._tag_cols[tag] + (ROW_ID,) * (ROW_ID in settled.rows.cols)
        fields = ", ".join(f"{q(tag)}.{q(c)} AS {q(c)}" for c in self._tag_cols[tag])
        fields += f", {q(ROW_ID)}" * (ROW_ID in settled.rows.cols)
        unique = "DISTINCT " * distinct
        sql = f"SELECT {unique}{fields} FROM ({settled.rows.sql}) WHERE {q(tag)} IS NOT NULL"
        return self.settle(Rel(sql, cols))

    def absent(self, settled: Settled, tags: Sequence[str]) -> Settled:
        cond = " OR ".join(f"{q(t)} IS NULL" for t in tags)
        if ROW_ID in settled.rows.cols:
            sql = f"SELECT DISTINCT {q(ROW_ID)} FROM ({settled.rows.sql}) WHERE {cond}"
            return self.settle(Rel(sql, (ROW_ID,)))
        return self.settle(Rel(f"SELECT 1 AS one FROM ({settled.rows.sql}) WHERE {cond} LIMIT 1", ("one",)))

    def picked(self, rel: Rel, cols: Sequence[str]) -> Rel:
        kept = (*cols, *[ROW_ID] * (ROW_ID in rel.cols))
        return Rel(f"SELECT {', '.join(map(q, kept))} FROM ({rel.sql})", kept, rel.nonnull & set(kept))

    def named(self, rel: Rel, cols: Sequence[Col], distinct: bool) -> pa.Table:
        held = self._held.get(rel.sql)
        ids = [*(c.id for c in cols), *[ROW_ID] * (ROW_ID in rel.cols)]
        if held is not None:  # the rows are here: their columns renamed
            rows = held.local.select(ids)
            if not distinct or _distinct_already(rows):
                return rows.rename_columns([*(c.name for c in cols), *ids[len(cols) :]])
        kept = [q(ROW_ID)] * (ROW_ID in rel.cols)
        picked = ", ".join([*(f"{q(c.id)} AS {q(c.name)}" for c in cols), *kept])
        distinctly = "DISTINCT " * distinct
        return self.con.sql(self._ready(f"SELECT {distinctly}{picked} FROM ({rel.sql})")).to_arrow_table()

    def union_distinct(self, rels: list[pa.Table]) -> pa.Table:
        if len(rels) == 1:
            return rels[0]
        names = [self._register(t).rows.sql for t in rels]
        return self.con.sql(self._ready(" UNION ".join(f"({s})" for s in names))).to_arrow_table()

    # --- reasons computed at question time --------------------------------------------------------
    def _with_reasons(self, seg: Segment, rel: Rel) -> Rel:
        """The stored rows of ``seg`` (model values, no reasons) with the reason of every call
        among them: from the run's cache, else computed now and cached."""
        for fn in seg.functions:
            rel = self._reasoned_by(fn, rel)
        return rel

    def _reasoned_by(self, fn: Function, rel: Rel) -> Rel:
        """``rel``'s rows with the reasons of ``fn``'s calls (cached, else computed now)."""
        local = self.settle(rel).local
        rows = with_reasons(self.con, self.restorer.run_dir, fn, local, self.types, self.tell)
        return self._register(rows.select(list(rel.cols))).rows

    def _with_args(self, fn: Function, rel: Rel) -> tuple[Rel, list[str], list[str]]:
        """``rel`` with ``fn``'s arguments evaluated as columns ``__arg<i>``, their names and
        their Spark types (DDL)."""
        evaluated, args, ddls = argument_columns(fn, self.types)
        return Rel(f"SELECT *, {evaluated} FROM ({rel.sql})", (*rel.cols, *args)), args, ddls

    def _in_run(self, name: str) -> str:
        return f"{self.restorer.run_dir}/{name}"

    def _model_values(self, udf: ReasoningUDF, arrays: list[pa.Array]) -> pa.Array:
        """The model's value for each row of ``arrays``, each distinct row of arguments
        computed once per question: rows repeat an argument (the test suite's pair of a WITH
        query: 658 calls of 12 review texts), and a WITH query's subtree read twice calls the
        model on the same rows in each copy (CDA Q20 on rerun: its 16 forest photos, twice)."""
        known = self._values.setdefault(udf.name, {})
        keys = [json.dumps(row, default=str) for row in zip(*(a.to_pylist() for a in arrays))]
        new: dict[str, int] = {}
        for i, key in enumerate(keys):
            if key not in known:
                new.setdefault(key, i)
        if new:
            at = pa.array(list(new.values()), pa.int64())
            found = udf.arrow_function("normal")(*(a.take(at) for a in arrays))
            known.update(zip(new, found.to_pylist()))
        return pa.array([known[key] for key in keys], type=arrow_type(udf.value_type))

    # --- helpers ----------------------------------------------------------------------------------
    def _register(self, table: pa.Table) -> Settled:
        """``table`` held under a name queries can read; given to DuckDB only when a query
        does (a registration is 0.2-0.6 ms, and many held rows are only read in Arrow)."""
        name = f"__settled_{next(self._names)}"
        self._unregistered[name] = table
        nonnull = frozenset(c for c in table.column_names if table.column(c).null_count == 0)
        rel = Rel(f"SELECT * FROM {name}", tuple(table.column_names), nonnull)
        self._held[rel.sql] = settled = Settled(rel, table.num_rows, table)
        return settled

    def _ready(self, sql: str) -> str:
        """``sql``, the held tables it reads registered first."""
        for name in _HELD.findall(sql):
            table = self._unregistered.pop(name, None)
            if table is not None:
                self.con.register(name, table)
        return sql

    def _restricted(self, rel: Rel, restriction: Restriction | None) -> Rel:
        if restriction is None:
            return rel
        on = {n: v for v, n in restriction.on.items() if n in rel.cols}
        if not on:
            return rel
        values: Rel = restriction.values
        # null-safe; plain = where the values hold no NULL (the same rows, and DuckDB then
        # pushes the keys into the scan of the Parquet files as a filter)
        cond = " AND ".join(
            f"x.{q(n)} {'=' if v in values.nonnull else 'IS NOT DISTINCT FROM'} v.{q(v)}"
            for n, v in on.items()
        )
        kept = f"SELECT * FROM ({rel.sql}) x WHERE {_looked_up(restriction, on)}"
        return Rel(f"SELECT x.* FROM ({kept}) x SEMI JOIN ({values.sql}) v ON {cond}", rel.cols)

    def _call(self, node: Function, kid: Rel) -> Rel:
        """φ in normal mode on the (pushed-down) input rows: the UDF's own Arrow function, on
        arguments of the Arrow types Spark would pass; the reasons of the calls in the lineage
        are added by :meth:`reasoned`."""
        udf = _callable(node)
        keyed, args, types = self._with_args(node, kid)
        with_args: pa.Table = self.settle(keyed).local
        if with_args.num_rows > MAX_CALLS:
            raise NotInProcess(f"{with_args.num_rows:,} calls of {node.udf} (in process up to {MAX_CALLS:,})")
        values = self._model_values(udf, arguments(with_args, args, types))
        reasons = pa.nulls(len(values), arrow_type(udf.reason_type))
        rows = with_args.select(list(kid.cols))
        table = rows.append_column(node.value.id, values).append_column(node.reason.id, reasons)
        return self._register(table).rows


