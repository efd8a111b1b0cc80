"""Content digests of what a results store holds, so that damage or editing is an error naming
the file, never a silently different answer.

One root per run: its record (``run.json``) lists the size and sha256 of every file the run
wrote (``files``), of every file a later question added to the run (``added``: computed
reasons, region lineage, forward indexes; the question rewrites the record whole, under a
lock) and, for each source snapshot it read, the digest of that snapshot's own list
(``inputs``); a snapshot's ``_al_source.json`` lists its data files. A file the record does
not list is never read. A digest is not a signature: it catches a damaged or edited file, not
an editor who also rewrites the record, unless ``$AL_STORE_KEY`` seals the record
(:func:`materialization.catalog.seal`).

Files are read through pyarrow's file systems (no Spark), hashed once per process and state.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from materialization.catalog import LOCK, STAGING, StoreCatalog, StoreError

Files = dict[str, list]  # relative path -> [bytes, sha256]
CACHES = ("reasons", "regions", "forward")  # folders of a run its questions add files to
ADDED = "added"  # in a run's record: the files its questions added, by path in the run
RECORDS = ("run.json", "_al_source.json", "OWNER.json", LOCK)  # not in the lists
_WRITING = re.compile(r"^\.|\.tmp$")  # a file or folder being written (or left by a killed writer)
_SEEN: dict[tuple[str, int, int], str] = {}  # (path, bytes, mtime ns) -> sha256, hashed already


class IntegrityError(StoreError):
    """A stored file is not what its record says: damaged, edited or missing."""


def listed(fs: pafs.FileSystem, folder: str) -> dict[str, pafs.FileInfo]:
    """The files under ``folder`` a record lists (not Hadoop's .crc files, the records or the
    caches), by path relative to it."""
    infos = fs.get_file_info(pafs.FileSelector(folder, recursive=True, allow_not_found=True))
    found = {}
    for info in infos:
        rel = info.path[len(folder) :].lstrip("/")
        if info.type == pafs.FileType.File and not _unlisted(rel):
            found[rel] = info
    return found


def _unlisted(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    rewriting = name.startswith(".run.json.")  # a record being rewritten (catalog.update_run)
    return name.endswith(".crc") or name in RECORDS or rewriting or rel.split("/", 1)[0] in CACHES


def added_files(fs: pafs.FileSystem, run_folder: str) -> dict[str, pafs.FileInfo]:
    """The files questions added under a run's cache folders (not those still being written),
    by path relative to the run's folder."""
    found = {}
    for cache in CACHES:
        selector = pafs.FileSelector(f"{run_folder}/{cache}", recursive=True, allow_not_found=True)
        for info in fs.get_file_info(selector):
            rel = info.path[len(run_folder) :].lstrip("/")
            if info.type == pafs.FileType.File and not any(_WRITING.search(part) for part in rel.split("/")):
                found[rel] = info
    return found


def sha256(fs: pafs.FileSystem, info: pafs.FileInfo) -> str:
    stamp = (info.path, info.size or 0, info.mtime_ns or 0)
    if stamp not in _SEEN:
        digest = hashlib.sha256()
        with fs.open_input_stream(info.path) as f:
            while chunk := f.read(1 << 22):
                digest.update(chunk)
        _SEEN[stamp] = digest.hexdigest()
    return _SEEN[stamp]


def manifest(fs: pafs.FileSystem, folder: str) -> Files:
    """Size and sha256 of every listed file under ``folder``."""
    return {rel: [info.size, sha256(fs, info)] for rel, info in sorted(listed(fs, folder).items())}


def manifest_digest(files: Mapping[str, list]) -> str:
    """One digest for a whole list (a run records its inputs' by this)."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


@dataclass
class Check:
    """Checks folders against their lists; ``content``: hash while the bytes hashed stay
    within ``budget`` (beyond, sizes only). Problems are collected, one line each."""

    fs: pafs.FileSystem
    content: bool = True
    budget: float = float("inf")
    problems: list[str] = field(default_factory=list)
    hashed: int = 0

    def folder(
        self,
        folder: str,
        files: Mapping[str, list],
        shown: str,
        found: Mapping[str, pafs.FileInfo] | None = None,
        strict: bool = True,
    ) -> None:
        """``folder``'s files (``found``: as listed already) against ``files``; ``strict``: a
        file ``files`` does not name is a problem too (else it is just not read)."""
        found = listed(self.fs, folder) if found is None else found
        for rel, (size, digest) in sorted(files.items()):
            info = found.get(rel)
            if info is None:
                self.problems.append(f"{shown}/{rel} is missing")
            elif info.size != size:
                self.problems.append(f"{shown}/{rel} holds {info.size} bytes, its record says {size}")
            elif self.content and self.hashed + size <= self.budget:
                self.hashed += size
                if sha256(self.fs, info) != digest:
                    self.problems.append(f"{shown}/{rel} was changed: its sha256 differs from its record's")
        for rel in sorted(set(found) - set(files)) if strict else ():
            self.problems.append(f"{shown}/{rel} is not in its record")

    def raise_any(self, what: str) -> None:
        if self.problems:
            others = len(self.problems) - 1
            more = f" (and {others} more; `al verify` lists all)" if others else ""
            raise IntegrityError(f"{what}: {self.problems[0]}{more}")


def local_manifest(folder: str) -> Files:
    """:func:`manifest` of a local folder."""
    return manifest(pafs.LocalFileSystem(), os.path.abspath(folder))


def run_of(run_dir: str) -> tuple[StoreCatalog, str]:
    """The store of a run's folder (URI), and the run's id."""
    store, run_id = run_dir.rsplit("/runs/", 1)
    return StoreCatalog(store), run_id


def listed_cache(run_dir: str, folder: str) -> list[str]:
    """The files under the run's cache ``folder`` (``reasons/<udf>``, ``forward/<index>``)
    that its record lists as added, each checked against its entry (an :class:`IntegrityError`
    names one that differs or is missing), as paths on the store's file system. A file there
    that the record does not list (a question killed before listing it, or planted) is never
    read."""
    catalog, run_id = run_of(run_dir)
    prefix = folder + "/"
    added = catalog.read_run(run_id).get(ADDED, {})
    mine = {rel[len(prefix) :]: entry for rel, entry in added.items() if rel.startswith(prefix)}
    check = Check(catalog.fs)
    base = f"{catalog.root}/runs/{run_id}/{folder}"
    check.folder(base, mine, f"runs/{run_id}/{folder}", strict=False)
    check.raise_any(f"run {run_id} is damaged")
    return [f"{base}/{rel}" for rel in sorted(mine)]


def add_to_record(run_dir: str, folder: str, files: Files, replace: bool = False) -> None:
    """List ``files`` (by path in the run's cache ``folder``: [bytes, sha256]) in the run's
    record as added by a question; ``replace``: instead of the files it listed there."""
    catalog, run_id = run_of(run_dir)
    prefix = folder + "/"

    def change(record: dict[str, Any]) -> None:
        added = record.setdefault(ADDED, {})
        for rel in [r for r in added if replace and r.startswith(prefix)]:
            del added[rel]
        added.update({prefix + rel: entry for rel, entry in files.items()})

    catalog.update_run(run_id, change)


def budget() -> float:
    """Bytes a question hashes when it opens a run (``AL_VERIFY_BYTES``, default 256 MiB):
    beyond, sizes only; ``al verify`` hashes everything."""
    return float(os.environ.get("AL_VERIFY_BYTES", 256 << 20))


def check_snapshot(catalog: StoreCatalog, snapshot: str, digest: str | None, check: Check) -> None:
    """A source snapshot against its own list (and that list against ``digest``, what a run
    recorded of it)."""
    shown = snapshot.removeprefix(catalog.uri + "/")
    if shown == snapshot:
        check.problems.append(f"snapshot {snapshot} is outside the store")
        return
    folder = f"{catalog.root}/{shown}"
    try:
        files = _json(catalog.fs, f"{folder}/_al_source.json").get("files")
    except (OSError, ValueError, AttributeError):
        check.problems.append(f"{shown}/_al_source.json is missing or damaged")
        return
    if files is None:  # written before snapshots listed their files
        return
    if digest is not None and manifest_digest(files) != digest:
        check.problems.append(f"{shown}/_al_source.json lists other files than when the run read it")
    check.folder(folder, files, shown)


def check_run(catalog: StoreCatalog, record: Mapping, check: Check) -> None:
    """A run's files and the snapshots it read against its record (a run written before
    records listed their files is checked for what it lists)."""
    run_id = record["run_id"]
    if "files" in record:
        check.folder(f"{catalog.root}/runs/{run_id}", record["files"], f"runs/{run_id}")
    for snapshot, digest in record.get("inputs", []):
        check_snapshot(catalog, snapshot, digest, check)


@dataclass(frozen=True)
class Verified:
    what: str  # "run r…" or "snapshot sources/t/s…"
    problems: list[str]
    bytes: int  # hashed
    note: str = ""


def verify(
    catalog: StoreCatalog,
    run_ids: list[str] | None,
    check_task: Callable[[dict[str, Any], str], Any] = lambda record, run_id: None,
) -> list[Verified]:
    """Every file of the runs ``run_ids`` (None: all runs, and every source snapshot) hashed
    and compared with its record, the files questions added included; ``check_task`` raises a
    :class:`StoreError` for a record whose task a question would refuse."""
    found = []
    for run_id in catalog.run_ids() if run_ids is None else run_ids:
        check = Check(catalog.fs)
        note = ""
        try:
            record = catalog.read_run(run_id)
        except StoreError as exc:
            found.append(Verified(f"run {run_id}", [str(exc)], 0))
            continue
        try:
            check_task(record, run_id)
        except StoreError as exc:
            check.problems.append(str(exc))
        check_run(catalog, record, check)
        run_folder = f"{catalog.root}/runs/{run_id}"
        check.folder(run_folder, record.get(ADDED, {}), f"runs/{run_id}", added_files(catalog.fs, run_folder))
        if "files" not in record:
            note = "written before runs listed their files: only its sources' files were checked"
        found.append(Verified(f"run {run_id}", check.problems, check.hashed, note))
    if run_ids is None:
        for table in subfolders(catalog.fs, f"{catalog.root}/sources"):
            for snap in subfolders(catalog.fs, table.path):
                if not snap.base_name.startswith(STAGING):
                    shown = f"sources/{table.base_name}/{snap.base_name}"
                    check = Check(catalog.fs)
                    check_snapshot(catalog, f"{catalog.uri}/{shown}", None, check)
                    found.append(Verified(f"snapshot {shown}", check.problems, check.hashed))
    return found


def _json(fs: pafs.FileSystem, path: str) -> Any:
    with fs.open_input_stream(path) as f:
        return json.loads(f.read().decode("utf-8"))


def subfolders(fs: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    """The folders in ``path`` (none if it does not exist), by name."""
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted((i for i in infos if i.type == pafs.FileType.Directory), key=lambda i: i.base_name)
