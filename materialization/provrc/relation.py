"""Lineage relations: which input cells each output cell was derived from, as plain integer arrays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Shape = tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Relation:
    """A set of (output cell, input cell) pairs; cells are n-dimensional indices (row ids: 1-D).

    ``out`` has shape (rows, len(out_shape)) and ``inp`` (rows, len(in_shape)). Set semantics:
    ProvRC is lossless on sets, so duplicates are dropped on construction.
    """

    out: np.ndarray
    inp: np.ndarray
    out_shape: Shape
    in_shape: Shape

    def __post_init__(self) -> None:
        out = np.asarray(self.out, dtype=np.int64).reshape(-1, len(self.out_shape))
        inp = np.asarray(self.inp, dtype=np.int64).reshape(-1, len(self.in_shape))
        if len(out) != len(inp):
            raise ValueError(f"{len(out)} output cells for {len(inp)} input cells")
        out, inp = _distinct_sorted(out, inp, tuple(self.out_shape), tuple(self.in_shape))
        object.__setattr__(self, "out", out)
        object.__setattr__(self, "inp", inp)
        object.__setattr__(self, "out_shape", tuple(int(s) for s in self.out_shape))
        object.__setattr__(self, "in_shape", tuple(int(s) for s in self.in_shape))

    @classmethod
    def from_flat(cls, out_ids: np.ndarray, in_ids: np.ndarray, out_shape: Shape, in_shape: Shape,
                  ) -> Relation:
        """Builds a relation from flat (row-major) cell ids, the form vectorised capture produces."""
        out = np.stack(np.unravel_index(np.asarray(out_ids, dtype=np.int64), out_shape), axis=1)
        inp = np.stack(np.unravel_index(np.asarray(in_ids, dtype=np.int64), in_shape), axis=1)
        return cls(out, inp, out_shape, in_shape)

    def __len__(self) -> int:
        return len(self.out)

    def swapped(self) -> Relation:
        """The same pairs read input → output: what a forward-oriented table is compressed from."""
        return Relation(self.inp, self.out, self.in_shape, self.out_shape)

    @property
    def raw_bytes(self) -> int:
        """Size as uncompressed int64 rows, the paper's "Raw" baseline."""
        return len(self) * (len(self.out_shape) + len(self.in_shape)) * 8


def _distinct_sorted(out: np.ndarray, inp: np.ndarray, out_shape: Shape, in_shape: Shape):
    """Drops duplicate pairs and sorts them (output cell, then input cell): one 1-D sort of
    combined flat ids where they fit in int64, row-wise ``np.unique`` otherwise."""
    n_out, n_in = int(np.prod(out_shape)), int(np.prod(in_shape))
    if not len(out):
        return out, inp
    if n_out * n_in >= 2**62:
        both = np.unique(np.hstack([out, inp]), axis=0)
        return np.ascontiguousarray(both[:, : out.shape[1]]), np.ascontiguousarray(both[:, out.shape[1] :])
    flat_out = np.ravel_multi_index(tuple(out.T), out_shape)
    flat_in = np.ravel_multi_index(tuple(inp.T), in_shape)
    key = np.sort(flat_out * n_in + flat_in)
    key = key[np.concatenate([[True], key[1:] != key[:-1]])]  # sort + diff: np.unique hashes first, slower
    out = np.stack(np.unravel_index(key // n_in, out_shape), axis=1).reshape(-1, len(out_shape))
    inp = np.stack(np.unravel_index(key % n_in, in_shape), axis=1).reshape(-1, len(in_shape))
    return out, inp
