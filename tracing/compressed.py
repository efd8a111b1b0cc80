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
    """The compressed indexes of one run, read from a local copy of its ``compressed/`` folder."""

    def __init__(self, store: ResultsStore, run_dir: str, meta: dict[str, Any]) -> None:
        self.meta = meta
        # runs never change once committed: a copy (non-local stores) is kept per run folder
        cache = os.path.join(tempfile.gettempdir(), f"al-provrc-{hashlib.sha1(run_dir.encode()).hexdigest()}")
        os.makedirs(cache, exist_ok=True)
        self.root = os.path.dirname(store.fetch(f"{run_dir}/{COMPRESSED}", cache))
        self.reader = ParquetReader(None, local=True)
        self._tables: dict[tuple[str, str], Table] = {}

    @property
    def names(self) -> list[str]:
        return sorted(self.meta["indexes"])

    def _uri(self, directory: str) -> str:
        return f"file:{self.root}/{directory}"

    def table(self, name: str, orientation: str) -> Table:
        """A compressed relation, read once (they are small: that is the point)."""
        key = (name, orientation)
        if key not in self._tables:
            self._tables[key] = read(f"{self.root}/{self.meta['indexes'][name][orientation]['file']}")
        return self._tables[key]

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        """Distinct attribute values in the lineage of the output rows with ids ``lids``."""
        info = self.meta["indexes"][name]
        ords = self.reader.lookup(self._uri(self.meta["outputs"]["dir"]), lids, [(ORD, ORD)])
        boxes = _walk(backward, self.table(name, "backward"), ords)
        return self.reader.ranges(self._uri(info["dict"]["dir"]), ORD, boxes, [(a, a) for a in info["attrs"]])

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        """Ids of the output rows whose lineage holds one of the attribute values ``keys``."""
        info = self.meta["indexes"][name]
        ords = self.reader.lookup(self._uri(info["dict"]["dir"]), keys, [(ORD, ORD)])
        boxes = _walk(forward, self.table(name, "forward"), ords)
        found = self.reader.ranges(self._uri(self.meta["outputs"]["dir"]), ORD, boxes, [(LID, LID)])
        return set(found.column(LID).to_pylist())


def _walk(direction: Any, table: Table, ords: pa.Table) -> Boxes:
    """One in-situ step from the ordinals in ``ords`` (ranges out, not rows)."""
    cells = ords.column(ORD).to_numpy()
    if not len(cells):
        return Boxes(np.empty((0, 1), np.int64), np.empty((0, 1), np.int64))
    return direction([table], cells)
