"""Compose the segments' captured lineage into end-to-end lineage indexes of a run.

For every captured source table (``src-<table>``) and every segment topped by function
operators (``fn-<segment>``, the model calls whose reasons belong to an output row's
reasoning lineage) the run gets:

    eager/backward/<name>/   (__lid, attrs...)  sorted by __lid: output row -> its lineage
    eager/forward/<name>/    the same pairs sorted by attrs: lineage row -> output rows

written as Parquet with small row groups, so a lookup reads one row group. A difference
T1 − T2 on the way adds control lineage (forward paper §3.4, the paper's D-segment rule):
every output row that passes through its left input depends on all of T2. Rather than repeat
T2's lineage for every such row, ``eager/ctl`` holds (__lid, d) pairs and
``eager/control-<d>/<name>/`` the lineage of all of T2, once; an outer join's padded rows
refer the same way to its check, T₁ ⋉ T₂, the lineage of its matched rows, and the rows
joined with a one-row segment (an uncorrelated scalar subquery) to all of its lineage,
``eager/control-<segment>``, which an answer counts as contributing. With the reasoning lineage,
``eager/reads-<segment>/`` pairs each model call (its segment row's __lid) with the source
rows it read (``__table`` names each row's table; ``__d``, a difference whose right input's
rows, ``eager/control-<d>``, it also depends on), so an answer names them per call. A table
that two segments read (Q2's supplier: the query and its min-cost subquery) gets
``eager/via/``: its pairs with ``__seg``, the segment each row entered by (``__d`` the
difference whose right input it is, for control lineage), so an answer gives each row's path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import duckdb
from pyspark.sql import SparkSession

from materialization import duck
from materialization.capture import LID, MATCHED, Capture, distinct_as_captured, traced_leaves
from materialization.compressed_index import COMPRESSED, write_compressed, write_paths
from materialization.index_frames import REF, Frames, SparkFrames, frames_for
from materialization.provrc.paths import Step, encode_paths
from materialization.provrc.tuples import FN
from materialization.restore import stored_columns
from materialization.store import ResultsStore
from segmenter.operators import Source
from segmenter.segments import Segment

TABLE = "__table"  # which source table a call's read row is from
SEG = "__seg"  # the segment that read a source row
DIFF = "__d"  # the difference whose right input holds a row (control lineage; else null)


def index_name(kind: str, what: str | int) -> str:
    return f"{kind}-{what}"


class IndexBuilder:
    """Reads what the capture stored under ``staging`` and writes the run's indexes, composed
    by ``frames`` (Spark, or DuckDB in process: :mod:`materialization.index_frames`)."""

    def __init__(
        self,
        frames: Frames,
        store: ResultsStore,
        staging: str,
        root: Segment,
        segments: dict[str, dict[str, Any]],
        plan: Mapping[str, Sequence[str]],
        capture: Capture,
        firsts: dict[int, Segment],
    ) -> None:
        self.f = frames
        self.store = store
        self.staging = staging
        self.root = root
        self.segments = segments  # segment id -> {"output": dir, "lineage": dir, "tags": {...}}
        self.plan = plan
        self.capture = capture
        self._composed: dict[int, tuple[dict[str, Any], Any | None]] = {}
        self._controls: dict[int, dict[str, Any]] = {}
        self._firsts = firsts  # each segment's first equal one (Segment.firsts)
        self._by_id = {s.id: s for s in root.walk()}
        self._again: dict[int, tuple[Any, Any, dict[str, dict[str, Any]]]] = {}

    def _read(self, directory: str) -> Any:
        return self.f.read(f"{self.staging}/{directory}")

    def _output(self, seg: Segment) -> Any:
        """``seg``'s stored output (with its rows' lineage ids); a copy's (``same_as``) is
        the first one's files, under the copy's column ids."""
        meta = self.segments[str(seg.id)]
        if meta.get("recomputed"):
            return self._recomputed(seg)[0]
        rel = self._read(meta["output"])
        return self._renamed(rel, seg) if "same_as" in meta else rel

    def _renamed(self, rel: Any, seg: Segment) -> Any:
        """``rel``, a relation of the first segment equal to copy ``seg``, under ``seg``'s
        column ids (the record's ``same_as``, checked against the tree)."""
        names = dict(stored_columns(self.segments[str(seg.id)], seg, self._firsts))
        return self.f.select(rel, [(c, names.get(c, c)) for c in self.f.columns(rel)])

    def _recomputed(self, seg: Segment) -> tuple[Any, Any, dict[str, dict[str, Any]]]:
        """A segment the capture did not store, evaluated again here (``Frames.recomputed``):
        its output, its tagged rows, how to read its tags; a copy's (``same_as``) are its
        first one's, renamed."""
        if seg.id not in self._again:
            if "same_as" in self.segments[str(seg.id)]:
                output, rows, tags = self._recomputed(self._firsts[seg.id])
                self._again[seg.id] = (self._renamed(output, seg), self._renamed(rows, seg), tags)
            else:
                kids = {j: seg.child_for(leaf) for j, leaf in enumerate(seg.leaves)}
                children = {j: self._output(child) for j, child in kids.items() if child is not None}
                self._again[seg.id] = self.f.recomputed(seg, self.plan, children)
        return self._again[seg.id]

    def out_lids(self, seg: Segment) -> Any:
        return self.f.lids(self._output(seg))

    def compose(self, seg: Segment) -> tuple[dict[str, Any], Any | None]:
        """(__lid, attrs) pairs per index name for every row ``seg`` captured, and the
        (__lid, d) control references of the differences on their way."""
        if seg.id in self._composed:
            return self._composed[seg.id]
        first = self._firsts[seg.id]
        if first is not seg and not first.calls_models:
            found = self._copy(first, seg)
            self._composed[seg.id] = found
            return found
        f = self.f
        parts: dict[str, list[Any]] = {}
        ctl: list[Any] = []
        for target, pairs in self.steps(seg):
            if isinstance(target, Source):
                tagged = f.with_value(pairs, SEG, seg.id)
                parts.setdefault(index_name("src", target.table), []).append(tagged)
                continue
            below, below_ctl = self.compose(target)
            if target.one_row:  # each row joined with its row shares all its lineage: once
                self._share(target, below)
                ctl.append(f.with_value(f.select(pairs, [(LID, LID)]), "d", target.id))
            else:
                distinct = self._distinct(target)
                for name, rel in below.items():
                    parts.setdefault(name, []).append(f.through(pairs, rel, name in distinct))
            if below_ctl is not None:
                ctl.append(f.through(pairs, below_ctl))
        if seg.functions and self.capture.functions:
            lids = self.out_lids(seg)
            parts.setdefault(index_name("fn", seg.id), []).append(f.select(lids, [(LID, LID), (LID, FN)]))
        if seg.is_d:
            ctl.append(f.with_value(self.out_lids(seg), "d", seg.id))
            self._controls[seg.id] = self.control(seg)
        if seg.kind == "outer":
            meta = self.segments[str(seg.id)]
            if meta.get("recomputed"):
                lineage = self._recomputed(seg)[1]
            else:
                lineage = self._read(meta["lineage"] or meta["output"])
            matched, padded = (f.lids(f.where_equal(lineage, MATCHED, m)) for m in (True, False))
            self._controls[seg.id] = self._check(seg, parts, ctl, matched)
            ctl.append(f.with_value(padded, "d", seg.id))
        found = ({name: f.union(rels) for name, rels in parts.items()}, f.union(ctl) if ctl else None)
        self._composed[seg.id] = found
        return found

    def _distinct(self, seg: Segment) -> frozenset[str]:
        """The indexes whose pairs ``seg`` composes distinct as they are."""
        return frozenset(index_name("src", t) for t in distinct_as_captured(seg, self.plan))

    def _copy(self, first: Segment, seg: Segment) -> tuple[dict[str, Any], Any | None]:
        """What ``seg`` composes, from ``first``'s (an equal subtree, composed once and kept):
        the same pairs, the segment ids of ``seg``'s subtree in them."""
        f = self.f
        parts, ctl = self.compose(first)
        pairs = list(zip(first.post_order(), seg.post_order(), strict=True))
        ids = {a.id: b.id for a, b in pairs} | {a.check_id: b.check_id for a, b in pairs if a.kind == "outer"}
        for d in [d for d in ids if d in self._controls]:
            self._controls[ids[d]] = {n: f.renumbered(rel, SEG, ids) for n, rel in self._controls[d].items()}
        kept = {name: f.keep(rel) for name, rel in parts.items()}
        renumbered = {name: f.renumbered(rel, SEG, ids) for name, rel in kept.items()}
        return renumbered, (f.renumbered(f.keep(ctl), "d", ids) if ctl is not None else None)

    def steps(self, seg: Segment) -> Iterator[tuple[Segment | Source, Any]]:
        """Per input of ``seg`` what its rows were derived from: (__lid, __ref) pairs to a
        child segment's rows, or (__lid, attrs...) pairs to a source table's."""
        meta = self.segments[str(seg.id)]
        tags = meta["tags"]
        if meta.get("recomputed"):
            _, lineage, tags = self._recomputed(seg)
        elif not tags:
            return
        elif meta.get("derived"):  # from the inputs, and the output's lineage ids
            children = {
                j: self._output(child)
                for j, leaf in enumerate(traced_leaves(seg))
                if (child := seg.child_for(leaf)) is not None
            }
            lineage = self.f.derived(seg, self.plan, self._output(seg), children)
            if len(tags) > 1 or children:  # read by each tag's pairs, or composed with each
                lineage = self.f.keep(lineage)  # table below a child: evaluated once
        else:
            lineage = self._read(meta["lineage"] or meta["output"])
        for tag, info in tags.items():
            leaf = seg.leaves[info["leaf"]]
            child = seg.child_for(leaf)
            if "fields" in info:  # a source row's attributes, written flat
                pairs = self.f.select(lineage, [(LID, LID), *((c, a) for c, a in info["fields"])])
            elif "packed" in info:  # a source row's key packed into one bigint
                pairs = self.f.tag_pairs(lineage, tag, info["array"], expand=False)
                pairs = self.f.unpacked(pairs, info["packed"])
            elif "attr" in info:  # a source row's one key value, as is
                pairs = self.f.tag_pairs(lineage, tag, info["array"], expand=False)
                pairs = self.f.select(pairs, [(LID, LID), (REF, info["attr"])])
            else:
                pairs = self.f.tag_pairs(lineage, tag, info["array"], expand=child is None)
            if child is not None:
                yield child, pairs
            else:
                assert isinstance(leaf, Source)
                yield leaf, pairs

    def _share(self, seg: Segment, below: dict[str, Any]) -> None:
        """The lineage of one-row segment ``seg`` (its composed pairs ``below``), written once
        as ``control-<seg>`` and referred to from every row that joined its row, as a
        difference's right input is: an uncorrelated scalar subquery's rows are every output
        row's (TPC-DS q14a: 100 rows × 130 k line items; TPC-H Q11 at SF 1: 1,048 × 32 k).
        Its own references (differences below it) stay with the rows that refer to it; an
        answer counts these rows as contributing (the segment is not a difference)."""
        if seg.id not in self._controls:
            f, lids = self.f, self.out_lids(seg)
            self._controls[seg.id] = {name: f.drop(f.semi(rel, lids), LID) for name, rel in below.items()}

    def control(self, seg: Segment) -> dict[str, Any]:
        """Lineage of ALL of a difference's right input: what every row of its output that
        passes the difference depends on (with the segment that read each row)."""
        f = self.f
        right = seg.leaves[1]
        child = seg.child_for(right)
        if child is None:
            assert isinstance(right, Source)
            attrs = self.plan.get(right.table)
            if attrs is None:
                return {}
            return {index_name("src", right.table): f.with_value(f.source(right, attrs), SEG, seg.id)}
        below, below_ctl = self.compose(child)
        lids = self.out_lids(child)
        found = {name: [f.drop(f.semi(rel, lids), LID)] for name, rel in below.items()}
        return self._with_controls(found, below_ctl, lids)

    def _with_controls(
        self, found: dict[str, list[Any]], ctl: Any | None, lids: Any, check: int | None = None
    ) -> dict[str, Any]:
        """``found``'s relations per index name, united with the lineage stored once that the
        rows ``lids`` refer to (their references ``ctl``: a difference's or outer join's
        control lineage, a one-row segment's); a one-row segment's source rows labelled
        ``check`` where given (an outer join's check reads them)."""
        f = self.f
        if ctl is not None:
            for d in f.values(f.semi(ctl, lids), "d"):
                for name, rel in self._controls[d].items():
                    if check is not None and self._by_id[d].one_row and name.startswith("src-"):
                        rel = f.with_value(rel, SEG, check)
                    found.setdefault(name, []).append(rel)
        return {name: f.union(rels) for name, rels in found.items()}

    def _check(
        self, seg: Segment, parts: dict[str, list[Any]], ctl: list[Any], matched: Any
    ) -> dict[str, Any]:
        """Lineage of an outer join's check, T₁ ⋉ T₂ (either side's for ⟗): its matched rows'
        lineage (``parts`` and the control references ``ctl`` of the rows it joined,
        restricted to the ``matched`` ids), what each padded row depends on; its source rows
        read under the join's :attr:`Segment.check_id`, as the lazy backend reads them."""
        f = self.f
        found: dict[str, list[Any]] = {}
        for name, rels in parts.items():
            rows = f.drop(f.semi(f.union(rels), matched), LID)
            found[name] = [f.with_value(rows, SEG, seg.check_id) if name.startswith("src-") else rows]
        return self._with_controls(found, f.union(ctl) if ctl else None, matched, seg.check_id)

    def build(self) -> dict[str, Any]:
        """Write the indexes; returns what was written (names, attributes, bytes)."""
        try:
            return self._build()
        finally:
            self.f.release()

    def _build(self) -> dict[str, Any]:
        f = self.f
        parts, ctl = self.compose(self.root)
        root_lids = self.out_lids(self.root)
        tagged = {name: f.semi(rel, root_lids) for name, rel in parts.items()}
        pairs = {name: f.drop(rel, SEG) for name, rel in tagged.items()}
        storage = self.capture.storage or ("pairs",)
        jobs: dict[str, Callable[[], dict[str, Any]]] = {}
        distinct = self._distinct(self.root)
        for name, rel in pairs.items():
            if "pairs" in storage:
                jobs[f"index {name}"] = partial(self._write_both, rel, name, name in distinct)
        if ctl is not None:
            jobs["ctl"] = partial(self._write, f.semi(ctl, root_lids), "eager/ctl", [LID])
        reads = self._reads() if "backward" in self.capture.directions else {}
        for s, (rel, _) in reads.items():
            jobs[f"reads {s}"] = partial(self._write, rel, f"eager/reads-{s}", [LID], as_is=True)
        via = self._via(tagged) if "backward" in self.capture.directions else None
        if via is not None:
            jobs["via"] = partial(self._write, via[0], "eager/via", [LID], as_is=True)
        for d, sets in self._controls.items():
            for name, rel in sets.items():
                rows = f.drop(rel, SEG)
                path = f"eager/control-{d}/{name}"
                jobs[f"control {d} {name}"] = partial(self._write, rows, path, f.columns(rows))
        done = f.run(jobs)
        written: dict[str, Any] = {"indexes": {}, "controls": {}, "ctl": done.get("ctl"), "reads": {}}
        for s, (_, tables) in reads.items():
            written["reads"][str(s)] = done[f"reads {s}"] | {"tables": tables}
        if via is not None:
            written["via"] = done["via"] | {"tables": via[1]}
        for name in parts:
            written["indexes"][name] = done.get(f"index {name}") or {"attrs": self._attrs(pairs[name])}
        if "provrc" in storage:
            lids = f.arrow(root_lids).column(LID).to_numpy()
            orientations = tuple(self.capture.directions)
            if self.capture.compose:
                collected = {
                    name: f.arrow(self._read(info["backward"]["dir"])) if "backward" in info
                    else f.arrow(f.distinct(pairs[name]))
                    for name, info in written["indexes"].items()
                }
                written[COMPRESSED] = write_compressed(
                    self.store, self.staging, collected, lids, orientations
                )
            else:
                written[COMPRESSED] = write_paths(self.store, self.staging, partial(
                    encode_paths, self._collect_steps(), self.root.id, lids, self._functions(), orientations
                ))
        for d, sets in self._controls.items():
            for name in sets:
                written["controls"].setdefault(str(d), {})[name] = done[f"control {d} {name}"]
        return written

    def _reads(self) -> dict[int, tuple[Any, dict[str, list[str]]]]:
        """Per segment topped by function operators: (__lid, __table, attrs...) pairs, a model
        call (the segment's row ``__lid``) with the source rows its values were read from,
        and (__lid, __d) pairs, a call with each difference below it whose right input it
        depends on: that input's rows are ``eager/control-<d>``, written once, not once per
        call (CDA Q21 at SF 0.1: 322 M pairs, 566 MB and 136 s of its index build, for 69 k
        calls and a subtrahend of 0.6 M rows); and each table's attributes. One file set per
        segment: the pairs are few, a job costs more."""
        if not self.capture.functions:
            return {}
        f = self.f
        found: dict[int, tuple[Any, dict[str, list[str]]]] = {}
        for seg in self.root.walk():
            if not seg.functions:
                continue
            parts, ctl = self.compose(seg)
            rels = {name: f.drop(rel, SEG) for name, rel in parts.items() if name.startswith("src-")}
            data, tables = self._by_table(rels, [LID]) if rels else (None, {})
            below = {s.id for s in seg.walk()}
            refs = [
                f.distinct(f.select(f.where_equal(ctl, "d", d), [(LID, LID), ("d", DIFF)]))
                for d in self._controls
                if ctl is not None and d in below
            ]
            kept = ([data] if data is not None else []) + refs
            if kept:
                found[seg.id] = (f.union(kept, fill=True), tables)
        return found

    def _via(self, tagged: dict[str, Any]) -> tuple[Any, dict[str, list[list[str]]]] | None:
        """(__lid, __d, __seg, __table, attrs...) of the tables two segments read: each output
        row's rows with the segment each entered by, and (``__d`` set, no __lid) those of all
        of a difference's right input."""
        f = self.f
        multi = {index_name("src", t) for t, segs in self.root.entries().items() if len(segs) > 1}
        rels = {name: [f.with_value(rel, DIFF, None)] for name, rel in tagged.items() if name in multi}
        for d, sets in self._controls.items():
            for name, rel in sets.items():
                if name in multi:
                    rows = f.with_value(f.with_value(f.distinct(rel), LID, None, "long"), DIFF, d)
                    rels.setdefault(name, []).append(rows)
        if not rels:
            return None
        return self._by_table({name: f.union(r) for name, r in rels.items()}, [LID, DIFF, SEG])

    def _by_table(self, rels: dict[str, Any], meta: list[str]) -> tuple[Any, dict[str, list[list[str]]]]:
        """Several tables' rows in one relation: ``meta`` columns, ``__table`` naming each
        row's table, and each table's attributes under columns of its own (two tables may
        share a column name, not its type); with each table's (column, attribute) pairs."""
        f = self.f
        tagged, tables = [], {}
        for k, (name, pairs) in enumerate(sorted(rels.items())):
            tables[name] = [[f"t{k}_{a}", a] for a in self._attrs(pairs, meta)]  # as JSON keeps it
            own = [(a, c) for c, a in tables[name]]
            picked = f.select(pairs, [*[(m, m) for m in meta], *own])
            tagged.append(f.with_value(picked, TABLE, name, "string"))
        return f.union(tagged, fill=True), tables

    def _attrs(self, pairs: Any, meta: Sequence[str] = (LID,)) -> list[str]:
        return [c for c in self.f.columns(pairs) if c not in meta]

    def _collect_steps(self) -> list[Step]:
        """Every captured step below the root, its distinct pairs collected to the driver."""
        found: list[tuple[Segment, Segment | Source, Any]] = []
        todo = [self.root]
        while todo:
            seg = todo.pop()
            for target, pairs in self.steps(seg):
                found.append((seg, target, self.f.distinct(pairs)))
                todo.extend([target] if isinstance(target, Segment) else [])
        rows = self.f.run({str(k): partial(self.f.arrow, step[2]) for k, step in enumerate(found)})
        return [
            Step(seg.id, rows[str(k)], table=target.table) if isinstance(target, Source)
            else Step(seg.id, rows[str(k)], child=target.id)
            for k, (seg, target, _) in enumerate(found)
        ]

    def _functions(self) -> list[int]:
        """Segments whose model calls are indexes."""
        return [s.id for s in self.root.post_order() if s.functions] if self.capture.functions else []

    def _write_both(self, pairs: Any, name: str, distinct: bool = False) -> dict[str, Any]:
        """The backward and forward index of ``pairs`` (``distinct``: as they are, with no
        duplicates to remove)."""
        out: dict[str, Any] = {"attrs": self._attrs(pairs)}
        attrs = out["attrs"]
        source = pairs
        if "backward" in self.capture.directions:
            out["backward"] = self._write(source, f"eager/backward/{name}", [LID], as_is=distinct)
            source = self._read(out["backward"]["dir"])  # re-sorting written pairs beats recomposing
        if "forward" in self.capture.directions:
            if "backward" in out and self.f.in_process:  # sorted by the first forward question
                out["forward"] = {"dir": f"forward/{name}", "deferred": True, "bytes": 0}
            else:
                out["forward"] = self._write(
                    source, f"eager/forward/{name}", attrs, as_is="backward" in out or distinct
                )
        return out

    def _write(self, rel: Any, path: str, order: list[str], as_is: bool = False) -> dict[str, Any]:
        """``rel``'s distinct rows (``as_is``: its rows, where they are distinct already or
        duplicates are dropped where they are read), sorted by ``order`` in each file."""
        self.f.write(rel, f"{self.staging}/{path}", order, distinct=not as_is)
        return {"dir": path, "bytes": self.store.size(f"{self.staging}/{path}")}


def build_indexes(
    spark: SparkSession,
    store: ResultsStore,
    staging: str,
    root: Segment,
    segments: dict[str, dict[str, Any]],
    plan: Mapping[str, Sequence[str]],
    capture: Capture,
    firsts: dict[int, Segment],
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """The run's indexes, composed by DuckDB where the staged capture and the sources are
    local files (:func:`frames_for`), else by Spark; and by Spark where DuckDB, which spills
    to disk first, still needs more memory than ``AL_DUCKDB_MEMORY``: the run is kept, not
    lost (what DuckDB wrote is removed first). ``composed_by`` records which."""
    sources = [leaf for seg in root.walk() for leaf in seg.leaves if isinstance(leaf, Source)]
    frames = frames_for(spark, store, staging, sources)

    def built(f: Frames) -> dict[str, Any]:
        found = IndexBuilder(f, store, staging, root, segments, plan, capture, firsts).build()
        return found | {"composed_by": "duckdb" if f.in_process else "spark"}

    try:
        return built(frames)
    except duckdb.OutOfMemoryException:
        if not frames.in_process:
            raise
    progress(
        f"building the lineage indexes: DuckDB needed more than its {duck.memory_limit()} "
        "(AL_DUCKDB_MEMORY); composing them with Spark"
    )
    for folder in ("eager", COMPRESSED):
        if store.exists(f"{staging}/{folder}"):
            store.delete(f"{staging}/{folder}")
    return built(SparkFrames(spark))
