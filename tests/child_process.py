"""The environment of a child process that starts Spark.

Such a process lives seconds to two minutes, beside the suite's own JVM on 2 cores: its JVMs
compile with C1 only (``-XX:TieredStopAtLevel=1``; C2's compiles of code that runs a few
times cost more than they return). Measured side by side (docs/results.md): test_cluster
130-132 s → 86-90 s, the concurrent writers 63-73 s → 48-53 s.
"""

from __future__ import annotations

import os

from materialization.spark import SHORT_LIVED_JAVA


def spark_child_env(**extra: str) -> dict[str, str]:
    """This process's environment, with ``extra``, for a child whose Spark JVMs live briefly."""
    return {**os.environ, "AL_JAVA_OPTIONS": SHORT_LIVED_JAVA, **extra}
