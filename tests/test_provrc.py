"""ProvRC store: lossless compression and in-situ queries checked against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from materialization.provrc import Boxes, Relation, backward, compress, forward, read, write
from materialization.provrc.capture import OPS, capture
from materialization.provrc.parquet import COMPRESSIONS
from materialization.provrc.pipelines import random_pipeline
from materialization.provrc.ranges import merge_boxes
from materialization.provrc.rowwise import flat_ids, semijoin_path

shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


@st.composite
def relations(draw, out_shape=None, in_shape=None) -> Relation:
    """Random pairs plus, often, a structured part (shifted one-to-one or all-to-all blocks)."""
    out_shape = out_shape or draw(shapes)
    in_shape = in_shape or draw(shapes)
    n_out, n_in = int(np.prod(out_shape)), int(np.prod(in_shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.05, 0.3, 0.9]))
    pairs = np.argwhere(rng.random((n_out, n_in)) < density)
    if draw(st.booleans()):  # one-to-one with an offset: what the relative transformation targets
        shift = int(rng.integers(0, n_in))
        o = np.arange(n_out)
        pairs = np.vstack([pairs, np.stack([o, (o + shift) % n_in], axis=1)])
    return Relation.from_flat(pairs[:, 0], pairs[:, 1], out_shape, in_shape)


def same(a: Relation, b: Relation) -> bool:
    return (a.out_shape, a.in_shape) == (b.out_shape, b.in_shape) and np.array_equal(a.out, b.out) \
        and np.array_equal(a.inp, b.inp)


@settings(max_examples=150, deadline=None)
@given(relations(), st.sampled_from(["backward", "forward"]))
def test_compress_is_lossless(relation: Relation, orientation: str) -> None:
    table = compress(relation, orientation)
    assert same(table.decompress(), relation)
    assert len(table) <= len(relation)


@pytest.mark.parametrize("name", sorted(OPS))
def test_captured_lineage_round_trips(name: str) -> None:
    rng = np.random.default_rng(7)
    x = rng.random((6, 4))
    arrays, args = _op_inputs(name, rng, x)
    result, rels = capture(name, *arrays, **args)
    assert len(rels) == len(arrays)
    for r in rels:
        assert r.out_shape == result.shape
        for orientation in ("backward", "forward"):
            assert same(compress(r, orientation).decompress(), r)


def _op_inputs(name: str, rng: np.random.Generator, x: np.ndarray) -> tuple[list[np.ndarray], dict]:
    extra = {"add": [x[0]], "subtract": [x], "multiply": [x], "maximum": [x], "matmul": [rng.random((4, 3))]}
    args = {"reshape": {"shape": (3, 8)}, "roll": {"shift": 2}, "tile": {"reps": (2, 3)},
            "repeat": {"repeats": 3},
            "slice": {"key": (slice(1, 5), slice(None, None, 2))}, "filter": {"mask": x > 0.5},
            "sum": {"axis": 1}, "cumsum": {"axis": 0}}
    if name == "group_by":
        return [rng.integers(0, 5, 30)], {}
    if name == "inner_join":
        return [rng.integers(0, 6, 12), rng.integers(0, 6, 9)], {}
    return [x, *extra.get(name, [])], args.get(name, {})


def test_structured_operations_compress_to_a_row() -> None:
    x = np.random.default_rng(0).random((40, 30))
    for name, arrays, args in [("negative", [x], {}), ("add", [x, x], {}), ("sum", [x], {"axis": 0}),
                               ("transpose", [x], {}), ("matmul", [x, x.T], {}), ("matmul", [x, x[0]], {})]:
        for r in capture(name, *arrays, **args)[1]:
            assert len(compress(r)) == 1, name
            assert len(compress(r, "forward")) == 1, name


def test_diagonal_is_answered_exactly() -> None:
    """Two input attributes relative to one output attribute: the box must be split, not widened."""
    n = 8
    i = np.arange(n)
    diag = Relation(i[:, None], np.stack([i, i], axis=1), (n,), (n, n))
    table = compress(diag)
    assert len(table) == 1
    assert np.array_equal(backward([table], Boxes(np.array([[2]]), np.array([[5]])), rows=True),
                          np.stack([np.arange(2, 6)] * 2, axis=1))


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(COMPRESSIONS), relations(), st.sampled_from(["backward", "forward"]))
def test_parquet_round_trip(tmp_path_factory, compression: str, relation: Relation, orientation: str) -> None:
    path = tmp_path_factory.mktemp("provrc") / "t.parquet"
    table = compress(relation, orientation)
    assert write(table, path, compression) > 0
    back = read(path)
    assert back.orientation == orientation
    assert same(back.decompress(), relation)


@pytest.mark.parametrize("pairs", [1, 5000])
def test_parquet_layouts(tmp_path, pairs: int) -> None:
    """Small tables are packed into one column (a 1-row table costs a few hundred bytes, not
    a footer per column); large ones stay columnar; both read back exactly."""
    rng = np.random.default_rng(pairs)
    out, inp = rng.integers(0, 300, (pairs, 1)), rng.integers(0, 300, (pairs, 2))
    relation = Relation(out, inp, (300,), (300, 300))
    table = compress(relation)
    size = write(table, tmp_path / "t.parquet", "zstd")
    back = read(tmp_path / "t.parquet")
    assert same(back.decompress(), relation) and back.val_ref.dtype == table.val_ref.dtype
    assert (size < 600) == (len(table) == 1)


@st.composite
def relation_chains(draw) -> list[Relation]:
    """Random relations whose shapes chain: relation i's input cells are relation i+1's outputs."""
    cell_shapes = draw(st.lists(shapes, min_size=2, max_size=5))
    return [draw(relations(out_shape=o, in_shape=i)) for o, i in itertools.pairwise(cell_shapes)]


@settings(max_examples=120, deadline=None)
@given(relation_chains(), st.integers(0, 2**32 - 1))
@example(  # rows that differ only in how their value is stored: nothing left to rank them by
    [Relation(np.array([[0, 2], [0, 2], [0, 3], [0, 3]]), np.array([[0], [2], [0], [3]]), (1, 4), (4,))], 0
)
def test_queries_on_random_relation_chains(chain: list[Relation], seed: int) -> None:
    rng = np.random.default_rng(seed)
    for direction in ("backward", "forward"):
        rels = chain if direction == "backward" else chain[::-1]
        shape = rels[0].out_shape if direction == "backward" else rels[0].in_shape
        cells = np.argwhere(rng.random(shape) < rng.choice([0.1, 0.5, 1.0]))
        query = backward if direction == "backward" else forward
        answer = query([compress(r, direction) for r in rels], cells)
        last = rels[-1].in_shape if direction == "backward" else rels[-1].out_shape
        assert np.array_equal(flat_ids(answer.cells(), last), semijoin_path(rels, cells, direction))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.sampled_from([(6, 5), (4, 3, 2), (17,)]))
def test_queries_on_random_numpy_pipelines(seed: int, steps: int, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(seed)
    wf, chain = random_pipeline(rng, shape, steps, max_rows=2000)
    # the uncompressed relations along the chain, recovered from the stored tables
    rels = [wf.edges[(b, a)]["backward"].decompress() for a, b in itertools.pairwise(chain)]
    out_cells = np.argwhere(rng.random(wf.arrays[chain[-1]].shape) < 0.3)
    got = wf.prov_query(chain[::-1], out_cells, rows=True)
    expected = semijoin_path(rels[::-1], out_cells, "backward")
    assert np.array_equal(flat_ids(got, wf.arrays[chain[0]].shape), expected)
    in_cells = np.argwhere(rng.random(shape) < 0.2)
    got = wf.prov_query(chain, in_cells)
    expected = semijoin_path(rels, in_cells, "forward")
    assert np.array_equal(flat_ids(got.cells(), wf.arrays[chain[-1]].shape), expected)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_merging_boxes_keeps_their_union(ndim: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lo = rng.integers(0, 6, (int(rng.integers(0, 12)), ndim))
    hi = lo + rng.integers(0, 3, lo.shape)
    merged = Boxes(*merge_boxes(lo, hi)[:2])
    assert len(merged) <= len(lo)
    assert np.array_equal(merged.cells(), Boxes(lo, hi).cells())
