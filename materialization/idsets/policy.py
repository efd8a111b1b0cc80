"""Which representation to use for an id set, from its size, universe and clustering.

The thresholds come from ``cda_workload/benchmarks/bench_idsets.py`` (docs/bench/idsets/idsets.json);
see the constants below for the figures each one rests on.
"""

from __future__ import annotations

import numpy as np

from materialization.idsets.base import IdSet
from materialization.idsets.bdd import BddIdSet
from materialization.idsets.roaring import RoaringIdSet
from materialization.idsets.sorted_array import SortedIdSet

KINDS: dict[str, type] = {"sorted": SortedIdSet, "roaring": RoaringIdSet, "bdd": BddIdSet}

# Clustered, in the sense of the roBDD paper's clustering factor (share of ids with a
# neighbour at distance < 3): TPC-H orders → lineitems lineage is ~100 %, random ids ~0 %.
CLUSTERED_FACTOR = 0.5
# docs/bench/idsets/idsets.json (medians of 3, 2 cores): up to 1e3 random ids a sorted array is
# as small as roaring (8,001 vs 7,765 B at 1e3; 801 vs 981 B at 1e2) and has the fastest union
# and intersection; clustered sets are smaller in roaring but stay below 8 kB there.
SMALL_SET = 1000
# Same JSON: roaring is smallest for clustered, sparse and dense sets at every size (BDDs
# 1.2-25x larger, unions 10-1500x slower); BDDs win only on periodic sets (strided regime):
# 397 B vs 1,276 B at 1e4 ids, 379 B vs 1.25 MB at 1e7 (roaring 152 B vs 415 B at 1e3).
BDD_MIN_PERIODIC = 10_000
PERIODIC_PATTERNS = 4  # at most this many distinct (run length, gap) pairs: a periodic set


def representation(kind: str) -> type:
    """The IdSet class of a representation name."""
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown id-set representation {kind!r} (use one of {sorted(KINDS)})") from None


def clustering_factor(ids: np.ndarray) -> float:
    """Share of ids (sorted) whose nearest neighbour is less than 3 away (paper's Table 7)."""
    if len(ids) < 2:
        return 0.0
    gap = np.diff(np.asarray(ids, np.int64)) < 3
    near = np.concatenate([gap, [False]]) | np.concatenate([[False], gap])
    return float(near.mean())


def periodic(ids: np.ndarray) -> bool:
    """Whether the runs of a sorted id set repeat one pattern (a few distinct run lengths and
    gaps, e.g. a column slice of a row-major array): the case where a BDD shares nearly all
    nodes across runs, while roaring still pays per run or per 2^16 block."""
    if len(ids) < 2:
        return False
    breaks = np.flatnonzero(np.diff(ids) != 1)
    if len(breaks) < 8:
        return False
    starts = np.concatenate([[0], breaks + 1])
    lengths = np.diff(starts)  # complete runs only (the last one may be cut by the universe)
    gaps = ids[starts[1:]] - ids[starts[1:] - 1]
    return len(np.unique(lengths * (int(gaps.max()) + 1) + gaps, return_inverse=True)[0]) <= PERIODIC_PATTERNS


def choose(n_ids: int, universe: int, clustered: bool, is_periodic: bool = False) -> str:
    """The representation for a set of ``n_ids`` ids out of ``universe`` (see module doc)."""
    if n_ids < 0 or universe < 0:
        raise ValueError(f"n_ids and universe must be non-negative, got {n_ids} and {universe}")
    if n_ids <= SMALL_SET:
        return "sorted"
    if is_periodic and n_ids >= BDD_MIN_PERIODIC:
        return "bdd"
    return "roaring"


def best_for(ids: np.ndarray, universe: int | None = None) -> str:
    """``choose`` for a concrete sorted id array (clustering measured on it)."""
    arr = np.asarray(ids)
    uni = universe if universe is not None else (int(arr[-1]) + 1 if len(arr) else 0)
    clustered = clustering_factor(arr) >= CLUSTERED_FACTOR
    return choose(len(arr), uni, clustered, clustered and len(arr) >= BDD_MIN_PERIODIC and periodic(arr))


def build(ids: np.ndarray, kind: str | None = None, universe: int | None = None) -> IdSet:
    """An id set of sorted ``ids`` in ``kind`` (default: the policy's choice)."""
    return representation(kind or best_for(ids, universe)).from_sorted(ids)
