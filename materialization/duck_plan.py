"""Spark plans as DuckDB SQL: a segment's σ/π/⋈/α/∪/−/explode over tagged inputs, every
expression through the allow-list of :mod:`materialization.duck_expressions` (Spark's values,
or :class:`NotInProcess`).

Two users compile the same operators: the in-process tracing engine (a lineage question over
a run's files) and the eager index builder, which derives the lineage of an aggregation, a
semi-join or a difference from its inputs' files, so that the task carries no tags for it.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb

from materialization.compile import TAG_PREFIX
from materialization.duck_expressions import (
    INTEGERS,
    DecimalType,
    NotInProcess,
    SqlType,
    spark_type,
    to_duckdb,
)
from materialization.locations import sql_string
from segmenter.operators import (
    ROW_ID_COLUMN,
    Aggregation,
    Col,
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
    Source,
    Union,
    Window,
)
from segmenter.segments import Segment
from segmenter.sources import ROW_SHIFT, local_file, read_by_spark_only


def quoted(name: str) -> str:
    """A DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


q = quoted


def duck_literal(value: Any) -> str:
    """``value`` (NULL, or of one of the literal types: ``pushdown._LITERAL_TYPES``) as a
    DuckDB literal equal to it in every type it is compared with."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # not 1E+2, a DOUBLE
    if isinstance(value, str):
        return sql_string(value)
    if type(value) is datetime.date:  # not a datetime, a subclass with a time and a zone
        return f"DATE '{value.isoformat()}'"
    raise TypeError(f"no DuckDB literal is written for a {type(value).__name__} ({value!r})")


def source_scan(node: Source, scan: Callable[[str], str]) -> str:
    """A FROM item of a source's rows by column name: its store snapshot through ``scan``, or
    the user's Parquet files where they are, with a keyless source's ``_rid`` computed as
    Spark computes it (:func:`materialization.compile.source_rows`). Other formats are read
    by Spark's own parser: their parsed copy is a store snapshot."""
    files = node.files
    if node.in_store or files is None:
        return scan(node.snapshot)
    if read_by_spark_only(files):
        raise NotInProcess(f"source {node.table} is read in place as only Spark parses it")
    paths = [local_file(f) for f in files.paths]
    if any(p is None for p in paths):
        raise NotInProcess(f"source {node.table} is not on the local file system")
    listed = "[" + ", ".join(sql_string(p) for p in paths if p is not None) + "]"
    if not files.row_id:
        return f"read_parquet({listed})"
    ordinal = " ".join(f"WHEN {sql_string(p)} THEN {i}" for i, p in enumerate(paths) if p is not None)
    rid = f"((CASE filename {ordinal} END)::BIGINT << {ROW_SHIFT}) + file_row_number"
    scanned = f"read_parquet({listed}, filename = true, file_row_number = true)"
    return f"(SELECT *, {rid} AS {q(ROW_ID_COLUMN)} FROM {scanned})"


@dataclass(frozen=True)
class Rel:
    """A relation not yet evaluated: a DuckDB query and the names of its columns."""

    sql: str
    cols: tuple[str, ...]
    nonnull: frozenset[str] = frozenset()  # columns known to hold no NULL

    def tags(self) -> list[str]:
        return [c for c in self.cols if c.startswith(TAG_PREFIX)]


def column_types(root: Segment) -> dict[str, SqlType]:
    """The Spark type of every column id in the task (ids are unique in a tree)."""
    found: dict[str, SqlType] = {}
    for node in root.top.walk():
        found |= {c.id: spark_type(c.dtype) for c in node.columns}
        if isinstance(node, Window):  # its frame keys: columns of tracing queries alone
            found |= {c.id: spark_type(c.dtype) for c, _ in (*node.keys, *node.frame_keys)}
    return found


def evaluated(node: Node, aggregates: bool) -> list[Expr]:
    """The expressions a tracing query (or a recomputation) of ``node`` evaluates."""
    if isinstance(node, Selection):
        return list(node.condition)
    if isinstance(node, Join | OuterJoin):
        return list(node.condition)
    if isinstance(node, Projection):
        return [e for _, e in node.outputs]
    if isinstance(node, Aggregation):
        return [e for _, e in (node.outputs if aggregates else node.keys)]
    if isinstance(node, Expand):
        return [e for p in node.projections for e in p]
    if isinstance(node, Window):
        return [e for _, e in (*node.functions, *node.keys, *node.frame_keys)] + list(node.frame)
    if isinstance(node, Generate):
        if node.function != "explode" or node.outer or len(node.outputs) != 1:  # of a list: unnest
            raise NotInProcess(f"generator {node.generator.sql}")
        return list(node.args)
    return []


def exact_in_duckdb(seg: Segment, keys: Sequence[str]) -> bool:
    """Whether DuckDB evaluates every expression of ``seg``'s body and grouping keys as Spark
    does, and compares the values of columns ``keys`` as Spark groups them (integers,
    decimals, strings, dates, booleans: no floating point, whose NaN and -0.0 Spark
    normalizes when grouping)."""
    types = column_types(seg)
    try:
        for node in seg.operators:
            if not isinstance(node, Function):  # φ tops a segment: not part of its lineage
                for e in evaluated(node, aggregates=False):
                    to_duckdb(e, types)
    except NotInProcess:
        return False
    exact = {*INTEGERS, "string", "date", "boolean"}
    return all(isinstance(types[k], DecimalType) or types[k] in exact for k in keys)


class DuckPlan:
    """Compiles operator trees to DuckDB SQL over inputs given as :class:`Rel` (by ``id`` of
    their leaf); ``scan`` turns a Parquet folder's URI into a FROM item. φ is a subclass's
    (:meth:`_call`): here a model call cannot be made."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, types: dict[str, SqlType], scan: Callable[[str], str]
    ) -> None:
        self.con = con
        self.types = types
        self.scan = scan
        self._tag_cols: dict[str, tuple[str, ...]] = {}
        self._tag_keys: dict[str, tuple[str, ...] | None] = {}  # a key of a tag's rows, if known
        self._sql: dict[str, str] = {}

    def tagged(self, rel: Rel, tag: str, cols: Sequence[Col], key: tuple[str, ...] | None = None) -> Rel:
        self._tag_cols[tag] = tuple(c.id for c in cols)
        self._tag_keys[tag] = key
        fields = ", ".join(f"{q(c.id)} := {q(c.id)}" for c in cols)
        return Rel(f"SELECT *, struct_pack({fields}) AS {q(tag)} FROM ({rel.sql})", (*rel.cols, tag))

    def with_keys(self, rel: Rel, keys: Sequence[tuple[Col, Expr]]) -> Rel:
        ids = [c.id for c, _ in keys]
        kept = [c for c in rel.cols if c not in ids]
        exprs = [f"{self._expr(e)} AS {q(c.id)}" for c, e in keys]
        return Rel(f"SELECT {', '.join([*map(q, kept), *exprs])} FROM ({rel.sql})", (*kept, *ids))

    def _expr(self, e: Expr) -> str:
        if e.sql not in self._sql:
            self._sql[e.sql] = to_duckdb(e, self.types)
        return self._sql[e.sql]

    def source(self, node: Source) -> Rel:
        picked = ", ".join(f"{q(c.name)} AS {q(c.id)}" for c in node.cols)
        return Rel(f"SELECT {picked} FROM {source_scan(node, self.scan)}", tuple(c.id for c in node.cols))

    def compile(
        self, node: Node, inputs: dict[int, Rel], tagged: bool, probes: dict[int, str] | None = None
    ) -> Rel:
        given = inputs.get(id(node))
        if given is not None:
            return given
        if isinstance(node, Source):
            return self.source(node)
        kids = [self.compile(child, inputs, tagged, probes) for child in node.children]
        if isinstance(node, Function):
            return self._call(node, kids[0])
        if isinstance(node, Selection):
            cond = " AND ".join(f"({self._expr(e)})" for e in node.condition)
            return Rel(f"SELECT * FROM ({kids[0].sql}) WHERE {cond}", kids[0].cols)
        if isinstance(node, Projection):
            tags = kids[0].tags()
            exprs = [f"{self._expr(e)} AS {q(c.id)}" for c, e in node.outputs] + [q(t) for t in tags]
            ids = tuple(c.id for c, _ in node.outputs)
            return Rel(f"SELECT {', '.join(exprs)} FROM ({kids[0].sql})", (*ids, *tags))
        if isinstance(node, Join):
            return self._join(node, kids, tagged, (probes or {}).get(id(node)))
        if isinstance(node, OuterJoin):
            return self._outer_join(node, kids)
        if isinstance(node, Aggregation):
            return self._aggregation(node, kids[0])
        if isinstance(node, Generate):
            return self._explode(node, kids[0])
        if isinstance(node, Expand):
            return self._expand(node, kids[0])
        if isinstance(node, Window):
            return self._window(node, kids[0], tagged, (probes or {}).get(id(node)))
        if isinstance(node, Union):
            return self._union(node, kids)
        if isinstance(node, Difference):
            return self._difference(node, kids)
        raise NotInProcess(f"operator {type(node).__name__}")

    def _call(self, node: Function, kid: Rel) -> Rel:
        raise NotInProcess(f"a call of {node.udf}")

    def _join(self, node: Join, kids: list[Rel], tagged: bool, probe: str | None) -> Rel:
        if node.semi and (probe or not tagged):
            cond = " AND ".join(f"({self._expr(e)})" for e in node.condition) or "TRUE"
            semi = f"SELECT x.* FROM ({kids[0].sql}) x SEMI JOIN ({kids[1].sql}) y ON {cond}"
            kept = Rel(semi, kids[0].cols)
            return self.tagged(kept, probe, node.probe_columns()) if probe else kept
        pending = list(node.condition)
        available = {c.id for c in node.inputs[0].columns}
        sql = f"({kids[0].sql}) t0"
        for j, (child, kid) in enumerate(zip(node.inputs[1:], kids[1:]), start=1):
            available |= {c.id for c in child.columns}
            usable = [e for e in pending if e.refs <= available]
            pending = [e for e in pending if e not in usable]
            if usable:
                cond = " AND ".join(f"({self._expr(e)})" for e in usable)
                sql += f" JOIN ({kid.sql}) t{j} ON {cond}"
            else:
                sql += f" CROSS JOIN ({kid.sql}) t{j}"
        cols = tuple(c for kid in kids for c in kid.cols)
        if node.semi:  # tagged: keep the right input's tags, not its columns
            cols = tuple(c.id for c in node.inputs[0].columns) + tuple(
                c for c in cols if c.startswith(TAG_PREFIX)
            )
        return Rel(f"SELECT {', '.join(map(q, cols))} FROM {sql}", cols)

    def _outer_join(self, node: OuterJoin, kids: list[Rel]) -> Rel:
        """One outer join, its inputs' tags passed on (a padded row's other tags NULL). An
        existence join: each left row once, flagged by EXISTS; over tagged inputs (tracing),
        the left join of the pairs, flagged where a right tag is set."""
        cond = " AND ".join(f"({self._expr(e)})" for e in node.condition) or "TRUE"
        flag = node.flag
        if flag is not None and not kids[1].tags():
            exists = f"EXISTS (SELECT 1 FROM ({kids[1].sql}) r WHERE {cond}) AS {q(flag.id)}"
            return Rel(f"SELECT l.*, {exists} FROM ({kids[0].sql}) l", (*kids[0].cols, flag.id))
        left = [*(c.id for c in node.left.match_columns()), *kids[0].tags()]
        picked = [f"l.{q(c)}" for c in left]
        if flag is None:
            right = [*(c.id for c in node.right.match_columns()), *kids[1].tags()]
            how, made = node.kind.upper(), []
        else:  # the right input's tags alone, and the flag they give
            right = kids[1].tags()
            matched = " OR ".join(f"r.{q(t)} IS NOT NULL" for t in right)
            how, made = "LEFT", [flag.id]
            picked.append(f"({matched}) AS {q(flag.id)}")
        picked += [f"r.{q(c)}" for c in right]
        joined = f"({kids[0].sql}) l {how} JOIN ({kids[1].sql}) r ON {cond}"
        return Rel(f"SELECT {', '.join(picked)} FROM {joined}", (*left, *made, *right))

    def _explode(self, node: Generate, kid: Rel) -> Rel:
        """explode(list): a row per element (none for an empty or NULL list), as unnest."""
        (arg,), (out,) = node.args, node.outputs
        sql = f"SELECT *, unnest({self._expr(arg)}) AS {q(out.id)} FROM ({kid.sql})"
        return Rel(sql, (*kid.cols, out.id))

    def _expand(self, node: Expand, kid: Rel) -> Rel:
        """Each row once per grouping set, read once (a CTE the sets' projections share)."""
        tags = [q(t) for t in kid.tags()]
        picked = [
            [f"{self._expr(e)} AS {q(c.id)}" for c, e in zip(node.outputs, p)]
            for p in node.projections
        ]
        sets = [f"SELECT {', '.join([*exprs, *tags])} FROM expanded" for exprs in picked]
        ids = tuple(c.id for c in node.outputs)
        return Rel(f"WITH expanded AS ({kid.sql}) " + " UNION ALL ".join(sets), (*ids, *kid.tags()))

    def _window(self, node: Window, kid: Rel, tagged: bool, probe: str | None) -> Rel:
        """ω as :meth:`materialization.compile.Compiler._window` evaluates it: with a probe
        of each row's frame keys (tracing), or once per row of its frame with that row's
        tags (a capture)."""
        functions = [f"{self._expr(e)} AS {q(c.id)}" for c, e in node.functions]
        ids = tuple(c.id for c, _ in node.functions)
        tags = kid.tags()
        if probe:
            keys = [c for c, _ in node.keys]
            self._tag_cols[probe] = tuple(c.id for c in keys)
            self._tag_keys[probe] = None
            fields = ", ".join(f"{q(c.id)} := {self._expr(e)}" for c, e in node.keys)
            sql = f"SELECT *, {', '.join(functions)}, struct_pack({fields}) AS {q(probe)} FROM ({kid.sql})"
            return Rel(sql, (*kid.cols, *ids, probe))
        if not (tagged and tags):
            return Rel(f"SELECT *, {', '.join(functions)} FROM ({kid.sql})", (*kid.cols, *ids))
        values = [c for c in kid.cols if c not in tags]
        keys = [f"{self._expr(e)} AS {q(c.id)}" for c, e in node.keys]
        rows = f"SELECT {', '.join([*map(q, values), *functions, *keys])} FROM ({kid.sql})"
        frame_keys = [f"{self._expr(e)} AS {q(c.id)}" for c, e in node.frame_keys]
        frame = f"SELECT {', '.join([*frame_keys, *map(q, tags)])} FROM ({kid.sql})"
        cond = " AND ".join(f"({self._expr(e)})" for e in node.frame) or "TRUE"
        shown = [*values, *ids, *tags]
        sql = f"SELECT {', '.join(map(q, shown))} FROM ({rows}) JOIN ({frame}) ON {cond}"
        return Rel(sql, tuple(shown))

    def _aggregation(self, node: Aggregation, kid: Rel) -> Rel:
        keys = [(c, self._expr(e)) for c, e in node.keys]
        aggs = [f"{self._expr(e)} AS {q(c.id)}" for c, e in node.aggregates]
        picked = ", ".join([*(f"{s} AS {q(c.id)}" for c, s in keys), *aggs])
        if not aggs:
            inner = f"SELECT DISTINCT {picked} FROM ({kid.sql})"
        else:
            group = f" GROUP BY {', '.join(s for _, s in keys)}" if keys else ""
            inner = f"SELECT {picked} FROM ({kid.sql}){group}"
        ids = tuple(c.id for c in node.columns)
        return Rel(f"SELECT {', '.join(map(q, ids))} FROM ({inner})", ids)

    def _union(self, node: Union, kids: list[Rel]) -> Rel:
        parts = []
        for child, kid in zip(node.inputs, kids):
            mapped = [f"{q(s.id)} AS {q(o.id)}" for s, o in zip(child.match_columns(), node.outputs)]
            parts.append(f"(SELECT {', '.join(mapped + [q(t) for t in kid.tags()])} FROM ({kid.sql}))")
        tags = tuple(dict.fromkeys(t for kid in kids for t in kid.tags()))
        return Rel(" UNION ALL BY NAME ".join(parts), (*(o.id for o in node.outputs), *tags))

    def _difference(self, node: Difference, kids: list[Rel]) -> Rel:
        left_cols = [c.id for c in node.left.match_columns()]
        left = f"SELECT {', '.join(map(q, left_cols))} FROM ({kids[0].sql})"
        renamed = zip(node.right.match_columns(), left_cols)
        right = f"SELECT {', '.join(f'{q(s.id)} AS {q(t)}' for s, t in renamed)} FROM ({kids[1].sql})"
        if node.kind == "all":
            return Rel(f"({left}) EXCEPT ALL ({right})", tuple(left_cols))
        if node.kind == "distinct":
            return Rel(f"({left}) EXCEPT ({right})", tuple(left_cols))
        cond = " AND ".join(f"x.{q(c)} IS NOT DISTINCT FROM y.{q(c)}" for c in left_cols)
        sql = f"SELECT x.* FROM ({left}) x ANTI JOIN ({right}) y ON {cond}"
        return Rel(sql, tuple(left_cols))
