"""Rows made column by column (tracing/arrow_rows.py) are pyarrow's own rows, value for value
and type for type, NULLs and the edges of each type included."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pyarrow as pa
import pytest

from tracing.arrow_rows import to_pylist


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
