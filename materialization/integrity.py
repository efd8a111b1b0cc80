"""Content digests of what a results store holds, so that damage or editing is an error naming
the file, never a silently different answer.

A run's record lists the size and sha256 of every file the run wrote (``files``) and, for each
source snapshot it read, the digest of that snapshot's own list (``inputs``); a snapshot's
``_al_source.json`` lists its data files. Caches written after a run (computed reasons,
region lineage, forward indexes sorted by a first forward question) carry their digests with
them: a reasons file is named by its sha256, a region or forward-index folder holds a
``files.json``. A digest is not a signature: it catches a damaged or edited
file, not an editor who also rewrites the records that list it.

Files are read through pyarrow's file systems (no Spark), hashed once per process and state.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from materialization.catalog import STAGING, StoreCatalog, StoreError

Files = dict[str, list]  # relative path -> [bytes, sha256]
CACHES = ("reasons", "regions", "forward")  # folders of a run written after it, each checked on its own
LISTED_CACHES = ("regions", "forward")  # caches whose every folder holds a DIGESTS list
DIGESTS = "files.json"  # in a stored region or forward-index folder: its files' sizes and sha256
RECORDS = ("run.json", "_al_source.json", "OWNER.json", DIGESTS)  # not in the lists
NAMED = re.compile(r"[0-9a-f]{64}\.parquet")  # a cache file named by its content's sha256
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
    return name.endswith(".crc") or name in RECORDS or rel.split("/", 1)[0] in CACHES


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

    def folder(self, folder: str, files: Mapping[str, list], shown: str) -> None:
        found = listed(self.fs, folder)
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
        for rel in sorted(set(found) - set(files)):
            self.problems.append(f"{shown}/{rel} is not in its record")

    def named(self, folder: str, shown: str) -> list[str]:
        """The cache files under ``folder`` whose sha256 is their name (others are problems)."""
        infos = self.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
        good = []
        for info in sorted(infos, key=lambda i: i.path):
            if info.type != pafs.FileType.File or not info.base_name.endswith(".parquet"):
                continue
            if not NAMED.fullmatch(info.base_name) or sha256(self.fs, info) != info.base_name[:64]:
                self.problems.append(f"{shown}/{info.base_name} was changed: its sha256 is not its name")
            else:
                good.append(info.path)
        return good

    def raise_any(self, what: str) -> None:
        if self.problems:
            others = len(self.problems) - 1
            more = f" (and {others} more; `al verify` lists all)" if others else ""
            raise IntegrityError(f"{what}: {self.problems[0]}{more}")


def local_manifest(folder: str) -> Files:
    """:func:`manifest` of a local folder."""
    return manifest(pafs.LocalFileSystem(), os.path.abspath(folder))


def check_local(folder: str, files: Mapping[str, list], shown: str, what: str) -> None:
    """A local copy of a stored folder (``shown``) is what its list says, else one line."""
    check = Check(pafs.LocalFileSystem())
    check.folder(os.path.abspath(folder), files, shown)
    check.raise_any(what)


def write_listing(folder: str) -> None:
    """Write a local folder's ``files.json``: its files' sizes and sha256."""
    with open(os.path.join(folder, DIGESTS), "w") as f:
        json.dump(local_manifest(folder), f)


def check_listing(folder: str, shown: str, what: str) -> None:
    """A local folder (``shown``) is what its ``files.json`` says, else one line naming the
    file (or the list) after ``what``."""
    try:
        with open(os.path.join(folder, DIGESTS)) as f:
            files = json.load(f)
    except (OSError, ValueError):
        raise IntegrityError(f"{what}: {shown}/{DIGESTS} is missing or damaged") from None
    check_local(folder, files, shown, what)


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


def verify(catalog: StoreCatalog, run_ids: list[str] | None) -> list[Verified]:
    """Every file of the runs ``run_ids`` (None: all runs, and every source snapshot) hashed
    and compared with its record, caches included."""
    found = []
    for run_id in catalog.run_ids() if run_ids is None else run_ids:
        check = Check(catalog.fs)
        note = ""
        try:
            record = catalog.read_run(run_id)
        except StoreError as exc:
            found.append(Verified(f"run {run_id}", [str(exc)], 0))
            continue
        check_run(catalog, record, check)
        if "files" not in record:
            note = "written before runs listed their files: only its sources' files were checked"
        run_dir = f"{catalog.root}/runs/{run_id}"
        for cache in subfolders(catalog.fs, f"{run_dir}/reasons"):
            check.named(cache.path, f"runs/{run_id}/reasons/{cache.base_name}")
        for kind in LISTED_CACHES:
            for cache in subfolders(catalog.fs, f"{run_dir}/{kind}"):
                if cache.base_name.startswith("."):  # still being built, or left by a killed build
                    continue
                shown = f"runs/{run_id}/{kind}/{cache.base_name}"
                try:
                    check.folder(cache.path, _json(catalog.fs, f"{cache.path}/{DIGESTS}"), shown)
                except (OSError, ValueError, AttributeError):
                    check.problems.append(f"{shown}/{DIGESTS} is missing or damaged")
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
