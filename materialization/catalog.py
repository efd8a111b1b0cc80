"""The run records of a results store, read through pyarrow's file systems: listing runs and
checking a run id need no Spark (a command that only reads starts its JVM only when a
question needs one)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow.fs as pafs

from segmenter.errors import LineageError

STAGING = "staging-"  # a run being written (or left by a killed one): not listed


class StoreError(LineageError):
    """The results store cannot be used (not writable, missing run, corrupt record)."""


class StoreCatalog:
    def __init__(self, uri: str) -> None:
        """``uri``: a normalised store URI (``file:/abs/path``, ``s3://...``)."""
        self.uri = uri
        self.fs, self.root = pafs.FileSystem.from_uri(uri)

    def exists(self) -> bool:
        return self.fs.get_file_info(self.root).type == pafs.FileType.Directory

    def run_ids(self) -> list[str]:
        found = self.fs.get_file_info(pafs.FileSelector(f"{self.root}/runs", allow_not_found=True))
        names = (f.base_name for f in found if f.type == pafs.FileType.Directory)
        return sorted(n for n in names if not n.startswith(STAGING))

    def read_run(self, run_id: str) -> dict[str, Any]:
        path = f"{self.root}/runs/{run_id}/run.json"
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            known = ", ".join(self.run_ids()[-5:]) or "none"
            raise StoreError(f"no run {run_id!r} in {self.uri} (latest runs: {known})")
        with self.fs.open_input_stream(path) as f:
            return json.loads(f.read().decode("utf-8"))
