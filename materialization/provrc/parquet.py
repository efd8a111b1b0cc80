"""Parquet persistence of ProvRC tables (and of raw relations, the baselines they are measured against)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from materialization.provrc.relation import Relation
from materialization.provrc.table import Table

COMPRESSIONS = ("none", "snappy", "gzip", "zstd")
PACKED_ROWS = 256  # up to this many table rows, one column (row-major): a chunk's metadata costs ~150 B


def table_to_arrow(table: Table) -> pa.Table:
    """Columns per attribute: low end and length (hi - lo: mostly zeros, which Parquet encodes to
    almost nothing), plus the int8 reference of each value attribute; shapes go in the metadata."""
    cols: dict[str, np.ndarray] = {}
    for j in range(table.key_lo.shape[1]):
        cols[f"k{j}_lo"] = table.key_lo[:, j]
        cols[f"k{j}_len"] = table.key_hi[:, j] - table.key_lo[:, j]
    for i in range(table.val_lo.shape[1]):
        cols[f"v{i}_lo"] = table.val_lo[:, i]
        cols[f"v{i}_len"] = table.val_hi[:, i] - table.val_lo[:, i]
        cols[f"v{i}_ref"] = table.val_ref[:, i]
    meta = {"orientation": table.orientation, "key_shape": table.key_shape, "val_shape": table.val_shape}
    return pa.table(cols).replace_schema_metadata({"provrc": json.dumps(meta)})


def packed(data: pa.Table) -> pa.Table:
    """All columns in one int64 column, row-major: small tables are then mostly values, not
    per-column metadata (structured lineage is 1-4 rows)."""
    meta = json.loads(data.schema.metadata[b"provrc"]) | {"packed": data.column_names}
    cells = np.stack([c.to_numpy().astype(np.int64) for c in data.columns], axis=1).reshape(-1)
    return pa.table({"cells": cells}).replace_schema_metadata({"provrc": json.dumps(meta)})


def table_from_arrow(data: pa.Table) -> Table:
    meta = json.loads(data.schema.metadata[b"provrc"])
    a, b = len(meta["key_shape"]), len(meta["val_shape"])
    names = meta.get("packed")
    if names is not None:
        cells = data.column("cells").to_numpy().reshape(-1, len(names))
        columns = {n: cells[:, i] for i, n in enumerate(names)}
    else:
        columns = {n: data.column(n).to_numpy() for n in data.column_names}

    def col(name: str) -> np.ndarray:
        return columns[name]

    key_lo = np.stack([col(f"k{j}_lo") for j in range(a)], axis=1).reshape(-1, a)
    key_hi = key_lo + np.stack([col(f"k{j}_len") for j in range(a)], axis=1).reshape(-1, a)
    val_lo = np.stack([col(f"v{i}_lo") for i in range(b)], axis=1).reshape(-1, b)
    val_hi = val_lo + np.stack([col(f"v{i}_len") for i in range(b)], axis=1).reshape(-1, b)
    val_ref = np.stack([col(f"v{i}_ref") for i in range(b)], axis=1).reshape(-1, b).astype(np.int8)
    return Table(meta["orientation"], key_lo, key_hi, val_lo, val_hi, val_ref,
                 tuple(meta["key_shape"]), tuple(meta["val_shape"]))


def write(table: Table, path: str | Path, compression: str = "snappy") -> int:
    """Writes a ProvRC table; returns the file's size in bytes.

    Without the Arrow schema (rebuilt from the "provrc" metadata) and column statistics: a table
    is read whole, nothing would be pruned, and these ~2 kB dominate a structured table's file.
    Small tables are :func:`packed` into one column.
    """
    data = table_to_arrow(table)
    small = len(table) <= PACKED_ROWS
    if small:
        data = packed(data)
    with pq.ParquetWriter(path, data.schema, compression=_codec(compression), store_schema=False,
                          write_statistics=False, use_dictionary=not small) as writer:
        writer.write_table(data)
        writer.add_key_value_metadata(data.schema.metadata)
    return Path(path).stat().st_size


def read(path: str | Path) -> Table:
    return table_from_arrow(pq.read_table(path))


def relation_to_arrow(relation: Relation) -> pa.Table:
    """The uncompressed lineage rows, one int64 column per output and input attribute."""
    cols = {f"out{j}": relation.out[:, j] for j in range(relation.out.shape[1])}
    cols |= {f"in{i}": relation.inp[:, i] for i in range(relation.inp.shape[1])}
    return pa.table(cols)


def write_relation(relation: Relation, path: str | Path, compression: str = "snappy") -> int:
    """Writes the raw rows as Parquet with pyarrow's defaults (the columnar baseline: statistics
    kept, as they let a query engine skip row groups); returns the file's size in bytes."""
    pq.write_table(relation_to_arrow(relation), path, compression=_codec(compression))
    return Path(path).stat().st_size


def _codec(compression: str) -> str:
    if compression not in COMPRESSIONS:
        raise ValueError(f"compression must be one of {COMPRESSIONS}, not {compression!r}")
    return compression
