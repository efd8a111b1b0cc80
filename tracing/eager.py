"""Lineage answers from an eager run's captured indexes (see materialization/indexes.py).

Backward: target output rows -> their lineage ids -> the backward indexes (+ the control
lineage of differences on the way) -> source rows and model calls, the same
:class:`AugmentedLineage` the tracing queries give. Forward: source rows (by id or predicate)
or model decisions -> the forward indexes -> the output rows that depend on them.
Everything runs in-process over the index files unless the answer is large.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import pyarrow as pa
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame, SparkSession

from materialization.capture import LID, lid_columns, lid_of
from materialization.compile import ref
from materialization.compressed_index import COMPRESSED
from materialization.indexes import index_name
from materialization.provrc.tuples import FN
from materialization.store import ResultsStore
from segmenter.errors import LineageError
from segmenter.operators import Function, Source, Task
from segmenter.segments import Segment
from tracing.allowed_sql import check_where
from tracing.compressed import open_compressed
from tracing.errors import NotCapturedError, TargetNotFoundError, first_line
from tracing.forward import ForwardLineage
from tracing.lineage import AugmentedLineage, ReasoningRows, TraceStat
from tracing.parquet_reader import ParquetReader, local_path


class PairIndex(Protocol):
    """How a run's (output row, lineage row) pairs are kept and looked up, per index name."""

    names: list[str]

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        """Distinct attribute values in the lineage of the output rows with ids ``lids``."""

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        """Ids of the output rows whose lineage holds one of the attribute values ``keys``."""


class ParquetPairs:
    """The eager backend's indexes: the pairs as Parquet, sorted per orientation."""

    def __init__(self, reader: ParquetReader, run_dir: str, meta: dict[str, Any]) -> None:
        self.reader = reader
        self.run_dir = run_dir
        self.meta = meta
        self.names = sorted(meta["indexes"])

    def _index(self, name: str, direction: str) -> str:
        return f"{self.run_dir}/{self.meta['indexes'][name][direction]['dir']}"

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        return self.reader.lookup(self._index(name, "backward"), lids).drop_columns([LID])

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        found = self.reader.lookup(self._index(name, "forward"), keys, [(LID, LID)])
        return set(found.column(LID).to_pylist())


class EagerIndex:
    """The captured lineage of one eager (or compressed) run."""

    def __init__(
        self, spark: SparkSession, store: ResultsStore, record: dict[str, Any], task: Task, root: Segment,
        storage: str = "pairs",
    ):
        self.spark = spark
        self.run_dir = store.run_dir(record["run_id"])
        self.record = record
        self.task = task
        self.root = root
        self.meta = record["capture"]
        self.reader = ParquetReader(spark, local_path(self.run_dir) is not None)
        self.sources = {n.table: n for n in task.root.walk() if isinstance(n, Source)}
        self.storage = storage
        self.pairs: PairIndex = (
            ParquetPairs(self.reader, self.run_dir, self.meta) if storage == "pairs"
            else open_compressed(store, self.run_dir, self.meta[COMPRESSED])
        )

    def _uri(self, directory: str) -> str:
        return f"{self.run_dir}/{directory}"

    @property
    def tables(self) -> list[str]:
        """Source tables whose lineage was captured."""
        return sorted(self.meta["plan"])

    def attrs(self, table: str) -> list[str]:
        return list(self.meta["plan"][table])

    def keyed(self, table: str) -> bool:
        """Whether ``table``'s lineage is on its key (rows), not a coarser attribute set."""
        source = self.sources[table]
        names = {c.id: c.name for c in source.cols}
        return self.attrs(table) == [names[k] for k in source.key]

    @property
    def _visible(self) -> list[tuple[str, str]]:
        """(column id, name) of the task's output columns."""
        return [(c.id, c.name) for c in self.task.output]

    def _require(self, direction: str) -> None:
        if direction not in self.meta["capture"]["directions"]:
            raise NotCapturedError(
                f"run {self.record['run_id']} did not capture {direction} lineage (capture directions "
                f"{self.meta['capture']['directions']}); ask with backend='lazy' or capture {direction!r}"
            )

    # --- backward -----------------------------------------------------------------------------
    def targets(self, chosen: DataFrame | None) -> tuple[pa.Table, list[int]]:
        """Visible rows and lineage ids of the chosen output rows (None: all of them)."""
        if chosen is None:
            rows = self.reader.scan(self._uri("output"), [*self._visible, (LID, LID)])
        else:
            named = chosen.select(
                *[ref(i).alias(n) for i, n in self._visible], lid_of(lid_columns(self.root)).alias(LID)
            )
            rows = named.toArrow()
        lids = sorted(set(rows.column(LID).to_pylist()))
        return rows.drop_columns([LID]), lids

    def rows_targets(self, rows: list[dict[str, Any]]) -> tuple[pa.Table, list[int]]:
        """Output rows equal (null-safely, on the columns given) to one of ``rows`` (dicts by
        column id: two output columns may share a name)."""
        order = [c.id for c in self.task.output]
        names = {c.id: c.name for c in self.task.output}
        cols = sorted({k for r in rows for k in r}, key=order.index)
        uri = self._uri("output")
        schema = self._schema(uri, [(c, c) for c in cols])
        try:
            given = pa.Table.from_pylist([{c: r.get(c) for c in cols} for r in rows], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            types = ", ".join(f"{names[f.name]} {f.type}" for f in schema)
            raise LineageError(f"rows= do not fit the output's column types ({types}): {exc}") from None
        keys = [(c, c) for c in cols]  # by id beside the names: two output columns may share one
        matched = self.reader.lookup(uri, given, [*keys, *self._visible, (LID, LID)], distinct=False)
        found = {tuple(r.values()) for r in matched.select(cols).to_pylist()}
        missing = [r for r in given.to_pylist() if tuple(r.values()) not in found]
        if missing:
            raise TargetNotFoundError(
                f"{len(missing)} of the given rows are not in the output of run {self.record['run_id']}, "
                f"e.g. { {names[c]: v for c, v in missing[0].items()} }"
            )
        return matched.drop_columns([*cols, LID]), sorted(set(matched.column(LID).to_pylist()))

    def _schema(self, uri: str, select: Sequence[tuple[str, str]]) -> pa.Schema:
        return self.reader.scan(uri, select, "FALSE").schema

    def backward(self, targets: pa.Table, lids: list[int]) -> AugmentedLineage:
        self._require("backward")
        keys = pa.table({LID: pa.array(lids, pa.int64())})
        stats: list[TraceStat] = []
        pairs: dict[str, list[pa.Table]] = {}
        for name in self.pairs.names:
            started = time.perf_counter()
            found = self.pairs.backward(name, keys)
            pairs.setdefault(name, []).append(found)
            stats.append(self._stat(f"backward index {name}", started, len(lids), name, found.num_rows))
        for d in self._controls_of(keys):
            for name, info in self.meta["controls"][str(d)].items():
                started = time.perf_counter()
                found = self.reader.scan(self._uri(info["dir"]))
                pairs.setdefault(name, []).append(found)
                stats.append(
                    self._stat(f"control lineage of segment {d}: {name}", started, 1, name, found.num_rows)
                )
        source: dict[str, pa.Table | DataFrame] = {}
        reasoning: list[ReasoningRows] = []
        for name, tables in sorted(pairs.items()):
            found = pa.concat_tables(tables, promote_options="permissive")
            found = found.group_by(found.column_names).aggregate([])
            started = time.perf_counter()
            if name.startswith("src-"):
                table = name[len("src-") :]
                source[table] = self._source_rows(table, found)
                stats.append(
                    self._stat(f"source rows of {table}", started, found.num_rows, table, found.num_rows)
                )
            else:
                seg = self._segment(int(name[len("fn-") :]))
                reasoning += self._calls(seg, found.rename_columns([LID]))
                stats.append(
                    self._stat(
                        f"model calls of segment {seg.id}", started, found.num_rows, name, found.num_rows
                    )
                )
        keys_ = {t: tuple(self.attrs(t)) for t in self.tables}
        scope = self._scope()
        return AugmentedLineage(
            source=source, reasoning=reasoning, queries=stats, targets=targets, keys=keys_, scope=scope
        )

    def _scope(self) -> str | None:
        """What a pruned or coarsened capture leaves out, for people reading the answer."""
        notes = []
        if set(self.tables) != set(self.sources):
            notes.append(f"captured tables: {', '.join(self.tables)}")
        notes += [f"{t} per {', '.join(self.attrs(t))}" for t in self.tables if not self.keyed(t)]
        return "; ".join(notes) or None

    def _controls_of(self, keys: pa.Table) -> list[int]:
        ctl = self.meta.get("ctl")
        if not ctl:
            return []
        found = self.reader.lookup(self._uri(ctl["dir"]), keys)
        return sorted(set(found.column("d").to_pylist()))

    def _source_rows(self, table: str, attrs: pa.Table) -> pa.Table | DataFrame:
        if not self.keyed(table):
            return attrs  # coarser granularity: the attribute values are the answer
        source = self.sources[table]
        return self.reader.semi(source.snapshot, attrs, [(c.name, c.name) for c in source.cols])

    def _segment(self, seg_id: int) -> Segment:
        return next(s for s in self.root.walk() if s.id == seg_id)

    def _stored(self, seg: Segment) -> str:
        return self._uri("output" if seg is self.root else self.record["stored"][str(seg.id)]["dir"])

    def _calls(self, seg: Segment, lids: pa.Table) -> list[ReasoningRows]:
        out = []
        for fn in seg.functions:
            rows = self.reader.semi(self._stored(seg), lids, _call_columns(fn))
            names = tuple(c.name for c in fn.arg_columns())
            out.append(ReasoningRows(fn.udf, seg.id, names, fn.value.name, fn.reason.name, rows))
        return out

    def _stat(self, what: str, started: float, rows_in: int, label: str, rows_out: int) -> TraceStat:
        return TraceStat(
            self.root.id, "index", what, time.perf_counter() - started, rows_in, {label: rows_out}
        )

    # --- forward ------------------------------------------------------------------------------
    def forward_sources(self, table: str, ids: Iterable[Any] | None, where: str | None) -> ForwardLineage:
        """Output rows that depend on the given rows of source ``table``: ``ids`` are values
        of its captured attributes (its key, unless a coarser granularity was captured), or
        ``where`` a SQL predicate over the table's columns."""
        started = time.perf_counter()
        if table not in self.sources:
            raise LineageError(f"the task does not read table {table!r} (it reads {sorted(self.sources)})")
        if table not in self.meta["plan"]:
            raise NotCapturedError(
                f"run {self.record['run_id']} did not capture table {table!r} (captured: {self.tables})"
            )
        attrs = self.attrs(table)
        if (ids is None) == (where is None):
            raise ValueError("give exactly one of ids= or where=")
        source = self.sources[table]
        if ids is not None:
            keys = self._given_keys(table, attrs, ids)
        else:
            keys = self._filtered(source.snapshot, [(a, a) for a in attrs], where, f"table {table}")
        name = index_name("src", table)
        lids = self._forward_lids(name, keys)
        what = (
            f"{keys.num_rows} {table} row(s)"
            if self.keyed(table)
            else f"{keys.num_rows} {table} {attrs} value(s)"
        )
        return self._answer(what, keys, lids, started)

    def forward_calls(self, udf: str, where: str | None) -> ForwardLineage:
        """Output rows that depend on the model calls of ``udf`` matching ``where`` (a SQL
        predicate over the call's input attribute names, value name and reason name)."""
        started = time.perf_counter()
        if not self.meta["capture"]["functions"]:
            raise NotCapturedError(f"run {self.record['run_id']} did not capture the reasoning lineage")
        segs = [(s, fn) for s in self.root.walk() for fn in s.functions if fn.udf == udf]
        if not segs:
            used = sorted({fn.udf for s in self.root.walk() for fn in s.functions})
            raise LineageError(f"the task calls no UDF {udf!r} (it calls {used or 'none'})")
        lids: set[int] = set()
        decisions = []
        for seg, fn in segs:
            name = index_name("fn", seg.id)
            calls = self._filtered(
                self._stored(seg), [*_call_columns(fn), (LID, LID)], where, f"calls of {udf}"
            )
            decisions.append(calls.drop_columns([LID]))
            lids |= self._forward_lids(name, calls.select([LID]).rename_columns([FN]))
        given = pa.concat_tables(decisions)
        return self._answer(f"{given.num_rows} call(s) of {udf}", given, lids, started)

    def _given_keys(self, table: str, attrs: list[str], ids: Iterable[Any]) -> pa.Table:
        rows = []
        for value in ids:
            if isinstance(value, dict):
                rows.append({a: value.get(a) for a in attrs})
            elif isinstance(value, (tuple, list)):
                if len(value) != len(attrs):
                    raise LineageError(f"id {tuple(value)!r} of {table} should have values for {attrs}")
                rows.append(dict(zip(attrs, value)))
            else:
                if len(attrs) != 1:
                    raise LineageError(f"ids of {table} are tuples of {attrs}, not {value!r}")
                rows.append({attrs[0]: value})
        schema = self._schema(self.sources[table].snapshot, [(a, a) for a in attrs])
        try:
            return pa.Table.from_pylist(rows, schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise LineageError(f"ids of {table} do not fit {schema}: {exc}") from None

    def _filtered(
        self, uri: str, select: Sequence[tuple[str, str]], where: str | None, what: str
    ) -> pa.Table:
        """Rows of ``uri`` matching ``where``, evaluated by Spark so that a predicate means
        what it means everywhere else in the API (Spark SQL: 0-based arrays, its functions)."""
        if where is not None:
            check_where(self.reader.spark, where)
        try:
            return self.reader.spark_scan(uri, select, where)
        except (AnalysisException, ParseException) as exc:
            raise LineageError(f"invalid where={where!r} on {what}: {first_line(exc)}") from None

    def _forward_lids(self, name: str, keys: pa.Table) -> set[int]:
        """Output rows whose lineage holds one of ``keys``: through the forward index (a table
        read only by the right side of differences has none) and through control lineage."""
        self._require("forward")
        lids: set[int] = set()
        if name in self.pairs.names:
            lids |= self.pairs.forward(name, keys)
        for d, sets in self.meta["controls"].items():
            info = sets.get(name)
            if info is None or not keys.num_rows:
                continue
            if self.reader.lookup(self._uri(info["dir"]), keys).num_rows:
                refs = self.reader.scan(
                    self._uri(self.meta["ctl"]["dir"]), [(LID, LID), ("d", "d")], f"d = {int(d)}"
                )
                lids |= set(refs.column(LID).to_pylist())
        return lids

    def _answer(self, what: str, given: pa.Table, lids: set[int], started: float) -> ForwardLineage:
        keys = pa.table({LID: pa.array(sorted(lids), pa.int64())})
        outputs = self.reader.lookup(self._uri("output"), keys, self._visible, distinct=False)
        return ForwardLineage(what, given, outputs, len(lids), time.perf_counter() - started)


def _call_columns(fn: Function) -> list[tuple[str, str]]:
    return [
        *[(c.id, c.name) for c in fn.arg_columns()],
        (fn.value.id, fn.value.name),
        (fn.reason.id, fn.reason.name),
    ]
