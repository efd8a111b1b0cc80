"""Lineage queries on uncompressed relations: the definition in-situ answers must equal, and the
decompress-then-query baseline they are measured against."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from materialization.provrc.relation import Relation


def flat_ids(cells: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.ravel_multi_index(tuple(np.asarray(cells).T), shape) if len(cells) else np.empty(0, np.int64)


def semijoin_path(relations: Sequence[Relation], cells: np.ndarray, direction: str) -> np.ndarray:
    """Flat ids of the cells reached from ``cells`` through ``relations`` (in path order), found
    row by row: each step keeps the pairs whose source is in the current set."""
    backward = direction == "backward"
    ids = flat_ids(cells, relations[0].out_shape if backward else relations[0].in_shape)
    for r in relations:
        src, dst = (flat_ids(r.out, r.out_shape), flat_ids(r.inp, r.in_shape))[:: 1 if backward else -1]
        ids = np.unique(dst[np.isin(src, ids)])
    return ids
