"""Row-level lineage of a task run as ProvRC relations (the compressed backend).

The eager capture gives, per index (a source table, or a segment's model calls), pairs
(output lineage id, lineage attributes). ProvRC compresses integer cells, and it compresses
well only when related rows have neighbouring numbers, so both sides get dense ordinals:

- output rows are numbered in the order of the first (by key) row of the largest index they
  depend on, so that outputs follow the table they come from;
- the lineage rows of every index (source rows by their key values, model calls by their
  ids) are numbered by the first output row that uses them, then by value: the rows of one
  group, wherever they lie in the table, get consecutive numbers (one range), a selection's
  input runs alongside its output (one range for the whole relation), and a row shared by
  many outputs is one number in many ranges.

The dictionaries (ordinal → values) are stored beside the compressed relations; queries
turn values into ordinals, walk the ranges and turn ordinals back into values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from materialization.provrc.encode import compress
from materialization.provrc.relation import Relation
from materialization.provrc.table import Table

ORD = "__ord"
LID = "__lid"  # materialization.capture.LID (not imported: this package stays free of Spark)
FN = "__fn"  # the model-call id column of a fn-<segment> index


@dataclass(frozen=True)
class Numbering:
    """Dense ordinals for the rows of a table: ``values`` holds each distinct row once, row i
    having ordinal i; ``of[j]`` is the ordinal of the table's row j."""

    values: pa.Table
    of: np.ndarray

    def dictionary(self) -> pa.Table:
        """``values`` with their ordinal as a column, the stored form."""
        return self.values.append_column(ORD, pa.array(np.arange(self.values.num_rows, dtype=np.int64)))


def by_value(table: pa.Table) -> Numbering:
    """Ordinals in the order of the rows' values (nulls last, equal to each other)."""
    n = table.num_rows
    if n == 0:
        return Numbering(table, np.empty(0, np.int64))
    order = pc.sort_indices(table, sort_keys=[(c, "ascending", "at_end") for c in table.column_names])
    order = order.to_numpy()
    ordered = table.take(order)
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for column in ordered.columns:
        if pa.types.is_null(column.type):
            continue  # all NULL: equal everywhere
        after, before = column.slice(1), column.slice(0, n - 1)
        equal = pc.fill_null(pc.equal(after, before), False)
        same = pc.or_(equal, pc.and_(pc.is_null(after), pc.is_null(before)))
        new[1:] |= ~same.to_numpy(zero_copy_only=False)
    of = np.empty(n, dtype=np.int64)
    of[order] = np.cumsum(new) - 1
    return Numbering(ordered.filter(pa.array(new)), of)


def by_first_use(attrs: pa.Table, users: np.ndarray) -> Numbering:
    """Ordinals in the order of the smallest ``users`` ordinal (output row) next to each
    value, then of the values: the rows one output depends on get consecutive numbers, so a
    group's lineage is one range wherever its rows lie in the table."""
    values = by_value(attrs)
    first = np.full(values.values.num_rows, np.iinfo(np.int64).max)
    np.minimum.at(first, values.of, users)
    order = np.lexsort((np.arange(len(first)), first))
    rank = np.empty(len(first), dtype=np.int64)
    rank[order] = np.arange(len(first))
    return Numbering(values.values.take(order), rank[values.of])


@dataclass(frozen=True)
class Outputs:
    """The output rows' lineage ids in ordinal order."""

    lids: np.ndarray

    @classmethod
    def ordered(
        cls, lids: np.ndarray, pair_lids: np.ndarray | None = None, pair_ords: np.ndarray | None = None
    ) -> Outputs:
        """By the smallest ordinal of their lineage in one index (pass the largest), then by
        id; outputs with no lineage there come last."""
        lids = np.unique(lids)
        first = np.full(len(lids), np.iinfo(np.int64).max)
        if pair_lids is not None and pair_ords is not None:
            np.minimum.at(first, np.searchsorted(lids, pair_lids), pair_ords)
        return cls(lids[np.lexsort((lids, first))])

    def ordinals(self, lids: np.ndarray) -> np.ndarray:
        by_lid = np.argsort(self.lids)
        return by_lid[np.searchsorted(self.lids, lids, sorter=by_lid)]

    def table(self) -> pa.Table:
        """(__lid, __ord) sorted by __lid: the stored form, looked up by either column."""
        by_lid = np.argsort(self.lids)
        return pa.table({LID: pa.array(self.lids[by_lid], pa.int64()), ORD: pa.array(by_lid, pa.int64())})


def value_attrs(dictionary: pa.Table) -> list[str]:
    """A dictionary's value columns: all but the ordinal."""
    return [c for c in dictionary.column_names if c != ORD]


@dataclass(frozen=True)
class Encoded:
    """One index compressed: its dictionary, and ProvRC tables by orientation."""

    dictionary: pa.Table
    tables: dict[str, Table]
    pairs: int


def encode_run(
    pairs: dict[str, pa.Table], root_lids: np.ndarray, orientations: tuple[str, ...]
) -> tuple[Outputs, dict[str, Encoded]]:
    """Compresses every index of a run. ``pairs[name]`` holds (__lid, attributes...) rows;
    names starting with ``fn-`` are model-call indexes (one int64 id column)."""
    sources = [n for n in pairs if not n.startswith("fn-")]
    primary = max(sources, key=lambda n: pairs[n].num_rows, default=None)
    if primary is None:
        outputs = Outputs.ordered(root_lids)
    else:
        by_key = by_value(pairs[primary].drop_columns([LID]))
        outputs = Outputs.ordered(root_lids, _lids(pairs[primary]), by_key.of)
    encoded = {}
    for name, table in pairs.items():
        out = outputs.ordinals(_lids(table))
        numbering = by_first_use(table.drop_columns([LID]), out)
        tables = compress_pairs(out, numbering, len(outputs.lids), orientations)
        encoded[name] = Encoded(numbering.dictionary(), tables, len(out))
    return outputs, encoded


def compress_pairs(
    out: np.ndarray, values: Numbering, n_out: int, orientations: tuple[str, ...]
) -> dict[str, Table]:
    """The relation (output ordinal ``out[j]``, value ordinal ``values.of[j]``) compressed in
    each orientation."""
    shapes = (max(n_out, 1),), (max(values.values.num_rows, 1),)  # never 0 cells
    relation = Relation(out[:, None], values.of[:, None], *shapes)
    return {o: compress(relation, o) for o in orientations}


def _lids(table: pa.Table) -> np.ndarray:
    return table.column(LID).to_numpy()
