"""Algorithm 1: run the tracing queries segment by segment from the root, queueing the
intermediate lineage of each child segment, collecting source lineage at the source tables
and reasoning lineage at every segment topped by function operators. Which engine runs the
queries is the engine's business (:mod:`tracing.engines`)."""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from materialization.compile import ROW_ID
from materialization.duck_expressions import NotInProcess
from materialization.pushdown import Restriction
from segmenter.operators import Source
from segmenter.segments import Segment, control_reads
from tracing.arrow_rows import one_value
from tracing.call_reads import Renumbering, Shared
from tracing.engines import Engine
from tracing.lineage import (
    PLACE,
    SEGMENT,
    AugmentedLineage,
    ByRow,
    Deferred,
    ReasoningRows,
    TraceStat,
    as_arrow,
    entered_by,
    for_each,
    joinable,
    placed,
    unique_rows,
)
from tracing.queries import trace_d, trace_non_d, trace_outer

# a table's rows read by a segment: its id (or an outer join's check_id), the rows, shared ids
Part = tuple[int, Any, list[int] | None]
Read = Callable[[Source, pa.Table], pa.Table]  # a source's whole rows, by their key's values
Entry = tuple[Segment, Restriction | None, list[int] | None, int | None]
_TRACE = {"non-d": trace_non_d, "d": trace_d, "outer": trace_outer}
_KINDS = {"non-d": "Non-D", "d": "D", "outer": "Outer"}


def derive(
    root: Segment, targets: Restriction | None, engine: Engine, read: Read | None = None
) -> AugmentedLineage:
    """Augmented lineage of ``targets`` (rows of the root segment's output; None = all);
    numbered targets give it per target too (:class:`ByRow`). With ``read`` (a source's
    whole rows by their key's values), the rows only checked are traced by their key alone,
    counted, and read when asked for (:class:`Deferred`; reconcile's one-row question at
    1 M orders: 900 k orders and as many payments checked)."""
    # each entry: a segment, its targets, the target ids every row of it serves where it is
    # traced once for all of them (a difference's subtrahend: see _shared), and the label
    # of the outer join's check it serves, if any (Segment.check_id: what it reads is control)
    queue: deque[Entry] = deque([(root, targets, None, None)])
    # per table: the segment that read them, the rows, and the target ids they all serve where
    # they were traced once for several (see _shared)
    source: dict[str, list[Part]] = {}
    keys: dict[str, list[str]] = {}  # per table: its key's columns (a row's identity)
    checked: dict[str, list[Part]] = {}  # per table: rows only checked, by their key alone
    leaves: dict[str, Source] = {}
    control = control_reads(root)
    reasoning: list[ReasoningRows] = []
    stats: list[TraceStat] = []
    renumbering = Renumbering()
    while queue:
        seg, r, shared, check = queue.popleft()
        started = time.perf_counter()
        numbered = r is not None and r.numbered
        if seg.functions:
            if r is not None and r.complete:
                rows = engine.reasoned(seg, r.values)
            else:
                out = engine.output(seg, r)
                rows = engine.settle(engine.semi(out, r) if numbered else out).rows  # type: ignore[arg-type]
            if numbered:  # each row its own id below: the calls it feeds name what they read
                fresh = renumbering.renumber(seg, rows, engine)
                rows = fresh.rows
                r = fresh.restricting({c.id: c.id for c in seg.top.match_columns()}, True, True)
            for fn in seg.functions:
                picked = [*fn.arg_columns(), fn.value, fn.reason]
                reasoning.append(
                    ReasoningRows(
                        fn.udf,
                        seg.id,
                        tuple(c.name for c in fn.arg_columns()),
                        fn.value.name,
                        fn.reason.name,
                        engine.named(rows, picked, distinct=True),
                    )
                )
        keyed = None if read is None else _checked(seg, check, control)
        found = _TRACE[seg.kind](seg, r, engine, keyed)
        rows_out: dict[str, int | None] = {}
        for part in found:
            label = f"segment {part.child.id}" if part.child else f"table {part.leaf.table}"  # type: ignore[attr-defined]
            checking = seg.check_id if part.control and check is None else check
            serving = part.ids if part.ids is not None else shared
            if part.rows is None:  # an input of a difference: trace the child directly
                child: Segment = part.child  # type: ignore[assignment]
                all_for = _shared(child, part.targets)
                entry = (child, None, all_for) if all_for else (child, part.targets, serving)
                queue.append((*entry, checking))
                rows_out[label] = part.targets.rows if part.targets and part.targets.on else None
                continue
            rows_out[label] = (rows_out.get(label) or 0) + part.rows.count
            if part.child is None:
                leaf = part.leaf
                assert isinstance(leaf, Source)
                cols = leaf.key_cols if part.keyed else leaf.cols
                rows = engine.named(part.rows.rows, cols, distinct=False)
                keys[leaf.table], leaves[leaf.table] = list(leaf.key_names), leaf
                read_by = seg.id if checking is None else checking
                parts = checked if part.keyed else source
                parts.setdefault(leaf.table, []).append((read_by, rows, serving))
            elif part.rows.count:
                ids = {c.id: c.id for c in part.child.top.match_columns()}
                restriction = part.rows.restricting(ids, True, numbered and part.ids is None)
                queue.append((part.child, restriction, serving, checking))
        stats.append(
            TraceStat(
                seg.id,
                _KINDS[seg.kind],
                seg.pattern(),
                time.perf_counter() - started,
                None if r is None or not r.on else r.rows,
                rows_out,
            )
        )
    routes = root.routes()
    if targets is None or not targets.numbered:
        found = {t: engine.union_distinct([rows for _, rows, _ in parts]) for t, parts in source.items()}
        used = {t: [rows for s, rows, _ in ps if s not in control.get(t, {})] for t, ps in source.items()}
        contributing = {
            t: engine.union_distinct(r) if t in control else found[t] for t, r in used.items() if r
        }
        answer = AugmentedLineage(source=found, reasoning=reasoning, queries=stats, routes=routes)
        answer.control, answer.contributing = control, contributing
        if checked:
            _defer(answer, checked, keys, leaves, read)  # type: ignore[arg-type]
        return answer
    source = {t: [(seg, as_arrow(rows), ids) for seg, rows, ids in parts] for t, parts in source.items()}
    apart = {t: kept for t, parts in source.items() if (kept := [p for p in parts if p[2] is None])}
    wide = {table: _once(parts, keys[table]) for table, parts in apart.items()}
    narrow = {t: _narrow_key(rows, keys[t]) for t, rows in wide.items()}
    via = {table: _entered(parts, keys[table], narrow[table]) for table, parts in apart.items()}
    found = {t: _served(rows, apart[t], keys[t]) for t, rows in via.items()}
    by_row = ByRow(source=found, reasoning=reasoning, via=via).local()
    shared = {t: ps for t, parts in source.items() if (ps := [p for p in parts if p[2] is not None])}
    every, every_shared = _with_checked(by_row.source, shared, checked)  # type: ignore[arg-type]
    reads = renumbering.reads(every, keys, every_shared)
    rooted = _widened(renumbering.rooted(by_row, keys), wide, narrow)
    answer = _with_shared(rooted, shared, keys, renumbering).merged(stats, keys)  # type: ignore[arg-type]
    answer.reads = reads
    answer.routes = routes
    answer.control = control
    if checked:
        _defer(answer, checked, keys, leaves, read, renumbering)  # type: ignore[arg-type]
    return answer


def _checked(seg: Segment, check: int | None, control: dict[str, dict[int, Any]]) -> frozenset[int]:
    """The source inputs of ``seg`` whose rows it reads only as control rows (read under
    ``check``, an outer join's, where given): traced by their key alone."""
    read_by = seg.id if check is None else check
    return frozenset(
        id(leaf) for leaf in seg.leaves if isinstance(leaf, Source) and read_by in control.get(leaf.table, {})
    )


def _with_checked(
    source: dict[str, pa.Table], shared: Shared, checked: dict[str, list[Part]]
) -> tuple[dict[str, pa.Table], Shared]:
    """The rows (by key) of ``source`` and ``shared`` with those only ``checked`` beside
    them: what the model calls on their way read (:meth:`Renumbering.reads`)."""
    every, every_shared = dict(source), {t: list(ps) for t, ps in shared.items()}
    for table, parts in checked.items():
        apart = [rows for _, rows, ids in parts if ids is None]
        if apart:
            had = [every[table]] if table in every else []
            every[table] = pa.concat_tables([*had, *apart], promote_options="permissive")
        every_shared.setdefault(table, []).extend(p for p in parts if p[2] is not None)
    return every, every_shared


def _defer(
    answer: AugmentedLineage,
    checked: dict[str, list[Part]],
    keys: dict[str, list[str]],
    leaves: dict[str, Source],
    read: Read,
    renumbering: Renumbering | None = None,
) -> None:
    """``answer`` (and its rows apart, with the ``renumbering`` of their ids) given the rows
    only ``checked`` (by key): those it read for another reason are its rows there too (with
    the targets they were checked for); the others are :class:`Deferred`, counted, read when
    asked for."""
    by_row = answer.by_row
    for table, parts in checked.items():
        key, leaf = keys[table], leaves[table]
        if not all(joinable(rows.select(key)) for _, rows, _ in parts):
            raise NotInProcess(f"{table}'s key {key} holds a NULL or a floating value")  # Spark answers
        reader = functools.partial(read, leaf)
        if table not in answer.source:  # only checked: no row read yet
            answer.source[table] = reader(parts[0][1].select(key).slice(0, 0))
        had = as_arrow(answer.source[table])
        if by_row is None or renumbering is None:
            ids = unique_rows(pa.concat_tables([rows for _, rows, _ in parts]).select(key))
            answer.deferred[table] = Deferred(_unread(ids, had, key), reader)
            continue
        pairs = pa.concat_tables([_rooted(p, key, renumbering) for p in parts])
        if len(parts) > 1:  # each part holds a row once per target already (a DISTINCT split)
            pairs = unique_rows(pairs, key)
        found = placed(pairs, had, key)  # those read already: their rows, for these targets too
        more = had.take(found.column(PLACE)).append_column(ROW_ID, found.column(ROW_ID))
        mine = by_row.source.get(table)
        by_row.source[table] = more if mine is None else _union(mine, more.select(mine.column_names), key)
        via = [by_row.via[table]] if table in by_row.via else []
        by_row.via[table] = pa.concat_tables([*via, pairs], promote_options="permissive")
        later = _unread(pairs.select([*key, ROW_ID]), had, key)
        if later.num_rows:
            by_row.deferred[table] = Deferred(unique_rows(later, key) if len(parts) > 1 else later, reader)
            answer.deferred[table] = by_row.deferred[table].distinct()


def _rooted(part: Part, key: list[str], renumbering: Renumbering) -> pa.Table:
    """A part's rows (by ``key``) with the targets they serve and the segment that read them."""
    seg, rows, ids = part
    if ids is None:
        return entered_by(renumbering.root(rows.select([*key, ROW_ID]), key), seg)
    return entered_by(for_each(rows.select(key), ROW_ID, renumbering.roots(ids)), seg)


def _unread(rows: pa.Table, had: pa.Table, key: list[str]) -> pa.Table:
    """``rows`` whose ``key`` is not among the rows ``had``."""
    return rows.join(had.select(key), key, join_type="left anti", use_threads=False)


def _shared(child: Segment, targets: Restriction | None) -> list[int] | None:
    """The target ids of an "all of it, for each of these targets" restriction (a
    difference's subtrahend) that can be traced once, unnumbered, and its rows labelled with
    each id after (Q21: one pass, not 5 over 0.15 M rows); None where it cannot: the values
    are not held here, or a model call below must be told apart per target (its reads)."""
    if targets is None or targets.on or not targets.numbered or targets.local is None:
        return None
    if child.calls_models:
        return None
    return pc.unique(targets.local.column(ROW_ID)).to_pylist()


def _once(parts: list[Part], key: list[str]) -> pa.Table:
    """A table's rows in the answer, each once (told by its ``key``), without the ids: one
    part holds each row once per target already (a DISTINCT split), so for one target it is
    the answer (the rollup job's 250 k orders for one row: a group-by the less)."""
    tables = [t.drop_columns([ROW_ID]) if ROW_ID in t.column_names else t for _, t, _ in parts]
    if len(parts) == 1 and (ROW_ID not in parts[0][1].column_names or one_value(parts[0][1].column(ROW_ID))):
        return tables[0]
    return unique_rows(pa.concat_tables(tables, promote_options="default"), key)  # nullable or not


def _narrow_key(rows: pa.Table, key: list[str]) -> list[str] | None:
    """The key by which a table's rows are carried through the per-row bookkeeping and
    joined back to their other columns at the end (Q21: 0.7 M labelled rows of 17 columns,
    the comments among them, became 0.7 M of 4 integers); None where a join on it would not
    find every row again (:func:`joinable`: a NULL, an outer join's padding; a floating or
    nested key)."""
    return key if key and joinable(rows.select(key)) else None


def _entered(parts: list[Part], key: list[str], narrow: list[str] | None) -> pa.Table:
    """A table's rows in a per-row answer, each with the target it serves and the segment it
    entered by (only their ``narrow`` key's columns, where given)."""
    tables = []
    for seg, table, _ in parts:
        if narrow:
            table = table.select([*narrow, *(c for c in table.column_names if c == ROW_ID)])
        tables.append(entered_by(table, seg))
    rows = pa.concat_tables(tables, promote_options="default")  # ROW_ID nullable or not
    return rows if len(parts) == 1 else unique_rows(rows, key)  # one part: each row once per target


def _served(via: pa.Table, parts: list[Part], key: list[str]) -> pa.Table:
    """A table's rows per target, each once: ``via`` without the segments, as it is where one
    segment read them all (each row once per target there already: a group-by the less)."""
    rows = via.drop_columns([SEGMENT])
    return rows if len({seg for seg, _, _ in parts}) == 1 else unique_rows(rows, key)


def _with_shared(
    by_row: ByRow, shared: Shared, keys: dict[str, list[str]], renumbering: Renumbering
) -> ByRow:
    """``by_row`` with the ``shared`` rows, traced once for several ids (a difference's
    subtrahend), each labelled with the targets those ids refine. They skip the per-id
    bookkeeping of the rows traced apart (their ids climbing to the targets, their key joined
    back to their columns): the retail job at 1 M orders has 20 k of those, and 650 k orders and as many
    reviews checked for one target through every model call above them."""
    via, found = dict(by_row.via), dict(by_row.source)
    for table, parts in shared.items():
        labelled = [entered_by(for_each(r, ROW_ID, renumbering.roots(ids)), seg) for seg, r, ids in parts]
        key = keys[table]
        entered = pa.concat_tables(labelled, promote_options="default")
        serving = entered.drop_columns([SEGMENT])
        if len(labelled) > 1:  # two subtrahends may check one row
            entered, serving = unique_rows(entered, key), unique_rows(serving, key)
        if table not in found:
            via[table], found[table] = entered, serving
            continue
        via[table] = pa.concat_tables([via[table], entered], promote_options="default")
        found[table] = _union(found[table], serving, key)
    return replace(by_row, source=found, via=via)


def _union(rows: pa.Table, more: pa.Table, key: list[str]) -> pa.Table:
    """``rows`` and the rows of ``more`` that serve no target there already (each once)."""
    on = [*key, ROW_ID]
    if key and joinable(rows.select(on)) and joinable(more.select(on)):  # by the key alone (nested columns)
        places = pa.array(np.arange(more.num_rows, dtype=np.int64))
        keyed = more.select(on).append_column(PLACE, places)
        new = keyed.join(rows.select(on), on, join_type="left anti", use_threads=False).column(PLACE)
        kept = np.zeros(more.num_rows, dtype=bool)
        kept[new.to_numpy()] = True  # in their order, without sorting the places (1 M: 90 ms)
        return pa.concat_tables([rows, more.filter(kept)], promote_options="default")
    return unique_rows(pa.concat_tables([rows, more], promote_options="default"), key)


def _widened(by_row: ByRow, wide: dict[str, pa.Table], narrow: dict[str, list[str] | None]) -> ByRow:
    """``by_row`` with each table's rows, carried by their key, given their other columns."""

    def widen(table: str, rows: pa.Table) -> pa.Table:
        key = narrow[table]
        if not key:
            return rows
        full = wide[table]
        if rows.num_rows == full.num_rows and rows.select(key).equals(full.select(key)):
            joined, widened = rows, full  # each row once, in order (one target, one path): no join
        else:
            joined = placed(rows, full, key)
            widened = full.take(joined.column(PLACE))
        for name in rows.column_names:
            if name not in key:
                widened = widened.append_column(name, joined.column(name))
        return widened

    return replace(
        by_row,
        source={t: widen(t, r) for t, r in by_row.source.items()},
        via={t: widen(t, r) for t, r in by_row.via.items()},
    )
