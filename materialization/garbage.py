"""What a results store holds that nothing will read again, found without Spark (pyarrow's
file systems, as the catalog reads runs):

- a run's staging folder whose writer is gone: its ``OWNER.json`` names this host and a
  process that has ended, or (another host, or no owner file) it is older than the limit;
- a source's staging folder older than the limit (a registration killed before its rename);
- a source snapshot older than the limit that is neither its table's newest (the one
  ``table(name)`` reads) nor named by any run's record. If a record cannot be read, no
  snapshot is called unreferenced.

The limit (default a day) keeps what a live writer on another host may still be writing.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow.fs as pafs

from materialization.catalog import STAGING, StoreCatalog, StoreError
from materialization.integrity import subfolders

OWNER = "OWNER.json"  # in a run's staging folder: who writes it
_SNAPSHOT_REF = re.compile(r"sources/([A-Za-z_][A-Za-z0-9_]*)/([A-Za-z0-9_.-]+)")


def owner() -> dict[str, Any]:
    """What a run's staging folder records about its writer."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": datetime.now(UTC).isoformat()}


@dataclass(frozen=True)
class Garbage:
    path: str  # relative to the store
    bytes: int
    why: str


def find_garbage(catalog: StoreCatalog, older_than_s: float = 86_400.0) -> tuple[list[Garbage], list[str]]:
    """What may be removed, and warnings (records that could not be read)."""
    fs, root = catalog.fs, catalog.root
    now = time.time()
    found: list[Garbage] = []

    def old(info: pafs.FileInfo) -> bool:
        return info.mtime is not None and now - info.mtime.timestamp() > older_than_s

    def add(info: pafs.FileInfo, why: str) -> None:
        files = fs.get_file_info(pafs.FileSelector(info.path, recursive=True))
        size = sum(f.size or 0 for f in files if f.type == pafs.FileType.File)
        found.append(Garbage(info.path.removeprefix(root).lstrip("/"), size, why))

    limit = f"older than {older_than_s / 3600:g} h"
    for info in subfolders(fs, f"{root}/runs"):
        if info.base_name.startswith(STAGING):
            writer = _owner(fs, f"{info.path}/{OWNER}")
            if writer is not None and writer.get("host") == socket.gethostname():
                if not _alive(writer.get("pid")):
                    add(info, f"a run left by process {writer.get('pid')}, which has ended")
            elif old(info):
                add(info, f"a run being written {limit}, its writer unknown")
    referenced, warnings = _referenced_snapshots(catalog)
    for table in subfolders(fs, f"{root}/sources"):
        snapshots = subfolders(fs, table.path)
        committed = [s.base_name for s in snapshots if not s.base_name.startswith(STAGING)]
        for snap in snapshots:
            name = snap.base_name
            if name.startswith(STAGING):
                if old(snap):
                    add(snap, f"a registration of {table.base_name} left unfinished, {limit}")
            elif (
                name != committed[-1]
                and not warnings
                and (table.base_name, name) not in referenced
                and old(snap)
            ):
                add(snap, f"a past snapshot of {table.base_name} that no run reads, {limit}")
    return found, warnings


def remove(catalog: StoreCatalog, garbage: list[Garbage]) -> None:
    for g in garbage:
        catalog.fs.delete_dir(f"{catalog.root}/{g.path}")


def _referenced_snapshots(catalog: StoreCatalog) -> tuple[set[tuple[str, str]], list[str]]:
    """(table, snapshot) pairs any run's record names; warnings for records not read."""
    referenced: set[tuple[str, str]] = set()
    warnings = []
    for run_id in catalog.run_ids():
        try:
            text = _text(catalog.fs, f"{catalog.root}/runs/{run_id}/run.json")
            if text is None:
                raise StoreError(f"run {run_id!r} has no run.json")
        except (StoreError, OSError) as exc:
            warnings.append(f"{exc}: no snapshot is removed")
            continue
        referenced |= set(_SNAPSHOT_REF.findall(text))
    return referenced, warnings


def _text(fs: pafs.FileSystem, path: str) -> str | None:
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(path) as f:
        return f.read().decode("utf-8").strip()


def _owner(fs: pafs.FileSystem, path: str) -> dict[str, Any] | None:
    try:
        text = _text(fs, path)
        found = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed process its parent has not reaped yet still answers kill(pid, 0) (Linux only)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
