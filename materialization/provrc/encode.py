"""ProvRC compression (paper §IV): multi-attribute range encoding plus the relative value transformation."""

from __future__ import annotations

import numpy as np

from materialization.provrc.ranges import informative, merge_boxes
from materialization.provrc.relation import Relation
from materialization.provrc.table import ABSOLUTE, Table


def compress(relation: Relation, orientation: str = "backward") -> Table:
    """Compresses a lineage relation losslessly into a ProvRC table.

    Step 1 range-encodes the value attributes (input cells of a backward table); step 2 merges
    rows along each key attribute, last first, where every value attribute is either equal or
    equal relative to that key attribute (one-to-one runs, shifts, transposes); step 1 runs
    again because relative ranges can now touch.
    """
    rel = relation if orientation == "backward" else relation.swapped()
    a, b = rel.out.shape[1], rel.inp.shape[1]
    rows = np.hstack([rel.out, rel.inp])
    ref = np.full((len(rows), b), ABSOLUTE, dtype=np.int64)
    val_dims = range(a + b - 1, a - 1, -1)
    lo, hi, ref = merge_boxes(rows, rows.copy(), ref, dims=val_dims)
    for k in reversed(range(a)):
        for by_relative in (True, False):
            lo, hi, ref = _merge_key(lo, hi, ref, a, k, by_relative)
    lo, hi, ref = merge_boxes(lo, hi, ref, dims=val_dims)
    return Table(orientation, lo[:, :a], hi[:, :a], lo[:, a:], hi[:, a:], ref.astype(np.int8),
                 rel.out_shape, rel.in_shape)


def _merge_key(lo: np.ndarray, hi: np.ndarray, ref: np.ndarray, a: int, k: int, by_relative: bool):
    """One pass of step 2 along key attribute ``k``.

    Rows of one key box are ranked (by relative or by absolute value ranges: two passes, since
    either ranking can line up the rows that merge) and rows with equal rank and equal other key
    ranges are compared with their neighbour along k. A pair merges when, per value attribute,
    the ranges are equal as stored or equal relative to k; a run keeps one choice per attribute.
    """
    n = len(lo)
    if n < 2:
        return lo, hi, ref
    klo, khi, vlo, vhi = lo[:, :a], hi[:, :a], lo[:, a:], hi[:, a:]
    can_rel = (ref == k) | ((ref == ABSOLUTE) & (klo[:, [k]] == khi[:, [k]]))
    shift = np.where(ref == k, 0, klo[:, [k]])
    rlo, rhi = vlo - shift, vhi - shift
    keys = [klo[:, j] for j in range(a)] + [khi[:, j] for j in range(a)]
    form = [rlo, rhi] if by_relative else [vlo, vhi, ref]
    cols = informative([c[:, i] for c in form for i in range(c.shape[1])])
    box = informative(keys)
    ranked = [*cols[::-1], *box[::-1]]  # none when every row has the same ranges
    order = np.lexsort(ranked) if ranked else np.arange(n)
    same_box = np.ones(n - 1, dtype=bool)
    for c in box:
        s = c[order]
        same_box &= s[1:] == s[:-1]
    first = np.maximum.accumulate(np.where(np.concatenate([[True], ~same_box]), np.arange(n), 0))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first

    others = informative([c for j, c in enumerate(keys) if j % a != k])
    order = np.lexsort([klo[:, k], rank, *others[::-1]])
    lo, hi, ref, rlo, rhi, can_rel, rank = (x[order] for x in (lo, hi, ref, rlo, rhi, can_rel, rank))
    klo, khi, vlo, vhi = lo[:, :a], hi[:, :a], lo[:, a:], hi[:, a:]
    ok = (rank[1:] == rank[:-1]) & (klo[1:, k] == khi[:-1, k] + 1)
    for j in range(a):
        if j != k:
            ok &= (klo[1:, j] == klo[:-1, j]) & (khi[1:, j] == khi[:-1, j])
    stored_eq = (vlo[1:] == vlo[:-1]) & (vhi[1:] == vhi[:-1]) & (ref[1:] == ref[:-1])
    rel_eq = can_rel[1:] & can_rel[:-1] & (rlo[1:] == rlo[:-1]) & (rhi[1:] == rhi[:-1])
    ok &= np.all(stored_eq | rel_eq, axis=1)
    mode = ~stored_eq  # per pair and value attribute: merged as relative to k
    link = ok & np.concatenate([[True], ~ok[:-1] | np.all(mode[1:] == mode[:-1], axis=1)])
    starts = np.flatnonzero(np.concatenate([[True], ~link]))
    ends = np.concatenate([starts[1:], [n]]) - 1
    run_mode = np.zeros((len(starts), ref.shape[1]), dtype=bool)
    multi = ends > starts
    run_mode[multi] = mode[starts[multi]]
    new_lo, new_hi = lo[starts], hi[starts]
    new_hi[:, k] = hi[ends, k]
    new_lo[:, a:] = np.where(run_mode, rlo[starts], vlo[starts])
    new_hi[:, a:] = np.where(run_mode, rhi[starts], vhi[starts])
    new_ref = np.where(run_mode, k, ref[starts])
    return new_lo, new_hi, new_ref
