"""The LineageSession a command works in: Spark on ``$AL_SPARK_MASTER`` (default local),
Spark's own logging quietened, the session's progress sent to the command's display."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cda_workload.progress import Progress

if TYPE_CHECKING:
    from tracing import LineageSession


def open_session(store: str, progress: Progress) -> LineageSession:
    from tracing import LineageSession  # deferred: `al --help` should not start a JVM

    with progress.working("starting Spark"):
        als = LineageSession(store=store, progress=progress.say)
        als.spark.sparkContext.setLogLevel("ERROR")
    return als
