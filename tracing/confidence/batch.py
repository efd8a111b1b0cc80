"""Batch confidences of a whole result as a Spark job (Trio §5, adapted).

Output rows are spread over Spark tasks; each task walks the lineage DAG of its rows with one
:class:`LineageGraph`, so derived rows shared by several outputs are expanded, and with
``indep`` their confidences computed, once per task (the memoization of Batch-I; ``basic``
expands every row to base facts, Batch-NI). The tasks read the lineage and facts tables
through the file system, so the store must be one the executors can read as files.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from materialization.locations import local_path
from segmenter.errors import LineageError
from tracing.confidence.rows import ALGORITHMS, target_graph
from tracing.confidence.store import FormulaStore

if TYPE_CHECKING:
    import pandas as pd

ROW = "__row"
RESULT_SCHEMA = f"{ROW} long, probability double, method string, samples long, seconds double"


def batch_confidences(
    rows: DataFrame,
    names: list[str],
    run_dir: str,
    meta: dict[str, Any],
    algorithm: str = "indep",
    partitions: int | None = None,
    **options: Any,
) -> DataFrame:
    """``rows`` (visible columns ``names`` and ``__var``) with the probability of each
    distinct visible row, how it was computed, and the seconds it took."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}, not {algorithm!r}")
    if local_path(run_dir) is None:
        raise LineageError(
            f"batch confidences read the lineage as files; {run_dir} is not on a file system the "
            "executors share (use Run.confidence, which works on any store)"
        )
    quoted = [F.col(f"`{n}`") for n in names]
    targets = rows.groupBy(*quoted).agg(F.sort_array(F.collect_set("__var")).alias("vars"))
    targets = targets.withColumn(ROW, F.monotonically_increasing_id())
    # one Spark task per core by default: each builds its own graph, so fewer, fuller tasks
    # memoize more, but at least every core should have one
    targets = targets.repartition(partitions or rows.sparkSession.sparkContext.defaultParallelism)

    def evaluate(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pandas as pd  # in Spark's worker (a question from the command line needs no pandas)

        store = FormulaStore(None, run_dir, meta)
        for batch in batches:
            wanted = [({}, list(v)) for v in batch["vars"]]
            graph, ids = target_graph(store, wanted, **options)
            graph.load(ids)
            found = [graph.conf(t) if algorithm == "indep" else graph.conf_basic(t) for t in ids]
            yield pd.DataFrame(
                {
                    ROW: batch[ROW],
                    "probability": [e.value for e in found],
                    "method": [e.method for e in found],
                    "samples": [e.samples for e in found],
                    "seconds": [e.seconds for e in found],
                }
            )

    scored = targets.select(ROW, "vars").mapInPandas(evaluate, RESULT_SCHEMA)
    return targets.join(scored, ROW).select(*quoted, "probability", "method", "samples", "seconds")
