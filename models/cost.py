"""Per-row cost of a reasoning UDF, measured the way Spark calls it (one batch at a time).

The lineage strategies trade storing reasons against re-running UDFs, so the cost of a
re-run per row is an input to that trade-off; this gives the figure for any ReasoningUDF.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from reasoning_udfs.udf import ReasoningUDF


def udf_cost(
    udf: ReasoningUDF, rows: Sequence[tuple], mode: str = "normal", batch: int = 16
) -> dict[str, Any]:
    """Milliseconds per row of ``udf`` on ``rows`` (argument tuples), in chunks of ``batch``.

    ``mode`` 'normal' times ``main_batch``, 'reasoning' times ``main_with_reason_batch``. One
    untimed warm-up call on the first chunk first, so model loading and lazy set-up (one-off
    per worker process in Spark) are not counted.
    """
    if mode not in ("normal", "reasoning"):
        raise ValueError(f"mode must be 'normal' or 'reasoning', not {mode!r}")
    if not rows:
        raise ValueError("udf_cost needs at least one row")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, not {batch}")
    call = udf.main_batch if mode == "normal" else udf.main_with_reason_batch
    chunks = [rows[i : i + batch] for i in range(0, len(rows), batch)]
    call(chunks[0])
    start = time.perf_counter()
    for chunk in chunks:
        call(chunk)
    elapsed = time.perf_counter() - start
    return {
        "udf": udf.name,
        "mode": mode,
        "ms_per_row": 1000.0 * elapsed / len(rows),
        "rows": len(rows),
        "batch": batch,
    }
