"""The results store: source snapshots, runs and their intermediates, as Parquet + JSON.

Layout under the store URI (any URI Spark's Hadoop FileSystem can write):

    sources/<table>/<snapshot>/            Parquet (zstd) + _al_source.json; ``table(name)``
                                           reads the newest (ids sort by commit time)
    runs/<run_id>/run.json                 the run record, written last
    runs/<run_id>/output/                  the task output (all root columns)
    runs/<run_id>/segment-<id>/            stored intermediate results

A run is written under ``runs/staging-<run_id>`` and renamed into place only when complete,
so a crash never leaves a run that looks finished. (No leading dot: Spark skips hidden paths.)
Nothing is rewritten in place: a snapshot is named when it is committed, and no pointer names
the current one, so concurrent writers never read a file another is writing.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property, reduce
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, NumericType, StructField, StructType

from materialization.catalog import (
    STAGING,
    StoreCatalog,
    StoreError,
    check_run_id,
    located,
    portable,
    sealed,
)
from materialization.compile import ref
from materialization.integrity import Files, manifest, manifest_digest
from materialization.locations import local_path, normalize_uri
from materialization.spark import SparkOf
from segmenter.operators import Source
from segmenter.sources import SourceRef, local_file

ROW_ID = "_rid"
DERIVED = "_al_lineage"  # a derived source's column: the variables of the run rows behind each row
SOURCE_META = "_al_source.json"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # fullmatch: "t\n" is no name
INTEGRAL = ("tinyint", "smallint", "int", "bigint")  # Spark's integer types, by simpleString


@dataclass(frozen=True)
class Uncertainty:
    """An uncertain source table (Trio's tuple-independent and x-tuple relations).

    ``confidence``: the column holding each row's probability of being true. ``alternatives``:
    a column whose equal values mark mutually exclusive alternatives of one x-tuple (their
    probabilities add up to at most 1; a NULL there marks an independent row); without it the
    rows are independent."""

    confidence: str
    alternatives: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "alternatives": self.alternatives}

    def check(self, table: str, df: DataFrame) -> None:
        """Refuse a declaration the data does not fit, naming the offending row."""
        names = {c.lower(): c for c in df.columns}
        for role, col in (("confidence", self.confidence), ("alternatives", self.alternatives)):
            if col is not None and col.lower() not in names:
                raise StoreError(f"source {table!r}: {role} column {col!r} not in {df.columns}")
        conf_name = names[self.confidence.lower()]
        conf = F.col(f"`{conf_name}`")
        if not isinstance(df.schema[conf_name].dataType, NumericType):
            raise StoreError(f"source {table!r}: confidence column {self.confidence!r} must be numeric")
        bad = df.filter(conf.isNull() | (conf < 0) | (conf > 1)).limit(1).collect()
        if bad:
            raise StoreError(
                f"source {table!r}: confidence must be in [0, 1], got {bad[0][conf_name]!r} "
                f"in row {bad[0].asDict()}"
            )
        if self.alternatives is not None:
            group = F.col(f"`{names[self.alternatives.lower()]}`")
            over = df.filter(group.isNotNull()).groupBy(group.alias("g")).agg(F.sum(conf).alias("total"))
            over = over.filter(F.col("total") > 1 + 1e-9).limit(1).collect()
            if over:
                raise StoreError(
                    f"source {table!r}: the alternatives of {self.alternatives} = {over[0]['g']!r} have "
                    f"confidences adding up to {over[0]['total']:.4g} > 1"
                )


def new_id(prefix: str) -> str:
    """An id that sorts by creation time (to the microsecond) and is unique across processes."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    return f"{prefix}{stamp}-{uuid.uuid4().hex[:8]}"


class ResultsStore:
    def __init__(self, spark_of: SparkOf, uri: str) -> None:
        """``spark_of``: the session, started by the first write or Spark read (run records
        are read through :class:`StoreCatalog` without it)."""
        self.spark_of = spark_of
        self.uri = normalize_uri(uri)
        self._meta_cache: dict[str, dict[str, Any]] = {}
        self._schemas: dict[str, StructType] = {}
        self._writable = False

    @property
    def spark(self) -> SparkSession:
        return self.spark_of()

    @cached_property
    def _Path(self) -> Any:
        return self.spark._jvm.org.apache.hadoop.fs.Path

    @cached_property
    def _io(self) -> Any:
        return self.spark._jvm.org.apache.commons.io.IOUtils

    @cached_property
    def _fs(self) -> Any:
        """Hadoop's file system of the store: any URI Spark can write."""
        return self._Path(self.uri).getFileSystem(self.spark._jsc.hadoopConfiguration())

    # --- file primitives ----------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return "/".join([self.uri, *parts])

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._Path(path)))

    def write_text(self, path: str, text: str) -> None:
        stream = self._fs.create(self._Path(path), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def read_text(self, path: str) -> str:
        """A file's text; one line where Hadoop's checksum beside it (``.<name>.crc``) says it
        was changed outside the store, instead of the file system's stack trace."""
        stream = self._fs.open(self._Path(path))
        try:
            return bytes(self._io.toByteArray(stream)).decode("utf-8")
        except Py4JJavaError as e:
            if "ChecksumException" not in str(e.java_exception.getClass().getName()):
                raise
            raise StoreError(
                f"{path} does not match the checksum the store wrote beside it: it was changed "
                "outside the store; restore it, or register the table (or make the run) again"
            ) from None
        finally:
            stream.close()

    def write_json(self, path: str, data: Any) -> None:
        self.write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str))

    def read_json(self, path: str) -> Any:
        return json.loads(self.read_text(path))

    def write_record(self, path: str, data: Any) -> None:
        """A record (run.json, sealed where a key is set; a snapshot's metadata) with the
        store's paths relative to it."""
        stored = portable(data, self.uri)
        self.write_json(path, sealed(stored) if path.endswith("/run.json") else stored)

    def read_record(self, path: str) -> Any:
        return located(self.read_json(path), self.uri)

    def rename(self, src: str, dst: str) -> None:
        if not self._fs.rename(self._Path(src), self._Path(dst)):
            raise StoreError(f"could not move {src} to {dst}")

    def delete(self, path: str) -> None:
        self._fs.delete(self._Path(path), True)

    def put(self, local_dir: str, path: str) -> None:
        """Copies a local folder (files written in-process, e.g. by pyarrow) to ``path``."""
        self._fs.copyFromLocalFile(False, True, self._Path(local_dir), self._Path(path))

    def fetch(self, path: str, local_dir: str) -> str:
        """A local folder holding ``path``'s files: ``path`` itself on a local store, else a
        copy made under ``local_dir`` (created only then: a local store leaves no folder)."""
        local = local_path(path)
        if local is not None:
            return local
        os.makedirs(local_dir, exist_ok=True)
        target = os.path.join(local_dir, os.path.basename(path))
        if not os.path.exists(target):
            self._fs.copyToLocalFile(False, self._Path(path), self._Path(f"file:{target}"), True)
        return target

    def size(self, path: str) -> int:
        return int(self._fs.getContentSummary(self._Path(path)).getLength())

    def manifest(self, path: str) -> Files:
        """Size and sha256 of each file under ``path`` (for the record that lists them)."""
        return manifest(self.catalog.fs, self.catalog.root + path.removeprefix(self.uri))

    def list_dirs(self, path: str) -> list[str]:
        if not self.exists(path):
            return []
        statuses = self._fs.listStatus(self._Path(path))
        return sorted(s.getPath().getName() for s in statuses if s.isDirectory())

    def check_writable(self) -> None:
        """Fail early, with the path, if the store cannot be written (probed once, before the
        first write: a store only asked questions may be read-only)."""
        if self._writable:
            return
        probe = self.path(f".probe-{uuid.uuid4().hex[:8]}")
        try:
            self._fs.mkdirs(self._Path(self.uri))
            self.write_text(probe, "ok")
            self.delete(probe)
        except Py4JJavaError as exc:
            reason = str(exc.java_exception.getMessage()).splitlines()[0]
            raise StoreError(f"results store {self.uri} is not writable: {reason}") from None
        self._writable = True

    def writable(self) -> bool:
        try:
            self.check_writable()
        except StoreError:
            return False
        return True

    def write_parquet(self, df: DataFrame, path: str) -> int:
        """Write ``df``; its row count, observed while writing (no second job to count)."""
        return int(self.write_observed(df, path)["n"])

    def write_observed(self, df: DataFrame, path: str, **observed: Column) -> dict[str, Any]:
        """Write ``df``; its row count (``n``) and the ``observed`` aggregates over its rows,
        computed while writing (no second job)."""
        seen = Observation("rows")
        counted = df.observe(seen, F.count(F.lit(1)).alias("n"), *[c.alias(k) for k, c in observed.items()])
        counted.write.mode("error").option("compression", "zstd").parquet(path)
        return dict(seen.get)

    # --- sources ------------------------------------------------------------------------------
    def register_source(
        self,
        name: str,
        df: DataFrame,
        key: Sequence[str] | None,
        uncertainty: Uncertainty | None = None,
        derived_from: str | None = None,
        replace: bool = False,
        folder: str = "sources",
        fingerprint: str | None = None,
    ) -> SourceRef:
        """Persist ``df`` as a new snapshot of source ``name`` with stable row ids (and, for
        an uncertain table, the columns that say how likely each row is; for the output of a
        confidence run, the run it came from). Other columns than the current snapshot's
        need ``replace=True``: a task written for the old table would read another one.
        ``folder="copies"``: a copy of files read in place (``fingerprint``: of those files),
        which is no registered table."""
        self.check_writable()
        if not _NAME.fullmatch(name):
            raise StoreError(f"source name {name!r} must be a SQL identifier")
        columns = [[f.name, f.dataType.simpleString()] for f in df.schema.fields]
        if folder == "sources":
            self._check_schema(name, columns, replace)
        lowered = {c.lower() for c in df.columns}
        if uncertainty is not None:
            uncertainty.check(name, df)
        if key:
            missing = [k for k in key if k.lower() not in lowered]
            if missing:
                raise StoreError(f"source {name!r}: key column(s) {missing} not in {df.columns}")
            # one job finds a repeated key, else a NULL in a key column (the eager capture
            # tags rows by a one-column key's value itself only where it holds none)
            nulls = reduce(lambda a, b: a | b, [ref(k).isNull() for k in key])
            counted = df.groupBy(*key).count()
            found = counted.filter((F.col("count") > 1) | nulls).orderBy(F.desc("count")).limit(1).collect()
            if found and found[0]["count"] > 1:
                raise StoreError(
                    f"source {name!r}: key {list(key)} is not unique "
                    f"(e.g. {found[0].asDict()}); declare another key or none (ids are added)"
                )
            key_nulls = bool(found)
            key = tuple(key)
        else:
            if ROW_ID in lowered:
                raise StoreError(f"source {name!r} already has a {ROW_ID!r} column: pass key=")
            df = _with_row_ids(df)
            key = (ROW_ID,)
            key_nulls = False
        # a key of several integer columns with no NULL: each column's range, observed while
        # the snapshot is written, lets the eager capture tag a row by one packed bigint
        types = {f.name.lower(): f.dataType.simpleString() for f in df.schema.fields}
        ranged = len(key) > 1 and not key_nulls and all(types[k.lower()] in INTEGRAL for k in key)
        bounds: dict[str, Column] = {}
        if ranged:  # (min, max) per key column
            bounds = {f"lo{i}": F.min(ref(k)) for i, k in enumerate(key)}
            bounds |= {f"hi{i}": F.max(ref(k)) for i, k in enumerate(key)}
        staging = self.path(folder, name, f"{STAGING}{uuid.uuid4().hex}")
        try:
            seen = self.write_observed(df, staging, **bounds)
            rows = int(seen["n"])
            ranges = None
            if ranged and rows:
                ranges = {k: [seen[f"lo{i}"], seen[f"hi{i}"]] for i, k in enumerate(key)}
            final = self.path(folder, name, new_id("s"))  # named at commit: newest is current
            meta = {
                "table": name,
                "key": list(key),
                "key_nulls": key_nulls,
                "key_ranges": ranges,
                "columns": columns,
                "files": self.manifest(staging),
                "snapshot": final,
                "rows": rows,
                "created": datetime.now(UTC).isoformat(),
                "uncertainty": uncertainty.to_dict() if uncertainty else None,
                "derived_from": derived_from,
                "fingerprint": fingerprint,
            }
            self.write_record(f"{staging}/{SOURCE_META}", meta)
            self.rename(staging, final)
        except BaseException:
            self.delete(staging)
            raise
        return SourceRef(name, key, final)

    def copy_of(self, name: str, fingerprint: str) -> SourceRef | None:
        """The copy of source ``name``'s files made when they had ``fingerprint``, if any."""
        folder = self.path("copies", name)
        for snapshot in reversed([d for d in self.list_dirs(folder) if not d.startswith(STAGING)]):
            ref_ = self.source_at(f"{folder}/{snapshot}")
            if self._source_meta(ref_.snapshot).get("fingerprint") == fingerprint:
                return ref_
        return None

    def _check_schema(self, name: str, columns: list[list[str]], replace: bool) -> None:
        snapshots = self._snapshots(name)
        if replace or not snapshots:
            return
        before = self._source_meta(self.path("sources", name, snapshots[-1])).get("columns")
        if before is not None and before != columns:
            shown = ", ".join(f"{c} {t}" for c, t in before)
            raise StoreError(
                f"source {name!r} is registered with other columns ({shown}); pass replace=True "
                "to register these as its new snapshot"
            )

    def _snapshots(self, name: str) -> list[str]:
        """The committed snapshots of source ``name``, oldest first."""
        return [d for d in self.list_dirs(self.path("sources", name)) if not d.startswith(STAGING)]

    def source_names(self) -> list[str]:
        """Registered source tables (those with a committed snapshot)."""
        return [n for n in self.list_dirs(self.path("sources")) if self._snapshots(n)]

    def current_source(self, name: str) -> SourceRef:
        """The newest snapshot of ``name``."""
        snapshots = self._snapshots(name) if _NAME.fullmatch(name) else []
        if not snapshots:
            known = ", ".join(self.source_names()) or "none"
            raise StoreError(f"no source table {name!r} in {self.uri} (registered: {known})")
        return self.source_at(self.path("sources", name, snapshots[-1]))

    def read_snapshot(self, snapshot: str) -> DataFrame:
        """A source snapshot's rows. Spark infers a Parquet schema with a job of its own; a
        snapshot never changes, so that happens once per snapshot in this process."""
        schema = self._schemas.get(snapshot)
        if schema is not None:
            return self.spark.read.schema(schema).parquet(snapshot)
        df = self.spark.read.parquet(snapshot)
        self._schemas[snapshot] = df.schema
        return df

    def source_at(self, snapshot: str) -> SourceRef:
        meta = self._source_meta(snapshot)
        return SourceRef(meta["table"], tuple(meta["key"]), snapshot)

    def key_without_nulls(self, snapshot: str) -> bool:
        """Whether the snapshot's key columns hold no NULL (unknown for snapshots registered
        before this was recorded: False)."""
        return self._source_meta(snapshot).get("key_nulls") is False

    def key_ranges(self, snapshot: str) -> dict[str, tuple[int, int]] | None:
        """Each key column's (min, max), where the key is several integer columns that hold
        no NULL (recorded at registration; None otherwise, or for older snapshots)."""
        found = self._source_meta(snapshot).get("key_ranges")
        try:
            return {str(k): (int(lo), int(hi)) for k, (lo, hi) in found.items()} if found else None
        except (AttributeError, TypeError, ValueError):
            return None  # not as registration writes it: the capture keeps a struct of the key

    def uncertainty(self, snapshot: str) -> Uncertainty | None:
        """How likely the rows of a source snapshot are (None: a certain table)."""
        found = self._source_meta(snapshot).get("uncertainty")
        return Uncertainty(**found) if found else None

    def derived_from(self, snapshot: str) -> str | None:
        """The confidence run whose output this source is (its rows carry ``DERIVED``)."""
        return self._source_meta(snapshot).get("derived_from")

    def source_size(self, source: Source) -> int | None:
        """Bytes of a source's rows where they are local files (None elsewhere)."""
        if source.in_store or source.files is None:
            return self.size(source.snapshot) if source.snapshot.startswith("file:") else None
        paths = [local_file(p) for p in source.files.paths]
        return None if None in paths else sum(os.path.getsize(p) for p in paths if p is not None)

    def _source_meta(self, snapshot: str) -> dict[str, Any]:
        """What registration recorded of a snapshot (nothing for the files of a source read
        in place, which have no snapshot)."""
        if not snapshot:
            return {}
        meta = self._meta_cache.get(snapshot)
        if meta is None:
            meta = self.read_record(f"{snapshot}/{SOURCE_META}")
            self._meta_cache[snapshot] = meta
        return meta

    def inputs(self, snapshots: list[str]) -> list[list[str]]:
        """What a run records of the snapshots it reads: [snapshot, digest of its file list]
        (a list, not a mapping: records keep paths in values, where a moved store finds them)."""
        return [[s, manifest_digest(self._source_meta(s).get("files", {}))] for s in snapshots]

    def resolve(self, paths: list[str]) -> SourceRef | None:
        """The registered snapshot a relation reads, recognised by its path."""
        if len(paths) != 1:
            return None
        path = paths[0].rstrip("/")
        if not self.exists(f"{path}/{SOURCE_META}"):
            return None
        return self.source_at(path)

    # --- runs ---------------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> str:
        return self.path("runs", check_run_id(run_id))

    def staging_dir(self, run_id: str) -> str:
        return self.path("runs", f"{STAGING}{check_run_id(run_id)}")

    def commit_run(self, run_id: str) -> None:
        """Move a written run into place; never into a run of the same id (a rename onto a
        folder would put it inside, and the new run would be lost)."""
        if self.exists(self.run_dir(run_id)):
            kept = self.staging_dir(run_id)
            raise StoreError(f"run {run_id!r} already exists in {self.uri}: this one stays in {kept}")
        self.rename(self.staging_dir(run_id), self.run_dir(run_id))

    def check_new_run(self, run_id: str) -> str:
        """``run_id`` if a run may be written under it: of the safe form, and no run (or run
        being written) of that id in the store; checked before anything is written."""
        if self.catalog.has_run(run_id):
            raise StoreError(f"run {run_id!r} already exists in {self.uri}; choose another run id")
        return run_id

    @cached_property
    def catalog(self) -> StoreCatalog:
        return StoreCatalog(self.uri)

    def run_ids(self) -> list[str]:
        return self.catalog.run_ids()

    def read_run(self, run_id: str) -> dict[str, Any]:
        return self.catalog.read_run(run_id)


def _with_row_ids(df: DataFrame) -> DataFrame:
    """Number rows 0..n-1 once, at registration; the ids are persisted with the data."""
    schema = StructType(df.schema.fields + [StructField(ROW_ID, LongType(), False)])
    rdd = df.rdd.zipWithIndex().map(lambda pair: (*pair[0], pair[1]))
    return df.sparkSession.createDataFrame(rdd, schema)
