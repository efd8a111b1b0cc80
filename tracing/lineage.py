"""The answer to "where did these rows come from, and why": AL(Ō) = (SL, RL).

Rows are Spark DataFrames (the tracing queries' results, settled so that asking twice costs
nothing more) or Arrow tables (answers read in-process from an eager run's indexes); the
accessors collect either into the same plain dicts. ``str()`` gives a readable report,
:meth:`to_json` a portable one.

An answer over several output rows also keeps, per row, what belongs to it (:class:`ByRow`,
computed in the same pass): index it like SHAP's ``Explanation`` (``lin[0]``, ``lin[1:3]``,
``lin.rows``, ``lin.where(...)``) for one row's own source rows and model calls.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, Row

from materialization import duck
from materialization.compile import ROW_ID
from materialization.duck_expressions import NotInProcess, output_predicate, register_functions
from reasoning_udfs.explanations import to_shap
from segmenter.errors import LineageError
from segmenter.operators import ROW_ID_COLUMN, Col
from segmenter.sources import ROW_SHIFT
from tracing import views
from tracing.arrow_rows import distinct_flat, exact_key, first_rows, one_value, to_pylist
from tracing.confidence.answer import ConfidenceAnswer
from tracing.errors import first_line
from tracing.gc_pause import gc_paused

SHOW_ROWS = 10
PER_ROW_MAX = 1_000  # chosen output rows answered apart (more: one merged answer)
SCHEMA_VERSION = 4  # of to_dict's shape: 2 added "rows", "run_id" and a call's "reads"; 3 a row's "paths";
# 4 "steps" (each segment id said in plain words)
RowList = list[dict[str, Any]]
JSON_MAX_ROWS = 100_000  # source rows to_dict lists (100 k orders' JSON: 116 MB, 7.9 s); beyond: Parquet
PARTS = ("all", "contributing", "control")  # of a table's rows in an answer (to_arrow)
UNSPLIT = (
    f"this answer does not say which rows were only checked: ask about at most {PER_ROW_MAX:,} output rows"
)
SEGMENT = "__segment"  # the segment whose input a source row is, in a per-row answer

CallKey = tuple[int, str, str]  # a model call: its segment, UDF and inputs (as JSON)
Reads = dict[CallKey, dict[str, pa.Table]]  # a call's source rows by table, with the targets they reach


def call_key(segment: int, udf: str, inputs: dict[str, Any]) -> CallKey:
    return segment, udf, _sort_key({k: _plain(v) for k, v in inputs.items()})

Rows = DataFrame | pa.Table


@dataclass(frozen=True)
class ReasoningRows:
    """⟨E, Value, Reason⟩ of one reasoning-mode function operator's rows in the lineage."""

    udf: str
    segment: int
    inputs: tuple[str, ...]  # names of the attributes E
    value: str
    reason: str
    rows: Rows


@dataclass(frozen=True)
class TraceStat:
    segment: int
    kind: str
    pattern: str
    seconds: float
    rows_in: int | None  # None: all rows of the segment
    rows_out: dict[str, int | None]  # per input; None: all of it


@dataclass(frozen=True)
class Deferred:
    """Rows of one table named by their key values alone (with the ``ROW_ID`` of the targets
    they serve, in a per-row answer), read from the source only when asked for: the rows an
    answer holds only as control lineage, counted first (TPC-H Q21 at SF 1: one row's 342 k
    line items checked by NOT EXISTS, reading them was 1.6 s of its 2.5 s question)."""

    ids: pa.Table
    read: Callable[[pa.Table], pa.Table]  # key values -> the whole rows they name

    @property
    def count(self) -> int:
        return self.ids.num_rows

    def serving(self, ids: list[int]) -> Deferred:
        return replace(self, ids=_serving(self.ids, ids))

    def distinct(self) -> Deferred:
        """Each row once, whichever targets it serves (``ids`` holds a row once per target)."""
        if ROW_ID not in self.ids.column_names:
            return self
        return replace(self, ids=_distinct(self.ids, once_each=True))

    def rows(self) -> pa.Table:
        return self.read(self.distinct().ids)


@dataclass(frozen=True)
class ByRow:
    """The answer's rows with ``ROW_ID``: which chosen output row each serves (a row that
    serves several is there once for each). ``via`` has each table's source rows (by the
    attributes the backend keeps) with the ``SEGMENT`` they entered by, once per segment."""

    source: dict[str, Rows]
    reasoning: list[ReasoningRows]
    targets: Rows | None = None
    via: dict[str, Rows] = field(default_factory=dict)
    deferred: dict[str, Deferred] = field(default_factory=dict)  # control rows not read yet

    def local(self) -> ByRow:
        """The same rows as Arrow tables (a per-row answer is small: it is read in process)."""
        return ByRow(
            {t: as_arrow(r) for t, r in self.source.items()},
            [replace(e, rows=as_arrow(e.rows)) for e in self.reasoning],
            None if self.targets is None else as_arrow(self.targets),
            {t: as_arrow(r) for t, r in self.via.items()},
            self.deferred,
        )

    def merged(self, queries: list[TraceStat], keys: dict[str, Sequence[str]]) -> AugmentedLineage:
        """The answer for all the targets (each row once, told by its table's ``keys``),
        keeping these rows apart (a table's rows here are each once per target: see derive)."""
        return AugmentedLineage(
            source={t: _distinct(r, keys.get(t), once_each=True) for t, r in self.source.items()},
            reasoning=[replace(e, rows=_distinct(e.rows)) for e in self.reasoning],
            queries=queries,
            by_row=self,
            deferred={t: d.distinct() for t, d in self.deferred.items()},
        )

    def only(self, ids: list[int]) -> ByRow:
        """What serves the targets ``ids`` (local rows)."""
        return ByRow(
            {t: _serving(r, ids) for t, r in self.source.items()},
            [replace(e, rows=_serving(e.rows, ids)) for e in self.reasoning],
            None if self.targets is None else _serving(self.targets, ids, shared=False),
            {t: _serving(r, ids) for t, r in self.via.items()},
            {t: d.serving(ids) for t, d in self.deferred.items()},
        )


@dataclass
class AugmentedLineage:
    source: dict[str, Rows]
    reasoning: list[ReasoningRows]
    queries: list[TraceStat]
    targets: Rows | None = None
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scope: str | None = None  # set when the answer covers less than every table, row by row
    confidence: ConfidenceAnswer | None = None  # the rows' probabilities (confidence runs)
    engine: str | None = None  # which engine ran the tracing queries (lazy answers)
    warnings: list[str] = field(default_factory=list)  # e.g. a model's weights changed since the run
    by_row: ByRow | None = None  # the same rows, each with the chosen output row it serves
    reads: Reads = field(default_factory=dict)  # the source rows each model call read
    routes: dict[int, tuple[int, ...]] = field(default_factory=dict)  # segment -> its path from the root
    run_id: str | None = None
    origins: dict[str, dict[str, Any]] = field(default_factory=dict)  # tables read in place: their files
    # per table, the segments whose reads of it are control rows, with what checks them
    control: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)
    contributing: dict[str, Rows] | None = None  # an answer not kept per row: rows read outside control
    output: tuple[Col, ...] = ()  # the task's output columns: what lin.where("…") reads
    steps: dict[int, str] = field(default_factory=dict)  # segment id -> plain words (segmenter.step_words)
    # per table, control rows not read yet (``source`` holds the others): counted, read when asked
    deferred: dict[str, Deferred] = field(default_factory=dict)
    _split: dict[str, tuple[RowList, RowList]] = field(default_factory=dict, repr=False)
    _arrows: dict[str, tuple[pa.Table, pa.Table]] = field(default_factory=dict, repr=False)
    _cache: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)
    _calls: dict[str | None, list[dict[str, Any]]] = field(default_factory=dict, repr=False)
    _read_ids: dict[CallKey, dict[str, list[dict[str, Any]]]] | None = field(default=None, repr=False)

    # --- accessors ----------------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        """Source tables with at least one row in the lineage."""
        return [t for t in sorted(self.source) if self._held(t)]

    def _held(self, table: str) -> int:
        """How many of ``table``'s rows the answer holds, read or not."""
        later = self.deferred.get(table)
        return self._read(table).num_rows + (later.count if later is not None else 0)

    def _read(self, table: str) -> pa.Table:
        """``table``'s rows read so far in Arrow, once (a Spark engine's answer holds DataFrames)."""
        rows = self.source[table]
        if not isinstance(rows, pa.Table):
            self.source[table] = rows = as_arrow(rows)
        return rows

    def _arrow(self, table: str) -> pa.Table:
        """All of ``table``'s rows in Arrow: its :attr:`deferred` rows are read now."""
        later = self.deferred.pop(table, None)
        if later is not None:
            rows = self._read(table)
            read = later.rows().select(rows.column_names)
            self.source[table] = pa.concat_tables([rows, read], promote_options="permissive")
            self._arrows.pop(table, None)  # a split of the rows read before
        return self._read(table)

    def source_rows(self, table: str) -> list[dict[str, Any]]:
        """Rows of ``table`` in the source lineage, sorted; [] when none contribute."""
        if table not in self.source:
            return []
        if table not in self._cache:
            self._cache[table] = collect_rows(self._arrow(table))
        return self._cache[table]

    def source_ids(self, table: str) -> set[tuple[Any, ...]]:
        """Stable ids (key values) of ``table``'s rows in the source lineage."""
        key = self.keys.get(table)
        if not key:
            raise KeyError(f"no key known for table {table!r}")
        return {tuple(r[k] for k in key) for r in self.source_rows(table)}

    def contributing_rows(self, table: str) -> list[dict[str, Any]]:
        """Rows of ``table`` whose values reached the chosen rows: the source lineage less the
        rows only checked for absence (docs/semantics.md, "Contributing and control lineage")."""
        return self._parts(table)[0]

    def control_rows(self, table: str) -> list[dict[str, Any]]:
        """Rows of ``table`` that were only checked for absence: a difference's subtrahend,
        the matched side of an anti-join or of an outer join's unmatched row (``checks``)."""
        return self._parts(table)[1]

    def checks(self, table: str) -> list[str]:
        """What checked ``table``'s control rows, in the run's words where the answer has
        them ("the anti-join of customers against orders"), else "the anti-join (…) of
        segments 12, 17"."""
        if not self.part_counts(table)[1]:
            return []
        by: dict[str, set[int]] = {}
        for construct, segment in self.control.get(table, {}).values():
            by.setdefault(construct, set()).add(segment)
        if self.steps:
            return list(dict.fromkeys(self.steps[s] for segs in by.values() for s in sorted(segs)))
        return [
            f"the {c} of segment{'s' if len(segs) > 1 else ''} {', '.join(map(str, sorted(segs)))}"
            for c, segs in sorted(by.items())
        ]

    def part_counts(self, table: str) -> tuple[int, int]:
        """How many of ``table``'s rows contribute and how many were only checked, counted in
        Arrow (none made a Python row); all contribute where the answer cannot tell."""
        later = self.deferred.get(table)
        if later is None:
            shown, checked = self._shown_parts(table)
            return shown.num_rows, checked.num_rows
        used = self._contributing(table).num_rows
        return used, self._read(table).num_rows - used + later.count

    def first_rows(self, table: str, part: str = "contributing", n: int = SHOW_ROWS) -> list[dict[str, Any]]:
        """The first ``n`` rows of ``table``'s ``part`` ("contributing", "control" or "all"),
        in :meth:`source_rows`' order, the others never made Python rows: what a page or a
        terminal shows of an answer of a million rows (:meth:`part_counts` counts them)."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {', '.join(PARTS)}, not {part!r}")
        if part == "control" and table in self.deferred:
            few = self._first_checked(table, n)
            if few is not None:
                return few
        return first_rows_of(self._part(table, part, self._shown_parts), n)

    def _first_checked(self, table: str, n: int) -> list[dict[str, Any]] | None:
        """The first ``n`` control rows of a table whose control rows are deferred, reading
        only the deferred rows that can be among them: rows sort by their first column
        first, so where that column is in the key the first ``n`` have at most the ``n``-th
        smallest value there (the report's folded list of TPC-H Q21's 3.3 M line items only
        checked at SF 10: a few read, not all); None where it is not."""
        rows = self._read(table)
        first, later = rows.column_names[0], self.deferred[table]
        if first not in later.ids.column_names or not _sortable(rows.schema.field(first).type):
            return None
        ids = later.distinct().ids
        smallest = pc.select_k_unstable(ids, n, [(first, "ascending")])
        if len(smallest):
            bound = pc.max(ids.column(first).take(smallest))
            read = later.read(ids.filter(pc.less_equal(ids.column(first), bound)))
            rows = pa.concat_tables(
                [rows.filter(pc.invert(self._used(table, rows))), read.select(rows.column_names)],
                promote_options="permissive",
            )
        return first_rows_of(rows, n)

    def _part(
        self, table: str, part: str, split: Callable[[str], tuple[pa.Table, pa.Table]]
    ) -> pa.Table:
        """``table``'s rows of ``part``, told apart by ``split`` (:meth:`_apart`, or
        :meth:`_shown_parts`); the contributing ones without reading deferred rows."""
        if part == "all":
            return self._arrow(table)
        if part == "contributing" and table in self.deferred:
            return self._contributing(table)
        return split(table)[part == "control"]

    def _contributing(self, table: str) -> pa.Table:
        """The contributing rows of an answer that holds ``table``'s control rows deferred:
        among the rows read (every deferred row is a control row)."""
        if table not in self._arrows:
            rows = self._read(table)
            self._arrows[table] = (rows.filter(self._used(table, rows)), rows.slice(0, 0))
        return self._arrows[table][0]

    def _shown_parts(self, table: str) -> tuple[pa.Table, pa.Table]:
        """:meth:`_apart`, or every row as contributing where the answer cannot tell."""
        try:
            return self._apart(table)
        except LineageError:
            rows = self._arrow(table)
            return rows, rows.slice(0, 0)

    def _apart(self, table: str) -> tuple[pa.Table, pa.Table]:
        """Contributing and control rows in Arrow, told apart once (LineageError where the
        answer cannot tell them apart)."""
        rows = self._arrow(table)  # deferred rows read now: a split of the rows read before dropped
        if table not in self._arrows:
            used = self._used(table, rows)
            if pc.all(used).as_py():  # every row contributes (no read of the table checks): no copy
                self._arrows[table] = (rows, rows.slice(0, 0))
            else:
                self._arrows[table] = (rows.filter(used), rows.filter(pc.invert(used)))
        return self._arrows[table]

    def split(self, table: str) -> tuple[RowList, RowList]:
        """Contributing and control rows where the answer tells them apart, else all rows."""
        try:
            return self._parts(table)
        except LineageError:
            return self.source_rows(table), []

    def _control_dict(self) -> dict[str, Any]:
        """Per table with control rows: how many, and what checked them."""
        found = {}
        for t in self.tables:
            checked = self.part_counts(t)[1]
            if checked:
                found[t] = {"rows": checked, "checked_by": self.checks(t)}
        return found

    def _parts(self, table: str) -> tuple[RowList, RowList]:
        if table not in self._split:
            if table not in self.source or not (self.control.get(table) or table in self.deferred):
                self._split[table] = (self.source_rows(table), [])
            else:  # told apart in Arrow, made Python rows once apart
                self._split[table] = tuple(map(collect_rows, self._apart(table)))  # type: ignore[assignment]
        return self._split[table]

    def _used_keys(self, table: str, names: Sequence[str]) -> tuple[list[str], pa.Table | None]:
        """The columns that tell ``table``'s rows apart (its key, else all its ``names``) and
        their values in its contributing rows (None: no row contributes)."""
        if self.by_row is not None and table in self.by_row.via:
            via = as_arrow(self.by_row.via[table])
            names = [c for c in via.column_names if c not in (ROW_ID, SEGMENT)]
            key = [k for k in self.keys.get(table, ()) if k in names] or names
            segs = via.column(SEGMENT)
            reads = pa.array(list(self.control.get(table, {})), segs.type)
            return key, unique_rows(via.filter(pc.invert(pc.is_in(segs, value_set=reads))).select(key))
        if self.contributing is None:
            raise LineageError(UNSPLIT)
        key = [k for k in self.keys.get(table, ()) if k in names] or list(names)
        if table not in self.contributing:
            return key, None
        return key, unique_rows(as_arrow(self.contributing[table]).select(key))

    def reasoning_rows(self, udf: str | None = None) -> list[dict[str, Any]]:
        """⟨E, Value, Reason⟩ rows, each tagged with its UDF and segment (collected once: a
        call's reads may be tens of thousands of rows)."""
        if udf not in self._calls:
            self._calls[udf] = self._reasoning_rows(udf)
        return self._calls[udf]

    @gc_paused()
    def _reasoning_rows(self, udf: str | None) -> list[dict[str, Any]]:
        out = []
        if self._read_ids is None:  # made once for the answer, whichever UDF is asked about
            self._read_ids = self._reads_by_call()
        read = self._read_ids
        for entry in self.reasoning:
            if udf is not None and entry.udf != udf:
                continue
            for r in collect_rows(entry.rows):
                inputs = {k: r[k] for k in entry.inputs}
                out.append(
                    {
                        "udf": entry.udf,
                        "segment": entry.segment,
                        "inputs": inputs,
                        "value": r[entry.value],
                        "reason": r[entry.reason],
                        "reads": read.get(call_key(entry.segment, entry.udf, inputs)),
                    }
                )
        return out

    def _reads_by_call(self) -> dict[CallKey, dict[str, list[dict[str, Any]]]]:
        """The ids (key values) of the source rows each call read, by table ({} where the
        answer does not know: eager and compressed runs, answers over many rows). Each table's
        reads are told apart for every call at once (a group-by and a join per call and table
        were 7 % of the differential suite's answers), and each id is one dict, shared by the
        calls that read it (CDA Q21's 5 calls each read the same 57 k line items)."""
        found: dict[CallKey, dict[str, list[dict[str, Any]]]] = {call: {} for call in self.reads}
        for table in sorted({t for tables in self.reads.values() for t in tables}):
            calls = [call for call, tables in self.reads.items() if table in tables]
            rows = [self.reads[call][table] for call in calls]
            key = list(self.keys.get(table) or [c for c in rows[0].column_names if c != ROW_ID])
            labelled = [
                r.select(key).append_column(_CALL, pa.array(np.full(r.num_rows, k, np.int64)))
                for k, r in enumerate(rows)
            ]
            every = pa.concat_tables(labelled, promote_options="default")
            mine = unique_rows(every)  # each id once per call
            ids = _Ids.of([every.select(key)])
            if ids is None:  # not joinable: each call's rows made dicts apart
                for k, call in enumerate(calls):
                    own = mine.filter(pc.equal(mine.column(_CALL), k)).drop_columns([_CALL])
                    found[call][table] = collect_rows(own)
                continue
            places = placed(mine, ids.table, key).select([_CALL, PLACE])
            places = places.sort_by([(_CALL, "ascending"), (PLACE, "ascending")])
            by_call, at = places.column(_CALL).to_numpy(), places.column(PLACE).to_numpy()
            bounds = np.searchsorted(by_call, np.arange(len(calls) + 1))
            for k, call in enumerate(calls):
                found[call][table] = [ids.dicts[i] for i in at[bounds[k] : bounds[k + 1]].tolist()]
        return found

    @gc_paused()
    def paths(self, table: str, among: RowList | None = None) -> list[dict[str, Any]]:
        """Per source row of ``table`` (its key values): the paths it reached the chosen rows
        by, each the segment ids from the root down to the segment that read it (Q2: a
        supplier that only the min-cost subquery read comes by ``[0, 2]``, not ``[0]``).
        ``among``: for these rows of the answer only (the rows a page shows)."""
        if self.by_row is None or table not in self.by_row.via:
            raise LineageError("paths are known for answers kept per output row: ask for chosen rows")
        key, picked = self._entries(table)
        if among is not None:
            picked = _among(picked, key, among)
        if all(map(_sortable, picked.schema.types)):  # each row's segments gathered by Arrow
            grouped = picked.group_by(key, use_threads=False).aggregate([(SEGMENT, "distinct")])
            grouped = grouped.sort_by([(k, "ascending") for k in key])  # as collect_rows orders them
            segments = grouped.column(f"{SEGMENT}_distinct").to_pylist()
            found = list(zip(collect_rows(grouped.select(key)), segments))
        else:
            by_key: dict[Any, tuple[dict[str, Any], list[int]]] = {}
            for r in collect_rows(picked):
                seg = r.pop(SEGMENT)
                by_key.setdefault(_row_key(r), (r, []))[1].append(seg)
            found = list(by_key.values())
        entered = [tuple(sorted(set(segs))) for _, segs in found]
        # rows that came by the same segments share one list of paths (read, not changed)
        paths = {e: [list(p) for p in sorted({self.routes.get(s, (s,)) for s in e})] for e in set(entered)}
        return [{"row": r, "paths": paths[e]} for (r, _), e in zip(found, entered)]

    def _entries(self, table: str) -> tuple[list[str], pa.Table]:
        """The columns that name ``table``'s rows in the answer's via, and each row's
        (key values, ``SEGMENT``) there."""
        rows = as_arrow(self.by_row.via[table])  # type: ignore[union-attr]
        names = [c for c in rows.column_names if c not in (ROW_ID, SEGMENT)]
        key = [k for k in self.keys.get(table, ()) if k in names] or names
        return key, rows.select([*key, SEGMENT])

    def path_notes(
        self,
        table: str,
        said: Callable[[list[int]], str] = lambda p: " → ".join(map(str, p)),
        among: RowList | None = None,
    ) -> Callable[[dict[str, Any]], str]:
        """``0 → 2`` (its paths, each as ``said`` puts it) for each row of ``table``, where its
        rows came by more than one path; else "" (the plan says it). ``among``: the rows a
        page shows, the only ones given their paths (TPC-H Q21 at SF 1: every one of 342 k
        line items' paths made in Python was 5.8 s of printing one row's answer)."""
        if self.by_row is None or table not in self.by_row.via:
            return lambda row: ""
        key, entries = self._entries(table)
        entered = pc.unique(entries.column(SEGMENT)).to_pylist()
        if len({self.routes.get(s, (s,)) for s in entered}) < 2:  # one path for every row
            return lambda row: ""
        if all(map(_sortable, entries.schema.types)):  # each row by every segment: one way for all
            ways = entries.group_by(key, use_threads=False).aggregate([(SEGMENT, "count_distinct")])
            if pc.min(ways.column(f"{SEGMENT}_count_distinct")).as_py() == len(entered):
                return lambda row: ""
        elif len({json.dumps(f["paths"]) for f in self.paths(table)}) < 2:
            return lambda row: ""
        found = self.paths(table, among)
        if not found:
            return lambda row: ""
        notes = {_row_key(f["row"]): "; ".join(dict.fromkeys(map(said, f["paths"]))) for f in found}
        key = list(found[0]["row"])

        def note(row: dict[str, Any]) -> str:
            return notes.get(_row_key({k: row.get(k) for k in key}), "")

        return note

    def to_shap(self, udf: str) -> Any:
        """The calls of ``udf`` (a SHAP or LIME UDF) as one ``shap.Explanation``."""
        return to_shap(self.reasoning_rows(udf))

    def calls(self, entry: ReasoningRows) -> list[dict[str, Any]]:
        """The ⟨E, Value, Reason⟩ rows of one function operator (a UDF may sit in two segments)."""
        return [r for r in self.reasoning_rows(entry.udf) if r["segment"] == entry.segment]

    def counts(self) -> dict[str, int]:
        """Rows per source table and calls per UDF, without turning rows into Python objects
        (a lineage set can hold millions of rows)."""
        found = {t: self._held(t) for t in sorted(self.source)}
        for entry in self.reasoning:
            key = f"{entry.udf} calls"
            found[key] = found.get(key, 0) + _count(entry.rows)
        return found

    def to_arrow(self, table: str, part: str = "all") -> pa.Table:
        """``table``'s rows in the answer as one Arrow table, never as Python rows (an answer
        of a million rows is counted, filtered and written as it is): ``part`` "all",
        "contributing" (the rows whose values reached the chosen rows) or "control" (the
        rows only checked, :meth:`control_rows`)."""
        if part not in PARTS:
            raise ValueError(f"part must be one of {', '.join(PARTS)}, not {part!r}")
        if table not in self.source:
            raise LineageError(f"no table {table!r} in this answer; it has {sorted(self.source)}")
        return self._part(table, part, self._apart)

    def to_parquet(self, folder: str) -> dict[str, dict[str, int]]:
        """Every table's rows into ``folder``/<table>.parquet, each with a column ``lineage``
        saying "contributing" or "control"; returns the counts. A file is written beside
        its place and renamed into it, so an interrupted export leaves no part of one."""
        os.makedirs(folder, exist_ok=True)
        counts = {}
        for table in sorted(self.source):
            rows = self._arrow(table)
            used = self._used(table, rows)
            kind = pc.if_else(used, pa.scalar("contributing"), pa.scalar("control"))
            path = os.path.join(folder, f"{table}.parquet")
            pq.write_table(rows.append_column("lineage", kind), path + ".partial")
            os.replace(path + ".partial", path)
            n = pc.sum(pc.cast(used, pa.int64())).as_py() or 0
            counts[table] = {"contributing": n, "control": rows.num_rows - n}
        return counts

    def _used(self, table: str, rows: pa.Table) -> pa.Array:
        """Which of ``table``'s ``rows`` are contributing, worked out in Arrow where the
        rows' key compares exactly there (else by the key's Python values)."""
        reads = self.control.get(table)
        if not reads or not rows.num_rows:
            return pa.array(np.ones(rows.num_rows, dtype=bool))
        key, mine = self._used_keys(table, rows.column_names)
        if mine is None:
            return pa.array(np.zeros(rows.num_rows, dtype=bool))
        if not (joinable(rows.select(key)) and joinable(mine)):  # a floating or nested key: in Python
            used = {_row_key(r) for r in collect_rows(mine)}
            return pa.array([_row_key(_plain(r)) in used for r in to_pylist(rows.select(key))])
        picked = np.zeros(rows.num_rows, dtype=bool)
        picked[placed(mine, rows, key).column(PLACE).to_numpy()] = True
        return pa.array(picked)

    @property
    def seconds(self) -> float:
        return sum(q.seconds for q in self.queries)

    def log(self, name: str | None = None) -> str:
        """Log this answer (its JSON) to the MLflow run its task run was logged as, found by
        the ``al.run_id`` tag in the current tracking store, as ``answers/<name>.json``
        (default name: the time); the artifact's path."""
        from tracing.tracking import log_answer, tracked_run_of

        found = tracked_run_of(self.run_id) if self.run_id else None
        if found is None:
            raise LookupError(
                f"run {self.run_id} has no MLflow run in this tracking store: log the run first "
                "(als.run inside mlflow.start_run(), or al run --mlflow)"
            )
        return log_answer(self, found, name)

    # --- per output row (like SHAP's Explanation: index, slice, iterate) ----------------------
    @property
    def rows(self) -> list[AugmentedLineage]:
        """One answer per chosen output row, in the order of :attr:`targets`' rows."""
        return [self._only([i]) for i, _ in self._numbered()]

    def __len__(self) -> int:
        """How many output rows the answer is about."""
        return 0 if self.targets is None else _count(self.targets)

    def __bool__(self) -> bool:
        return True  # an answer, even about no row

    def __getitem__(self, index: int | slice) -> AugmentedLineage:
        """``lin[i]``: the answer for output row i alone; ``lin[i:j]``: for those rows."""
        ids = [i for i, _ in self._numbered()]
        return self._only(ids[index] if isinstance(index, slice) else [ids[index]])

    def where(
        self, test: str | Callable[[dict[str, Any]], bool] | None = None, **values: Any
    ) -> AugmentedLineage:
        """The answer for the chosen output rows that pass ``test`` (a SQL predicate over the
        output's column names, as ``run.lineage(where=…)`` takes, or a function of the row's
        dict) and hold the given ``values`` (``lin.where(Decision="Accept")``)."""
        numbered = self._numbered()
        if isinstance(test, str):
            passing = self._passing(test)
            numbered = [(i, row) for i, row in numbered if i in passing]
        elif test is not None:
            numbered = [(i, row) for i, row in numbered if test(row)]
        ids = [i for i, row in numbered if all(row.get(k, _MISSING) == v for k, v in values.items())]
        if not ids:
            asked = test if isinstance(test, str) else values or "that property"
            raise LineageError(f"no output row of this answer has {asked}")
        return self._only(ids)

    def _passing(self, predicate: str) -> set[int]:
        """The ``ROW_ID`` of the chosen rows that ``predicate`` keeps, judged by DuckDB where
        it gives Spark's answer (the allow-list the in-process engine uses: nothing else runs)."""
        try:
            test = output_predicate(predicate, self.output)
        except NotInProcess as e:
            raise LineageError(
                f"lin.where({predicate!r}) cannot be judged here ({e}): ask run.lineage(where=...)"
            ) from None
        chosen = self.by_row.targets if self.by_row is not None else self.targets
        targets = as_arrow(chosen)  # type: ignore[arg-type]
        if ROW_ID not in targets.column_names:  # one row, not kept apart
            targets = targets.append_column(ROW_ID, pa.array([0] * targets.num_rows, pa.int64()))
        con = duck.cursor("questions", register_functions)  # the engine's database, its functions
        try:
            con.register("chosen", targets)
            return {r[0] for r in con.execute(f"SELECT {ROW_ID} FROM chosen WHERE {test}").fetchall()}
        except duckdb.Error as e:
            raise LineageError(f"lin.where({predicate!r}): {first_line(e)}") from None
        finally:
            con.close()

    def _numbered(self) -> list[tuple[int, dict[str, Any]]]:
        """(ROW_ID, row) of every target, in :func:`collect_rows` order."""
        if self.targets is None:
            raise LineageError("this answer is about every output row at once: ask for chosen rows")
        if self.by_row is None:
            count = _count(self.targets)
            if count != 1:
                raise LineageError(
                    f"this answer merges {count} output rows (answers apart are kept for up to "
                    f"{PER_ROW_MAX:,}): ask run.lineage_pages(…) for every row's own answer, a page at a time"
                )
            return [(0, collect_rows(self.targets)[0])]
        targets = as_arrow(self.by_row.targets)  # type: ignore[arg-type]
        at = targets.schema.get_field_index(ROW_ID)
        ordered = [*(i for i in range(targets.num_columns) if i != at), at]  # the row, then its id
        return [(r.pop(ROW_ID), r) for r in collect_rows(targets.select(ordered))]

    def _only(self, ids: list[int]) -> AugmentedLineage:
        if self.by_row is None or len(set(ids)) == _count(self.by_row.targets):  # type: ignore[arg-type]
            return self  # every chosen row: this answer, its rows collected once (one-row answers)
        part = self.by_row.only(ids)
        targets = collect_rows(part.targets.drop_columns([ROW_ID]))  # type: ignore[union-attr]
        confidence = self.confidence
        if confidence is not None:
            mine = [r for r in confidence.rows if r.row in targets]
            confidence = replace(confidence, rows=mine)
        return replace(
            self,
            source={t: _distinct(r, self.keys.get(t)) for t, r in part.source.items()},
            deferred={t: d.distinct() for t, d in part.deferred.items() if d.count},
            reasoning=[replace(e, rows=_distinct(e.rows)) for e in part.reasoning],
            targets=part.targets.drop_columns([ROW_ID]),  # type: ignore[union-attr]
            confidence=confidence,
            by_row=part,
            reads=_reads_serving(self.reads, ids),
            _cache={},
            _calls={},
            _read_ids=None,
            _split={},
            _arrows={},
        )

    # --- presentation -------------------------------------------------------------------------
    @gc_paused()
    def to_dict(self, max_rows: int | None = JSON_MAX_ROWS) -> dict[str, Any]:
        """The answer as plain values (JSON's shape, :data:`SCHEMA_VERSION`); an answer whose
        JSON would list more than ``max_rows`` source rows, its own and each chosen row's, is
        refused in one line (None: no bound): it is written as Parquet (:meth:`to_parquet`),
        not listed. (CDA Q21 at SF 0.1, all 47 rows: 47 k rows merged, 2.2 M listed row by
        row, 21 GB of Python before the bound counted the second.)"""
        held = sum(self._held(t) for t, r in self.source.items() if isinstance(r, pa.Table))  # no Spark job
        listed = held + self._listed_by_row()
        if max_rows is not None and listed > max_rows:
            raise LineageError(
                f"this answer lists {listed:,} source rows ({held:,} and each chosen row's own), more "
                f"than its JSON lists ({max_rows:,}): write it as Parquet (lin.to_parquet(folder), "
                "al lineage --format parquet -o DIR)"
            )
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "rows": self._rows_dict(),
            "targets": collect_rows(self.targets) if self.targets is not None else None,
            "source_lineage": {t: self.source_rows(t) for t in self.tables},
            "contributing_lineage": {t: self.split(t)[0] for t in self.tables},
            "control_lineage": self._control_dict(),
            "sources_read_in_place": self.origins,
            "reasoning_lineage": self.reasoning_rows(),
            "tracing_queries": [q.__dict__ for q in self.queries],
            "steps": {str(k): v for k, v in sorted(self.steps.items())},
            "engine": self.engine,
            "confidence": self.confidence.to_dict() if self.confidence is not None else None,
            "warnings": self.warnings,
        }

    def _listed_by_row(self) -> int:
        """How many source rows the chosen rows' own answers list (a row serving n chosen
        rows n times), counted in Arrow."""
        if self.by_row is None:
            return 0
        read = sum(r.num_rows for r in self.by_row.source.values() if isinstance(r, pa.Table))
        return read + sum(d.count for d in self.by_row.deferred.values())

    def _rows_dict(self) -> list[dict[str, Any]] | None:
        """Per chosen output row: its values, source rows by table, model calls (None when
        the answer merges rows it did not keep apart)."""
        try:
            rows = self.rows
        except LineageError:
            return None
        return [
            {
                "output": collect_rows(one.targets)[0],  # type: ignore[arg-type]
                "source": {t: one.source_rows(t) for t in one.tables},
                "contributing": {t: one.split(t)[0] for t in one.tables},
                "control": one._control_dict(),
                "paths": {t: one.paths(t) for t in one.tables if t in one.by_row.via},  # type: ignore[union-attr]
                "reasoning": one.reasoning_rows(),
            }
            for one in rows
        ]

    def to_json(self, indent: int | None = 2, max_rows: int | None = JSON_MAX_ROWS) -> str:
        return json.dumps(self.to_dict(max_rows), indent=indent, default=str)

    def __str__(self) -> str:
        lines = [f"Warning: {w}" for w in self.warnings]
        if self.targets is not None:
            targets = collect_rows(self.targets)
            lines.append(f"Augmented lineage of {len(targets)} output row(s)")
            lines += [f"  {fmt_row(r)}" for r in targets[:SHOW_ROWS]]
            lines += _more(len(targets))
        if self.by_row is not None and len(self) > 1:
            lines.append("Per output row (lin[i] is row i's own answer)")
            for i in range(min(len(self), SHOW_ROWS)):
                one = self[i]
                counts = ", ".join(f"{k}: {n}" for k, n in one.counts().items() if n)
                lines.append(f"  [{i}] {fmt_row(collect_rows(one.targets)[0])}: {counts}")  # type: ignore[arg-type]
            lines += _more(len(self))
        if self.confidence is not None:
            lines.append(f"Confidence: {self.confidence}")
        lines.append("Source lineage" + (f" ({self.scope})" if self.scope else ""))
        for table in self.tables:
            used, checked = self.part_counts(table)  # counted; only the rows shown made dicts
            origin = self.origins.get(table)
            read = ""
            if origin:
                read = f" of {origin['location']} ({origin['format']}, {len(origin['files'])} file(s))"
            lines.append(f"  {table}: {used} row(s){read}")
            if checked:
                by = "; ".join(self.checks(table))
                fetch = f"control_rows({table!r})"
                lines.append(f"    + {checked} row(s) only checked, by {by}: {fetch}")
            first = self.first_rows(table)
            via = self.path_notes(table, among=first)
            placed = _file_place(origin["files"]) if origin and origin["row_id"] else fmt_row
            for r in first:
                lines.append(f"    {placed(r)}" + (f"  (via segments {note})" if (note := via(r)) else ""))
            lines += _more(used, "    ")
        lines.append("Reasoning lineage")
        if not self.reasoning:
            lines.append("  (no function operator ran in reasoning mode on the way)")
        for entry in self.reasoning:
            rows = self.calls(entry)
            step = self.steps.get(entry.segment, f"segment {entry.segment}")
            lines.append(f"  {entry.udf} ({step}): {len(rows)} call(s)")
            for r in rows[:SHOW_ROWS]:
                call = f"{fmt_row(r['inputs'])} -> {entry.value}={shown(r['value'])}"
                lines.append(f"    {call}  reason={_plain(r['reason'])}")
                if r["reads"]:
                    lines.append(f"      read: {reads_line(r['reads'])}")
            lines += _more(len(rows), "    ")
        ran = f", {self.engine}" if self.engine else ""
        lines.append(f"Tracing queries ({self.seconds:.2f} s{ran})")
        for q in self.queries:
            outs = ", ".join(f"{k}: {'all' if v is None else v}" for k, v in q.rows_out.items())
            rows_in = "all" if q.rows_in is None else q.rows_in
            step = f" ({self.steps[q.segment]})" if q.segment in self.steps else ""
            lines.append(
                f"  segment {q.segment}{step} [{q.kind}] {q.pattern}: {q.seconds:.3f} s, "
                f"rows in {rows_in}, out {outs}"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return views.html(self)

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}: {self._held(t)}" for t in self.tables)
        return f"<AugmentedLineage source=({counts}) reasoning={len(self.reasoning_rows())} calls>"


def _among(entries: pa.Table, key: Sequence[str], rows: RowList) -> pa.Table:
    """The ``entries`` of the ``rows`` (by their ``key`` values), found by an Arrow join where
    it compares the key exactly; else, or where a row is not found so, all of them."""
    keys = entries.select(list(key))
    if not joinable(keys):
        return entries
    try:
        wanted = pa.Table.from_pylist([{k: r[k] for k in key} for r in rows], schema=keys.schema)
    except (pa.ArrowException, KeyError, TypeError):  # a value made plain (a zoned time)
        return entries
    wanted = unique_rows(wanted)
    found = entries.join(wanted, list(key), join_type="left semi", use_threads=False)
    return found if unique_rows(found.select(list(key))).num_rows == wanted.num_rows else entries


def _file_place(files: Sequence[str]) -> Callable[[dict[str, Any]], str]:
    """Shows a keyless row read in place by its file and position, not its packed ``_rid``."""

    def shown_row(row: dict[str, Any]) -> str:
        rid = row.get(ROW_ID_COLUMN)
        rest = fmt_row({k: v for k, v in row.items() if k != ROW_ID_COLUMN})
        if not isinstance(rid, int):
            return rest
        name = files[rid >> ROW_SHIFT].rsplit("/", 1)[-1]
        return f"{rest}  [{name} row {rid & ((1 << ROW_SHIFT) - 1)}]"

    return shown_row


def _plain(value: Any) -> Any:
    """Python values as Spark's collect gives them, whichever engine read the row."""
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)  # Spark gives local, naive timestamps
    return value


_MISSING = object()


def entered_by(rows: pa.Table, segment: int) -> pa.Table:
    """``rows`` of one table with the ``SEGMENT`` that read them (a per-row answer's via)."""
    return for_each(rows, SEGMENT, [segment])


def for_each(rows: pa.Table, column: str, ids: Sequence[int]) -> pa.Table:
    """``rows`` once for each of ``ids``, with the id in ``column`` (rows found once that
    serve every one of several targets)."""
    labelled = (rows.append_column(column, pa.array(np.full(rows.num_rows, i, np.int64))) for i in ids)
    return pa.concat_tables(labelled)


def as_arrow(rows: Rows) -> pa.Table:
    """Rows in process (a per-row answer is small)."""
    return rows if isinstance(rows, pa.Table) else rows.toArrow()


def _serving(table: pa.Table, ids: list[int], shared: bool = True) -> pa.Table:
    """The rows of ``table`` that serve one of the targets ``ids`` (``shared``: or all)."""
    col = table.column(ROW_ID)
    mine = pc.is_in(col, value_set=pa.array(ids, pa.int64()))
    return table.filter(pc.or_kleene(mine, pc.is_null(col)) if shared else mine)


def _reads_serving(reads: Reads, ids: list[int]) -> Reads:
    """What each call read on its way to the targets ``ids``."""
    out: dict[CallKey, dict[str, pa.Table]] = {}
    for call, tables in reads.items():
        mine = {t: r for t, rows in tables.items() if (r := _serving(rows, ids, shared=False)).num_rows}
        if mine:
            out[call] = mine
    return out


def _distinct(table: pa.Table, key: Sequence[str] | None = None, once_each: bool = False) -> pa.Table:
    """``table`` without ``ROW_ID``, each row once (rows equal on their table's ``key``, where
    the rows hold it, are one). ``once_each``: ``table`` holds each row once per target, so
    where every row serves one target the rows are distinct already (a one-row question
    about the reconcile job at 1 M orders: 0.17 s of grouping 1 M rows saved)."""
    rows = table.drop_columns([ROW_ID])
    if once_each and one_value(table.column(ROW_ID)):
        return rows
    return unique_rows(rows, key if key and set(key) <= set(rows.column_names) else None)


def unique_rows(table: pa.Table, key: Sequence[str] | None = None) -> pa.Table:
    """Each row of ``table`` once, in the order of first appearance (any column type: nested
    reasons too). Flat columns are grouped by Arrow; nested ones through Python (a TPC-DS
    q70 row's 581 k rows took 16 s that way, most of its answer). With its source table's
    ``key``, rows equal on the key and on the ids they carry (``SEGMENT``, ``ROW_ID``) are one
    (4 integers to group, not 18 columns with the comments)."""
    names = table.column_names
    if table.num_rows < 2:
        return table
    if key:
        return first_rows(table, [*key, *(c for c in (SEGMENT, ROW_ID) if c in names)])
    if len(set(names)) == len(names) and not any(map(pa.types.is_nested, table.schema.types)):
        return distinct_flat(table)
    unique = {_sort_key(r): r for r in table.to_pylist()}
    return pa.Table.from_pylist(list(unique.values()), schema=table.schema)


def _sort_key(row: dict[str, Any]) -> str:
    return _SORT_KEY(row)


def _row_key(row: dict[str, Any]) -> Any:
    """A row's values as a dict key: the tuple where they hash (flat values), else its JSON."""
    values = tuple(row.values())
    try:
        hash(values)
    except TypeError:
        return _sort_key(row)
    return values


_SORT_KEY = json.JSONEncoder(sort_keys=True, default=str).encode  # json.dumps's, built once


def _count(rows: Rows) -> int:
    return rows.num_rows if isinstance(rows, pa.Table) else rows.count()


def first_rows_of(rows: pa.Table, n: int) -> list[dict[str, Any]]:
    """The first ``n`` rows of :func:`collect_rows`' order, the others never made dicts."""
    ordered = _sorted_in_arrow(rows, n) if rows.num_rows > n else None
    return collect_rows(ordered.slice(0, n)) if ordered is not None else collect_rows(rows)[:n]


def _sorted_in_arrow(table: pa.Table, first: int | None = None) -> pa.Table | None:
    """``table`` sorted by its columns, left to right, nulls last, where Arrow can sort every
    column (in C++); None where it cannot. ``first``: only that many rows are wanted, picked
    without sorting the others (TPC-H Q1 at SF 1, ten of a row's 2.9 M line items printed:
    a full sort was 1.0 s)."""
    names = table.column_names
    if len(set(names)) != len(names) or not all(map(_sortable, table.schema.types)):
        return None
    keys = [(c, "ascending") for c in names]
    if first is not None and first < table.num_rows:
        try:
            return table.take(pc.select_k_unstable(table, first, keys))  # in order, nulls last
        except pa.ArrowNotImplementedError:  # a type Arrow sorts but does not select on
            pass
    return table.sort_by(keys)


@gc_paused()
def collect_rows(rows: Rows) -> list[dict[str, Any]]:
    """All rows as plain dicts in a stable order (for reports and comparisons): sorted by
    their columns, left to right, nulls last, where Arrow can sort every column (in C++: a
    Python sort key per row was most of a 69 k-row answer's time); else by their JSON text."""
    table = as_arrow(rows)
    ordered = _sorted_in_arrow(table)
    if ordered is not None:
        found = to_pylist(ordered)
        return [_plain(r) for r in found] if any(map(_unplain, ordered.schema.types)) else found
    return sorted((_plain(r) for r in to_pylist(table)), key=_sort_key)


@dataclass(frozen=True)
class _Ids:
    """The ids of one table that any call read, each made a dict once, in
    :func:`collect_rows`' order: a call's list shares them (CDA Q21's 5 calls each read the
    same 57 k line items; a dict per id and call was 0.1 s of its answer). Shared: the
    answer's dicts are read, not changed."""

    table: pa.Table  # sorted as collect_rows sorts
    dicts: list[dict[str, Any]]

    @staticmethod
    def of(tables: list[pa.Table]) -> _Ids | None:
        every = unique_rows(pa.concat_tables(tables, promote_options="default"))
        if not joinable(every):
            return None
        every = every.sort_by([(c, "ascending") for c in every.column_names])
        return _Ids(every, collect_rows(every))


PLACE = "__place"
_CALL = "__call"  # which call read a row (AugmentedLineage._reads_by_call)


def placed(rows: pa.Table, table: pa.Table, on: Sequence[str]) -> pa.Table:
    """``rows`` with the ``PLACE`` (row number) of the row of ``table`` they equal on the
    columns ``on`` (a key of ``table``): found by an Arrow join on those columns alone,
    since a nested column cannot ride one."""
    places = pa.array(np.arange(table.num_rows, dtype=np.int64))
    keyed = table.select(list(on)).append_column(PLACE, places)
    return rows.join(keyed, list(on), join_type="inner", use_threads=False)


def joinable(table: pa.Table) -> bool:
    """Whether Arrow can find ``table``'s rows by joining on all of its columns."""
    return all(map(exact_key, table.columns))


def _sortable(dtype: pa.DataType) -> bool:
    return not (pa.types.is_nested(dtype) or pa.types.is_dictionary(dtype))


def _unplain(dtype: pa.DataType) -> bool:
    """Whether a column's Python values may need :func:`_plain`: nested or zoned time."""
    return pa.types.is_nested(dtype) or (pa.types.is_timestamp(dtype) and dtype.tz is not None)


def fmt_row(row: dict[str, Any]) -> str:
    """``k=v, …`` as a person reads it: text quoted, numbers, decimals and dates as written."""
    return ", ".join(f"{k}={shown(_plain(v))}" for k, v in row.items())


def shown(value: Any) -> str:
    """A value as people write it, not as Python's repr (``199314.5778``, not
    ``Decimal('199314.5778')``; ``1995-03-13``, not ``datetime.date(1995, 3, 13)``)."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if value is None:
        return "NULL"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return repr(value)


def reads_line(reads: dict[str, list[dict[str, Any]]], most: int = 5) -> str:
    """``table id, id; table id`` for the source rows a call read (ids: key values)."""
    parts = []
    for table, ids in reads.items():
        shown_ids = [shown(next(iter(i.values()))) if len(i) == 1 else shown(list(i.values())) for i in ids]
        more = f", … {len(ids) - most} more" if len(ids) > most else ""
        parts.append(f"{table} {', '.join(shown_ids[:most])}{more}")
    return "; ".join(parts)


def _more(n: int, pad: str = "  ") -> list[str]:
    return [f"{pad}... {n - SHOW_ROWS} more"] if n > SHOW_ROWS else []
