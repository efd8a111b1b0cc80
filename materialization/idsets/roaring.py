"""Id sets as 64-bit roaring bitmaps (pyroaring ``BitMap64``): containers per 2^16 block, with
run containers for clustered ids (``run_optimize``), so both sparse and contiguous sets stay small."""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np
from pyroaring import BitMap64

from materialization.idsets.base import IdSet, IdSetBase, probe_array, sorted_ids

TAG = b"R"


def runs(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Maximal runs of consecutive ids in a sorted id array, as (starts, inclusive ends)."""
    if not len(ids):
        return ids, ids
    breaks = np.flatnonzero(np.diff(ids) != 1)
    return ids[np.concatenate([[0], breaks + 1])], ids[np.concatenate([breaks, [len(ids) - 1]])]


class RoaringIdSet(IdSetBase):
    """A frozen roaring bitmap over 64-bit ids (all of int64's non-negative range)."""

    kind: ClassVar[str] = "roaring"
    serialize_tag: ClassVar[bytes] = TAG

    def __init__(self, bitmap: BitMap64) -> None:
        self._bm = bitmap

    @classmethod
    def from_sorted(cls, ids: np.ndarray | list[int]) -> Self:
        arr = sorted_ids(ids)
        starts, ends = runs(arr)
        if len(starts) * 8 < len(arr):  # clustered: one add_range per run beats one add per id
            bm = BitMap64()
            for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
                bm.add_range(lo, hi + 1)
        else:
            bm = BitMap64(arr.astype(np.uint64))
        bm.run_optimize()
        return cls(bm)

    def union(self, other: IdSet) -> Self:
        return type(self)(self._bm | self.coerce(other)._bm)

    def intersection(self, other: IdSet) -> Self:
        return type(self)(self._bm & self.coerce(other)._bm)

    def difference(self, other: IdSet) -> Self:
        return type(self)(self._bm - self.coerce(other)._bm)

    def contains(self, ids: np.ndarray) -> np.ndarray:
        bm = self._bm
        return np.fromiter((i >= 0 and i in bm for i in probe_array(ids).tolist()), bool, len(ids))

    def to_array(self) -> np.ndarray:
        return np.frombuffer(self._bm.to_array(), np.uint64).astype(np.int64)

    def __len__(self) -> int:
        return len(self._bm)

    @property
    def nbytes(self) -> int:
        return len(TAG) + len(self._bm.serialize())

    def serialize(self) -> bytes:
        return TAG + self._bm.serialize()

    @classmethod
    def deserialize(cls, data: bytes) -> Self:
        if data[:1] != TAG:
            raise ValueError("not a serialized roaring id set")
        return cls(BitMap64.deserialize(bytes(data[1:])))

    @staticmethod
    def union_many(sets: list[RoaringIdSet]) -> RoaringIdSet:
        """roaring's n-way union (one pass over all containers)."""
        return RoaringIdSet(BitMap64.union(*[s._bm for s in sets]) if sets else BitMap64())
