"""The eager run's integration point: per-output lineage pairs → one id set per output row.

Pure numpy in, id sets out, so ``Run`` can call it on the (lid, source ordinal) arrays it
already captures without this package knowing about Spark.
"""

from __future__ import annotations

import numpy as np

from materialization.idsets.base import IdSet
from materialization.idsets.policy import best_for, representation


def idsets_by_output(
    lids: np.ndarray, ordinals: np.ndarray, kind: str | None = None, universe: int | None = None
) -> dict[int, IdSet]:
    """{lid: set of source ordinals} from parallel arrays of lineage pairs (any order, repeats ok).

    One representation for the whole answer, so unions and overlaps across outputs never
    convert: ``kind`` ("sorted", "roaring", "bdd") or, when None, the policy's pick for the
    largest set (large sets dominate the cost) over ``universe`` (default: max ordinal + 1).
    """
    lid = np.asarray(lids)
    ords = np.asarray(ordinals)
    if lid.ndim != 1 or ords.ndim != 1 or len(lid) != len(ords):
        raise ValueError(
            f"lids and ordinals must be 1-D arrays of one length, got {lid.shape} and {ords.shape}"
        )
    if len(lid) and not (np.issubdtype(lid.dtype, np.integer) and np.issubdtype(ords.dtype, np.integer)):
        raise ValueError("lids and ordinals must be integer arrays")
    if len(ords) and ords.min() < 0:
        raise ValueError(f"source ordinals must be non-negative, got {int(ords.min())}")
    if not len(lid):
        return {}
    lid, ords = lid.astype(np.int64), ords.astype(np.int64)
    order = np.lexsort((ords, lid))
    lid, ords = lid[order], ords[order]
    keep = np.concatenate([[True], (lid[1:] != lid[:-1]) | (ords[1:] != ords[:-1])])
    lid, ords = lid[keep], ords[keep]
    starts = np.flatnonzero(np.concatenate([[True], lid[1:] != lid[:-1]]))
    bounds = np.append(starts, len(lid))
    if kind is None:
        g = int(np.argmax(np.diff(bounds)))
        kind = best_for(ords[bounds[g] : bounds[g + 1]], universe or int(ords.max()) + 1)
    cls = representation(kind)
    return {
        int(lid[s]): cls.from_sorted(ords[s:e])
        for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    }
