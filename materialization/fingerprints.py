"""Fingerprints of the user's files a run read in place, and the check a question makes
against them: a file changed or gone since the run is a one-line error naming it, never a
silently different answer.

Per file: its URI, size, modification time, row count (Parquet: from the footer) and a
sha256 digest, ``digest_of`` saying of what:

- ``content``: every byte. Always for CSV, JSON and ORC (read whole by the run anyway), and
  for Parquet sources up to ``AL_CONTENT_DIGEST_BYTES`` (default 256 MiB) in all;
- ``footer``: a larger Parquet source's footer (its schema, row groups and their min/max
  statistics, a few KiB a file), with the size: a change that keeps size, row groups and every
  column's statistics equal is not seen.

A question re-reads the size and time of every file (one ``stat``), and the digest where the
time changed or the digest is a footer's, or a content digest within ``AL_VERIFY_BYTES``:
a file touched but not changed passes. A process hashes a file once while its size, times
and inode stay.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import pyarrow.fs as pafs
import pyarrow.parquet as pq

from segmenter.errors import LineageError
from segmenter.operators import Source
from segmenter.sources import local_file

CONTENT_BYTES = int(os.environ.get("AL_CONTENT_DIGEST_BYTES", str(256 << 20)))
_CHUNK = 1 << 20


class SourceChangedError(LineageError):
    """A file a run read in place changed or is gone since the run."""


def fingerprint(source: Source) -> dict[str, Any]:
    """What the run records of the files ``source`` reads in place."""
    assert source.files is not None
    found = [_stat(uri) for uri in source.files.paths]
    missing = [uri for uri, info in zip(source.files.paths, found) if info is None]
    if missing:
        raise SourceChangedError(f"source {source.table}: {shown(missing[0])} is gone")
    total = sum(info.size for info in found if info is not None)
    parquet = source.files.format == "parquet"
    digest_of = "footer" if parquet and total > CONTENT_BYTES else "content"
    files = []
    for uri, info in zip(source.files.paths, found):
        assert info is not None
        files.append(
            {
                "path": uri,
                "size": info.size,
                "mtime_ns": info.mtime_ns,
                "rows": _rows(uri) if parquet else None,
                "sha256": _checked_digest(uri, digest_of, info),
            }
        )
    return {"table": source.table, "format": source.files.format, "digest_of": digest_of, "files": files}


def check_fingerprints(recorded: Sequence[Mapping[str, Any]], run_id: str, budget: float) -> None:
    """Raise :class:`SourceChangedError` naming the first file read in place by run ``run_id``
    that is gone or changed; ``budget``: bytes of content digests recomputed where the
    modification time still matches."""
    for entry in recorded:
        if entry.get("copy"):
            continue  # the run reads its own copy: the files may change
        for f in entry["files"]:
            problem = _changed(f, entry["digest_of"], budget)
            if problem is not None:
                raise SourceChangedError(
                    f"source {entry['table']}: {shown(f['path'])} {problem} since run {run_id} read it; "
                    "run the task again, or run it with snapshot='copy' to keep a copy of sources that change"
                )
            if entry["digest_of"] == "content":
                budget -= f["size"]


def _changed(f: Mapping[str, Any], digest_of: str, budget: float) -> str | None:
    info = _stat(f["path"])
    if info is None:
        return "is gone"
    if info.size != f["size"]:
        return f"changed ({f['size']:,} -> {info.size:,} bytes)"
    rehash = digest_of == "footer" or info.mtime_ns != f["mtime_ns"] or f["size"] <= budget
    if rehash and _checked_digest(f["path"], digest_of, info) != f["sha256"]:
        return "changed (its sha256 differs)"
    return None


_SEEN: dict[tuple[Any, ...], str] = {}  # a file's state when hashed -> its digest


def _checked_digest(uri: str, digest_of: str, info: _Info) -> str:
    """``_digest``, once per process while the file's size, modification time and (a local
    file) inode and change time stay: every question and every run of a session re-hashed
    TPC-H SF 1's line items (0.24 s of a 0.9 s question; 0.16 s of Q6's 0.87 s fm run, read
    in place). The change time cannot be set back, as a modification time can."""
    local = local_file(uri)
    extra = ()
    if local is not None:
        st = os.stat(local)
        extra = (st.st_ino, st.st_ctime_ns)
    state = (uri, digest_of, info.size, info.mtime_ns, *extra)
    if state not in _SEEN:
        _SEEN[state] = _digest(uri, digest_of, info.size)
    return _SEEN[state]


class _Info(NamedTuple):
    size: int
    mtime_ns: int


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    local = local_file(uri)
    if local is not None:
        return pafs.LocalFileSystem(), local
    return pafs.FileSystem.from_uri(uri)


def _stat(uri: str) -> _Info | None:
    fs, path = _filesystem(uri)
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        return None
    return _Info(int(info.size), int(info.mtime_ns or 0))


def _rows(uri: str) -> int:
    fs, path = _filesystem(uri)
    with fs.open_input_file(path) as f:
        return int(pq.ParquetFile(f).metadata.num_rows)


def _digest(uri: str, digest_of: str, size: int) -> str:
    fs, path = _filesystem(uri)
    h = hashlib.sha256()
    with fs.open_input_file(path) as f:
        if digest_of == "footer":  # ... <footer> <4-byte length> PAR1
            f.seek(max(size - 8, 0))
            length = struct.unpack("<i", f.read(4))[0] if size >= 8 else 0
            f.seek(max(size - 8 - length, 0))
            h.update(f.read())
            h.update(str(size).encode())
        else:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
    return h.hexdigest()


def shown(uri: str) -> str:
    """A file's path as a person reads it (a local file without its URI scheme)."""
    return local_file(uri) or uri


def location(entry: Mapping[str, Any]) -> str:
    """Where a source read in place lives: its one file, or the folder its files share."""
    paths = [f["path"] for f in entry["files"]]
    if len(paths) == 1:
        return str(paths[0])
    parts = [p.split("/") for p in paths]
    common = [seg for seg, *rest in zip(*parts) if all(r == seg for r in rest)]
    return "/".join(common)


def files_version(entry: Mapping[str, Any]) -> str:
    """One digest of the files as the run read them (each file's path, size and sha256)."""
    listed = [[f["path"], f["size"], f["sha256"]] for f in entry["files"]]
    return hashlib.sha256(json.dumps(listed).encode()).hexdigest()
