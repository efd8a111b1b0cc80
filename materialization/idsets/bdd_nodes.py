"""Reduced ordered BDDs of id sets as numpy node tables: bottom-up construction from sorted ids,
vectorised membership and enumeration.

Ids are bit vectors of ``width`` bits, most significant bit first (the variable order of the
forward-lineage roBDD paper, section 4.2), so a run of consecutive ids shares every node above
the bits that vary inside it. A node table has one row per internal node: ``bit`` (which bit
it tests, 0 = least significant), ``lo``/``hi`` child *refs*; a ref is ``index * 2 + negated``,
index 0 is the constant ONE, so ref 0 is TRUE and ref 1 FALSE (CUDD's complement-edge form;
the tables this module builds simply never negate internal nodes). Nodes come children first.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

TRUE, FALSE = 0, 1


class NodeTable(NamedTuple):
    """Internal nodes (children before parents) and the root ref of one roBDD."""

    bit: np.ndarray  # int64, bit tested by the node (0 = least significant)
    lo: np.ndarray  # int64 refs of the 0-children
    hi: np.ndarray  # int64 refs of the 1-children
    root: int


def _floor_log2(x: np.ndarray) -> np.ndarray:
    """floor(log2(x)) for positive int64 below 2^53 (frexp is exact there)."""
    return np.frexp(x.astype(np.float64))[1].astype(np.int64) - 1


def dyadic_blocks(ids: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Splits the runs of a sorted id array into aligned power-of-two blocks (prefix, level).

    A block (p, k) holds the ids p·2^k … (p+1)·2^k − 1: in the BDD it is the TRUE sink reached
    after the top ``width - k`` bits spell p, so a run of any length costs O(width) blocks.
    """
    if not len(ids):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    breaks = np.flatnonzero(np.diff(ids) != 1)
    lo = ids[np.concatenate([[0], breaks + 1])]
    end = ids[np.concatenate([breaks, [len(ids) - 1]])] + 1
    prefixes, levels = [], []
    while len(lo):
        low_bit = lo & -lo
        tz = np.where(lo == 0, width, _floor_log2(np.maximum(low_bit, 1)))
        k = np.minimum(tz, _floor_log2(end - lo))
        prefixes.append(lo >> k)
        levels.append(k)
        lo = lo + (np.int64(1) << k)
        keep = lo < end
        lo, end = lo[keep], end[keep]
    return np.concatenate(prefixes), np.concatenate(levels)


def build(ids: np.ndarray, width: int) -> NodeTable:
    """The roBDD of a sorted id set, built bottom-up one bit level at a time.

    Items at level k are (prefix, ref): the set's ids with top bits = prefix, as a function of
    the low k bits. Siblings 2q, 2q+1 become the parent q's node (elimination rule: equal
    children need no node); equal (lo, hi) pairs of a level become one node (merging rule,
    one np.unique per level). Work is O(#blocks · width) vectorised, never one BDD call per id.
    """
    if len(ids) and (ids[0] < 0 or ids[-1] >> width):
        raise ValueError(f"ids must lie in [0, 2^{width}) for a {width}-bit BDD")
    prefix_all, level_all = dyadic_blocks(ids, width)
    if len(level_all) and level_all.max() >= width:
        return NodeTable(*(np.empty(0, np.int64),) * 3, TRUE)  # the whole universe
    order = np.argsort(level_all, kind="stable")
    prefix_all, level_all = prefix_all[order], level_all[order]
    cuts = np.searchsorted(level_all, np.arange(width + 1))
    bits: list[np.ndarray] = []
    los: list[np.ndarray] = []
    his: list[np.ndarray] = []
    n_nodes = 0
    prefix = np.empty(0, np.int64)
    ref = np.empty(0, np.int64)
    for k in range(width):
        fresh = prefix_all[cuts[k] : cuts[k + 1]]
        if len(fresh):
            prefix = np.concatenate([prefix, fresh])
            ref = np.concatenate([ref, np.full(len(fresh), TRUE, np.int64)])
            o = np.argsort(prefix, kind="stable")
            prefix, ref = prefix[o], ref[o]
        if not len(prefix):
            continue
        if len(prefix) == 1:  # one subtree left (the top levels of most sets): no numpy per level
            p, r = int(prefix[0]), int(ref[0])
            bits.append(np.array([k]))
            los.append(np.array([r if p & 1 == 0 else FALSE]))
            his.append(np.array([r if p & 1 else FALSE]))
            n_nodes += 1
            prefix, ref = np.array([p >> 1]), np.array([2 * n_nodes])
            continue
        parent, bit = prefix >> 1, prefix & 1
        start = np.concatenate([[True], parent[1:] != parent[:-1]])
        group = np.cumsum(start) - 1
        lo = np.full(int(group[-1]) + 1, FALSE, np.int64)
        hi = lo.copy()
        lo[group[bit == 0]] = ref[bit == 0]
        hi[group[bit == 1]] = ref[bit == 1]
        new_ref = lo.copy()
        split = lo != hi
        if split.any():
            span = 2 * (n_nodes + 1) + 2  # every ref so far is below this
            key, inverse = np.unique(lo[split] * span + hi[split], return_inverse=True)
            los.append(key // span)
            his.append(key % span)
            bits.append(np.full(len(key), k, np.int64))
            new_ref[split] = 2 * (n_nodes + 1 + inverse.ravel())
            n_nodes += len(key)
        prefix, ref = parent[start], new_ref
    root = int(ref[0]) if len(ref) else FALSE
    cat = lambda xs: np.concatenate(xs) if xs else np.empty(0, np.int64)  # noqa: E731
    return NodeTable(cat(bits), cat(los), cat(his), root)


def contains(table: NodeTable, probes: np.ndarray, width: int) -> np.ndarray:
    """Membership of every probe id: all probes walk the diagram together, one bit per step."""
    bit_of = np.concatenate([[-1], table.bit])  # index 0 is the constant
    lo, hi = np.concatenate([[0], table.lo]), np.concatenate([[0], table.hi])
    valid = (probes >= 0) & (probes < (np.int64(1) << width))
    p = np.where(valid, probes, 0)
    cur = np.full(len(p), table.root, np.int64)
    for b in range(width - 1, -1, -1):
        idx = cur >> 1
        at = np.flatnonzero(bit_of[idx] == b)
        if len(at):
            i = idx[at]
            child = np.where((p[at] >> b) & 1 == 1, hi[i], lo[i])
            cur[at] = child ^ (cur[at] & 1)
    return valid & (cur == TRUE)


def enumerate_ids(table: NodeTable, width: int) -> np.ndarray:
    """The sorted ids of the set: paths are expanded level by level and a TRUE reached with k
    bits left becomes one range of 2^k ids (clustered sets never expand their runs bit by bit)."""
    bit_of = np.concatenate([[-1], table.bit])
    lo, hi = np.concatenate([[0], table.lo]), np.concatenate([[0], table.hi])
    refs = np.array([table.root], np.int64)
    prefix = np.zeros(1, np.int64)
    starts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    for b in range(width, -1, -1):  # items hold the top width - b bits
        full = refs == TRUE
        if full.any():
            starts.append(prefix[full] << b)
            lengths.append(np.full(int(full.sum()), 1 << b, np.int64))
        keep = refs > FALSE
        refs, prefix = refs[keep], prefix[keep]
        if b == 0 or not len(refs):
            break
        idx, neg = refs >> 1, refs & 1
        at = bit_of[idx] == b - 1
        lo_ref = np.where(at, lo[idx] ^ neg, refs)
        hi_ref = np.where(at, hi[idx] ^ neg, refs)
        refs = np.concatenate([lo_ref, hi_ref])
        prefix = np.concatenate([prefix * 2, prefix * 2 + 1])
    if not starts:
        return np.empty(0, np.int64)
    start, length = np.concatenate(starts), np.concatenate(lengths)
    order = np.argsort(start)
    start, length = start[order], length[order]
    offsets = np.repeat(start - np.concatenate([[0], np.cumsum(length)[:-1]]), length)
    return offsets + np.arange(int(length.sum()), dtype=np.int64)
