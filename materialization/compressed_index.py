"""Write a run's captured row-level lineage through the compressed backend (ProvRC).

Composed layout (the default; :mod:`materialization.provrc.tuples` for the numbering):

    compressed/outputs/part-0.parquet          (__lid, __ord) of every output row, by __lid
    compressed/<index>/dict/part-0.parquet     (attributes..., __ord) by __ord
    compressed/<index>/backward.provrc         output ordinals -> lineage ordinals (ProvRC, zstd)
    compressed/<index>/forward.provrc          the same relation read the other way

Segment layout (``Capture(compose=False)``; :mod:`materialization.provrc.paths`): the same
outputs file, and one relation per captured step of a segment, queried along paths:

    compressed/steps/<i>/{backward,forward}.provrc   segment ordinals -> input ordinals
    compressed/steps/<i>/dict/                       a source step's (attributes..., __ord)
    compressed/fn-<segment>/dict/                    a model segment's (__fn, __ord)

The relations are encoded in the driver from the collected pairs.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from materialization.provrc.parquet import write
from materialization.provrc.paths import Paths
from materialization.provrc.table import Table
from materialization.provrc.tuples import FN, ORD, Outputs, encode_run, value_attrs
from materialization.store import ResultsStore

COMPRESSED = "compressed"
DICT_ROW_GROUP = 65_536  # rows: a lookup of a few ordinals reads a few row groups
PROVRC_CODEC = "zstd"


def write_compressed(
    store: ResultsStore,
    staging: str,
    pairs: dict[str, pa.Table],
    root_lids: np.ndarray,
    orientations: tuple[str, ...],
) -> dict[str, Any]:
    """Encodes every composed index and copies the files into the run; returns what was written."""

    def files(root: Path) -> dict[str, Any]:
        outputs, encoded = encode_run(pairs, root_lids, orientations)
        indexes: dict[str, Any] = {}
        for name, found in encoded.items():
            indexes[name] = {
                "attrs": value_attrs(found.dictionary),
                "pairs": found.pairs,
                "dict": _dictionary(root, name, found.dictionary),
                **_relations(root, name, found.tables),
            }
        return {"outputs": _outputs(root, outputs), "indexes": indexes}

    return _stored(store, staging, files)


def write_paths(store: ResultsStore, staging: str, encode: Callable[[], Paths]) -> dict[str, Any]:
    """Writes the segment layout of ``encode()``'s steps; returns what was written."""

    def files(root: Path) -> dict[str, Any]:
        paths = encode()
        steps = []
        for i, step in enumerate(paths.steps):
            info: dict[str, Any] = {"segment": step.segment, "child": step.child, "table": step.table,
                                    "pairs": step.pairs, **_relations(root, f"steps/{i}", step.tables)}
            if step.dictionary is not None:
                info["dict"] = _dictionary(root, f"steps/{i}", step.dictionary)
            steps.append(info)
        indexes: dict[str, Any] = {}
        for name, found in paths.indexes.items():
            if name.startswith("fn-"):  # a model segment's calls are its rows: (__fn, __ord)
                calls = paths.numbering[int(name.removeprefix("fn-"))].table().rename_columns([FN, ORD])
                dicts = [_dictionary(root, name, calls)]
            else:
                dicts = [steps[path[-1]]["dict"] for path in found]
            attrs = [FN] if name.startswith("fn-") else paths.steps[found[0][-1]].attrs
            indexes[name] = {"attrs": attrs, "paths": [{"steps": p, "dict": d} for p, d in zip(found, dicts)]}
        outputs = _outputs(root, paths.numbering[paths.root])
        return {"layout": "segments", "outputs": outputs, "steps": steps, "indexes": indexes}

    return _stored(store, staging, files)


def _stored(store: ResultsStore, staging: str, files: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """Encodes and writes into a local folder with ``files``, then copies it into the run."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="al-provrc-") as tmp:
        root = Path(tmp) / COMPRESSED
        meta = files(root)
        meta["bytes"] = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        store.put(str(root), f"{staging}/{COMPRESSED}")
    meta["seconds"] = time.perf_counter() - started
    return meta


def _outputs(root: Path, outputs: Outputs) -> dict[str, Any]:
    return {"dir": f"{COMPRESSED}/outputs", "rows": len(outputs.lids),
            "bytes": _parquet(outputs.table(), root / "outputs")}


def _dictionary(root: Path, where: str, dictionary: pa.Table) -> dict[str, Any]:
    return {"dir": f"{COMPRESSED}/{where}/dict", "rows": dictionary.num_rows,
            "bytes": _parquet(dictionary, root / where / "dict")}


def _relations(root: Path, where: str, tables: dict[str, Table]) -> dict[str, Any]:
    """Each orientation's ProvRC file under ``where``."""
    (root / where).mkdir(parents=True, exist_ok=True)
    return {
        orientation: {"file": f"{COMPRESSED}/{where}/{orientation}.provrc", "rows": len(table),
                      "bytes": write(table, root / where / f"{orientation}.provrc", PROVRC_CODEC)}
        for orientation, table in tables.items()
    }


def _parquet(table: pa.Table, folder: Path) -> int:
    """Integer columns delta-encoded: ordinals count up and keys are sorted within a group, so
    they cost bits per row, not bytes (TPC-H Q1 SF 1: a 30 MB dictionary becomes 4 MB)."""
    folder.mkdir(parents=True, exist_ok=True)
    ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    pq.write_table(
        table, folder / "part-0.parquet", compression="zstd", row_group_size=DICT_ROW_GROUP,
        use_dictionary=[c for c in table.column_names if c not in ints],
        column_encoding=dict.fromkeys(ints, "DELTA_BINARY_PACKED"),
    )
    return _size(folder)


def _size(folder: Path) -> int:
    return sum(os.path.getsize(p) for p in folder.iterdir())
