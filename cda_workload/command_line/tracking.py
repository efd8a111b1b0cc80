"""MLflow tracking of the workload commands: the embedded defaults of :mod:`tracing.tracking`
and the benchmark's medians as metrics."""

from __future__ import annotations

from typing import Any

import mlflow

from tracing.tracking import tracked_run

__all__ = ["log_records", "tracked_run"]


def log_records(records: list[dict[str, Any]]) -> None:
    """Every median as a metric, logged in one batch per call (not one request per value)."""
    metrics = {}
    for r in records:
        scale = r["sf"] if r["workload"] == "cda" else r["size"]
        name = f"{r['workload']}.{r['query']}.{scale}.{r['strategy']}.{r['phase']}"
        if r["al_size"] is not None:
            name += f".al{r['al_size']}"
        metrics[f"{name}.median_s"] = r["median_s"]
        if r["phase"] == "task" and r["strategy"] in ("fm", "full"):
            metrics[f"{name}.stored_tuples"] = float(r["stored_tuples"])
    mlflow.log_metrics({k: v for k, v in metrics.items() if v is not None})
