"""Id sets for large per-output lineage: sorted int64 arrays, roaring bitmaps, reduced ordered
BDDs, behind one protocol, with the set operations lineage needs and a size-regime policy."""

from materialization.idsets.base import IdSet
from materialization.idsets.bdd import BddIdSet
from materialization.idsets.lineage import idsets_by_output
from materialization.idsets.ops import Overlap, overlap, union_all
from materialization.idsets.policy import KINDS, best_for, build, choose, clustering_factor, representation
from materialization.idsets.roaring import RoaringIdSet
from materialization.idsets.sorted_array import SortedIdSet


def deserialize(data: bytes) -> IdSet:
    """An id set from ``serialize()`` bytes of any representation (the first byte names it)."""
    for cls in KINDS.values():
        if data[:1] == cls.serialize_tag:
            return cls.deserialize(data)
    raise ValueError(f"unknown id-set serialization tag {bytes(data[:1])!r}")


__all__ = [
    "KINDS",
    "BddIdSet",
    "IdSet",
    "Overlap",
    "RoaringIdSet",
    "SortedIdSet",
    "best_for",
    "build",
    "choose",
    "clustering_factor",
    "deserialize",
    "idsets_by_output",
    "overlap",
    "representation",
    "union_all",
]
