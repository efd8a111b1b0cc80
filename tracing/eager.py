"""Lineage answers from an eager run's captured indexes (see materialization/indexes.py).

Backward: target output rows -> their lineage ids -> the backward indexes (+ the control
lineage of differences on the way) -> source rows and model calls, the same
:class:`AugmentedLineage` the tracing queries give. Forward: source rows (by id or predicate)
or model decisions -> the forward indexes -> the output rows that depend on them.
Everything runs in-process over the index files unless the answer is large.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import DataFrame

from materialization.capture import LID, at_key, lid_columns, lid_of
from materialization.compile import ROW_ID, ref
from materialization.compressed_index import COMPRESSED
from materialization.duck_expressions import NotInProcess, SqlType, output_predicate
from materialization.duck_plan import column_types
from materialization.indexes import DIFF, SEG, TABLE, index_name
from materialization.locations import local_path
from materialization.provrc.tuples import FN
from materialization.spark import SparkOf
from materialization.store import ResultsStore
from segmenter.errors import LineageError
from segmenter.operators import Function, Source, Task
from segmenter.segments import Segment, control_reads
from tracing.allowed_sql import check_where
from tracing.compressed import open_compressed
from tracing.errors import NotCapturedError, TargetNotFoundError, first_line
from tracing.forward import CONTRIBUTING, CONTROL, DEPENDENCE, ForwardLineage
from tracing.forward_index import forward_index
from tracing.lazy_reasons import Tell, with_reasons
from tracing.lineage import (
    PER_ROW_MAX,
    SEGMENT,
    AugmentedLineage,
    ByRow,
    CallKey,
    Deferred,
    Reads,
    ReasoningRows,
    TraceStat,
    as_arrow,
    call_key,
    entered_by,
    for_each,
)
from tracing.parquet_reader import ParquetReader, Rows, quoted

CALL = "__call"  # a model call's row id in its segment's stored output


class PairIndex(Protocol):
    """How a run's (output row, lineage row) pairs are kept and looked up, per index name."""

    names: list[str]

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        """Distinct attribute values in the lineage of the output rows with ids ``lids``."""

    def backward_pairs(self, name: str, lids: pa.Table) -> pa.Table:
        """(``LID``, attribute values): each of the output rows ``lids`` with its own lineage."""

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        """Ids of the output rows whose lineage holds one of the attribute values ``keys``."""


class ParquetPairs:
    """The eager backend's indexes: the pairs as Parquet, sorted per orientation."""

    def __init__(self, reader: ParquetReader, run_dir: str, meta: dict[str, Any]) -> None:
        self.reader = reader
        self.run_dir = run_dir
        self.meta = meta
        self.names = sorted(meta["indexes"])
        self._forward: dict[str, str] = {}  # index name -> the folder its forward lookups read

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        return self.backward_pairs(name, lids).drop_columns([LID])

    def backward_pairs(self, name: str, lids: pa.Table) -> pa.Table:
        return self.reader.lookup(f"{self.run_dir}/{self.meta['indexes'][name]['backward']['dir']}", lids)

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        if name not in self._forward:
            self._forward[name] = forward_index(self.run_dir, name, self.meta["indexes"][name])
        found = self.reader.lookup(self._forward[name], keys, [(LID, LID)])
        return set(found.column(LID).to_pylist())


class EagerIndex:
    """The captured lineage of one eager (or compressed) run."""

    def __init__(
        self, spark_of: SparkOf, store: ResultsStore, record: dict[str, Any], task: Task, root: Segment,
        storage: str = "pairs", tell: Tell | None = None,
    ):
        self.run_dir = store.run_dir(record["run_id"])
        self.record = record
        self.task = task
        self.root = root
        self.meta = record["capture"]
        self.reader = ParquetReader(spark_of, local_path(self.run_dir) is not None)
        self.lazy_reasons = record.get("reasons") == "lazy"  # models ran in normal mode: no reason stored
        self.tell = tell  # where a question says it computes such reasons
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
        return at_key(self.sources[table], self.attrs(table))

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
        """Visible rows (with their ``LID``) and lineage ids of the chosen output rows (None:
        all of them)."""
        if chosen is None:
            rows = self.reader.scan(self._uri("output"), [*self._visible, (LID, LID)])
        else:
            named = chosen.select(
                *[ref(i).alias(n) for i, n in self._visible], lid_of(lid_columns(self.root)).alias(LID)
            )
            rows = named.toArrow()
        return rows, sorted(set(rows.column(LID).to_pylist()))

    def where_targets(self, where: str) -> tuple[pa.Table, list[int]]:
        """:meth:`targets` for the output rows matching ``where`` (Spark SQL over the output's
        names), chosen in process: no Spark job. :class:`NotInProcess` where DuckDB might
        judge a row otherwise, or the store is not local: Spark chooses them then."""
        if not self.reader.local:
            raise NotInProcess("the run is not in a local store")
        test = output_predicate(where, self.task.output)
        rows = self.reader.scan(self._uri("output"), [*self._visible, (LID, LID)], test)
        return rows, sorted(set(rows.column(LID).to_pylist()))

    def drawn_targets(self, places: pa.Table) -> tuple[pa.Table, list[int]]:
        """:meth:`targets` for the output rows at the drawn ``places`` (:mod:`tracing.sample`),
        chosen in process: no Spark job. :class:`NotInProcess` where the store is not local."""
        if not self.reader.local:
            raise NotInProcess("the run is not in a local store")
        rows = self.reader.drawn(self._uri("output"), places, [*self._visible, (LID, LID)])
        return rows, sorted(set(rows.column(LID).to_pylist()))

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
        matched = matched.drop_columns(cols)
        return matched, sorted(set(matched.column(LID).to_pylist()))

    def _schema(self, uri: Rows, select: Sequence[tuple[str, str]]) -> pa.Schema:
        return self.reader.scan(uri, select, "FALSE").schema

    def backward(self, targets: pa.Table, lids: list[int]) -> AugmentedLineage:
        """The lineage of ``targets`` (output rows with their ``LID``); a few rows are also
        answered apart (:class:`ByRow`), from the same index lookups kept with their ``LID``."""
        self._require("backward")
        self._controls_read: dict[tuple[int, str], pa.Table] = {}  # this question's, read once
        numbered = targets.num_rows <= PER_ROW_MAX
        keys = pa.table({LID: pa.array(lids, pa.int64())})
        stats: list[TraceStat] = []
        pairs: dict[str, list[pa.Table]] = {}
        for name in self.pairs.names:
            started = time.perf_counter()
            found = self.pairs.backward_pairs(name, keys) if numbered else self.pairs.backward(name, keys)
            pairs.setdefault(name, []).append(found)
            stats.append(self._stat(f"backward index {name}", started, len(lids), name, found.num_rows))
        data = {name: list(tables) for name, tables in pairs.items()}  # the contributing rows
        controls = self._controls_of(keys)
        checked: set[str] = set()  # the indexes control lineage adds rows to
        checks: dict[str, list[tuple[pa.Table, int]]] = {}  # rows of an outer join's check, its label
        for d, serves in controls.items():
            seg = self._segment(d)
            what = "lineage of one-row segment" if seg.one_row else "control lineage of segment"
            for name in self.meta["controls"][str(d)]:
                started = time.perf_counter()
                found = self._control_rows(d, name)
                rows = for_each(found, LID, serves) if numbered else found
                pairs.setdefault(name, []).append(rows)
                if seg.one_row:  # a scalar subquery's rows, stored once: contributing
                    data.setdefault(name, []).append(rows)
                else:
                    checked.add(name)
                if seg.kind == "outer":
                    checks.setdefault(name, []).append((rows, seg.check_id))
                stats.append(self._stat(f"{what} {d}: {name}", started, 1, name, found.num_rows))
        source: dict[str, pa.Table | DataFrame] = {}
        deferred: dict[str, Deferred] = {}  # control rows, counted, read when asked
        reasoning: list[ReasoningRows] = []
        by_row = ByRow({}, [], self._numbered(targets)) if numbered else None
        reads: Reads = {}
        once = self.storage == "pairs" and len(lids) == 1  # an index holds a row's pairs once each
        for name, tables in sorted(pairs.items()):
            owned = pa.concat_tables(tables, promote_options="permissive")
            picked = owned.drop_columns([LID]) if numbered else owned
            found = picked if once and len(tables) == 1 else _distinct(picked)
            started = time.perf_counter()
            if name.startswith("src-"):
                table = name[len("src-") :]
                read = functools.partial(self._read_rows, table)
                if name in checked and self.keyed(table):  # only the contributing rows read now
                    parts = data.get(name) or [owned.slice(0, 0)]
                    used = pa.concat_tables(parts, promote_options="permissive")
                    used = _distinct(used.drop_columns([LID]) if numbered else used)
                    found, deferred[table] = used, Deferred(self._unused(found, used), read)
                source[table] = self._source_rows(table, found)
                if by_row is not None:
                    by_row.source[table] = self._owned(source[table], owned, by_row.targets)
                    if table in deferred:
                        later = self._owned(deferred[table].ids, owned, by_row.targets)
                        by_row.deferred[table] = Deferred(later, read)
                stats.append(
                    self._stat(f"source rows of {table}", started, found.num_rows, table, found.num_rows)
                )
            else:
                seg = self._segment(int(name[len("fn-") :]))
                calls = self._calls(seg, found.rename_columns([LID]))
                reasoning += calls
                if by_row is not None:
                    by_call = owned.rename_columns([c if c == LID else CALL for c in owned.column_names])
                    by_row.reasoning.extend(self._owned_calls(seg, by_call, by_row.targets))
                    reads.update(self._reads(seg, by_call, by_row.targets))
                stats.append(
                    self._stat(
                        f"model calls of segment {seg.id}", started, found.num_rows, name, found.num_rows
                    )
                )
        if by_row is not None:
            by_row.via.update(self._via(keys, controls, by_row, pairs, checks))
        contributing = None
        if by_row is None:  # many rows at once: the rows the data lineage reaches, apart
            contributing = {
                t: self._source_rows(t, _distinct(pa.concat_tables(data.get(n) or [pairs[n][0].slice(0, 0)])))
                for t in source
                if (n := f"src-{t}") in checked and t not in deferred
            } | {t: found for t, found in source.items() if f"src-{t}" not in checked or t in deferred}
        keys_ = {t: tuple(self.attrs(t)) for t in self.tables}
        return AugmentedLineage(
            source=source,
            reasoning=reasoning,
            queries=stats,
            targets=targets.drop_columns([LID]),
            keys=keys_,
            scope=self._scope(),
            by_row=None if by_row is None else replace(by_row, targets=by_row.targets.drop_columns([LID])),
            reads=reads,
            routes=self.root.routes(),
            run_id=self.record["run_id"],
            control=control_reads(self.root),
            contributing=contributing,
            deferred=deferred,
        )

    @staticmethod
    def _numbered(targets: pa.Table) -> pa.Table:
        return targets.append_column(ROW_ID, pa.array(range(targets.num_rows), pa.int64()))

    def _owned(self, rows: pa.Table | DataFrame, pairs: pa.Table, targets: pa.Table) -> pa.Table:
        """``rows`` (one table's answer, each row once) with the ``ROW_ID`` of each target
        whose own lineage, by ``pairs`` (``LID``, attribute values), holds them."""
        local = rows if isinstance(rows, pa.Table) else rows.toArrow()
        if targets.num_rows == 1:  # each row was read for the one target (Q21 at SF 1: 0.16 s)
            return for_each(local, ROW_ID, targets.column(ROW_ID).to_pylist())
        attrs = [c for c in pairs.column_names if c != LID]
        on = " AND ".join(f"r.{quoted(a)} IS NOT DISTINCT FROM p.{quoted(a)}" for a in attrs)
        return self._joined(local, pairs, targets, on, r_distinct=True)

    def _owned_calls(self, seg: Segment, pairs: pa.Table, targets: pa.Table) -> list[ReasoningRows]:
        """The model calls of ``seg``, each with the ``ROW_ID`` of the targets it serves."""
        calls = pa.table({LID: pairs.column(CALL)})
        out = []
        for fn in seg.functions:
            rows = self._call_rows(seg, fn, calls, (LID, CALL))
            owned = self._joined(rows, pairs, targets, f"r.{CALL} = p.{CALL}").drop_columns([CALL])
            names = tuple(c.name for c in fn.arg_columns())
            out.append(ReasoningRows(fn.udf, seg.id, names, fn.value.name, fn.reason.name, owned))
        return out

    def _reads(self, seg: Segment, pairs: pa.Table, targets: pa.Table) -> Reads:
        """The source rows each model call of ``seg`` read, with the ``ROW_ID`` of the targets
        it serves by ``pairs`` (``LID``, ``CALL``). A call is named by its inputs: two with the
        same inputs may have read other rows for other targets."""
        index = self.meta.get("reads", {}).get(str(seg.id))
        if not index:
            return {}  # a run captured before calls named their reads, or none read a table
        ids = pa.table({LID: pc.unique(pairs.column(CALL))})
        args = sorted({c.id for fn in seg.functions for c in fn.arg_columns()})
        stored = self.reader.lookup(self._stored(seg), ids, [*[(i, i) for i in args], (LID, CALL)])
        named: dict[CallKey, list[int]] = {}
        for row in stored.to_pylist():
            for fn in seg.functions:
                inputs = {c.name: row[c.id] for c in fn.arg_columns()}
                named.setdefault(call_key(seg.id, fn.udf, inputs), []).append(row[CALL])
        out: Reads = {}
        found = self.reader.lookup(self._uri(index["dir"]), ids)
        for name, columns in index["tables"].items():
            table = name[len("src-") :]
            stored_as, attrs = zip(*columns, strict=True)
            rows = found.filter(pc.equal(found.column(TABLE), name)).select([LID, *stored_as])
            read = self._joined(rows.rename_columns([CALL, *attrs]), pairs, targets, f"r.{CALL} = p.{CALL}")
            for call, ids_of in named.items():
                mine = read.filter(pc.is_in(read.column(CALL), value_set=pa.array(ids_of, pa.int64())))
                if mine.num_rows:
                    kept = mine.drop_columns([CALL])
                    out.setdefault(call, {})[table] = kept.group_by(kept.column_names).aggregate([])
        if DIFF in found.column_names:  # references (a run captured before them has the rows above)
            self._control_reads(found.filter(pc.is_valid(found.column(DIFF))), named, pairs, targets, out)
        return out

    def _control_reads(
        self, refs: pa.Table, named: dict[CallKey, list[int]], pairs: pa.Table, targets: pa.Table, out: Reads
    ) -> None:
        """Into ``out``, each call's rows of the differences' right inputs it depends on
        (``refs``: the call's ``LID`` and ``DIFF``): each input read once
        (``eager/control-<d>``) and given to every call that refers to it as those rows with
        the ``ROW_ID`` of the targets the call serves, not joined and made distinct per call
        (CDA Q21: 14 calls × 567 k line items, 3.1 s of a 4.2 s answer)."""
        served = self._joined(pa.table({CALL: refs.column(LID)}), pairs, targets, f"r.{CALL} = p.{CALL}")
        for call, ids_of in named.items():
            lids = pa.array(ids_of, pa.int64())
            ds = pc.unique(refs.filter(pc.is_in(refs.column(LID), value_set=lids)).column(DIFF)).to_pylist()
            row_ids = pc.unique(served.filter(pc.is_in(served.column(CALL), value_set=lids)).column(ROW_ID))
            for d in sorted(ds) if len(row_ids) else ():
                for name in self.meta["controls"].get(str(d), {}):
                    table = name[len("src-") :]
                    checked = for_each(self._control_rows(d, name), ROW_ID, row_ids.to_pylist())
                    own = out.setdefault(call, {}).get(table)
                    if own is not None:  # the rows it read that the check does not hold (few)
                        own = own.select(checked.column_names).cast(checked.schema)
                        rest = checked.join(own, keys=checked.column_names, join_type="right anti")
                        both = [rest.select(checked.column_names), checked]
                        checked = pa.concat_tables(both, promote_options="permissive")
                    out[call][table] = checked

    def _control_rows(self, d: int, name: str) -> pa.Table:
        """The rows of index ``name`` in the right input of difference ``d``, read once."""
        if (d, name) not in self._controls_read:
            info = self.meta["controls"][str(d)][name]
            self._controls_read[(d, name)] = self.reader.scan(self._uri(info["dir"]))
        return self._controls_read[(d, name)]

    def _via(
        self,
        lids: pa.Table,
        controls: dict[int, list[int]],
        by_row: ByRow,
        pairs: dict[str, list[pa.Table]],
        checks: dict[str, list[tuple[pa.Table, int]]],
    ) -> dict[str, pa.Table]:
        """Each table's rows of the per-row answer with the segment each entered by: the one
        segment that reads the table (an outer join's check, for the rows its control lineage
        gave: ``checks``, among the ``pairs`` found), or (two read it) what the run's via
        index says."""
        entries = self.root.entries()
        index = self.meta.get("via")
        stored: pa.Table | None = None
        found = {}
        for table, rows in by_row.source.items():
            attrs = self.attrs(table)
            segs = entries[table]
            name = index_name("src", table)
            if len(segs) == 1 and name in checks:
                found[table] = _placed(pairs[name], checks[name], segs[0], attrs, by_row.targets)
                continue
            if len(segs) == 1:
                named = [rows.select([*attrs, ROW_ID])]  # type: ignore[union-attr]
                if table in by_row.deferred:
                    named.append(by_row.deferred[table].ids.select([*attrs, ROW_ID]))
                united = pa.concat_tables(named, promote_options="permissive")
                found[table] = entered_by(united, segs[0])
                continue
            if not index:
                continue  # a run captured before answers gave rows' paths
            if stored is None:
                stored = self._via_pairs(self._uri(index["dir"]), lids, controls)
            columns, names = zip(*index["tables"][name], strict=True)
            mine = stored.filter(pc.equal(stored.column(TABLE), name)).select([LID, SEG, *columns])
            mine = mine.rename_columns([LID, SEGMENT, *names])
            owned = mine.join(by_row.targets.select([LID, ROW_ID]), LID).drop_columns([LID])  # type: ignore[union-attr]
            found[table] = owned.group_by(owned.column_names).aggregate([])
        return found

    def _via_pairs(self, uri: str, lids: pa.Table, controls: dict[int, list[int]]) -> pa.Table:
        """The via index's rows of the output rows ``lids``: theirs, and those of all of the
        right input of each difference they pass (``controls``: difference -> rows)."""
        found = self.reader.lookup(uri, lids)
        parts = [found]
        for d, serves in controls.items():
            rows = self.reader.scan(uri, None, f"{DIFF} = {int(d)}").drop_columns([LID])
            parts.append(for_each(rows, LID, serves).select(found.column_names))
        return pa.concat_tables(parts)

    def _joined(self, r: pa.Table, p: pa.Table, t: pa.Table, on: str, r_distinct: bool = False) -> pa.Table:
        """The rows ``r`` with the ``ROW_ID`` of the targets ``t`` whose pairs ``p`` (their
        ``LID``) match them ``on`` (DuckDB over the Arrow tables), each once. Where the rows
        ``r`` are distinct, the narrow pairs are made distinct, not the wide rows joined: a
        row then meets each ``LID`` once, and a target has one ``LID`` (the reconcile job's
        answer at 1 M orders: 1.9 M pairs of integers, not 1.9 M rows of every column)."""
        pairs = "(SELECT DISTINCT * FROM p) p" if r_distinct else "p"
        join = f"r JOIN {pairs} ON {on} JOIN t ON p.{quoted(LID)} = t.{quoted(LID)}"
        unique = "" if r_distinct else "DISTINCT "
        sql = f"SELECT {unique}r.*, t.{quoted(ROW_ID)} FROM {join}"
        return self.reader.query(sql, r=r, p=p, t=t.select([LID, ROW_ID]))

    def _scope(self) -> str | None:
        """What a pruned or coarsened capture leaves out, for people reading the answer."""
        notes = []
        if set(self.tables) != set(self.sources):
            notes.append(f"captured tables: {', '.join(self.tables)}")
        notes += [f"{t} per {', '.join(self.attrs(t))}" for t in self.tables if not self.keyed(t)]
        return "; ".join(notes) or None

    def _controls_of(self, keys: pa.Table) -> dict[int, list[int]]:
        """The lineage stored once that the output rows ``keys`` depend on (a difference's
        subtrahend, an outer join's check, a one-row segment's rows), by the segment it
        belongs to, each with the ids of the rows that do."""
        ctl = self.meta.get("ctl")
        if not ctl:
            return {}
        found = self.reader.lookup(self._uri(ctl["dir"]), keys)
        serves: dict[int, list[int]] = {}
        for lid, d in zip(found.column(LID).to_pylist(), found.column("d").to_pylist()):
            serves.setdefault(d, []).append(lid)
        return dict(sorted(serves.items()))

    def _unused(self, found: pa.Table, used: pa.Table) -> pa.Table:
        """The key values of ``found`` not among ``used`` (each distinct)."""
        on = " AND ".join(f"f.{quoted(a)} IS NOT DISTINCT FROM u.{quoted(a)}" for a in found.column_names)
        return self.reader.query(f"SELECT f.* FROM f ANTI JOIN u ON {on}", f=found, u=used)

    def _read_rows(self, table: str, attrs: pa.Table) -> pa.Table:
        """:meth:`_source_rows` in Arrow: deferred control rows, read when asked for."""
        return as_arrow(self._source_rows(table, attrs))

    def _source_rows(self, table: str, attrs: pa.Table) -> pa.Table | DataFrame:
        """``table``'s rows that ``attrs`` name (read in this process wherever the store is
        local, however many: TPC-H Q1 at SF 10, one row's 15 M line items collected from
        Spark passed ``spark.driver.maxResultSize``)."""
        if not self.keyed(table):
            return attrs  # coarser granularity: the attribute values are the answer
        source = self.sources[table]
        return self.reader.semi(source, attrs, [(c.name, c.name) for c in source.cols])

    def _segment(self, seg_id: int) -> Segment:
        return next(s for s in self.root.walk() if s.id == seg_id)

    def _stored(self, seg: Segment) -> str:
        return self._uri("output" if seg is self.root else self.record["stored"][str(seg.id)]["dir"])

    def _calls(self, seg: Segment, lids: pa.Table) -> list[ReasoningRows]:
        out = []
        for fn in seg.functions:
            rows: pa.Table | DataFrame
            if self.lazy_reasons:
                rows = self._call_rows(seg, fn, lids)
            else:
                rows = self.reader.semi(self._stored(seg), lids, _call_columns(fn))
            names = tuple(c.name for c in fn.arg_columns())
            out.append(ReasoningRows(fn.udf, seg.id, names, fn.value.name, fn.reason.name, rows))
        return out

    def _call_rows(
        self, seg: Segment, fn: Function, keys: pa.Table | None, *extra: tuple[str, str]
    ) -> pa.Table:
        """The stored rows of ``fn``'s calls that ``keys`` name (None: every call): the call's
        inputs, value and reason by the user's names, and ``extra`` columns. A run that ran its
        models in normal mode (``reasons="lazy"``) stored no reason: it is computed now for
        these calls alone, and cached in the run (:mod:`tracing.lazy_reasons`); a forward
        question filtering on reasons computes those of every call once."""
        stored = self._stored(seg)
        by_id = [(c.id, c.id) for c in (*fn.arg_columns(), fn.value)]
        picked = [*(by_id if self.lazy_reasons else _call_columns(fn)), *extra]
        rows = self.reader.scan(stored, picked) if keys is None else self.reader.lookup(stored, keys, picked)
        if not self.lazy_reasons:
            return rows
        reasoned = with_reasons(self.reader.con, self.run_dir, fn, rows, self._types, self.tell)
        names = dict(_call_columns(fn)) | {e: e for _, e in extra}
        return reasoned.rename_columns([names[c] for c in reasoned.column_names])

    @functools.cached_property
    def _types(self) -> dict[str, SqlType]:
        """The Spark type of every column of the run's tree (a model's arguments in DuckDB)."""
        return column_types(self.root)

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
            keys = self._filtered(source, [(a, a) for a in attrs], where, f"table {table}")
        name = index_name("src", table)
        used, checked = self._forward_lids(name, keys)
        what = (
            f"{keys.num_rows} {table} row(s)"
            if self.keyed(table)
            else f"{keys.num_rows} {table} {attrs} value(s)"
        )
        return self._answer(what, keys, used, checked, started)

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
        used: set[int] = set()
        checked: set[int] = set()
        decisions = []
        for seg, fn in segs:
            name = index_name("fn", seg.id)
            if self.lazy_reasons and where is not None and fn.reason.name in where:
                every = self._call_rows(seg, fn, None, (LID, LID))  # their reasons computed now
                calls = self._filtered(every, None, where, f"calls of {udf}")
            else:
                picked = [*_call_columns(fn, not self.lazy_reasons), (LID, LID)]
                calls = self._filtered(self._stored(seg), picked, where, f"calls of {udf}")
            decisions.append(calls.drop_columns([LID]))
            found = self._forward_lids(name, calls.select([LID]).rename_columns([FN]))
            used, checked = used | found[0], checked | found[1]
        given = pa.concat_tables(decisions)
        return self._answer(f"{given.num_rows} call(s) of {udf}", given, used, checked, started)

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
        schema = self._schema(self.sources[table], [(a, a) for a in attrs])
        try:
            return pa.Table.from_pylist(rows, schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise LineageError(f"ids of {table} do not fit {schema}: {exc}") from None

    def _filtered(
        self, uri: Rows | pa.Table, select: Sequence[tuple[str, str]] | None, where: str | None, what: str
    ) -> pa.Table:
        """Rows of ``uri`` matching ``where``, evaluated by Spark so that a predicate means
        what it means everywhere else in the API (Spark SQL: 0-based arrays, its functions)."""
        if where is not None:
            check_where(self.reader.spark, where)
        try:
            return self.reader.spark_scan(uri, select, where)
        except (AnalysisException, ParseException) as exc:
            raise LineageError(f"invalid where={where!r} on {what}: {first_line(exc)}") from None

    def _forward_lids(self, name: str, keys: pa.Table) -> tuple[set[int], set[int]]:
        """Output rows whose lineage holds one of ``keys``: as contributing rows, through the
        forward index (a table read only by the right side of differences has none) and a
        one-row segment's rows stored once, and as control rows only, through control
        lineage."""
        self._require("forward")
        used: set[int] = set()
        lids: set[int] = set()
        if name in self.pairs.names:
            used = self.pairs.forward(name, keys)
        for d, sets in self.meta["controls"].items():
            info = sets.get(name)
            if info is None or not keys.num_rows:
                continue
            if self.reader.lookup(self._uri(info["dir"]), keys).num_rows:
                refs = self.reader.scan(
                    self._uri(self.meta["ctl"]["dir"]), [(LID, LID), ("d", "d")], f"d = {int(d)}"
                )
                found = set(refs.column(LID).to_pylist())
                if self._segment(int(d)).one_row:  # a scalar subquery's rows: contributing
                    used |= found
                else:
                    lids |= found
        return used, lids - used

    def _answer(
        self, what: str, given: pa.Table, used: set[int], checked: set[int], started: float
    ) -> ForwardLineage:
        """The output rows of ``used`` and ``checked`` lineage ids, each with its dependence."""
        keys = pa.table({LID: pa.array(sorted(used | checked), pa.int64())})
        rows = self.reader.lookup(self._uri("output"), keys, [*self._visible, (LID, LID)], distinct=False)
        contributing = pc.is_in(rows.column(LID), value_set=pa.array(sorted(used), pa.int64()))
        kinds = pc.if_else(contributing, CONTRIBUTING, CONTROL)
        outputs = rows.drop_columns([LID]).append_column(DEPENDENCE, kinds)
        return ForwardLineage(what, given, outputs, len(used | checked), time.perf_counter() - started)


def _call_columns(fn: Function, reason: bool = True) -> list[tuple[str, str]]:
    return [
        *[(c.id, c.name) for c in fn.arg_columns()],
        (fn.value.id, fn.value.name),
        *([(fn.reason.id, fn.reason.name)] if reason else []),
    ]


def _placed(
    found: list[pa.Table],
    checks: list[tuple[pa.Table, int]],
    reader: int,
    attrs: list[str],
    targets: pa.Table,
) -> pa.Table:
    """A table's rows (``attrs``) per target (``ROW_ID``) with the segment each entered by,
    from the narrow pairs (``LID``, ``attrs``) the answer ``found``: ``reader``, the one
    segment that reads the table, or the label of the outer join's check whose control
    lineage gave them (``checks``); no via index needed."""
    labelled = [*checks, *((rows, reader) for rows in found if all(rows is not c for c, _ in checks))]
    parts = [for_each(rows.select([LID, *attrs]), SEGMENT, [label]) for rows, label in labelled]
    united = pa.concat_tables(parts, promote_options="permissive")
    owned = united.join(targets.select([LID, ROW_ID]), LID).drop_columns([LID])
    return owned.group_by(owned.column_names).aggregate([])


def _distinct(pairs: pa.Table) -> pa.Table:
    return pairs.group_by(pairs.column_names).aggregate([])
