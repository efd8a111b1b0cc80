"""The run records of a results store, read through pyarrow's file systems: listing runs and
checking a run id need no Spark (a command that only reads starts its JVM only when a
question needs one)."""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow.fs as pafs

from materialization.locations import filesystem, local_path
from segmenter.errors import LineageError

STAGING = "staging-"  # a run being written (or left by a killed one): not listed
# a run id names one folder under runs/: letters, digits, '_', '.', '-', no path in it
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
# a folder a record names inside its run: relative, of plain names (no '..', no scheme)
RUN_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=-]*(/[A-Za-z0-9_][A-Za-z0-9_.=-]*)*")


class StoreError(LineageError):
    """The results store cannot be used (not writable, missing run, corrupt record)."""


SEAL = "seal"  # in a run's record: its HMAC by the store's key, where $AL_STORE_KEY gives one
LOCK = ".record.lock"  # in a run's folder: held while a question rewrites the record
_HELD = threading.local()  # .paths: the lock files this thread holds


def seal(record: dict[str, Any]) -> str | None:
    """The HMAC-SHA256 of ``record`` (as stored, without its seal) by ``$AL_STORE_KEY``; None
    without a key. With a key, a record (and through it every file it lists) cannot be
    rewritten by whoever can write the store but not read the key."""
    key = os.environ.get("AL_STORE_KEY")
    if not key:
        return None
    text = json.dumps({k: v for k, v in record.items() if k != SEAL}, sort_keys=True, separators=(",", ":"))
    return hmac.new(key.encode(), text.encode(), hashlib.sha256).hexdigest()


def sealed(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` (as stored) with its seal, where a key is set."""
    found = seal(record)
    return record if found is None else {**record, SEAL: found}


def check_seal(run_id: str, record: dict[str, Any]) -> None:
    expected = seal(record)
    if expected is not None and not hmac.compare_digest(str(record.get(SEAL, "")), expected):
        says = (
            "is not sealed by $AL_STORE_KEY: written without the key"
            if SEAL not in record
            else "has a seal $AL_STORE_KEY does not give: edited, or sealed by another key"
        )
        raise StoreError(f"the record of run {run_id!r} {says}")


STORE_PREFIX = "@store/"  # in records: a path inside the store, wherever the store now is


def portable(data: Any, uri: str) -> Any:
    """``data`` with every path inside the store at ``uri`` written relative to it, so that a
    store copied or moved elsewhere reads its own files."""
    inside = uri + "/"
    return _strings(data, lambda s: STORE_PREFIX + s[len(inside) :] if s.startswith(inside) else s)


def located(data: Any, uri: str) -> Any:
    """Inverse of :func:`portable` for the store now at ``uri``."""
    return _strings(data, lambda s: f"{uri}/{s[len(STORE_PREFIX) :]}" if s.startswith(STORE_PREFIX) else s)


def _strings(data: Any, change: Callable[[str], str]) -> Any:
    """``data`` (JSON: dicts, lists, scalars) with ``change`` applied to every string value."""
    if isinstance(data, str):
        return change(data)
    if isinstance(data, dict):
        return {k: _strings(v, change) for k, v in data.items()}
    if isinstance(data, list):
        return [_strings(v, change) for v in data]
    return data


def check_run_id(run_id: Any) -> str:
    """``run_id`` if it is of the one safe form, else a one-line error: an id is joined to the
    store's path, so ``../x`` would read or write outside the store."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id) or run_id.startswith(STAGING):
        raise StoreError(
            f"run id {run_id!r} is not valid: use 1-128 letters, digits, '_', '.' or '-', starting "
            f"with a letter or digit (and not with {STAGING!r})"
        )
    return run_id


def check_record(run_id: str, record: Any) -> dict[str, Any]:
    """A run record read from the store, refused (one line naming the run) unless it is a JSON
    object about this run whose folders (every ``dir`` field) stay inside the run."""
    if not isinstance(record, dict) or record.get("run_id") != run_id:
        raise StoreError(f"the record of run {run_id!r} (run.json) is not this run's: edited or damaged")
    for value in _dir_fields(record):
        if not isinstance(value, str) or not RUN_PART.fullmatch(value) or ".." in value.split("/"):
            raise StoreError(f"the record of run {run_id!r} names a folder outside the run: {value!r}")
    return record


def _dir_fields(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for k, v in value.items() if k == "dir"] + [
            d for k, v in value.items() if k != "dir" for d in _dir_fields(v)
        ]
    if isinstance(value, list):
        return [d for v in value for d in _dir_fields(v)]
    return []


class StoreCatalog:
    def __init__(self, uri: str) -> None:
        """``uri``: a normalised store URI (``file:/abs/path``, ``s3://...``)."""
        self.uri = uri
        self.fs, self.root = filesystem(uri)

    def exists(self) -> bool:
        return self.fs.get_file_info(self.root).type == pafs.FileType.Directory

    def run_ids(self) -> list[str]:
        found = self.fs.get_file_info(pafs.FileSelector(f"{self.root}/runs", allow_not_found=True))
        names = (f.base_name for f in found if f.type == pafs.FileType.Directory)
        return sorted(n for n in names if not n.startswith(STAGING))

    def has_run(self, run_id: str) -> bool:
        """A run of this id exists, or is being written (its staging folder)."""
        runs = f"{self.root}/runs/{check_run_id(run_id)}"
        infos = self.fs.get_file_info([runs, f"{self.root}/runs/{STAGING}{run_id}"])
        return any(i.type != pafs.FileType.NotFound for i in infos)

    def snapshot_rows(self, snapshot: str) -> int | None:
        """The rows a source snapshot of this store holds, as its registration counted them
        (None: not recorded, or not a snapshot of this store)."""
        shown = snapshot.removeprefix(self.uri + "/")
        try:
            with self.fs.open_input_stream(f"{self.root}/{shown}/_al_source.json") as f:
                rows = json.loads(f.read().decode("utf-8")).get("rows")
        except (OSError, ValueError, AttributeError):
            return None
        return rows if isinstance(rows, int) and shown != snapshot else None

    def read_run(self, run_id: str) -> dict[str, Any]:
        path = f"{self.root}/runs/{check_run_id(run_id)}/run.json"
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            known = ", ".join(self.run_ids()[-5:]) or "none"
            raise StoreError(f"no run {run_id!r} in {self.uri} (latest runs: {known})")
        with self.fs.open_input_stream(path) as f:
            text = f.read()
        try:
            record = json.loads(text.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StoreError(f"the record of run {run_id!r} (run.json) is not valid JSON: {exc}") from None
        check_record(run_id, record)
        check_seal(run_id, record)
        return located(record, self.uri)

    def update_run(self, run_id: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply ``change`` to run ``run_id``'s record (as stored: paths relative to the store)
        and put the new record in place whole (written beside it, then renamed over it), sealed
        again; one question at a time (a lock file, on a local store). Returns it, located."""
        with self.record_lock(run_id):
            record = portable(self.read_run(run_id), self.uri)
            change(record)
            folder = f"{self.root}/runs/{run_id}"
            tmp = f"{folder}/.run.json.{uuid.uuid4().hex}"
            with self.fs.open_output_stream(tmp) as f:
                f.write(json.dumps(sealed(record), indent=1).encode())
            self.fs.move(tmp, f"{folder}/run.json")
        return located(record, self.uri)

    @contextmanager
    def record_lock(self, run_id: str) -> Iterator[None]:
        """Held while a question rewrites run ``run_id``'s record or builds what it will list
        (a store off the local file system has no lock: two questions adding at once may lose
        one's entry, and the file is then not used)."""
        local = local_path(self.uri)
        path = os.path.join(local or "", "runs", check_run_id(run_id), LOCK)
        held: set[str] = _HELD.__dict__.setdefault("paths", set())
        if local is None or path in held:  # held by this thread already: one lock, nested
            yield
            return
        with open(path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            held.add(path)
            try:
                yield
            finally:
                held.discard(path)
                fcntl.flock(f, fcntl.LOCK_UN)
