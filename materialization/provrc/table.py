"""The compressed lineage table: boxes over one side, ranges (absolute or relative) over the other."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from materialization.provrc.ranges import expand
from materialization.provrc.relation import Relation, Shape

ABSOLUTE = -1
ORIENTATIONS = ("backward", "forward")


@dataclass(frozen=True, eq=False)
class Table:
    """A ProvRC table. Each row stands for every (key cell, value cell) pair with the key cell in the
    box ``[key_lo, key_hi]`` and, per value attribute i, ``val[i]`` in ``[val_lo, val_hi]`` when
    ``val_ref[i] == -1`` or ``val[i] - key[val_ref[i]]`` in that range otherwise (relative).

    Backward tables have output cells as keys (the query side must be absolute to be joined on);
    forward tables are the same relation read the other way (paper §IV-C).
    """

    orientation: str
    key_lo: np.ndarray
    key_hi: np.ndarray
    val_lo: np.ndarray
    val_hi: np.ndarray
    val_ref: np.ndarray
    key_shape: Shape
    val_shape: Shape

    def __post_init__(self) -> None:
        if self.orientation not in ORIENTATIONS:
            raise ValueError(f"orientation must be one of {ORIENTATIONS}, not {self.orientation!r}")

    def __len__(self) -> int:
        return len(self.key_lo)

    def absolute_values(self, key_lo: np.ndarray, key_hi: np.ndarray, rows: np.ndarray):
        """De-relativizes the value ranges of ``rows`` for key sub-boxes ``[key_lo, key_hi]``.

        A relative range [a, b] over key attribute k spans [lo_k + a, hi_k + b] in absolute terms;
        the result is exact as long as no key attribute with a non-unit range is referenced twice.
        """
        ref = self.val_ref[rows]
        rel = ref != ABSOLUTE
        k = np.where(rel, ref, 0)
        lo = self.val_lo[rows] + np.where(rel, np.take_along_axis(key_lo, k, axis=1), 0)
        hi = self.val_hi[rows] + np.where(rel, np.take_along_axis(key_hi, k, axis=1), 0)
        return lo, hi

    @cached_property
    def shared_refs(self) -> np.ndarray:
        """Per row and key attribute: referenced by two or more value attributes (e.g. a diagonal)."""
        counts = np.zeros(self.key_lo.shape, dtype=np.int64)
        for i in range(self.val_ref.shape[1]):
            rel = self.val_ref[:, i] != ABSOLUTE
            counts[np.flatnonzero(rel), self.val_ref[rel, i]] += 1
        return counts >= 2

    @cached_property
    def key_index(self) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """For range joins: per power-of-two bucket of first-attribute length, the rows sorted on
        their low end (low ends, row numbers, longest length). Built once per table."""
        length = self.key_hi[:, 0] - self.key_lo[:, 0] + 1
        bucket = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
        index = []
        for b in np.unique(bucket):
            rows = np.flatnonzero(bucket == b)
            rows = rows[np.argsort(self.key_lo[rows, 0], kind="stable")]
            index.append((self.key_lo[rows, 0], rows, int(length[rows].max())))
        return index

    def decompress(self) -> Relation:
        """The exact relation the table was compressed from (expands every row: rows, not boxes)."""
        row, offsets = expand(self.key_hi - self.key_lo + 1)
        keys = self.key_lo[row] + offsets
        vrow, voffsets = expand(self.val_hi[row] - self.val_lo[row] + 1)
        lo, _ = self.absolute_values(keys[vrow], keys[vrow], row[vrow])
        vals, keys = lo + voffsets, keys[vrow]
        if self.orientation == "backward":
            return Relation(keys, vals, self.key_shape, self.val_shape)
        return Relation(vals, keys, self.val_shape, self.key_shape)
