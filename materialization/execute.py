"""Run a task segment by segment, storing what the strategy asks for, and persist the run."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from materialization.capture import (
    KEY_MARKER,
    Capture,
    Capturer,
    at_key,
    derivable,
    lid_columns,
    packing,
)
from materialization.compile import Compiler, finish, runs_as_anti_join
from materialization.duck_plan import exact_in_duckdb
from materialization.formulas import capture_formulas
from materialization.garbage import OWNER, owner
from materialization.indexes import build_indexes
from materialization.store import ResultsStore, StoreError
from materialization.strategies import run_mode, stores
from models.checksums import udf_models
from reasoning_udfs.udf import ERROR_MARKER, UDFRowError, lookup
from segmenter.errors import TIE_MARKER, LineageError, OrderTieError
from segmenter.operators import Function, Node, Source, Task, to_dict
from segmenter.segments import Segment, render_segments

Progress = Callable[[str], None]
# local snapshots beyond it: the tags ride in the task, or a second pass writes them. None: any
# size, DuckDB spilling to disk and Spark composing the indexes where it still runs out of
# memory (indexes.build_indexes)
DERIVED_BYTES: int | None = None


class UDFError(LineageError):
    """A model UDF failed on a row while the task ran; nothing of the run was kept."""


def execute_run(
    spark: SparkSession,
    store: ResultsStore,
    task: Task,
    root: Segment,
    strategy: str,
    run_id: str,
    progress: Progress = lambda msg: None,
    capture: Capture | None = None,
    confidence: bool = False,
    reasons: str = "eager",
    read_in_place: list[dict[str, Any]] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Run ``task`` and commit it to the store atomically; returns the run record.

    ``capture``: eager lineage capture; ``confidence``: boolean lineage for confidences
    (needs strategy full: formulas are written over the stored intermediates); ``reasons``:
    "lazy" runs the task in normal mode (see :mod:`materialization.strategies`);
    ``read_in_place``: the fingerprints of the user's files the task reads (recorded);
    ``name``: the task's, if given (recorded)."""
    store.check_writable()  # a read-only store fails here, in one line, before any work
    staging = store.staging_dir(run_id)
    mode = run_mode(strategy, reasons) if capture is None or reasons == "lazy" else capture.mode
    started = time.perf_counter()
    shared = SharedResults(root)
    try:
        store.write_json(f"{staging}/{OWNER}", owner())  # `al gc` tells a dead writer's leftovers
        if capture is None:
            final, stored = _run_segments(spark, store, staging, root, strategy, mode, progress, shared)
            captured = None
        else:
            final, stored, captured = _capture_segments(
                spark, store, staging, task, root, capture, mode, progress, shared
            )
        progress("writing the task output")
        out_path = f"{staging}/output"
        with translate_task_errors():
            output_rows = store.write_parquet(finish(task, final), out_path)
        shared.release()
        task_seconds = time.perf_counter() - started
        record = {
            "run_id": run_id,
            "created": datetime.now(UTC).isoformat(),
            "strategy": strategy,
            "backend": capture.backend if capture is not None else "confidence" if confidence else "lazy",
            "mode": mode,
            "reasons": reasons,
            "task": to_dict(task),
            "segments": render_segments(root),
            "stored": stored,
            "output": {"dir": "output", "rows": output_rows, "bytes": store.size(out_path)},
            "udfs": {n.udf: lookup(n.udf).import_path() for n in task.root.walk() if isinstance(n, Function)},
        }
        if name:
            record["name"] = name
        record["models"] = udf_models(sorted(record["udfs"]))  # the weights the run was made with
        if captured is not None:
            progress("building the lineage indexes")
            captured["segments"][str(root.id)]["output"] = "output"
            index_started = time.perf_counter()
            captured.update(build_indexes(
                spark, store, staging, root, captured["segments"], captured["plan"], capture,
                shared.firsts, progress,
            ))  # fmt: skip
            captured["index_seconds"] = time.perf_counter() - index_started
            record["capture"] = captured
        if confidence:
            formulas_started = time.perf_counter()
            with translate_task_errors():
                record["confidence"] = capture_formulas(spark, store, staging, run_id, root, stored, progress)
            record["confidence"]["seconds"] = time.perf_counter() - formulas_started
        record["task_seconds"] = task_seconds
        record["files"] = store.manifest(staging)  # what `al verify` and every question check
        snapshots = {n.snapshot for n in task.root.walk() if isinstance(n, Source) and n.in_store}
        record["inputs"] = store.inputs(sorted(snapshots))
        record["read_in_place"] = read_in_place or []
        record["seconds"] = time.perf_counter() - started
        store.write_record(f"{staging}/run.json", record)
        store.commit_run(run_id)
    except BaseException:
        shared.release()
        store.delete(staging)
        raise
    return record


def _run_segments(
    spark: SparkSession,
    store: ResultsStore,
    staging: str,
    root: Segment,
    strategy: str,
    mode: str,
    progress: Progress,
    shared: SharedResults,
) -> tuple[DataFrame, dict[str, Any]]:
    """The task, segment by segment in UDF ``mode``, storing what the strategy keeps; returns
    the root's (unwritten) result and what was stored. A segment that computes what an earlier
    one computed is that one's result (``shared``)."""
    stored: dict[str, Any] = {}
    outputs: dict[int, DataFrame] = {}
    unread = _unread(root)
    for seg in root.post_order():
        first = shared.first_of(seg)
        if first is not seg:
            cache = str(first.id) not in stored and seg.id not in unread
            df = shared.copy(outputs[first.id], first, seg, cache=cache)
        else:
            inputs = {id(child.top): outputs[child.id] for child in seg.children}
            df = Compiler(spark, mode, inputs=lambda n, i=inputs: i.get(id(n))).compile(seg.top)
        if stores(strategy, seg, root):
            if str(first.id) in stored:
                progress(f"segment {seg.id} ({seg.pattern()}): its output is segment {first.id}'s, stored")
                stored[str(seg.id)] = shared.stored_copy(stored[str(first.id)], first)
            else:
                progress(f"segment {seg.id} ({seg.pattern()}): storing its output")
                df, stored[str(seg.id)] = _store_segment(spark, store, staging, seg, df, mode)
        outputs[seg.id] = df
    return outputs[root.id], stored


def _unread(root: Segment) -> frozenset[int]:
    """The segments a task's plan never reads: those below T₁ ⋉ T₂ where T₁ ▷ T₂ runs as
    Spark's anti-join (:func:`runs_as_anti_join`). A copy of T₁ there is not cached for a
    second use (TPC-H Q21 at SF 1: its T₁ cached made the fm run 2x plain Spark)."""
    found: set[int] = set()
    for seg in root.walk():
        right = seg.child_for(seg.leaves[-1]) if seg.is_d and runs_as_anti_join(seg.top) else None
        found |= {s.id for s in right.walk()} if right is not None else set()
    return frozenset(found)


class SharedResults:
    """Segments that compute the same rows, computed once (:meth:`Segment.firsts`): a later
    copy is the first one's result, renamed, and a first result that is not stored is kept
    in Spark's cache while the task runs."""

    def __init__(self, root: Segment) -> None:
        self.firsts = root.firsts()
        self.cached: list[DataFrame] = []

    def first_of(self, seg: Segment) -> Segment:
        return self.firsts[seg.id]

    def copy(self, df: DataFrame, first: Segment, seg: Segment, cache: bool) -> DataFrame:
        """``seg``'s result: ``df`` (``first``'s, with any columns a capture adds) under
        ``seg``'s column ids; ``cache``: ``df`` is computed, not read back from the store, so
        Spark keeps it after its first use."""
        if cache and not df.is_cached:
            df.persist()
            self.cached.append(df)
        names = {a.id: b.id for a, b in zip(first.top.columns, seg.top.columns, strict=True)}
        return df.toDF(*[names.get(c, c) for c in df.columns])  # one call, not one per column

    @staticmethod
    def stored_copy(info: dict[str, Any], first: Segment) -> dict[str, Any]:
        """What the run records for a copy of ``first``, whose output is stored (``info``):
        ``first``'s files, written once (read under the copy's column ids:
        :func:`materialization.restore.stored_columns`)."""
        return {**info, "bytes": 0, "same_as": first.id}

    def release(self) -> None:
        for df in self.cached:
            df.unpersist()
        self.cached.clear()


def _capture_segments(
    spark: SparkSession,
    store: ResultsStore,
    staging: str,
    task: Task,
    root: Segment,
    capture: Capture,
    mode: str,
    progress: Progress,
    shared: SharedResults,
) -> tuple[DataFrame, dict[str, Any], dict[str, Any]]:
    """The task with eager lineage capture: every non-root segment is stored (as Full does, in
    ``mode``: reasoning unless the capture drops reasoning lineage or the reasons are lazy)
    with its lineage ids, so that parents can refer to its rows; a copy of an earlier segment
    (``shared``) is that one's stored files, read under its own column ids, or where it calls
    a model (whose calls answers read by column id) a copy of them."""
    plan = capture.resolve(task)
    sources = {n.table: n for n in task.root.walk() if isinstance(n, Source)}
    plain = frozenset(
        t for t, attrs in plan.items()
        if len(attrs) == 1 and at_key(sources[t], attrs) and store.key_without_nulls(sources[t].snapshot)
    )  # fmt: skip
    packed = {t: found for t in plan if (found := _packing(store, sources[t], plan[t])) is not None}
    derived = _derived_in_process(store, staging, root)
    capturer = Capturer(spark, plan, mode, plain, derived, packed)
    again = _recomputed(store, root, derived, shared.firsts)
    unread = _unread(root)
    stored: dict[str, Any] = {}
    segments: dict[str, Any] = {}
    outputs: dict[int, DataFrame] = {}
    for seg in root.post_order():
        first = shared.first_of(seg)
        if seg.id in again:  # its output feeds its parent's plan; the index builder evaluates it
            progress(f"segment {seg.id} ({seg.pattern()}): not stored, derived with its parent's lineage")
            meta: dict[str, Any] = {"output": None, "lineage": None, "tags": {}, "recomputed": True}
            if first is seg:
                outputs[seg.id] = capturer.output(seg, _inputs(capturer, seg, outputs))
            else:
                outputs[seg.id] = shared.copy(outputs[first.id], first, seg, cache=seg.id not in unread)
                meta["same_as"] = first.id
            segments[str(seg.id)] = meta
            continue
        if first is not seg and seg is not root:  # the same rows, lineage ids and lineage
            copied = shared.copy(outputs[first.id], first, seg, cache=False)
            if not seg.functions:  # the first one's files (answers read a φ segment's calls by id)
                progress(f"segment {seg.id} ({seg.pattern()}): its output is segment {first.id}'s, stored")
                segments[str(seg.id)] = {**segments[str(first.id)], "same_as": first.id}
                outputs[seg.id] = copied
                stored[str(seg.id)] = shared.stored_copy(stored[str(first.id)], first)
                continue
            segments[str(seg.id)] = {**segments[str(first.id)], "output": f"segment-{seg.id}"}
            progress(f"segment {seg.id} ({seg.pattern()}): storing its output (segment {first.id}'s)")
            outputs[seg.id], stored[str(seg.id)] = _store_segment(spark, store, staging, seg, copied, mode)
            continue
        found = capturer.segment(seg, _inputs(capturer, seg, outputs), stored=seg is not root)
        meta = {"output": f"segment-{seg.id}", "lineage": None, "tags": found.tags}
        if found.derived:
            meta["derived"] = True
        if found.lineage is not None:
            progress(f"segment {seg.id} ({seg.pattern()}): capturing its lineage")
            meta["lineage"] = f"lineage-{seg.id}"
            store.write_parquet(found.lineage, f"{staging}/lineage-{seg.id}")
        if seg is root:
            outputs[seg.id] = found.output
        else:
            progress(f"segment {seg.id} ({seg.pattern()}): storing its output and lineage")
            stored_df, info = _store_segment(spark, store, staging, seg, found.output, mode)
            outputs[seg.id], stored[str(seg.id)] = stored_df, info
        if found.from_output is not None:
            progress(f"segment {seg.id} ({seg.pattern()}): pairing its stored rows with their frames")
            meta["lineage"] = f"lineage-{seg.id}"
            store.write_parquet(found.from_output(outputs[seg.id]), f"{staging}/lineage-{seg.id}")
        segments[str(seg.id)] = meta
    captured = {
        "capture": capture.to_dict(),
        "outer_joins": "native",  # captured as one join each (a run before: their rewrite)
        "plan": {t: list(a) for t, a in plan.items()},
        "segments": segments,
    }
    return outputs[root.id], stored, captured


def _inputs(capturer: Capturer, seg: Segment, outputs: dict[int, DataFrame]) -> dict[int, DataFrame]:
    """``seg``'s inputs with their tags, by leaf: source tables, and its children's outputs."""
    inputs = {}
    for j, leaf in enumerate(seg.leaves):
        child = seg.child_for(leaf)
        inputs[id(leaf)] = capturer.leaf_input(leaf, j, outputs[child.id] if child else None)
    return inputs


def _derived_in_process(store: ResultsStore, staging: str, root: Segment) -> frozenset[int]:
    """Aggregations, semi-joins and differences (:func:`derivable`) whose lineage the index
    builder derives in process from the source snapshots and the children's stored rows, with
    no tags in the task: the store and snapshots are local files (within ``DERIVED_BYTES``
    where set), and DuckDB evaluates the body's expressions and compares the values
    naming an output row as Spark does.
    TPC-H Q1 at SF 1: a 1.0 s Spark pass writing 6 M rows gone (DuckDB derives and writes the
    sorted pairs in 0.5 s). Q10: the tags' ``collect_list`` no longer makes the task's
    aggregation an object hash aggregate (capture with the index build +20 → +15 %)."""
    if not staging.startswith("file:"):
        return frozenset()
    return frozenset(
        seg.id for seg in root.walk()
        if derivable(seg)
        and _small_local(store, seg.leaves)
        and exact_in_duckdb(seg, lid_columns(seg))
    )


def _recomputed(
    store: ResultsStore, root: Segment, derived: frozenset[int], firsts: dict[int, Segment]
) -> frozenset[int]:
    """Segments an eager capture does not store: the index builder evaluates them again in
    process (``Frames.recomputed``), where each one's parent derives its lineage there
    (``derived``) or is itself evaluated again, so that nothing else needs its rows' lineage
    ids as the task made them. A join, an outer join, a filter, a difference or an
    aggregation whose lineage is derived, with no model call, DuckDB evaluating it exactly,
    over local snapshots (within ``DERIVED_BYTES`` where set); copies of one subtree
    (:meth:`Segment.firsts`) all of them or none. TPC-H Q20 at SF 1: the aggregation of a
    year's line items its outer join reads. Q13: its outer join's
    1.5 M rows; Q21: its difference, T₁ (a four-table join), T₁ ⋉ T₂ and T₁'s copy in it (the
    difference stored hashed every one of T₁'s 37 columns into its rows' lineage ids, where
    the task's plan, as Spark's own, reads 3 of them). Not a window: its tagged rows are
    its rows paired with their frames', each row repeated, which a parent window's values
    evaluated again over them would count (DuckDB's rank and sums over the repeats)."""
    parents = {c.id: s for s in root.walk() for c in s.children}

    def eligible(seg: Segment) -> bool:
        return (
            seg.id in parents
            and not seg.functions and (not seg.aggregations or seg.id in derived)
            and not seg.windowed
            and not any(c.is_reason for c in seg.top.columns)
            and exact_in_duckdb(seg, lid_columns(seg))
            and _small_local(store, seg.leaves)
        )  # fmt: skip

    copies: dict[int, list[Segment]] = {}
    for seg in root.walk():
        copies.setdefault(firsts[seg.id].id, []).append(seg)
    found = frozenset(s.id for group in copies.values() if all(map(eligible, group)) for s in group)
    while True:  # each one's parent derived, or itself evaluated again: down from the root
        kept = frozenset(
            s.id for group in copies.values()
            if all(s.id in found and parents[s.id].id in derived | found for s in group)
            for s in group
        )  # fmt: skip
        if kept == found:
            return found
        found = kept


def _packing(store: ResultsStore, source: Source, attrs: tuple[str, ...]) -> list[list[Any]] | None:
    """How ``source``'s rows are tagged by one bigint, where captured at a key of several
    integer columns whose ranges registration recorded (and that hold no NULL)."""
    ranges = store.key_ranges(source.snapshot)
    if len(attrs) < 2 or ranges is None or not at_key(source, attrs):
        return None
    named = {k.lower(): r for k, r in ranges.items()}  # as registration was given the key
    if any(a.lower() not in named for a in attrs):
        return None
    return packing(attrs, {a: named[a.lower()] for a in attrs}, {c.name: c.dtype for c in source.cols})


def _small_local(store: ResultsStore, leaves: Sequence[Node]) -> bool:
    sizes = [store.source_size(leaf) for leaf in leaves if isinstance(leaf, Source)]
    if None in sizes:
        return False
    return DERIVED_BYTES is None or sum(s for s in sizes if s is not None) <= DERIVED_BYTES


def _store_segment(
    spark: SparkSession, store: ResultsStore, staging: str, seg: Segment, df: DataFrame, mode: str
) -> tuple[DataFrame, dict[str, Any]]:
    path = f"{staging}/segment-{seg.id}"
    with translate_task_errors():
        rows = store.write_parquet(df, path)
    info = {"dir": f"segment-{seg.id}", "mode": mode, "rows": rows, "bytes": store.size(path)}
    return spark.read.schema(df.schema).parquet(path), info


@contextmanager
def translate_task_errors() -> Iterator[None]:
    """A UDF failure inside a Spark job becomes one readable line naming the UDF and row; a
    tie that a rewrite refuses (``raise_error`` in its SQL) one line naming the window."""
    try:
        yield
    except (Py4JJavaError, PySparkException, UDFRowError) as exc:  # the last: run in process
        for marker, error, prefix in _MARKED:
            found = re.search(f"{marker}(.*?){marker}", str(exc), re.S)
            if found:
                raise error(prefix + found.group(1).strip()) from None
        raise


# messages our code bracketed inside a Spark error: the error to raise, and its first words
_MARKED: tuple[tuple[str, type[LineageError], str], ...] = (
    (ERROR_MARKER, UDFError, "UDF "),
    (TIE_MARKER, OrderTieError, ""),
    (KEY_MARKER, StoreError, ""),
)
