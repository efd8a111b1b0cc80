"""Id sets (sorted arrays, roaring bitmaps, roBDDs) against Python ``set`` semantics.

Ids are drawn from three neighbourhoods (small ids with 0, a run-rich middle, and ids around
2^40) so that empty sets, runs, sparse ids and wide bit vectors all occur.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from materialization.idsets import (
    KINDS,
    BddIdSet,
    RoaringIdSet,
    SortedIdSet,
    bdd_nodes,
    best_for,
    choose,
    clustering_factor,
    deserialize,
    idsets_by_output,
    overlap,
    union_all,
)
from materialization.idsets.bdd import fresh_managers

FAST = settings(max_examples=40, deadline=None)
BIG = 2**40
ID = st.one_of(
    st.integers(0, 40),
    st.integers(1000, 1100),
    st.integers(BIG - 40, BIG + 40),
    st.integers(0, 2**47),
)
RUN = st.tuples(st.sampled_from([0, 500, BIG - 20]), st.integers(0, 80)).map(
    lambda t: range(t[0], t[0] + t[1])
)
IDS = st.tuples(st.sets(ID, max_size=30), st.lists(RUN, max_size=3)).map(
    lambda t: t[0].union(*[set(r) for r in t[1]])
)
KIND = st.sampled_from(sorted(KINDS))


def make(kind: str, ids: set[int]):
    return KINDS[kind].from_sorted(np.array(sorted(ids), np.int64))


@FAST
@given(kind=KIND, ids=IDS, probes=st.lists(ID, max_size=20))
def test_build_membership_and_round_trip(kind: str, ids: set[int], probes: list[int]) -> None:
    s = make(kind, ids)
    assert s.to_array().dtype == np.int64
    assert s.to_array().tolist() == sorted(ids)
    assert list(s) == sorted(ids) and len(s) == len(ids)
    assert s.contains(np.array(probes + [-1], np.int64)).tolist() == [p in ids for p in probes] + [False]
    assert all((p in s) == (p in ids) for p in probes[:5])
    data = s.serialize()
    assert s.nbytes == len(data)
    back = deserialize(data)
    assert type(back) is type(s) and back.to_array().tolist() == sorted(ids)


@FAST
@given(kind=KIND, other_kind=KIND, a=IDS, b=IDS)
def test_binary_operations_match_python_sets(kind: str, other_kind: str, a: set[int], b: set[int]) -> None:
    x, y = make(kind, a), make(other_kind, b)  # mixed kinds: the right operand is converted
    assert (x | y).to_array().tolist() == sorted(a | b)
    assert (x & y).to_array().tolist() == sorted(a & b)
    assert (x - y).to_array().tolist() == sorted(a - b)
    assert (x | y).kind == kind
    o = overlap(x, y, labels=(7, 9))
    assert (o.n_a, o.n_b, o.n_shared) == (len(a), len(b), len(a & b))
    assert o.to_dict(limit=None)["shared"] == sorted(a & b)
    assert o.jaccard == (len(a & b) / len(a | b) if a | b else 0.0)


@FAST
@given(kind=KIND, groups=st.lists(IDS, min_size=1, max_size=6))
def test_union_all_is_the_union_of_every_group(kind: str, groups: list[set[int]]) -> None:
    got = union_all([make(kind, g) for g in groups])
    assert got.kind == kind and got.to_array().tolist() == sorted(set().union(*groups))


@FAST
@given(pairs=st.lists(st.tuples(st.integers(0, 5), ID), max_size=60), kind=st.sampled_from([None, *KINDS]))
def test_idsets_by_output_groups_pairs_per_output(pairs: list[tuple[int, int]], kind: str | None) -> None:
    lids = np.array([p[0] for p in pairs], np.int64)
    ords = np.array([p[1] for p in pairs], np.int64)
    got = idsets_by_output(lids, ords, kind=kind)
    want: dict[int, set[int]] = {}
    for lid, o in pairs:
        want.setdefault(lid, set()).add(o)
    assert {k: v.to_array().tolist() for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
    assert len({v.kind for v in got.values()}) <= 1  # one representation per answer


@FAST
@given(ids=IDS, width=st.sampled_from([41, 48, 62]))
def test_bdd_node_table_walks_match_ids(ids: set[int], width: int) -> None:
    ids = {i for i in ids if i < 2**width}
    arr = np.array(sorted(ids), np.int64)
    table = bdd_nodes.build(arr, width)
    assert bdd_nodes.enumerate_ids(table, width).tolist() == sorted(ids)
    probes = np.array(sorted(ids)[:5] + [1, 2**41 + 1, -3], np.int64)
    assert bdd_nodes.contains(table, probes, width).tolist() == [int(p) in ids for p in probes]


def test_bdd_shares_nodes_for_runs_and_is_reduced() -> None:
    """A run of 10^6 ids costs O(width) nodes; the paper's example set has 6 nodes over 4 bits."""
    run = BddIdSet.from_sorted(np.arange(1000, 1_001_000))
    assert len(run) == 1_000_000 and run.nodes <= 2 * 48
    paper = BddIdSet.from_sorted([0, 1, 2, 3, 4, 9, 10, 11, 12], width=4)
    assert paper.nodes <= 6 and paper.to_array().tolist() == [0, 1, 2, 3, 4, 9, 10, 11, 12]
    assert BddIdSet.from_sorted(np.arange(16), width=4).nodes == 0  # the universe is the TRUE sink


@pytest.mark.parametrize("backend", ["cudd", "autoref"])
def test_bdd_backends_agree(backend: str) -> None:
    a = BddIdSet.from_sorted([0, 5, 6, 7, BIG], backend=backend)
    b = BddIdSet.from_sorted([6, 7, 8, BIG + 1], backend=backend)
    assert (a | b).to_array().tolist() == [0, 5, 6, 7, 8, BIG, BIG + 1]
    assert (a & b).to_array().tolist() == [6, 7] and len(a - b) == 3
    assert BddIdSet.deserialize(a.serialize(), backend=backend) == a


def test_bdd_sets_of_different_managers_still_combine() -> None:
    """After ``fresh_managers`` (benchmarks), old and new sets live in different managers."""
    old = BddIdSet.from_sorted([1, 2, 3])
    fresh_managers()
    new = BddIdSet.from_sorted([3, 4])
    assert (old | new).to_array().tolist() == [1, 2, 3, 4] and len(new & old) == 1
    assert len(old) == 3 and union_all([new, old]).to_array().tolist() == [1, 2, 3, 4]


def test_policy_and_clustering() -> None:
    assert clustering_factor(np.arange(100)) == 1.0
    assert clustering_factor(np.arange(0, 1000, 10)) == 0.0
    assert choose(10, 10**8, clustered=False) == "sorted"
    assert best_for(np.arange(10**6)) == choose(10**6, 10**6, clustered=True)
    assert choose(10**6, 10**8, clustered=False) == "roaring"
    cells = np.arange(2 * 10**5)
    assert best_for(cells[cells % 64 < 32]) == "bdd"  # a column slice of a row-major array


def test_overlap_answer_prints_and_serializes() -> None:
    a = SortedIdSet.from_sorted(np.arange(0, 20))
    b = RoaringIdSet.from_sorted(np.arange(15, 40))
    o = overlap(a, b, labels=("row 1", "row 2"))
    assert str(o).startswith("outputs row 1 and row 2 share 5 source rows (of 20 and 25; Jaccard 0.125)")
    d = o.to_dict(limit=2)
    assert (
        d["shared"] == [15, 16] and d["truncated"] and d["n_shared"] == 5 and d["representation"] == "sorted"
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: SortedIdSet.from_sorted([3, 1]), "strictly increasing"),
        (lambda: RoaringIdSet.from_sorted([-1, 2]), "non-negative"),
        (lambda: BddIdSet.from_sorted([2**48]), "larger than"),
        (lambda: BddIdSet.from_sorted([1], width=80), "width"),
        (lambda: KINDS["sorted"].from_sorted([[1, 2]]), "1-D"),
        (lambda: idsets_by_output(np.array([1]), np.array([1, 2])), "one length"),
        (lambda: idsets_by_output(np.array([1]), np.array([-2])), "non-negative"),
        (lambda: idsets_by_output(np.array([1]), np.array([2]), kind="zip"), "unknown id-set"),
        (lambda: union_all([]), "at least one"),
        (lambda: deserialize(b"Zxx"), "unknown id-set"),
        (lambda: choose(-1, 10, False), "non-negative"),
    ],
)
def test_bad_input_is_one_clear_error(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()
