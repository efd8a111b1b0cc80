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
``eager/control-<d>/<name>/`` the lineage of all of T2, once. With the reasoning lineage,
``eager/reads-<segment>/`` pairs each model call (its segment row's __lid) with the source
rows it read (``__table`` names each row's table), so an answer names them per call. A table
that two segments read (Q2's supplier: the query and its min-cost subquery) gets
``eager/via/``: its pairs with ``__seg``, the segment each row entered by (``__d`` the
difference whose right input it is, for control lineage), so an answer gives each row's path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial, reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from materialization.capture import LID, Capture
from materialization.compile import read_source, ref
from materialization.compressed_index import COMPRESSED, write_compressed, write_paths
from materialization.provrc.paths import Step, encode_paths
from materialization.provrc.tuples import FN
from materialization.store import ResultsStore
from segmenter.operators import Source
from segmenter.segments import Segment

REF = "__ref"
TABLE = "__table"  # which source table a call's read row is from
SEG = "__seg"  # the segment that read a source row
DIFF = "__d"  # the difference whose right input holds a row (control lineage; else null)
ROW_GROUP_BYTES = 1 << 20  # small row groups: a point lookup decompresses little


def index_name(kind: str, what: str | int) -> str:
    return f"{kind}-{what}"


class IndexBuilder:
    """Reads what the capture stored under ``staging`` and writes the run's indexes."""

    def __init__(
        self,
        spark: SparkSession,
        store: ResultsStore,
        staging: str,
        root: Segment,
        segments: dict[str, dict[str, Any]],
        plan: Mapping[str, Sequence[str]],
        capture: Capture,
        firsts: dict[int, Segment],
    ) -> None:
        self.spark = spark
        self.store = store
        self.staging = staging
        self.root = root
        self.segments = segments  # segment id -> {"output": dir, "lineage": dir, "tags": {...}}
        self.plan = plan
        self.capture = capture
        self._composed: dict[int, tuple[dict[str, DataFrame], DataFrame | None]] = {}
        self._controls: dict[int, dict[str, DataFrame]] = {}
        self._firsts = firsts  # each segment's first equal one (Segment.firsts)
        self._cached: list[DataFrame] = []  # composed once, read by copies: released by build()

    def _read(self, directory: str) -> DataFrame:
        return self.spark.read.parquet(f"{self.staging}/{directory}")

    def out_lids(self, seg: Segment) -> DataFrame:
        return self._read(self.segments[str(seg.id)]["output"]).select(LID).distinct()

    def compose(self, seg: Segment) -> tuple[dict[str, DataFrame], DataFrame | None]:
        """(__lid, attrs) pairs per index name for every row ``seg`` captured, and the
        (__lid, d) control references of the differences on their way."""
        if seg.id in self._composed:
            return self._composed[seg.id]
        first = self._firsts[seg.id]
        if first is not seg and not any(s.functions for s in first.walk()):
            found = self._copy(first, seg)
            self._composed[seg.id] = found
            return found
        parts: dict[str, list[DataFrame]] = {}
        ctl: list[DataFrame] = []
        for target, pairs in self.steps(seg):
            if isinstance(target, Source):
                tagged = pairs.withColumn(SEG, F.lit(seg.id))
                parts.setdefault(index_name("src", target.table), []).append(tagged)
                continue
            below, below_ctl = self.compose(target)
            for name, df in below.items():
                parts.setdefault(name, []).append(_through(pairs, df))
            if below_ctl is not None:
                ctl.append(_through(pairs, below_ctl))
        if seg.functions and self.capture.functions:
            lids = self.out_lids(seg)
            parts.setdefault(index_name("fn", seg.id), []).append(lids.select(LID, ref(LID).alias(FN)))
        if seg.is_d:
            ctl.append(self.out_lids(seg).select(LID, F.lit(seg.id).alias("d")))
            self._controls[seg.id] = self.control(seg)
        found = ({name: _union(frames) for name, frames in parts.items()}, _union(ctl) if ctl else None)
        self._composed[seg.id] = found
        return found

    def _copy(self, first: Segment, seg: Segment) -> tuple[dict[str, DataFrame], DataFrame | None]:
        """What ``seg`` composes, from ``first``'s (an equal subtree, composed once and kept
        in Spark's cache): the same pairs, the segment ids of ``seg``'s subtree in them."""
        parts, ctl = self.compose(first)
        ids = {a.id: b.id for a, b in zip(first.post_order(), seg.post_order(), strict=True)}
        for d in [d for d in ids if d in self._controls]:
            self._controls[ids[d]] = {n: _renumbered(df, SEG, ids) for n, df in self._controls[d].items()}
        for df in [*parts.values(), *([ctl] if ctl is not None else [])]:
            if not df.is_cached:
                self._cached.append(df.persist())
        renumbered = {name: _renumbered(df, SEG, ids) for name, df in parts.items()}
        return renumbered, (_renumbered(ctl, "d", ids) if ctl is not None else None)

    def steps(self, seg: Segment) -> Iterator[tuple[Segment | Source, DataFrame]]:
        """Per input of ``seg`` what its rows were derived from: (__lid, __ref) pairs to a
        child segment's rows, or (__lid, attrs...) pairs to a source table's."""
        meta = self.segments[str(seg.id)]
        lineage = self._read(meta["lineage"] or meta["output"])
        for tag, info in meta["tags"].items():
            leaf = seg.leaves[info["leaf"]]
            column = F.explode(ref(tag)) if info["array"] else ref(tag)
            pairs = lineage.select(ref(LID), column.alias(REF)).where(F.col(REF).isNotNull())
            child = seg.child_for(leaf)
            if child is not None:
                yield child, pairs
            else:
                assert isinstance(leaf, Source)
                yield leaf, pairs.select(LID, f"{REF}.*")

    def control(self, seg: Segment) -> dict[str, DataFrame]:
        """Lineage of ALL of a difference's right input: what every row of its output that
        passes the difference depends on (with the segment that read each row)."""
        right = seg.leaves[1]
        child = seg.child_for(right)
        if child is None:
            assert isinstance(right, Source)
            attrs = self.plan.get(right.table)
            if attrs is None:
                return {}
            names = {c.name: c.id for c in right.cols}
            rows = read_source(self.spark, right).select(*[ref(names[a]).alias(a) for a in attrs])
            return {index_name("src", right.table): rows.withColumn(SEG, F.lit(seg.id))}
        below, below_ctl = self.compose(child)
        lids = self.out_lids(child)
        found = {name: [df.join(lids, LID, "left_semi").drop(LID)] for name, df in below.items()}
        if below_ctl is not None:
            nested = below_ctl.join(lids, LID, "left_semi").select("d").distinct().collect()
            for row in nested:
                for name, df in self._controls[row["d"]].items():
                    found.setdefault(name, []).append(df)
        return {name: _union(frames) for name, frames in found.items()}

    def build(self) -> dict[str, Any]:
        """Write the indexes; returns what was written (names, attributes, bytes)."""
        try:
            return self._build()
        finally:
            for df in self._cached:
                df.unpersist()

    def _build(self) -> dict[str, Any]:
        parts, ctl = self.compose(self.root)
        root_lids = self.out_lids(self.root)
        tagged = {name: df.join(root_lids, LID, "left_semi") for name, df in parts.items()}
        pairs = {name: df.drop(SEG) for name, df in tagged.items()}
        storage = self.capture.storage or ("pairs",)
        jobs: dict[str, Callable[[], dict[str, Any]]] = {}
        for name, df in pairs.items():
            if "pairs" in storage:
                jobs[f"index {name}"] = partial(self._write_both, df, name)
        if ctl is not None:
            refs = ctl.join(root_lids, LID, "left_semi")
            jobs["ctl"] = partial(self._write, refs, "eager/ctl", [LID])
        reads = self._reads() if "backward" in self.capture.directions else {}
        for s, (df, _) in reads.items():
            jobs[f"reads {s}"] = partial(self._write_sorted, df, f"eager/reads-{s}")
        via = self._via(tagged) if "backward" in self.capture.directions else None
        if via is not None:
            jobs["via"] = partial(self._write_sorted, via[0], "eager/via")
        for d, sets in self._controls.items():
            for name, df in sets.items():
                rows = df.drop(SEG)
                jobs[f"control {d} {name}"] = partial(
                    self._write, rows, f"eager/control-{d}/{name}", list(rows.columns)
                )
        # independent Spark jobs: submitted together they overlap their scheduling latency
        with ThreadPoolExecutor(max_workers=4) as pool:
            done = dict(zip(jobs, pool.map(lambda job: job(), jobs.values())))
        written: dict[str, Any] = {"indexes": {}, "controls": {}, "ctl": done.get("ctl"), "reads": {}}
        for s, (_, tables) in reads.items():
            written["reads"][str(s)] = done[f"reads {s}"] | {"tables": tables}
        if via is not None:
            written["via"] = done["via"] | {"tables": via[1]}
        for name in parts:
            written["indexes"][name] = done.get(f"index {name}") or {"attrs": _attrs(pairs[name])}
        if "provrc" in storage:
            lids = root_lids.toArrow().column(LID).to_numpy()
            orientations = tuple(self.capture.directions)
            if self.capture.compose:
                collected = {
                    name: self._read(info["backward"]["dir"]).toArrow() if "backward" in info
                    else pairs[name].distinct().toArrow()
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

    def _reads(self) -> dict[int, tuple[DataFrame, dict[str, list[str]]]]:
        """Per segment topped by function operators: (__lid, __table, attrs...) pairs, a model
        call (the segment's row ``__lid``) with the source rows it read, those of all of a
        difference's right input below it included (so each call names its rows); and each
        table's attributes. One file set per segment: the pairs are few, a job costs more."""
        if not self.capture.functions:
            return {}
        found: dict[int, tuple[DataFrame, dict[str, list[str]]]] = {}
        for seg in self.root.walk():
            if not seg.functions:
                continue
            parts, ctl = self.compose(seg)
            frames = {name: [df.drop(SEG)] for name, df in parts.items() if name.startswith("src-")}
            for d, sets in self._controls.items():
                if ctl is None or not any(s.id == d for s in seg.walk()):
                    continue
                serves = ctl.where(F.col("d") == d).select(LID)
                for name, df in sets.items():
                    frames.setdefault(name, []).append(serves.crossJoin(df.drop(SEG)))
            if frames:
                found[seg.id] = _by_table({name: _union(dfs) for name, dfs in frames.items()}, [LID])
        return found

    def _via(self, tagged: dict[str, DataFrame]) -> tuple[DataFrame, dict[str, list[list[str]]]] | None:
        """(__lid, __d, __seg, __table, attrs...) of the tables two segments read: each output
        row's rows with the segment each entered by, and (``__d`` set, no __lid) those of all
        of a difference's right input."""
        multi = {index_name("src", t) for t, segs in self.root.entries().items() if len(segs) > 1}
        none = F.lit(None).cast("int")
        frames = {name: [df.withColumn(DIFF, none)] for name, df in tagged.items() if name in multi}
        for d, sets in self._controls.items():
            for name, df in sets.items():
                if name in multi:
                    rows = df.withColumn(LID, F.lit(None).cast("long")).withColumn(DIFF, F.lit(d))
                    frames.setdefault(name, []).append(rows)
        if not frames:
            return None
        return _by_table({name: _union(dfs) for name, dfs in frames.items()}, [LID, DIFF, SEG])

    def _collect_steps(self) -> list[Step]:
        """Every captured step below the root, its distinct pairs collected to the driver."""
        found: list[tuple[Segment, Segment | Source, DataFrame]] = []
        todo = [self.root]
        while todo:
            seg = todo.pop()
            for target, pairs in self.steps(seg):
                found.append((seg, target, pairs.distinct()))
                todo.extend([target] if isinstance(target, Segment) else [])
        with ThreadPoolExecutor(max_workers=4) as pool:  # independent jobs, as in build()
            rows = list(pool.map(lambda step: step[2].toArrow(), found))
        return [
            Step(seg.id, pairs, table=target.table) if isinstance(target, Source)
            else Step(seg.id, pairs, child=target.id)
            for (seg, target, _), pairs in zip(found, rows)
        ]

    def _functions(self) -> list[int]:
        """Segments whose model calls are indexes."""
        return [s.id for s in self.root.post_order() if s.functions] if self.capture.functions else []

    def _write_both(self, pairs: DataFrame, name: str) -> dict[str, Any]:
        out: dict[str, Any] = {"attrs": _attrs(pairs)}
        attrs = out["attrs"]
        source = pairs
        if "backward" in self.capture.directions:
            out["backward"] = self._write(source, f"eager/backward/{name}", [LID])
            source = self._read(out["backward"]["dir"])  # re-sorting written pairs beats recomposing
        if "forward" in self.capture.directions:
            out["forward"] = self._write(source, f"eager/forward/{name}", attrs, unique="backward" in out)
        return out

    def _write_sorted(self, df: DataFrame, path: str) -> dict[str, Any]:
        """``df`` as it is partitioned, sorted by ``__lid`` in each file: one stage, no shuffle
        (duplicates are dropped where the pairs are read)."""
        (
            df.sortWithinPartitions(LID)
            .write.mode("error")
            .option("compression", "zstd")
            .option("parquet.block.size", ROW_GROUP_BYTES)
            .parquet(f"{self.staging}/{path}")
        )
        return {"dir": path, "bytes": self.store.size(f"{self.staging}/{path}")}

    def _write(self, df: DataFrame, path: str, order: list[str], unique: bool = False) -> dict[str, Any]:
        """Distinct rows, hash-partitioned on all their columns (balanced even when a few
        output rows own most pairs; the distinct needs no second shuffle) and sorted by the
        lookup columns within each file: a lookup prunes row groups by min/max in every
        file, and no sampling job is needed as for a global sort."""
        spread = df.repartition(*[ref(c) for c in df.columns])
        (
            (spread if unique else spread.distinct())
            .sortWithinPartitions(*[ref(c) for c in order])
            .write.mode("error")
            .option("compression", "zstd")
            .option("parquet.block.size", ROW_GROUP_BYTES)
            .parquet(f"{self.staging}/{path}")
        )
        return {"dir": path, "bytes": self.store.size(f"{self.staging}/{path}")}


def _attrs(pairs: DataFrame, meta: Sequence[str] = (LID,)) -> list[str]:
    return [c for c in pairs.columns if c not in meta]


def _by_table(frames: dict[str, DataFrame], meta: list[str]) -> tuple[DataFrame, dict[str, list[list[str]]]]:
    """Several tables' rows in one frame: ``meta`` columns, ``__table`` naming each row's
    table, and each table's attributes under columns of its own (two tables may share a
    column name, not its type); with each table's (column, attribute) pairs."""
    tagged, tables = [], {}
    for k, (name, pairs) in enumerate(sorted(frames.items())):
        tables[name] = [[f"t{k}_{a}", a] for a in _attrs(pairs, meta)]  # as JSON keeps it
        own = [ref(a).alias(c) for c, a in tables[name]]
        tagged.append(pairs.select(*[ref(m) for m in meta], F.lit(name).alias(TABLE), *own))
    return reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), tagged), tables


def _renumbered(df: DataFrame, column: str, ids: dict[int, int]) -> DataFrame:
    """``df`` with the segment ids in ``column`` mapped by ``ids``."""
    mapping = F.create_map(*[F.lit(v) for pair in ids.items() for v in pair])
    return df.withColumn(column, F.element_at(mapping, ref(column)))


def _through(pairs: DataFrame, below: DataFrame) -> DataFrame:
    """(__lid, __ref) ⋈ (__ref as the child's __lid, x...) -> (__lid, x...)."""
    return pairs.join(below.withColumnRenamed(LID, REF), REF).drop(REF)


def _union(frames: list[DataFrame]) -> DataFrame:
    return reduce(lambda a, b: a.unionByName(b), frames)
