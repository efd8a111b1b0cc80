"""The LineageSession a command works in: Spark on ``$AL_SPARK_MASTER`` (default local),
Spark's own logging quietened, the session's progress sent to the command's display."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cda_workload.progress import Progress

if TYPE_CHECKING:
    from tracing import LineageSession


def open_session(store: str, progress: Progress, existing: bool = False) -> LineageSession:
    """``existing``: the command reads runs, so a local store that is not there is a typo, not
    a new store to create (other URIs are checked by the store itself)."""
    from tracing import LineageSession  # deferred: `al --help` should not start a JVM

    local = store.removeprefix("file:")
    if existing and "://" not in store and not os.path.isdir(local):
        raise FileNotFoundError(f"no results store at {os.path.abspath(local)} (give --store)")
    with progress.working("starting Spark"):
        als = LineageSession(store=store, progress=progress.say)
        als.spark.sparkContext.setLogLevel("ERROR")
    return als
