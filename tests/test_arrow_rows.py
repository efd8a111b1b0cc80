"""Rows made column by column (tracing/arrow_rows.py) are pyarrow's own rows, value for value
and type for type, NULLs and the edges of each type included; rows made distinct in Arrow
keep their order of first appearance and their schema."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pyarrow as pa
import pytest

from segmenter.errors import LineageError
from tracing.arrow_rows import distinct_flat, first_rows, to_pylist
from tracing.lineage import AugmentedLineage


def test_rows_are_pyarrows_value_for_value() -> None:
    table = pa.table(
        {
            "d": pa.array([date(1, 1, 1), None, date(9999, 12, 31), date(1998, 7, 9)], pa.date32()),
            "p": pa.array(
                [Decimal("0.00"), Decimal("-891.99"), None, Decimal("1234567890123.5")], pa.decimal128(16, 2)
            ),
            "w": pa.array([Decimal("1E-20"), Decimal("0"), Decimal("-1"), None], pa.decimal256(50, 20)),
            "s": ["a", None, "", "ü"],
            "n": pa.array([[1], None, [], [2, 3]], pa.list_(pa.int64())),
            "i": pa.array([-(2**63), 0, 2**63 - 1, 7], pa.int64()),
            "u": pa.array([0, 2**64 - 1, 1, 2], pa.uint64()),
            "b": pa.array([-128, None, 127, 0], pa.int8()),
        }
    )
    for rows in (table, pa.concat_tables([table.slice(0, 1), table.slice(1)])):  # one chunk, several
        got, want = to_pylist(rows), rows.to_pylist()
        assert got == want
        assert [list(map(repr, r.values())) for r in got] == [list(map(repr, r.values())) for r in want]


def test_dates_beyond_pythons_years_fail_as_pyarrows_do() -> None:
    table = pa.table({"d": pa.array([2_932_897], pa.int32()).cast(pa.date32())})
    with pytest.raises(OverflowError):
        table.to_pylist()
    with pytest.raises(OverflowError):
        to_pylist(table)


def test_distinct_rows_in_order_of_first_appearance() -> None:
    schema = pa.schema(
        [pa.field("k", pa.int32(), nullable=False), ("s", pa.string()), ("r", pa.list_(pa.int8()))]
    )
    table = pa.table(
        {"k": [3, 1, 3, 2, 1, 3], "s": ["c", None, "c", "b", None, "x"], "r": [[1], [2], [9], None, [2], []]},
        schema=schema,
    )
    flat = distinct_flat(table.select(["k", "s"]))
    assert [tuple(r.values()) for r in flat.to_pylist()] == [(3, "c"), (1, None), (2, "b"), (3, "x")]
    assert flat.schema == schema.remove(2)
    first = first_rows(table, ["k"])  # the nested column is carried, the first row of each key kept
    assert first.to_pylist() == [table.slice(i, 1).to_pylist()[0] for i in (0, 1, 3)]
    assert first.schema == schema
    distinct = table.slice(0, 2)
    assert first_rows(distinct, ["k"]) is distinct  # each key once already: no take


def test_a_merged_answer_tells_its_control_rows_apart_in_arrow() -> None:
    """An answer not kept per row (more than 1,000 output rows) splits a table's rows by its
    contributing rows in Arrow, by the key, as its Python rows are split; a floating key
    goes through the Python rows, with the same result."""
    for key in (pa.array([1, 2, 3, 4], pa.int64()), pa.array([1.5, 2.5, float("nan"), 4.5])):
        rows = pa.table({"k": key, "v": ["a", "b", "c", "d"]})
        lin = AugmentedLineage(
            source={"t": rows},
            reasoning=[],
            queries=[],
            keys={"t": ("k",)},
            control={"t": {3: ("anti-join", 3)}},
            contributing={"t": rows.take([3, 1])},
        )
        for part, want in (("contributing", ["b", "d"]), ("control", ["a", "c"]), ("all", list("abcd"))):
            assert lin.to_arrow("t", part).column("v").to_pylist() == want, (key.type, part)
        assert [r["v"] for r in lin.control_rows("t")] == ["a", "c"]
    with pytest.raises(LineageError, match="no table 'u' in this answer"):
        lin.to_arrow("u")
