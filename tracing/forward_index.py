"""A run's forward index, sorted from its backward index on the first forward question.

Both orientations hold the same (output row, lineage row) pairs; the forward one is sorted by
the lineage attributes so that a lookup reads one row group. Where a capture composes its
indexes in process (a local store), it writes the backward index only and leaves the forward
one ``deferred``: a task pays for no index a question may never use (issue 14, "eager capture
without a second pass"). The first forward question on an index sorts it into the run's
``forward/<name>/`` cache folder, with a ``files.json`` of its files' digests (as region
lineage is kept), checked before every process's first use. A run whose store this process
cannot write answers from the backward index itself: the same pairs, scanned rather than
looked up, so the answer is the same.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from materialization.index_frames import DuckFrames
from materialization.integrity import check_listing, write_listing
from materialization.locations import local_path

FOLDER = "forward"  # in a run's folder: the forward indexes its questions sorted


def forward_index(run_dir: str, name: str, info: Mapping[str, Any]) -> str:
    """The folder (URI) to look up index ``name``'s pairs by their attributes: the capture's
    forward index, or the one sorted on the first forward question (sorted now if it is
    missing and the run's folder can be written), or else the backward index."""
    forward = info["forward"]
    if not forward.get("deferred"):
        return f"{run_dir}/{forward['dir']}"
    backward = f"{run_dir}/{info['backward']['dir']}"
    run_path = local_path(run_dir)
    if run_path is None:
        return backward
    folder = os.path.join(run_path, FOLDER, name)
    if not os.path.isdir(folder):
        if not os.access(run_path, os.W_OK):
            return backward
        _sort(backward, folder, info["attrs"])
    run_id = os.path.basename(run_path)
    check_listing(folder, f"runs/{run_id}/{FOLDER}/{name}", f"run {run_id} is damaged")
    return f"file:{folder}"


def _sort(backward: str, folder: str, attrs: Sequence[str]) -> None:
    """Write the pairs of ``backward`` sorted by ``attrs`` into ``folder``, whole or not at
    all: built beside it and renamed (a question that built it at the same time wins)."""
    building = os.path.join(os.path.dirname(folder), f".{os.path.basename(folder)}-{uuid.uuid4().hex}")
    try:
        frames = DuckFrames()
        try:
            frames.write(frames.read(backward), f"file:{building}", attrs, distinct=False)
        finally:
            frames.release()
        write_listing(building)
        try:
            os.rename(building, folder)
        except OSError:
            if not os.path.isdir(folder):
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
