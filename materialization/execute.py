"""Run a task segment by segment, storing what the strategy asks for, and persist the run."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from materialization.compile import Compiler, finish
from materialization.store import ResultsStore
from materialization.strategies import run_mode, stores
from reasoning_udfs.udf import ERROR_MARKER, lookup
from segmenter.errors import LineageError
from segmenter.operators import Function, Task, to_dict
from segmenter.segments import Segment, render_segments

Progress = Callable[[str], None]


class UDFError(LineageError):
    """A model UDF failed on a row while the task ran; nothing of the run was kept."""


def execute_run(
    spark: SparkSession,
    store: ResultsStore,
    task: Task,
    root: Segment,
    strategy: str,
    run_id: str,
    progress: Progress = lambda msg: None,
) -> dict[str, Any]:
    """Run ``task`` and commit it to the store atomically; returns the run record."""
    staging = store.staging_dir(run_id)
    mode = run_mode(strategy)
    started = time.perf_counter()
    stored: dict[str, Any] = {}
    outputs: dict[int, DataFrame] = {}
    try:
        for seg in _post_order(root):
            inputs = {id(child.top): outputs[child.id] for child in seg.children}
            df = Compiler(spark, mode, inputs=lambda n, i=inputs: i.get(id(n))).compile(seg.top)
            if stores(strategy, seg, root):
                progress(f"segment {seg.id} ({seg.pattern()}): storing its output")
                path = f"{staging}/segment-{seg.id}"
                with translate_udf_errors():
                    store.write_parquet(df, path)
                df = spark.read.parquet(path)
                stored[str(seg.id)] = {
                    "dir": f"segment-{seg.id}",
                    "mode": mode,
                    "rows": df.count(),
                    "bytes": store.size(path),
                }
            outputs[seg.id] = df
        progress("writing the task output")
        out_path = f"{staging}/output"
        with translate_udf_errors():
            store.write_parquet(finish(task, outputs[root.id]), out_path)
        output_rows = spark.read.parquet(out_path).count()
        record = {
            "run_id": run_id,
            "created": datetime.now(UTC).isoformat(),
            "strategy": strategy,
            "mode": mode,
            "task": to_dict(task),
            "segments": render_segments(root),
            "stored": stored,
            "output": {"dir": "output", "rows": output_rows, "bytes": store.size(out_path)},
            "udfs": {n.udf: lookup(n.udf).import_path() for n in task.root.walk() if isinstance(n, Function)},
            "seconds": time.perf_counter() - started,
        }
        store.write_json(f"{staging}/run.json", record)
        store.commit_run(run_id)
    except BaseException:
        store.delete(staging)
        raise
    return record


def _post_order(seg: Segment) -> list[Segment]:
    out: list[Segment] = []
    for child in seg.children:
        out += _post_order(child)
    return out + [seg]


@contextmanager
def translate_udf_errors() -> Iterator[None]:
    """A UDF failure inside a Spark job becomes one readable line naming the UDF and row."""
    try:
        yield
    except (Py4JJavaError, PySparkException) as exc:
        found = re.search(f"{ERROR_MARKER}(.*?){ERROR_MARKER}", str(exc), re.S)
        if found:
            raise UDFError("UDF " + found.group(1).strip()) from None
        raise
