"""The id-set protocol every representation implements, and the operator plumbing they share.

An id set is an immutable set of non-negative int64 row ids (source ordinals of one output
row's lineage). Representations differ only in storage and in the cost of set operations,
so the lineage code talks to this protocol and the policy picks the representation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Protocol, Self, runtime_checkable

import numpy as np


@runtime_checkable
class IdSet(Protocol):
    """A set of non-negative row ids with the operations lineage queries need."""

    kind: ClassVar[str]

    @classmethod
    def from_sorted(cls, ids: np.ndarray) -> Self: ...

    @classmethod
    def deserialize(cls, data: bytes) -> Self: ...

    def union(self, other: IdSet) -> Self: ...

    def intersection(self, other: IdSet) -> Self: ...

    def difference(self, other: IdSet) -> Self: ...

    def contains(self, ids: np.ndarray) -> np.ndarray: ...

    def to_array(self) -> np.ndarray: ...

    def serialize(self) -> bytes: ...

    @property
    def nbytes(self) -> int: ...

    def __contains__(self, rid: object) -> bool: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[int]: ...


def sorted_ids(ids: np.ndarray | list[int], max_id: int | None = None) -> np.ndarray:
    """Validates ids as strictly increasing non-negative int64 (below ``max_id`` if given).

    One check here rather than in every representation: a wrong order or a negative id would
    otherwise silently build a wrong set in BDDs and sorted arrays alike.
    """
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError(f"ids must be a 1-D array, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"ids must be integers, got dtype {arr.dtype}")
    if arr.dtype == np.uint64 and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError("ids must fit in int64")
    arr = arr.astype(np.int64, copy=False)
    if arr[0] < 0:
        raise ValueError(f"ids must be non-negative, got {int(arr[0])}")
    if arr.size > 1 and not (arr[1:] > arr[:-1]).all():
        raise ValueError("ids must be strictly increasing (sorted, no duplicates)")
    if max_id is not None and arr[-1] > max_id:
        raise ValueError(f"id {int(arr[-1])} is larger than this representation's maximum {max_id}")
    return arr


class IdSetBase:
    """Operators, iteration, equality and cross-representation coercion on top of the protocol."""

    kind: ClassVar[str] = ""

    def coerce(self, other: IdSet) -> Self:
        """``other`` in this set's representation (rebuilt from its ids when it is another kind)."""
        if type(other) is type(self) and self.compatible(other):
            return other  # type: ignore[return-value]
        if not isinstance(other, IdSet):
            raise ValueError(f"expected an IdSet, got {type(other).__name__}")
        return self.like(other.to_array())

    def compatible(self, other: IdSet) -> bool:
        """Whether binary operations with ``other`` (same class) work without rebuilding it."""
        return True

    def like(self, ids: np.ndarray) -> Self:
        """A set of ``ids`` in this set's representation (and settings)."""
        return type(self).from_sorted(ids)  # type: ignore[attr-defined]

    def __or__(self, other: IdSet) -> Self:
        return self.union(other)  # type: ignore[attr-defined]

    def __and__(self, other: IdSet) -> Self:
        return self.intersection(other)  # type: ignore[attr-defined]

    def __sub__(self, other: IdSet) -> Self:
        return self.difference(other)  # type: ignore[attr-defined]

    def __contains__(self, rid: object) -> bool:
        if isinstance(rid, bool) or not isinstance(rid, int | np.integer) or rid < 0:
            return False
        if rid > np.iinfo(np.int64).max:
            return False
        return bool(self.contains(np.array([rid], np.int64))[0])  # type: ignore[attr-defined]

    def __iter__(self) -> Iterator[int]:
        return iter(self.to_array().tolist())  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IdSet):
            return NotImplemented
        return np.array_equal(self.to_array(), other.to_array())  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        ids = self.to_array()  # type: ignore[attr-defined]
        head = ", ".join(str(i) for i in ids[:5]) + (", …" if len(ids) > 5 else "")
        return f"{type(self).__name__}({len(ids)} ids: {head}; {self.nbytes} B)"  # type: ignore[attr-defined]


def probe_array(ids: np.ndarray | list[int]) -> np.ndarray:
    """Probe ids as int64 (any order, duplicates allowed); negative ids are simply absent."""
    arr = np.asarray(ids)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise ValueError("probe ids must be a 1-D integer array")
    return arr.astype(np.int64, copy=False)
