"""Row-level lineage of a task run kept per segment, as ProvRC relations along paths.

The composed form (:mod:`materialization.provrc.tuples`) joins the segments' lineage into one
relation per index before encoding. Here every captured hop stays its own relation, as DSLog
keeps one table per operation: a *step* maps a segment's rows to the rows of one of its
inputs (a child segment's rows, or a source table's lineage attributes). A question walks
the steps from the root segment to the index's table in situ (range joins, ranges merged
between steps), so lineage is composed at query time and never expanded per pair.

Ordinals are shared along a path: a segment's rows are numbered once, by first use from its
parent's step (the root's by the first key row of its largest step), and that numbering is
both the parent step's value side and the segment's own steps' key side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from materialization.provrc.table import Table
from materialization.provrc.tuples import LID, Outputs, by_first_use, by_value, compress_pairs, value_attrs

REF = "__ref"  # a child segment's row id in a step's pairs


@dataclass(frozen=True)
class Step:
    """One captured hop: (``__lid``, ``__ref``) rows to child segment ``child``, or
    (``__lid``, attributes...) rows to the source table ``table``."""

    segment: int
    pairs: pa.Table
    child: int | None = None
    table: str | None = None


@dataclass(frozen=True)
class EncodedStep:
    """A step compressed: ProvRC tables by orientation; for a source step its dictionary
    (attributes → ordinal), for a segment step none (the child's numbering is the value side)."""

    segment: int
    child: int | None
    table: str | None
    tables: dict[str, Table]
    dictionary: pa.Table | None
    pairs: int

    @property
    def attrs(self) -> list[str]:
        """A source step's lineage attributes (the dictionary's columns but the ordinal)."""
        return [] if self.dictionary is None else value_attrs(self.dictionary)


@dataclass(frozen=True)
class Paths:
    """A run's steps, the numbering of every segment's rows (``numbering[s].lids`` in ordinal
    order; the root's are the run's outputs) and, per index name, the step paths from the
    root that end at it (a source read twice has two)."""

    steps: list[EncodedStep]
    numbering: dict[int, Outputs]
    indexes: dict[str, list[list[int]]]
    root: int


def encode_paths(
    steps: Sequence[Step], root: int, root_lids: np.ndarray, functions: Sequence[int],
    orientations: tuple[str, ...],
) -> Paths:
    """Compresses every step reachable from the root; ``functions`` are the segments whose
    model calls are indexes (``fn-<segment>``: the path to the segment's own rows)."""
    by_segment: dict[int, list[int]] = {}
    for i, step in enumerate(steps):
        by_segment.setdefault(step.segment, []).append(i)
    numbering = {root: _root_numbering(steps, by_segment.get(root, []), root_lids)}
    path_to: dict[int, list[int]] = {root: []}
    encoded: list[EncodedStep] = []
    indexes: dict[str, list[list[int]]] = {}
    queue = [root]
    while queue:
        segment = queue.pop(0)
        rows = numbering[segment]
        for i in by_segment.get(segment, []):
            step = steps[i]
            known = np.isin(_lids(step.pairs), rows.lids)
            pairs = step.pairs.filter(pa.array(known))
            out = rows.ordinals(_lids(pairs))
            values = by_first_use(pairs.drop_columns([LID]), out)
            tables = compress_pairs(out, values, len(rows.lids), orientations)
            at = len(encoded)
            if step.child is not None:
                numbering[step.child] = Outputs(values.values.column(REF).to_numpy())
                path_to[step.child] = [*path_to[segment], at]
                queue.append(step.child)
                encoded.append(EncodedStep(segment, step.child, None, tables, None, pairs.num_rows))
            else:
                encoded.append(EncodedStep(segment, None, step.table, tables, values.dictionary(),
                                           pairs.num_rows))
                indexes.setdefault(f"src-{step.table}", []).append([*path_to[segment], at])
    for segment in functions:
        if segment in path_to:
            indexes[f"fn-{segment}"] = [path_to[segment]]
    return Paths(encoded, numbering, indexes, root)


def _root_numbering(steps: Sequence[Step], mine: list[int], root_lids: np.ndarray) -> Outputs:
    """The outputs by the first (by value) row of the root's largest step, as in the composed
    form, so that they follow the table they come from."""
    if not mine:
        return Outputs.ordered(root_lids)
    largest = steps[max(mine, key=lambda i: steps[i].pairs.num_rows)].pairs
    largest = largest.filter(pa.array(np.isin(_lids(largest), root_lids)))  # rows the output kept
    return Outputs.ordered(root_lids, _lids(largest), by_value(largest.drop_columns([LID])).of)


def _lids(table: pa.Table) -> np.ndarray:
    return table.column(LID).to_numpy()
