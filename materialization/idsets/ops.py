"""The set questions lineage asks, for any representation: forward lineage of several rows
(union of their id sets) and shared sources of two rows (intersection, as an answer object)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from materialization.idsets.base import IdSet


def union_all(sets: Iterable[IdSet]) -> IdSet:
    """The union of many id sets in the first set's representation (others are converted).

    Each representation has an n-way union (``union_many``: one sort, roaring's n-way OR, a
    balanced tree of BDD ORs), which beats a left fold of pairwise unions on many groups.
    """
    items = list(sets)
    if not items:
        raise ValueError(
            "union_all needs at least one id set (the representation of an empty union is unknown)"
        )
    first = items[0]
    return type(first).union_many([first.coerce(s) for s in items])  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Overlap:
    """Which source rows two output rows share: ``shared`` = lineage(a) ∩ lineage(b)."""

    a: Hashable
    b: Hashable
    n_a: int
    n_b: int
    shared: IdSet

    @property
    def n_shared(self) -> int:
        return len(self.shared)

    @property
    def jaccard(self) -> float:
        """|a ∩ b| / |a ∪ b| (0 when both are empty)."""
        union = self.n_a + self.n_b - self.n_shared
        return self.n_shared / union if union else 0.0

    def to_dict(self, limit: int | None = 1000) -> dict[str, Any]:
        """JSON-ready answer; ``shared`` lists at most ``limit`` ids (all with ``limit=None``)."""
        ids = self.shared.to_array()
        shown = ids if limit is None else ids[:limit]
        return {
            "a": self.a,
            "b": self.b,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "n_shared": self.n_shared,
            "jaccard": self.jaccard,
            "representation": self.shared.kind,
            "shared": shown.tolist(),
            "truncated": len(shown) < len(ids),
        }

    def __str__(self) -> str:
        ids = self.shared.to_array()
        head = ", ".join(str(i) for i in ids[:10]) + (", …" if len(ids) > 10 else "")
        return (
            f"outputs {self.a} and {self.b} share {self.n_shared} source rows "
            f"(of {self.n_a} and {self.n_b}; Jaccard {self.jaccard:.3f}): [{head}]"
        )


def overlap(a: IdSet, b: IdSet, labels: tuple[Hashable, Hashable] = ("a", "b")) -> Overlap:
    """The source rows two outputs share (intersection in ``a``'s representation)."""
    return Overlap(labels[0], labels[1], len(a), len(b), a.intersection(b))
