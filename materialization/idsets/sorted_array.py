"""Id sets as sorted int64 arrays: the plain baseline (8 bytes per id, merge-based operations)."""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np

from materialization.idsets.base import IdSet, IdSetBase, probe_array, sorted_ids

TAG = b"S"


def merge_unique(arrays: list[np.ndarray]) -> np.ndarray:
    """The sorted union of sorted int64 arrays: one stable sort (timsort merges the pre-sorted
    runs in near-linear time) and a neighbour mask. numpy 2.4's ``np.unique`` takes a hash
    path that measured 10 s on 8 M ids here, against 0.2 s for this."""
    if not arrays:
        return np.empty(0, np.int64)
    c = np.concatenate(arrays).astype(np.int64, copy=False)
    c.sort(kind="stable")
    return c[np.concatenate([[True], c[1:] != c[:-1]])] if len(c) else c


def members(ids: np.ndarray, probes: np.ndarray) -> np.ndarray:
    """Which probes are in the sorted array ``ids`` (binary search per probe)."""
    if not len(ids):
        return np.zeros(len(probes), bool)
    pos = np.searchsorted(ids, probes)
    pos[pos == len(ids)] = 0
    return ids[pos] == probes


class SortedIdSet(IdSetBase):
    """A strictly increasing int64 array; cheapest for small sets, linear in size for everything."""

    kind: ClassVar[str] = "sorted"
    serialize_tag: ClassVar[bytes] = TAG

    def __init__(self, ids: np.ndarray) -> None:
        self._ids = ids

    @classmethod
    def from_sorted(cls, ids: np.ndarray | list[int]) -> Self:
        return cls(sorted_ids(ids))

    def union(self, other: IdSet) -> Self:
        return type(self)(merge_unique([self._ids, self.coerce(other)._ids]))

    def intersection(self, other: IdSet) -> Self:
        a, b = self._ids, self.coerce(other)._ids
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        return type(self)(small[members(large, small)])  # binary search from the smaller side

    def difference(self, other: IdSet) -> Self:
        return type(self)(self._ids[~members(self.coerce(other)._ids, self._ids)])

    def contains(self, ids: np.ndarray) -> np.ndarray:
        return members(self._ids, probe_array(ids))

    def to_array(self) -> np.ndarray:
        return self._ids

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def nbytes(self) -> int:
        return len(TAG) + 8 * len(self._ids)

    def serialize(self) -> bytes:
        return TAG + self._ids.astype("<i8").tobytes()

    @classmethod
    def deserialize(cls, data: bytes) -> Self:
        if data[:1] != TAG:
            raise ValueError("not a serialized sorted-array id set")
        return cls(np.frombuffer(data, "<i8", offset=1).astype(np.int64))

    @staticmethod
    def union_many(sets: list[SortedIdSet]) -> SortedIdSet:
        """One sort over all ids instead of a chain of pairwise merges."""
        return SortedIdSet(merge_unique([s._ids for s in sets]))
