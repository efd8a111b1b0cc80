"""Vectorised cell-level lineage capture for numpy operations (no Python loop over cells).

The trick: an operation that only moves values (reshape, transpose, slicing, tile, filtering,
sorting) is applied to an array of flat cell ids, and where each id lands is its lineage.
Element-wise operations broadcast the ids; reductions, matrix products and cumulative sums
enumerate their all-to-all or triangular blocks with index arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from materialization.provrc.relation import Relation, Shape


@dataclass(frozen=True)
class Op:
    """An array operation: ``compute`` gives the result; ``lineage(result, *inputs, **args)`` one
    relation per input. Kept apart so that reuse can compute without capturing."""

    compute: Callable[..., np.ndarray]
    lineage: Callable[..., list[Relation]]


def cell_ids(shape: Shape) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)


def gather(in_ids: np.ndarray, in_shape: Shape) -> Relation:
    """Lineage of an output whose every cell comes from exactly one input cell (``in_ids`` per cell)."""
    in_ids = np.atleast_1d(in_ids)
    return Relation.from_flat(np.arange(in_ids.size), in_ids.ravel(), in_ids.shape, in_shape)


def elementwise(ufunc: Callable[..., np.ndarray]) -> Op:
    def lineage(result: np.ndarray, *arrays: np.ndarray) -> list[Relation]:
        return [gather(np.broadcast_to(cell_ids(a.shape), result.shape), a.shape) for a in arrays]

    return Op(ufunc, lineage)


def structural(fn: Callable[..., np.ndarray]) -> Op:
    """Operations that move values around: ``fn`` applied to cell ids is the lineage."""

    def lineage(result: np.ndarray, x: np.ndarray, **args) -> list[Relation]:
        return [gather(fn(cell_ids(x.shape), **args), x.shape)]

    return Op(fn, lineage)


def reduction(fn: Callable[..., np.ndarray]) -> Op:
    """Aggregates over ``axis`` (None: all); every output cell depends on its whole reduced slab."""

    def compute(x: np.ndarray, axis: int | tuple[int, ...] | None = None) -> np.ndarray:
        return np.atleast_1d(fn(x, axis=axis))

    def lineage(result: np.ndarray, x: np.ndarray, axis: int | tuple[int, ...] | None = None,
                ) -> list[Relation]:
        axes = list(range(x.ndim)) if axis is None else sorted(int(a) % x.ndim for a in np.atleast_1d(axis))
        kept = [d for d in range(x.ndim) if d not in axes]
        slabs = np.transpose(cell_ids(x.shape), kept + axes).reshape(result.size, -1)
        out = np.repeat(np.arange(result.size), slabs.shape[1])
        return [Relation.from_flat(out, slabs.ravel(), result.shape, x.shape)]

    return Op(compute, lineage)


def _sort_order(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.argsort(x, axis=axis, kind="stable")


def _sort_lineage(result: np.ndarray, x: np.ndarray, axis: int = -1) -> list[Relation]:
    """A sorted cell (or an argsort index) stems from the input cell it shows."""
    return [gather(np.take_along_axis(cell_ids(x.shape), _sort_order(x, axis), axis), x.shape)]


def _matmul_lineage(result: np.ndarray, a: np.ndarray, b: np.ndarray) -> list[Relation]:
    """Output (i, j) depends on row i of ``a`` and column j of ``b`` (``b`` may be a vector)."""
    n, k = a.shape
    m = b.size // k
    i, j, s = (g.ravel() for g in np.indices((n, m, k), dtype=np.int64))
    out = i * m + j
    return [Relation.from_flat(out, i * k + s, result.shape, a.shape),
            Relation.from_flat(out, s * m + j if b.ndim == 2 else s, result.shape, b.shape)]


def _cumsum_lineage(result: np.ndarray, x: np.ndarray, axis: int = -1) -> list[Relation]:
    """Cell i along the axis depends on cells 0..i (a triangle per line)."""
    lines = np.moveaxis(cell_ids(x.shape), axis, -1).reshape(-1, x.shape[axis])
    later, earlier = np.tril_indices(x.shape[axis])
    return [Relation.from_flat(lines[:, later].ravel(), lines[:, earlier].ravel(), x.shape, x.shape)]


def _group_by(keys: np.ndarray) -> np.ndarray:
    return np.unique(keys)


def _group_by_lineage(result: np.ndarray, keys: np.ndarray) -> list[Relation]:
    """Group g (in sorted key order) depends on the row ids holding its key."""
    group = np.searchsorted(result, keys)
    return [Relation.from_flat(group, np.arange(len(keys)), result.shape, keys.shape)]


def _join_pairs(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Matching (left row, right row) pairs of an equi-join on keys, in left-row order."""
    order = np.argsort(right, kind="stable")
    begin = np.searchsorted(right[order], left, side="left")
    end = np.searchsorted(right[order], left, side="right")
    counts = end - begin
    lrow = np.repeat(np.arange(len(left)), counts)
    pos = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    return lrow, order[np.repeat(begin, counts) + pos]


def _inner_join(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return left[_join_pairs(left, right)[0]]


def _inner_join_lineage(result: np.ndarray, left: np.ndarray, right: np.ndarray) -> list[Relation]:
    lrow, rrow = _join_pairs(left, right)
    out = np.arange(len(lrow))
    return [Relation.from_flat(out, lrow, result.shape, left.shape),
            Relation.from_flat(out, rrow, result.shape, right.shape)]


def _img_filter_windows(img: np.ndarray, threshold: float):
    """Per 3x3 offset: the shifted window and which output pixels take it (bright neighbours only)."""
    h, w = img.shape
    ys, xs = np.indices((h, w))
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            y, x = ys + dy, xs + dx
            inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
            yc, xc = np.clip(y, 0, h - 1), np.clip(x, 0, w - 1)
            take = inside & ((img[yc, xc] > threshold) | ((dy == 0) & (dx == 0)))
            yield yc * w + xc, take


def _img_filter(img: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """A value-dependent smoothing: each pixel averages itself and its neighbours above threshold."""
    total, count = np.zeros(img.shape), np.zeros(img.shape)
    for src, take in _img_filter_windows(img, threshold):
        total += np.where(take, img.ravel()[src], 0.0)
        count += take
    return total / count


def _img_filter_lineage(result: np.ndarray, img: np.ndarray, threshold: float = 0.5) -> list[Relation]:
    outs, ins = [], []
    for src, take in _img_filter_windows(img, threshold):
        outs.append(np.flatnonzero(take))
        ins.append(src.ravel()[take.ravel()])
    return [Relation.from_flat(np.concatenate(outs), np.concatenate(ins), img.shape, img.shape)]


OPS: dict[str, Op] = {
    **{name: elementwise(getattr(np, name))
       for name in ("negative", "abs", "exp", "sin", "square", "add", "subtract", "multiply", "maximum")},
    **{name: reduction(getattr(np, name)) for name in ("sum", "mean", "max", "min", "prod")},
    "reshape": structural(lambda x, shape: np.reshape(x, shape)),
    "transpose": structural(lambda x, axes=None: np.transpose(x, axes)),
    "flip": structural(lambda x, axis=None: np.flip(x, axis)),
    "roll": structural(lambda x, shift, axis=None: np.roll(x, shift, axis)),
    "rot90": structural(lambda x, k=1: np.rot90(x, k)),
    "tile": structural(lambda x, reps: np.tile(x, reps)),
    "repeat": structural(lambda x, repeats, axis=None: np.repeat(x, repeats, axis)),
    "slice": structural(lambda x, key: x[key]),
    "filter": structural(lambda x, mask: x[mask]),
    "sort": Op(lambda x, axis=-1: np.sort(x, axis=axis, kind="stable"), _sort_lineage),
    "argsort": Op(_sort_order, _sort_lineage),
    "matmul": Op(np.matmul, _matmul_lineage),
    "cumsum": Op(lambda x, axis=-1: np.cumsum(x, axis=axis), _cumsum_lineage),
    "group_by": Op(_group_by, _group_by_lineage),
    "inner_join": Op(_inner_join, _inner_join_lineage),
    "img_filter": Op(_img_filter, _img_filter_lineage),
}


def capture(name: str, *arrays: np.ndarray, **args) -> tuple[np.ndarray, list[Relation]]:
    """Runs operation ``name`` and captures its lineage: (result, one relation per input)."""
    op = OPS[name]
    result = np.atleast_1d(op.compute(*arrays, **args))
    return result, op.lineage(result, *arrays, **args)
