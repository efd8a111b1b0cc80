"""Id sets as reduced ordered BDDs in a shared ``dd`` manager (CUDD when ``dd.cudd`` is built,
else the pure-Python ``dd.autoref``).

All sets of one (backend, width) live in one manager, so overlapping lineage sets share nodes
(the multi-rooted roBDD of the forward-lineage paper, section 4.2) and union / intersection /
difference are the package's apply operations, whose cost depends on node counts, not on
cardinalities. Construction goes through numpy (``bdd_nodes.build``): one ``find_or_add`` per
final node. Membership and enumeration walk an exported node table (``bdd_nodes``), cached
per set (sets are immutable).
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any, ClassVar, Self

import numpy as np

from materialization.idsets import bdd_nodes
from materialization.idsets.base import IdSet, IdSetBase, probe_array, sorted_ids

try:
    import dd.cudd as _cudd
except ImportError:  # pragma: no cover - depends on how dd was built
    _cudd = None
import dd.autoref as _autoref

BACKEND = "cudd" if _cudd is not None else "autoref"
DEFAULT_WIDTH = 48  # ids below 2^48 (2.8e14 rows); the width only costs one node per unused top bit
MAX_WIDTH = 62
TAG = b"B"
_HEADER = struct.Struct("<cBII")  # tag, width, number of internal nodes, root ref
_ROW = 9  # serialized node: bit (uint8), lo ref (uint32), hi ref (uint32)


@cache
def manager(width: int, backend: str) -> Any:
    """The shared BDD manager for ids of ``width`` bits: variables b{width-1} … b0 in that
    order (most significant bit on top) and dynamic reordering off, so the order stays fixed."""
    if not 1 <= width <= MAX_WIDTH:
        raise ValueError(f"BDD width must be between 1 and {MAX_WIDTH}, got {width}")
    if backend not in ("cudd", "autoref"):
        raise ValueError(f"unknown BDD backend {backend!r} (use 'cudd' or 'autoref')")
    if backend == "cudd" and _cudd is None:
        raise ValueError("dd.cudd is not available here; use backend='autoref'")
    bdd = (_cudd if backend == "cudd" else _autoref).BDD()
    bdd.configure(reordering=False)
    bdd.declare(*var_names(width)[::-1])
    return bdd


def fresh_managers() -> None:
    """Sets built from now on go to new managers (for benchmarks: cold operation caches, since
    the managers memoise apply results); existing sets keep working in their own manager."""
    manager.cache_clear()


@cache
def var_names(width: int) -> list[str]:
    """Variable name of each bit, index = bit (0 = least significant)."""
    return [f"b{i}" for i in range(width)]


class BddIdSet(IdSetBase):
    """One root in a shared roBDD manager; ``nodes`` is its size in BDD nodes."""

    kind: ClassVar[str] = "bdd"
    serialize_tag: ClassVar[bytes] = TAG

    def __init__(self, func: Any, width: int, backend: str) -> None:
        self._u = func
        self._bdd = func.bdd
        self.width = width
        self.backend = backend
        self._table: bdd_nodes.NodeTable | None = None

    @classmethod
    def from_sorted(
        cls, ids: np.ndarray | list[int], width: int = DEFAULT_WIDTH, backend: str = BACKEND
    ) -> Self:
        return cls._build(manager(width, backend), ids, width, backend)

    @classmethod
    def _build(cls, bdd: Any, ids: np.ndarray | list[int], width: int, backend: str) -> Self:
        arr = sorted_ids(ids, max_id=(1 << width) - 1)
        return cls(_materialize(bdd, bdd_nodes.build(arr, width), width), width, backend)

    def like(self, ids: np.ndarray) -> Self:
        return type(self)._build(self._bdd, ids, self.width, self.backend)  # same manager as self

    def compatible(self, other: IdSet) -> bool:
        return isinstance(other, BddIdSet) and other._bdd is self._bdd and other.width == self.width

    def _wrap(self, func: Any) -> Self:
        return type(self)(func, self.width, self.backend)

    def union(self, other: IdSet) -> Self:
        return self._wrap(self._u | self.coerce(other)._u)

    def intersection(self, other: IdSet) -> Self:
        return self._wrap(self._u & self.coerce(other)._u)

    def difference(self, other: IdSet) -> Self:
        return self._wrap(self._u & ~self.coerce(other)._u)

    @property
    def table(self) -> bdd_nodes.NodeTable:
        """The node table of this root (exported from the manager once, then cached)."""
        if self._table is None:
            self._table = _export(self._u, self.width)
        return self._table

    def contains(self, ids: np.ndarray) -> np.ndarray:
        return bdd_nodes.contains(self.table, probe_array(ids), self.width)

    def to_array(self) -> np.ndarray:
        return bdd_nodes.enumerate_ids(self.table, self.width)

    def __len__(self) -> int:
        return int(self._bdd.count(self._u, nvars=self.width))

    @property
    def nodes(self) -> int:
        """Internal BDD nodes of this set (the package's DAG size less the constant)."""
        return len(self._u) - 1

    @property
    def nbytes(self) -> int:
        return _HEADER.size + _ROW * self.nodes

    def serialize(self) -> bytes:
        t = self.table
        head = _HEADER.pack(TAG, self.width, len(t.bit), t.root)
        return b"".join(
            [
                head,
                t.bit.astype(np.uint8).tobytes(),
                t.lo.astype("<u4").tobytes(),
                t.hi.astype("<u4").tobytes(),
            ]
        )

    @classmethod
    def deserialize(cls, data: bytes, backend: str = BACKEND) -> Self:
        if data[:1] != TAG or len(data) < _HEADER.size:
            raise ValueError("not a serialized BDD id set")
        _, width, n, root = _HEADER.unpack_from(data)
        if len(data) != _HEADER.size + _ROW * n:
            raise ValueError(f"serialized BDD id set is truncated ({len(data)} bytes for {n} nodes)")
        o = _HEADER.size
        bit = np.frombuffer(data, np.uint8, n, o).astype(np.int64)
        lo = np.frombuffer(data, "<u4", n, o + n).astype(np.int64)
        hi = np.frombuffer(data, "<u4", n, o + 5 * n).astype(np.int64)
        table = bdd_nodes.NodeTable(bit, lo, hi, root)
        out = cls(_materialize(manager(width, backend), table, width), width, backend)
        out._table = table
        return out

    @staticmethod
    def union_many(sets: list[BddIdSet]) -> BddIdSet:
        """Pairwise ORs in a balanced tree: operands stay similar in size (cheaper applies)."""
        items = [sets[0].coerce(s) for s in sets]
        while len(items) > 1:
            items = [a | b for a, b in zip(items[::2], items[1::2], strict=False)] + (
                [items[-1]] if len(items) % 2 else []
            )
        return items[0]


def _materialize(bdd: Any, table: bdd_nodes.NodeTable, width: int) -> Any:
    """The manager's function of a node table: one ``find_or_add`` per node, children first.

    CUDD wants the 1-edge regular (``find_or_add`` does not normalise and a complemented 1-edge
    corrupts the unique table), so a node with a complemented 1-child is added as the negation
    of its complemented twin (same function)."""
    names = var_names(width)
    one = bdd.true
    funcs = [one]

    def fn(ref: int) -> Any:
        f = funcs[ref >> 1]
        return ~f if ref & 1 else f

    for b, lo, hi in zip(table.bit.tolist(), table.lo.tolist(), table.hi.tolist(), strict=True):
        f_lo, f_hi = fn(lo), fn(hi)
        if f_hi.negated:
            funcs.append(~bdd.find_or_add(names[b], ~f_lo, ~f_hi))
        else:
            funcs.append(bdd.find_or_add(names[b], f_lo, f_hi))
    return fn(table.root)


def _export(root: Any, width: int) -> bdd_nodes.NodeTable:
    """The node table of a function in the manager: iterative post-order over regular nodes,
    children's complement marks kept in the refs (the manager's own complement-edge form)."""
    index: dict[int, int] = {}
    rows: list[tuple[int, int, int]] = []

    def regular(f: Any) -> Any:
        return ~f if f.negated else f

    top = regular(root)
    one = regular(root.bdd.true)
    index[int(one)] = 0
    stack = [top]
    while stack:
        f = stack[-1]
        key = int(f)
        if key in index:
            stack.pop()
            continue
        lo, hi = f.low, f.high
        rlo, rhi = regular(lo), regular(hi)
        todo = [g for g in (rlo, rhi) if int(g) not in index]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        index[key] = len(index)
        rows.append((width - 1 - f.level, 2 * index[int(rlo)] + lo.negated, 2 * index[int(rhi)] + hi.negated))
    arr = np.array(rows, np.int64).reshape(-1, 3)
    root_ref = 2 * index[int(top)] + int(root.negated)
    return bdd_nodes.NodeTable(arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), root_ref)
