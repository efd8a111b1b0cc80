"""Which source rows each model call read, found in the same pass as the per-row answers.

At a segment topped by function operators, the rows that reach it (numbered by the targets
they serve) are renumbered: each gets a fresh id whose *parent* is the id it had. Everything
traced below carries the fresh ids, so a source row's id climbs, parent by parent, to the
target it serves, and passes on the way the rows of every function segment it fed: the model
calls that read it. No engine learns of this; it is one more numbering of the targets.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from materialization.compile import ROW_ID
from segmenter.segments import Segment
from tracing.arrow_rows import exact_key, first_rows
from tracing.engines import PARENT, Engine, Settled
from tracing.lineage import PER_ROW_MAX, ByRow, CallKey, Reads, ReasoningRows, call_key, for_each, unique_rows

_ID, _CALL, _PLACE = "__id", "__call", "__place"

# per table: rows traced once for several ids (a subtrahend): the segment that read them, the
# rows, the ids they serve
Shared = dict[str, list[tuple[int, pa.Table, list[int]]]]


@dataclass
class Renumbering:
    parent: dict[int, int] = field(default_factory=dict)  # fresh id -> the id it refines
    calls: dict[int, list[CallKey]] = field(default_factory=dict)  # fresh id -> calls of its row
    next_id: int = PER_ROW_MAX  # below: the targets' own ids

    def renumber(self, seg: Segment, rows: Any, engine: Engine) -> Settled:
        """``rows`` (of ``seg``'s output, numbered) with fresh ids."""
        rel, fresh = engine.renumbered(rows, self.next_id)
        ids = fresh.column(ROW_ID).to_pylist()
        self.next_id += len(ids)
        self.parent.update(zip(ids, fresh.column(PARENT).to_pylist()))
        for fn in seg.functions:
            args = fresh.select([c.id for c in fn.arg_columns()]).to_pylist()
            names = [c.name for c in fn.arg_columns()]
            for i, values in zip(ids, args):
                inputs = dict(zip(names, values.values()))
                self.calls.setdefault(i, []).append(call_key(seg.id, fn.udf, inputs))
        return Settled(rel, len(ids), fresh.drop_columns([PARENT]))

    def _chain(self, i: int) -> Iterator[int]:
        yield i
        while i in self.parent:
            i = self.parent[i]
            yield i

    def _root(self, i: int) -> int:
        """The target id ``i`` refines (itself for a target)."""
        return list(self._chain(i))[-1]

    def roots(self, ids: list[int]) -> list[int]:
        """The targets ``ids`` refine, each once."""
        return sorted({self._root(i) for i in ids})

    def _roots(self, ids: pa.ChunkedArray) -> pa.Array:
        """The target each id refines, worked out once per distinct id (a difference's
        subtrahend repeats its rows for each id that reached it: 0.7 M rows for 5 ids)."""
        distinct = pc.unique(ids)
        roots = [None if i is None else self._root(i) for i in distinct.to_pylist()]
        return pc.take(pa.array(roots, pa.int64()), pc.index_in(ids, value_set=distinct))

    def root(self, table: pa.Table, key: list[str] | None = None) -> pa.Table:
        """``table`` with each id replaced by the target's it refines, each row once
        (``key``: its source table's, which says which rows are one)."""
        if not self.parent:
            return table
        at = table.schema.get_field_index(ROW_ID)
        return unique_rows(table.set_column(at, ROW_ID, self._roots(table.column(ROW_ID))), key)

    def rooted(self, by_row: ByRow, keys: dict[str, list[str]]) -> ByRow:
        return ByRow(
            {t: self.root(r, keys.get(t)) for t, r in by_row.source.items()},
            [replace(e, rows=self.root(e.rows, _call_inputs(e))) for e in by_row.reasoning],
            by_row.targets,
            {t: self.root(r, keys.get(t)) for t, r in by_row.via.items()},
        )

    def reads(self, source: dict[str, pa.Table], keys: dict[str, list[str]], shared: Shared) -> Reads:
        """The source rows (by table: their key values where the table has a key, else
        whole) each model call read on its way to each target (their ``ROW_ID``: a call with
        the same inputs may feed two targets from other rows). A ``shared`` part (a
        difference's subtrahend, traced once for every id that reached it) is read whole by
        every call on those ids' way: one table, labelled once per set of targets, goes to
        each of them (the retail job at 100 k orders: 65 k rows for each of 838 calls)."""
        out: Reads = {}
        for table, rows in source.items():
            if keys.get(table):  # a row is told by its key: Q21's 57 k line items, 4 columns not 17
                rows = rows.select([*keys[table], ROW_ID])
            ids = rows.column(ROW_ID)
            by_call = self._by_call(pc.unique(ids).drop_null().to_pylist())
            if not by_call:
                continue
            at = rows.schema.get_field_index(ROW_ID)
            rooted = rows.set_column(at, ROW_ID, self._roots(ids))
            if keys.get(table):
                for call, read in _per_call(rooted, ids, by_call, keys[table]):
                    out.setdefault(call, {})[table] = read
                continue
            for call, read_ids in by_call.items():  # whole rows, nested ones among them: apart
                read = rooted.filter(pc.is_in(ids, value_set=pa.array(read_ids, pa.int64())))
                out.setdefault(call, {})[table] = unique_rows(read)
        for table, parts in shared.items():
            for _, rows, ids in parts:
                rows = rows.select(keys[table]) if keys.get(table) else rows
                labelled: dict[tuple[int, ...], pa.Table] = {}
                for call, read_ids in self._by_call(ids).items():
                    roots = tuple(self.roots(read_ids))
                    if roots not in labelled:
                        labelled[roots] = for_each(rows, ROW_ID, roots)
                    mine = out.setdefault(call, {})
                    had = [mine[table]] if table in mine else []
                    mine[table] = pa.concat_tables([*had, labelled[roots]], promote_options="default")
        return out

    def _by_call(self, ids: list[int]) -> dict[CallKey, list[int]]:
        """Per model call, the ``ids`` on whose way up to their targets it lies."""
        found: dict[CallKey, list[int]] = {}
        for i in ids:
            for call in {c for j in self._chain(i) for c in self.calls.get(j, ())}:
                found.setdefault(call, []).append(i)
        return found


def _call_inputs(entry: ReasoningRows) -> list[str] | None:
    """The columns that tell a model's calls apart (their inputs: the value and reason are a
    function of them), where Arrow groups them exactly; None otherwise (rows then compared
    whole, the nested reason through Python: CDA Q21's 13 k calls, 0.12 s)."""
    rows = entry.rows
    inputs = list(entry.inputs)
    if not inputs or not all(exact_key(rows.column(c)) for c in inputs):
        return None
    return inputs


def _per_call(
    rooted: pa.Table, ids: pa.ChunkedArray, by_call: dict[CallKey, list[int]], key: list[str]
) -> Iterator[tuple[CallKey, pa.Table]]:
    """Each call's rows of ``rooted`` (by ``key``, with their target's ``ROW_ID``): those whose
    id (``ids``) is among the call's, each once, in their order; found by one join of the
    ids with every call's, not a filter and a group-by per call (CDA Q21 at SF 0.1, one row:
    5,529 calls, 2.3 s of its 2.9 s question)."""
    calls = list(by_call)
    pairs = pa.table({
        _ID: pa.array([i for c in calls for i in by_call[c]], pa.int64()),
        _CALL: pa.array(np.repeat(np.arange(len(calls)), [len(by_call[c]) for c in calls]), pa.int64()),
    })  # fmt: skip
    places = pa.table({_ID: ids, _PLACE: pa.array(np.arange(len(ids), dtype=np.int64))})
    found = places.join(pairs, _ID, join_type="inner", use_threads=False)
    found = found.sort_by([(_CALL, "ascending"), (_PLACE, "ascending")])
    read = rooted.take(found.column(_PLACE)).append_column(_CALL, found.column(_CALL))
    read = first_rows(read, [*key, ROW_ID, _CALL])  # each row once per target and call, in order
    bounds = np.searchsorted(read.column(_CALL).to_numpy(), np.arange(len(calls) + 1))
    for k, call in enumerate(calls):
        yield call, read.slice(bounds[k], bounds[k + 1] - bounds[k]).drop_columns([_CALL])
