"""Index lookups of the compressed backend: answered over the ProvRC relations in situ.

A question's output rows become output ordinals (one lookup), the ordinals become ranges of
lineage ordinals by range joins over the compressed table (never one row per pair), and the
ranges are joined, as ranges, with the dictionary to give attribute values; forward the same
the other way. See :mod:`materialization.compressed_index` for the layout.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

import numpy as np
import pyarrow as pa

from materialization.capture import LID
from materialization.compressed_index import COMPRESSED
from materialization.provrc import Boxes, Table, backward, forward, read
from materialization.provrc.tuples import ORD
from materialization.store import ResultsStore
from tracing.parquet_reader import ParquetReader


class ProvrcPairs:
    """The composed compressed indexes of one run (one relation per index), read from a local
    copy of its ``compressed/`` folder."""

    def __init__(self, store: ResultsStore, run_dir: str, meta: dict[str, Any]) -> None:
        self.meta = meta
        # runs never change once committed: a copy (non-local stores) is kept per run folder
        cache = os.path.join(tempfile.gettempdir(), f"al-provrc-{hashlib.sha1(run_dir.encode()).hexdigest()}")
        self.root = os.path.dirname(store.fetch(f"{run_dir}/{COMPRESSED}", cache))
        self.reader = ParquetReader(None, local=True)
        self._tables: dict[str, Table] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self.meta["indexes"])

    def uri(self, directory: str) -> str:
        return f"file:{self.root}/{directory}"

    def relation(self, file: str) -> Table:
        """A compressed relation, read once (they are small: that is the point)."""
        if file not in self._tables:
            self._tables[file] = read(f"{self.root}/{file}")
        return self._tables[file]

    def table(self, name: str, orientation: str) -> Table:
        return self.relation(self.meta["indexes"][name][orientation]["file"])

    def output_ordinals(self, lids: pa.Table) -> np.ndarray:
        """Ordinals of the output rows with ids ``lids``."""
        return self._ordinals(self.meta["outputs"]["dir"], lids)

    def output_lids(self, found: Boxes | np.ndarray) -> set[int]:
        """Ids of the output rows with the ordinals ``found`` (ranges or cells)."""
        rows = self.values(self.meta["outputs"]["dir"], [LID], found)
        return set(rows.column(LID).to_pylist())

    def values(self, dictionary: str, attrs: list[str], found: Boxes | np.ndarray) -> pa.Table:
        """Distinct attribute values of the dictionary rows with the ordinals ``found``."""
        return self.reader.ranges(self.uri(dictionary), ORD, Boxes.of(found, 1), [(a, a) for a in attrs])

    def value_ordinals(self, dictionary: str, keys: pa.Table) -> np.ndarray:
        """Ordinals of the dictionary rows equal to a row of ``keys``."""
        return self._ordinals(dictionary, keys)

    def _ordinals(self, directory: str, keys: pa.Table) -> np.ndarray:
        return self.reader.lookup(self.uri(directory), keys, [(ORD, ORD)]).column(ORD).to_numpy()

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        """Distinct attribute values in the lineage of the output rows with ids ``lids``."""
        info = self.meta["indexes"][name]
        boxes = _walk(backward, [self.table(name, "backward")], self.output_ordinals(lids))
        return self.values(info["dict"]["dir"], info["attrs"], boxes)

    def backward_pairs(self, name: str, lids: pa.Table) -> pa.Table:
        """Each output row's own lineage: ranges do not say which output row they serve, so
        one walk per row (in situ, in process)."""
        parts = []
        for lid in lids.column(LID).to_pylist():
            found = self.backward(name, pa.table({LID: pa.array([lid], pa.int64())}))
            parts.append(found.append_column(LID, pa.array([lid] * found.num_rows, pa.int64())))
        return pa.concat_tables(parts)

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        """Ids of the output rows whose lineage holds one of the attribute values ``keys``."""
        ords = self.value_ordinals(self.meta["indexes"][name]["dict"]["dir"], keys)
        return self.output_lids(_walk(forward, [self.table(name, "forward")], ords))


class SegmentPaths(ProvrcPairs):
    """The per-segment compressed lineage of one run (``Capture(compose=False)``): a question
    walks, in situ, every path of steps from the root segment to the index's table."""

    def _steps(self, path: dict[str, Any], orientation: str) -> list[Table]:
        tables = [self.relation(self.meta["steps"][i][orientation]["file"]) for i in path["steps"]]
        return tables if orientation == "backward" else tables[::-1]

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        info = self.meta["indexes"][name]
        ords = self.output_ordinals(lids)
        found = []
        for path in info["paths"]:
            boxes = _walk(backward, self._steps(path, "backward"), ords)
            found.append(self.values(path["dict"]["dir"], info["attrs"], boxes))
        if len(found) == 1:
            return found[0]
        return pa.concat_tables(found).group_by(info["attrs"]).aggregate([])  # a table read twice: distinct

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        lids: set[int] = set()
        for path in self.meta["indexes"][name]["paths"]:
            ords = self.value_ordinals(path["dict"]["dir"], keys)
            lids |= self.output_lids(_walk(forward, self._steps(path, "forward"), ords))
        return lids


def open_compressed(store: ResultsStore, run_dir: str, meta: dict[str, Any]) -> ProvrcPairs:
    """The compressed indexes of a run in the layout it was written in."""
    return (SegmentPaths if meta.get("layout") == "segments" else ProvrcPairs)(store, run_dir, meta)


def _walk(direction: Any, tables: list[Table], ords: np.ndarray) -> Boxes:
    """In-situ steps from the ordinals ``ords`` along ``tables`` (ranges out, not rows); no
    table: the ordinals themselves (a model segment at the root)."""
    if not len(ords):
        return Boxes(np.empty((0, 1), np.int64), np.empty((0, 1), np.int64))
    return direction(tables, ords) if tables else Boxes.of(ords, 1)
