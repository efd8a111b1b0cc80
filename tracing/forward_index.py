"""A run's forward index, sorted from its backward index on the first forward question.

Both orientations hold the same (output row, lineage row) pairs; the forward one is sorted by
the lineage attributes so that a lookup reads one row group. Where a capture composes its
indexes in process (a local store), it writes the backward index only and leaves the forward
one ``deferred``: a task pays for no index a question may never use (issue 14, "eager capture
without a second pass"). The first forward question on an index sorts it into the run's
``forward/<name>/`` cache folder and lists its files' digests in the run's record (under
its lock: one question sorts, the others wait and read it), checked before every use. A run
whose store this process cannot write answers from the backward index itself: the same
pairs, scanned rather than looked up, so the answer is the same.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from materialization.index_frames import DuckFrames
from materialization.integrity import add_to_record, listed_cache, local_manifest, run_of
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
    cache = f"{FOLDER}/{name}"
    catalog, run_id = run_of(run_dir)
    if not listed_cache(run_dir, cache):  # never sorted, or by a question killed before listing it
        if not os.access(run_path, os.W_OK):
            return backward
        with catalog.record_lock(run_id):
            if not listed_cache(run_dir, cache):
                _sort(backward, run_dir, cache, info["attrs"])
        listed_cache(run_dir, cache)  # checked as another question's would be
    return f"{run_dir}/{cache}"


def _sort(backward: str, run_dir: str, cache: str, attrs: Sequence[str]) -> None:
    """Write the pairs of ``backward`` sorted by ``attrs`` into the run's ``cache`` folder and
    list them in the run's record, whole or not at all: built beside it and renamed."""
    folder = os.path.join(local_path(run_dir) or "", cache)
    building = os.path.join(os.path.dirname(folder), f".{os.path.basename(folder)}-{uuid.uuid4().hex}")
    try:
        frames = DuckFrames()
        try:
            frames.write(frames.read(backward), f"file:{building}", attrs, distinct=False)
        finally:
            frames.release()
        files = local_manifest(building)
        shutil.rmtree(folder, ignore_errors=True)  # a killed question's, never listed
        os.rename(building, folder)
        add_to_record(run_dir, cache, files, replace=True)
    finally:
        shutil.rmtree(building, ignore_errors=True)
