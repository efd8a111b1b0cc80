"""Boxes (one integer range per attribute) and the range merge both compression and queries rely on."""

from __future__ import annotations

import numpy as np


def informative(cols: list[np.ndarray]) -> list[np.ndarray]:
    """The columns that matter as sort and grouping keys: constants and repeats of an earlier
    column change neither an order nor an equality, and dropping them makes sorts cheaper."""
    kept: list[np.ndarray] = []
    for c in cols:
        if len(c) and (c == c[0]).all():
            continue
        if not any(np.array_equal(c, k) for k in kept):
            kept.append(c)
    return kept


def merge_along(lo: np.ndarray, hi: np.ndarray, d: int, extra: np.ndarray | None = None):
    """Unions boxes that agree on every attribute but ``d`` (and on ``extra``) and touch along ``d``.

    Rows are grouped on the other attributes' ranges plus the ``extra`` columns, sorted on ``d``,
    and runs whose ranges overlap or are adjacent become one row: the union is exact, so this is
    both ProvRC's range-encoding step and the merge between query steps. Returns (lo, hi, extra).
    """
    n, k = lo.shape
    extra = np.empty((n, 0), np.int64) if extra is None else extra
    if n < 2:
        return lo, hi, extra
    others = [lo[:, j] for j in range(k) if j != d] + [hi[:, j] for j in range(k) if j != d]
    others = informative(others + [extra[:, j] for j in range(extra.shape[1])])
    order = np.lexsort([lo[:, d], *others[::-1]])
    lo, hi, extra = lo[order], hi[order], extra[order]
    same = np.ones(n - 1, dtype=bool)
    for col in others:
        c = col[order]
        same &= c[1:] == c[:-1]
    group = np.concatenate([[0], np.cumsum(~same)])
    base = lo[:, d].min()
    span = int(hi[:, d].max() - base) + 2
    reach = np.maximum.accumulate(hi[:, d] - base + group * span)  # running max of hi, per group
    start = np.concatenate([[True], ~same | (lo[1:, d] - base + group[1:] * span > reach[:-1] + 1)])
    first = np.flatnonzero(start)
    new_hi = np.maximum.reduceat(hi[:, d], first)
    lo, hi, extra = lo[first], hi[first].copy(), extra[first]
    hi[:, d] = new_hi
    return lo, hi, extra


def merge_boxes(lo: np.ndarray, hi: np.ndarray, extra: np.ndarray | None = None, dims=None):
    """Merges along every attribute in ``dims`` (default: all, last first) until nothing changes."""
    dims = list(range(lo.shape[1]))[::-1] if dims is None else list(dims)
    while True:
        n = len(lo)
        for d in dims:
            lo, hi, extra = merge_along(lo, hi, d, extra)
        if len(lo) == n:
            return lo, hi, extra


def expand(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Enumerates the cells of boxes with the given per-attribute lengths.

    Returns the box each cell comes from and the cell's offsets from the box's low corner
    (row-major within a box), without a Python loop over boxes.
    """
    n, k = lengths.shape
    counts = np.prod(lengths, axis=1)
    row = np.repeat(np.arange(n), counts)
    local = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    offsets = np.empty((len(row), k), dtype=np.int64)
    for j in reversed(range(k)):
        size = lengths[row, j]
        offsets[:, j] = local % size
        local //= size
    return row, offsets


def box_cells(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The distinct cells covered by a union of boxes, sorted (the row-level answer)."""
    row, offsets = expand(hi - lo + 1)
    cells = lo[row] + offsets
    return np.unique(cells, axis=0) if len(cells) else cells
