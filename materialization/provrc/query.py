"""In-situ lineage queries over ProvRC tables (paper §V): range joins, de-relativization, merging."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from materialization.provrc.ranges import box_cells, expand, merge_boxes
from materialization.provrc.table import Table


@dataclass(frozen=True, eq=False)
class Boxes:
    """A union of boxes of cells: ``lo`` and ``hi`` (inclusive), shape (boxes, attributes)."""

    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def of(cls, query: Boxes | np.ndarray, ndim: int) -> Boxes:
        """Cells (an (n, ndim) array, or 1-D row ids) become unit boxes, merged."""
        if isinstance(query, Boxes):
            return query
        cells = np.asarray(query, dtype=np.int64).reshape(-1, ndim)
        lo, hi, _ = merge_boxes(cells, cells.copy())
        return cls(lo, hi)

    def __len__(self) -> int:
        return len(self.lo)

    def cells(self) -> np.ndarray:
        """Expands to the distinct cells, sorted: the row-level answer."""
        return box_cells(self.lo, self.hi)


def range_join(qlo: np.ndarray, qhi: np.ndarray, table: Table) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (query box, table row) whose key boxes overlap.

    Table rows are bucketed by the power of two of their length on the first attribute and sorted
    on its low end, so each query box scans, per bucket, only rows starting in
    [q.lo - longest + 1, q.hi]; the remaining attributes are filtered afterwards.
    """
    qs, ts = [], []
    for starts, rows, longest in table.key_index:
        begin = np.searchsorted(starts, qlo[:, 0] - longest + 1, side="left")
        end = np.searchsorted(starts, qhi[:, 0], side="right")
        counts = np.maximum(end - begin, 0)
        q = np.repeat(np.arange(len(qlo)), counts)
        pos = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        t = rows[np.repeat(begin, counts) + pos]
        keep = np.all((qlo[q] <= table.key_hi[t]) & (table.key_lo[t] <= qhi[q]), axis=1)
        qs.append(q[keep])
        ts.append(t[keep])
    if not qs:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(qs), np.concatenate(ts)


def step(table: Table, query: Boxes) -> Boxes:
    """One θ-join: the value-side boxes related to the key-side ``query`` boxes, merged."""
    q, t = range_join(query.lo, query.hi, table)
    lo = np.maximum(query.lo[q], table.key_lo[t])
    hi = np.minimum(query.hi[q], table.key_hi[t])
    shared = table.shared_refs[t] & (hi > lo)
    if shared.any():  # two value attributes follow one key attribute: split it into single cells
        row, offsets = expand(np.where(shared, hi - lo + 1, 1))
        lo, hi, t, shared = lo[row] + offsets, hi[row], t[row], shared[row]
        hi = np.where(shared, lo, hi)
    vlo, vhi = table.absolute_values(lo, hi, t)
    vlo, vhi, _ = merge_boxes(vlo, vhi)
    return Boxes(vlo, vhi)


def _walk(tables: Sequence[Table], query: Boxes | np.ndarray, orientation: str, rows: bool):
    if not tables:
        raise ValueError("a lineage path needs at least one table")
    for before, after in itertools.pairwise(tables):
        if before.val_shape != after.key_shape:
            raise ValueError(f"path breaks: {before.val_shape} cells do not feed {after.key_shape}")
    boxes = Boxes.of(query, len(tables[0].key_shape))
    for table in tables:
        if table.orientation != orientation:
            raise ValueError(f"a {orientation} query needs {orientation} tables, not {table.orientation}")
        boxes = step(table, boxes)
    return boxes.cells() if rows else boxes


def backward(tables: Sequence[Table], query: Boxes | np.ndarray, rows: bool = False):
    """Input cells of the path's first operation that the queried cells of its last output depend on.

    ``tables`` are backward tables from the last operation back to the first; ``query`` holds
    cells of the last output (or Boxes). Returns Boxes, or the distinct cells if ``rows``.
    """
    return _walk(tables, query, "backward", rows)


def forward(tables: Sequence[Table], query: Boxes | np.ndarray, rows: bool = False):
    """Output cells of the path's last operation that depend on the queried input cells.

    ``tables`` are forward tables from the first operation to the last.
    """
    return _walk(tables, query, "forward", rows)
