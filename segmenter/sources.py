"""Sources: what a ``LogicalRelation`` of Spark's plan reads, as a leaf of the operator tree.

A relation over a registered store snapshot is that snapshot's table. Any other file-based
relation (``spark.read`` of Parquet, ORC, CSV or JSON; a catalog table; a temp view over
them) is the user's own files, read where they are: the leaf names every file the task read
and the reader's options, and its rows are named by the key the user declared
(``als.run(..., keys={table: columns})``) or, without one, by file and row position (a hidden
``_rid`` column that a projection above the leaf drops, so the tree above sees exactly the
relation's columns).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from segmenter.errors import UnknownSourceError
from segmenter.operators import (
    ROW_ID_COLUMN,
    Col,
    Files,
    Node,
    Projection,
    Source,
    Task,
    column_expr,
    from_dict,
    to_dict,
)

JObj = Any  # a py4j JavaObject

IN_PLACE_FORMATS = ("parquet", "orc", "csv", "json")


def read_by_spark_only(files: Files) -> bool:
    """Whether only Spark parses these files as the task read them: every format but Parquet
    (DuckDB's parsers are not Spark's, and Spark gives no row position in them), and a
    partitioned folder (its partition values are typed by Spark's inference from the paths)."""
    return files.format != "parquet" or "basepath" in dict(files.options)
ROW_SHIFT = 40  # a keyless row's id: file ordinal (in the sorted file list) << 40 | row position
_NOT_OPTIONS = {"path", "paths"}  # where, not how: the file list says where


@dataclass(frozen=True)
class SourceRef:
    table: str
    key: tuple[str, ...]
    snapshot: str


SourceResolver = Callable[[list[str]], SourceRef | None]
Keys = Mapping[str, Sequence[str]]  # table name -> the columns that identify its rows


def java_list(seq: JObj) -> list[JObj]:
    return [seq.apply(i) for i in range(seq.size())]


class SourceReader:
    """Turns the relations of one plan into source leaves; names each in-place source once
    (two different file sets that would share a name get ``name_2``)."""

    def __init__(self, resolve: SourceResolver, keys: Keys, fresh_id: Callable[[str], str]) -> None:
        self.resolve = resolve
        self.keys = {t.lower(): [k] if isinstance(k, str) else list(k) for t, k in keys.items()}
        self.fresh_id = fresh_id
        self.named: dict[str, tuple[str, ...]] = {}  # in-place table name -> its files
        self.used_keys: set[str] = set()

    def leaf(self, plan: JObj, cols: tuple[Col, ...], view: str | None) -> Node:
        """The leaf for relation ``plan`` whose output columns are ``cols``; ``view``: the
        temp or catalog view the user read it through, if any."""
        relation = plan.relation()
        location = relation.location()
        roots = [p.toString() for p in java_list(location.rootPaths())]
        ref = self.resolve(roots)
        if ref is not None:
            return _registered(ref, cols)
        fmt = relation.fileFormat().toString().lower()
        if fmt not in IN_PLACE_FORMATS:
            raise UnknownSourceError(
                f"the task reads {', '.join(roots)} as {fmt}; files are read in place as "
                f"{', '.join(IN_PLACE_FORMATS)}: register other data with LineageSession.register_table()"
            )
        files = tuple(sorted(str(f) for f in location.inputFiles()))
        if not files:
            raise UnknownSourceError(f"the task reads {', '.join(roots)}, which holds no {fmt} file")
        table = self._name(_catalog_name(plan) or view or _stem(roots[0]), files)
        options = _options(relation)
        if relation.partitionSchema().nonEmpty() and "basepath" not in dict(options):
            if len(roots) != 1:
                raise UnknownSourceError(f"{table!r} reads several partitioned folders: read each alone")
            options = tuple(sorted((*options, ("basepath", roots[0]))))  # its values are in the paths
        key = self.keys.get(table.lower())
        if key is not None:
            self.used_keys.add(table.lower())
            return Source(table, cols, _key_ids(table, key, cols), "", Files(fmt, files, options))
        if any(c.name.lower() == ROW_ID_COLUMN for c in cols):
            raise UnknownSourceError(
                f"source {table!r} has a column named {ROW_ID_COLUMN}, the name of the row id a "
                f"keyless source gets: declare its key, als.run(..., keys={{{table!r}: [...]}})"
            )
        rid = Col(self.fresh_id(ROW_ID_COLUMN), ROW_ID_COLUMN, "bigint")
        leaf = Source(table, (*cols, rid), (rid.id,), "", Files(fmt, files, options, row_id=True))
        return Projection(leaf, tuple((c, column_expr(c)) for c in cols))

    def check_keys(self) -> None:
        """Every table named in ``keys=`` was read by the task (a typo must not pass)."""
        unknown = sorted(set(self.keys) - self.used_keys)
        if unknown:
            read = ", ".join(sorted(self.named)) or "none"
            raise UnknownSourceError(f"keys= names {unknown}; the task reads in place: {read}")

    def _name(self, wanted: str, files: tuple[str, ...]) -> str:
        name, n = _identifier(wanted), 1
        while self.named.get(name, files) != files:
            n += 1
            name = f"{_identifier(wanted)}_{n}"
        self.named[name] = files
        return name


def _registered(ref: SourceRef, cols: tuple[Col, ...]) -> Source:
    return Source(table=ref.table, cols=cols, key=_key_ids(ref.table, ref.key, cols), snapshot=ref.snapshot)


def _key_ids(table: str, key: Sequence[str], cols: tuple[Col, ...]) -> tuple[str, ...]:
    by_name = {c.name.lower(): c.id for c in cols}
    missing = [k for k in key if k.lower() not in by_name]
    if missing:
        raise UnknownSourceError(
            f"source {table!r} has no key column(s) {missing}; it has {[c.name for c in cols]}"
        )
    return tuple(by_name[k.lower()] for k in key)


def _catalog_name(plan: JObj) -> str | None:
    table = plan.catalogTable()
    return str(table.get().identifier().table()) if table.isDefined() else None


def _stem(root: str) -> str:
    """``orders`` for ``file:/data/orders.parquet``, ``…/orders/`` or ``…/orders/*.csv``."""
    parts = [p for p in re.split(r"[/\\]", root) if p and not any(ch in p for ch in "*?[{")]
    return re.sub(r"\.[A-Za-z0-9]+$", "", parts[-1]) if parts else "source"


def _identifier(name: str) -> str:
    safe = re.sub(r"\W+", "_", name).strip("_") or "source"
    return f"t_{safe}" if safe[0].isdigit() else safe


def _options(relation: JObj) -> tuple[tuple[str, str], ...]:
    found = []
    it = relation.options().iterator()
    while it.hasNext():
        pair = it.next()
        if str(pair._1()).lower() not in _NOT_OPTIONS:
            found.append((str(pair._1()).lower(), str(pair._2())))
    return tuple(sorted(found))


def spark_file_uri(uri: str) -> str:
    """A file URI as Spark's ``_metadata.file_path`` writes it (``file:/a``, not ``file:///a``)."""
    return re.sub(r"^file:/+", "file:/", uri)


def local_file(uri: str) -> str | None:
    """The local path of a ``file:`` URI (percent-decoded, as Spark encodes it); None for
    other file systems."""
    if not uri.startswith("file:"):
        return None
    return "/" + unquote(re.sub(r"^file:/+", "", uri))


def read_through(task: Task, snapshots: Mapping[str, str]) -> Task:
    """``task`` with the in-place sources named in ``snapshots`` read through their copy in
    the store (the files stay named: answers still say which file a row came from)."""
    data = to_dict(task)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("@") == "Source" and node.get("files") and node["table"] in snapshots:
                node["snapshot"] = snapshots[node["table"]]
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(data)
    return from_dict(data)
