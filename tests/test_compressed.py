"""The compressed lineage backend (``als.run(task, backend="compressed")``): ProvRC-encoded
row lineage answers exactly as the Parquet pairs do, and is compact where lineage is regular.

The whole task suite is compared in tests/test_differential.py (test_compressed_equals_eager,
and the compressed forward answers in test_forward_inverts_backward); here: the paper's
golden example from compressed indexes only, the eager backend's special captures (pruning,
granularity with NULL ids, control lineage of differences) under both storages, the sizes of
regular lineage, the numbering on its own (a brute-force round trip), bad input.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from cda_workload.workloads.loan_example import loan_task
from materialization.capture import Capture, CaptureError
from materialization.provrc import backward, forward
from materialization.provrc.paths import REF, Step, encode_paths
from materialization.provrc.tuples import LID, by_value, encode_run
from tests.golden import LOAN_OUTPUT, assert_reject_lineage
from tests.tasks_suite import register_suite_tables
from tests.test_differential import Lineage
from tests.test_eager import RUNS, TABLES, answer, bag
from tracing import LineageSession, Run
from tracing.errors import NotCapturedError

BOTH = ("pairs", "provrc")


@pytest.fixture(scope="module")
def als(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LineageSession:
    session = LineageSession(spark, store=str(tmp_path_factory.mktemp("compressed") / "store"))
    register_suite_tables(session, tables=TABLES)
    return session


_runs: dict[str, Run] = {}


def both(als: LineageSession, name: str, compose: bool = True) -> Run:
    """The test_eager run ``name`` with its indexes kept as pairs and compressed (composed, or
    per segment), once."""
    key = f"{name}/{compose}"
    if key not in _runs:
        build, options = RUNS[name]
        capture = replace(options.get("capture", Capture()), storage=BOTH, compose=compose)
        _runs[key] = als.run(build(als), backend="eager", capture=capture)
    return _runs[key]


def test_loan_example_from_compressed_indexes_only(als: LineageSession) -> None:
    """Fig. 4 from ProvRC tables: the golden answer, forward too; no pair index is written."""
    run = als.run(loan_task(als), backend="compressed")
    assert run.backend == "compressed" and run.strategy == "full"
    assert sorted(bag(run).elements()) == LOAN_OUTPUT
    meta = run.record["capture"]
    assert meta["capture"]["storage"] == ["provrc"]
    assert all(set(info) == {"attrs"} for info in meta["indexes"].values())  # no Parquet pairs
    assert set(meta["compressed"]["indexes"]) == {"src-loan", "src-client", "src-debt", "fn-1"}
    assert_reject_lineage(run.lineage(rows=[("Reject", 1)]))
    assert answer(run, run.forward(table="loan", ids=["L02"])) == {("Reject", 1): 1}
    assert answer(run, run.forward(udf="credit_rules", where="Judge = 'Reject'")) == {("Reject", 1): 1}
    loaded = als.load_run(run.id)
    assert Lineage.of(loaded.lineage()) == Lineage.of(run.lineage())
    assert loaded.index_bytes == run.index_bytes > 0
    with pytest.raises(NotCapturedError, match="kept no eager lineage indexes"):
        run.lineage(backend="eager")


@pytest.mark.parametrize(
    "name, table, ids",
    [
        ("loan", "client", ["0001", "0002", "0009"]),
        ("q3_lineitem_backward", "lineitem", None),
        ("q3_per_supplier", "lineitem", [1, 2]),
        ("orders_per_customer", "orders", [None, 1]),
        ("difference", "lineitem", None),
        ("difference_below_agg", "orders", None),
        ("empty_subtrahend", "orders", None),
    ],
)
@pytest.mark.parametrize("compose", [True, False], ids=["composed", "segments"])
def test_compressed_answers_equal_the_pairs(
    als: LineageSession, name: str, table: str, ids: list | None, compose: bool
) -> None:
    """Backward (all rows, a sample, each row alone) and forward (ids, or the rows of the
    first lineage answer) agree between the two storages of one run."""
    run = both(als, name, compose)
    for target in ({}, {"sample": 2, "seed": 1}):
        pairs = Lineage.of(run.lineage(**target, backend="eager"))
        assert Lineage.of(run.lineage(**target, backend="compressed")) == pairs, target
    for row in list(bag(run))[:3]:
        one = {"rows": [row]}
        assert Lineage.of(run.lineage(**one, backend="compressed")) == Lineage.of(run.lineage(**one)), row
    if "forward" not in run.record["capture"]["capture"]["directions"]:
        return
    if ids is None:
        ids = sorted(run.lineage().source_ids(table), key=str)[:3]
    for given_ids in ([i] for i in ids):
        expected = answer(run, run.forward(table=table, ids=given_ids, backend="eager"))
        assert answer(run, run.forward(table=table, ids=given_ids, backend="compressed")) == expected


def test_segment_paths_walk_every_segment(als: LineageSession) -> None:
    """compose=False: one ProvRC relation per captured step of a segment; questions walk the
    path of segments from the root in situ and give the golden answers; a table read by two
    segments (q3's lineitem through orders ⋈ lineitem) is a path per reading."""
    run = als.run(loan_task(als), backend="compressed", capture=Capture(compose=False))
    meta = run.record["capture"]["compressed"]
    assert meta["layout"] == "segments" and run.record["capture"]["capture"]["compose"] is False
    steps = meta["steps"]
    assert {s["segment"] for s in steps} == {s.id for s in run.root.post_order()}
    assert any(s["child"] is not None for s in steps)  # a path of more than one step
    assert max(len(p["steps"]) for info in meta["indexes"].values() for p in info["paths"]) >= 2
    assert_reject_lineage(run.lineage(rows=[("Reject", 1)]))
    assert answer(run, run.forward(table="loan", ids=["L02"])) == {("Reject", 1): 1}
    assert answer(run, run.forward(udf="credit_rules", where="Judge = 'Reject'")) == {("Reject", 1): 1}
    reads = sum(d["bytes"] for d in run.record["capture"]["reads"].values())  # what each call read
    assert als.load_run(run.id).index_bytes == run.index_bytes == meta["bytes"] + reads and reads > 0
    with pytest.raises(CaptureError, match=r"compose=False .* needs storage 'provrc'"):
        als.run(loan_task(als), backend="eager", capture=Capture(compose=False))


def test_regular_lineage_compresses_to_ranges(als: LineageSession) -> None:
    """A selection's output runs alongside its input: one ProvRC row for the lineage of every
    output row; a group's rows are numbered together wherever they lie in the table (here
    grouped on a column the key order knows nothing of): one range per group."""
    lineitem = als.table("lineitem")
    picked = lineitem.filter(F.col("l_quantity") > 10).select("l_orderkey", "l_linenumber", "l_quantity")
    run = als.run(picked, backend="compressed")
    index = run.record["capture"]["compressed"]["indexes"]["src-lineitem"]
    assert index["pairs"] == run.record["output"]["rows"] > 100
    assert index["backward"]["rows"] == index["forward"]["rows"] == 1
    grouped = als.run(lineitem.groupBy("l_shipmode").agg(F.count(F.lit(1)).alias("n")), backend="compressed")
    index = grouped.record["capture"]["compressed"]["indexes"]["src-lineitem"]
    groups = grouped.record["output"]["rows"]
    assert index["pairs"] == lineitem.count() > 10 * groups
    assert index["backward"]["rows"] == index["forward"]["rows"] == groups


def test_bad_storage_choices(als: LineageSession) -> None:
    task = loan_task(als)
    with pytest.raises(CaptureError, match="capture storage must be some of"):
        als.run(task, backend="eager", capture=Capture(storage=("bdd",)))
    with pytest.raises(ValueError, match="backend='compressed' keeps its indexes as 'provrc'"):
        als.run(task, backend="compressed", capture=Capture(storage=("pairs",)))
    lazy = als.run(task)
    with pytest.raises(NotCapturedError, match="kept no compressed lineage indexes"):
        lazy.lineage(backend="compressed")
    with pytest.raises(ValueError, match=r"kept no boolean lineage .* no probabilities"):
        lazy.lineage(backend="confidence")
    with pytest.raises(NotCapturedError, match="kept no captured lineage indexes"):
        lazy.forward(table="loan", ids=["L02"])


# --- the numbering, on its own ---------------------------------------------------------------

pairs_strategy = st.lists(
    st.tuples(st.integers(0, 12), st.one_of(st.none(), st.integers(-3, 30)), st.sampled_from("abc")),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(pairs_strategy)
def test_numbering_round_trips(rows: list[tuple[int, int | None, str]]) -> None:
    """Decoding the ProvRC tables through the dictionaries gives back exactly the pairs, both
    orientations; NULLs are values; the dictionary is sorted and dense."""
    lids = np.array([(r[0] * 7919) % 97 - 40 for r in rows], dtype=np.int64)  # unordered ids
    pairs = pa.table({LID: lids, "k": [r[1] for r in rows], "s": [r[2] for r in rows]})
    outputs, encoded = encode_run({"src-t": pairs}, np.unique(lids), ("backward", "forward"))
    found = encoded["src-t"]
    values = found.dictionary.drop_columns(["__ord"]).to_pylist()
    assert len({tuple(v.values()) for v in values}) == len(values)  # each value once
    expected = {(int(lid), (k, s)) for lid, k, s in zip(lids, pairs["k"].to_pylist(), pairs["s"].to_pylist())}
    got = set()
    for o, lid in enumerate(outputs.lids):
        for cell in backward([found.tables["backward"]], np.array([o]), rows=True)[:, 0]:
            v = values[cell]
            got.add((int(lid), (v["k"], v["s"])))
    assert got == expected
    back = set()
    for i, v in enumerate(values):
        for cell in forward([found.tables["forward"]], np.array([i]), rows=True)[:, 0]:
            back.add((int(outputs.lids[cell]), (v["k"], v["s"])))
    assert back == expected


def test_by_value_orders_nulls_last_and_equal() -> None:
    numbering = by_value(pa.table({"a": [None, 2, 1, None, 2], "b": ["x", "y", "y", "x", None]}))
    assert numbering.values.to_pylist() == [
        {"a": 1, "b": "y"}, {"a": 2, "b": "y"}, {"a": 2, "b": None}, {"a": None, "b": "x"}
    ]
    assert numbering.of.tolist() == [3, 1, 0, 3, 2]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 14)), min_size=1, max_size=40),
    st.lists(st.tuples(st.integers(0, 14), st.integers(0, 20)), min_size=1, max_size=60),
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 20)), max_size=20),
    st.sets(st.integers(0, 9), min_size=1),
)
def test_segment_paths_equal_the_composed_relation(
    top: list[tuple[int, int]], below: list[tuple[int, int]], direct: list[tuple[int, int]], out: set[int]
) -> None:
    """Root rows -> child rows -> table t, and root rows -> t directly (a table read twice):
    walking the per-segment steps backward and forward gives exactly the composed lineage
    of the output rows ``out`` (root rows outside ``out`` are dropped); the child's model
    calls (``fn-2``) are the child rows each output row uses."""

    def pairs(rows: list[tuple[int, int]], other: str) -> pa.Table:
        return pa.table({LID: pa.array([a for a, _ in rows], pa.int64()),
                         other: pa.array([b for _, b in rows], pa.int64())})

    steps = [Step(1, pairs(top, REF), child=2), Step(2, pairs(below, "k"), table="t"),
             Step(1, pairs(direct, "k"), table="t")]
    paths = encode_paths(steps, 1, np.array(sorted(out)), [2], ("backward", "forward"))
    outputs = paths.numbering[1].lids

    def walk(path: list[int], lookup: list) -> tuple[set, set]:
        """(output id, looked-up value) pairs, backward from every output, forward from every value."""
        down, up = set(), set()
        for o, lid in enumerate(outputs):
            tables = [paths.steps[i].tables["backward"] for i in path]
            down |= {(int(lid), lookup[c]) for c in backward(tables, np.array([o]), rows=True)[:, 0]}
        for v, value in enumerate(lookup):
            tables = [paths.steps[i].tables["forward"] for i in reversed(path)]
            up |= {(int(outputs[c]), value) for c in forward(tables, np.array([v]), rows=True)[:, 0]}
        return down, up

    expected = {(a, k) for a, b in top for c, k in below if b == c and a in out}
    expected |= {(a, k) for a, k in direct if a in out}
    got, back = set(), set()
    for path in paths.indexes["src-t"]:
        down, up = walk(path, paths.steps[path[-1]].dictionary.column("k").to_pylist())
        got, back = got | down, back | up
    assert got == expected == back
    (path,) = paths.indexes["fn-2"]
    down, up = walk(path, paths.numbering[2].lids.tolist())
    assert down == up == {(a, b) for a, b in top if a in out}
