"""The operator tree: the paper's seven operators (σ π ⋈ α ∪ − φ) over source tables.

Nodes are immutable dataclasses. Every column carries a unique ``id`` (the name it has in
every DataFrame the engine builds) beside the user's ``name``, so trees stay unambiguous
when two inputs share a column name. Expressions are Spark SQL text over those ids.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Col:
    id: str
    name: str
    dtype: str
    is_reason: bool = False


@dataclass(frozen=True)
class Expr:
    """A Spark SQL expression over column ids; ``refs`` names the ids it reads."""

    sql: str
    refs: frozenset[str] = field(default_factory=frozenset)

    def is_column(self) -> str | None:
        """The id this expression merely reads, if it is a bare column reference."""
        if len(self.refs) == 1:
            (ref,) = self.refs
            if self.sql in (ref, f"`{ref}`"):
                return ref
        return None


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def column_expr(col: Col) -> Expr:
    return Expr(f"`{col.id}`", frozenset({col.id}))


class Node:
    """Base of all operators; subclasses are frozen dataclasses."""

    symbol: ClassVar[str] = "?"

    @property
    def children(self) -> tuple[Node, ...]:
        raise NotImplementedError

    @property
    def columns(self) -> tuple[Col, ...]:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def walk(self) -> Iterator[Node]:
        """Pre-order traversal."""
        yield self
        for child in self.children:
            yield from child.walk()

    def match_columns(self) -> tuple[Col, ...]:
        """Columns that identify a row by value: reasons are determined by values, skip them."""
        return tuple(c for c in self.columns if not c.is_reason)


@dataclass(frozen=True)
class Files:
    """The user's files a source reads where they are (``spark.read``, a catalog table):
    exactly the files the task read, so a file added to the folder later changes nothing."""

    format: str  # parquet, csv, json, orc: Spark's short name
    paths: tuple[str, ...]  # every file, as Spark lists it (URIs), sorted
    options: tuple[tuple[str, str], ...] = ()  # the reader's options (header, sep, ...)
    row_id: bool = False  # no key: rows are named by file and position (``ROW_ID_COLUMN``)


ROW_ID_COLUMN = "_rid"  # a keyless source's row id (a registered table stores it as a column)


@dataclass(frozen=True)
class Source(Node):
    """A source table: a store snapshot (``register_table``), or the user's files read in
    place (``files``; ``snapshot`` is then their parsed copy in the store for formats Spark
    gives no row position in, else empty)."""

    table: str
    cols: tuple[Col, ...]
    key: tuple[str, ...]
    snapshot: str
    files: Files | None = None
    symbol: ClassVar[str] = "T"

    @property
    def in_store(self) -> bool:
        """Whether its rows are read from a snapshot in the results store."""
        return bool(self.snapshot)

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.cols

    @property
    def key_cols(self) -> tuple[Col, ...]:
        """The key's columns (``key`` holds their ids)."""
        return tuple(c for c in self.cols if c.id in self.key)

    @property
    def key_names(self) -> tuple[str, ...]:
        """The key's columns by the names the table has (``key`` holds column ids)."""
        by_id = {c.id: c.name for c in self.cols}
        return tuple(by_id[i] for i in self.key)

    def describe(self) -> str:
        return f"{self.table} [{_col_list(self.cols)}] key({', '.join(self.key_names)})"


@dataclass(frozen=True)
class Selection(Node):
    child: Node
    condition: tuple[Expr, ...]
    symbol: ClassVar[str] = "σ"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.child.columns

    def describe(self) -> str:
        return " AND ".join(e.sql for e in self.condition)


@dataclass(frozen=True)
class Projection(Node):
    child: Node
    outputs: tuple[tuple[Col, Expr], ...]
    symbol: ClassVar[str] = "π"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def columns(self) -> tuple[Col, ...]:
        return tuple(c for c, _ in self.outputs)

    def describe(self) -> str:
        return ", ".join(_assignment(c, e) for c, e in self.outputs)


@dataclass(frozen=True)
class Join(Node):
    """Inner join of two or more inputs; ``semi`` keeps only the left input's columns."""

    inputs: tuple[Node, ...]
    condition: tuple[Expr, ...]
    semi: bool = False
    symbol: ClassVar[str] = "⋈"

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs

    @property
    def columns(self) -> tuple[Col, ...]:
        if self.semi:
            return self.inputs[0].columns
        return tuple(c for child in self.inputs for c in child.columns)

    def probe_columns(self) -> tuple[Col, ...]:
        """A semi-join's left columns that its condition reads: all a left row shows of
        which right rows match it (tracing probes the right side with them)."""
        refs = frozenset().union(*(e.refs for e in self.condition))
        return tuple(c for c in self.inputs[0].columns if c.id in refs)

    def describe(self) -> str:
        cond = " AND ".join(e.sql for e in self.condition) or "TRUE"
        return ("semi " if self.semi else "") + cond


# which input's unmatched rows are kept; "exists": each left row once, flagged matched or not
OUTER_KINDS = {"left": "⟕", "right": "⟖", "full": "⟗", "exists": "⋉∃"}


@dataclass(frozen=True)
class OuterJoin(Node):
    """T₁ ⟕ T₂, ⟖, ⟗: the matched pairs, and the unmatched rows of the ``kind``'s side(s)
    padded with NULLs; ``exists`` (Spark's existence join: EXISTS under OR or in a SELECT
    list): each T₁ row once, with ``flag`` telling whether a T₂ row matches. Defined by
    their rewrites (docs/semantics.md, :mod:`segmenter.rewrites`), (T₁ ⋈ T₂) ∪
    π_{T₁, NULL…}(T₁ − (T₁ ⋉ T₂)) for ⟕; evaluated as one join and traced in one step: a
    matched row's lineage is its input rows, an unmatched one's its own row, plus every
    matched row of either input as control (the check its difference makes)."""

    left: Node
    right: Node
    condition: tuple[Expr, ...]
    kind: str = "left"
    flag: Col | None = None  # exists: the flag column

    def __post_init__(self) -> None:
        if self.kind not in OUTER_KINDS:
            raise ValueError(f"outer join kind must be one of {tuple(OUTER_KINDS)}")
        if (self.kind == "exists") != (self.flag is not None):
            raise ValueError("an existence join, and only one, has a flag column")

    @property
    def symbol(self) -> str:  # type: ignore[override]
        return OUTER_KINDS[self.kind]

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @property
    def columns(self) -> tuple[Col, ...]:
        if self.flag is not None:
            return (*self.left.match_columns(), self.flag)
        return self.left.match_columns() + self.right.match_columns()  # as the rewrite's ∪

    @property
    def kept(self) -> tuple[int, ...]:
        """The inputs (0: left, 1: right) whose unmatched rows are kept."""
        return {"right": (1,), "full": (0, 1)}.get(self.kind, (0,))

    def describe(self) -> str:
        cond = " AND ".join(e.sql for e in self.condition) or "TRUE"
        if self.flag is not None:
            return f"{self.flag.name} := exists {cond}"
        return f"{self.kind} outer {cond}"


@dataclass(frozen=True)
class Aggregation(Node):
    """α_{G, g(B)}. ``outputs`` keep Spark's column order; every grouping expression has an
    output column (``key_ids``, one per grouping expression) so that a result row can be
    traced to its group. The parser adds such a column where the user did not select it,
    with a projection above that drops it again."""

    child: Node
    outputs: tuple[tuple[Col, Expr], ...]
    key_ids: tuple[str, ...]
    symbol: ClassVar[str] = "α"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def columns(self) -> tuple[Col, ...]:
        return tuple(c for c, _ in self.outputs)

    @property
    def keys(self) -> tuple[tuple[Col, Expr], ...]:
        by_id = {c.id: (c, e) for c, e in self.outputs}
        return tuple(by_id[k] for k in self.key_ids)

    @property
    def aggregates(self) -> tuple[tuple[Col, Expr], ...]:
        return tuple((c, e) for c, e in self.outputs if c.id not in self.key_ids)

    def describe(self) -> str:
        keys = ", ".join(_assignment(c, e) for c, e in self.keys) or "()"
        aggs = ", ".join(_assignment(c, e) for c, e in self.aggregates)
        return f"G=[{keys}] g=[{aggs}]"


@dataclass(frozen=True)
class Union(Node):
    """Bag union; each input's value columns map to ``outputs`` by position, as in SQL.
    (SQL's UNION DISTINCT arrives as an aggregation over this.)"""

    inputs: tuple[Node, ...]
    outputs: tuple[Col, ...]
    symbol: ClassVar[str] = "∪"

    @property
    def children(self) -> tuple[Node, ...]:
        return self.inputs

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.outputs

    def describe(self) -> str:
        return _col_list(self.outputs)


DIFFERENCE_KINDS = ("distinct", "all", "anti")


@dataclass(frozen=True)
class Difference(Node):
    """left − right. ``anti``: a left anti-join, modelled as left − (left ⋉ right), keeping
    the left input's duplicates as Spark does."""

    left: Node
    right: Node
    kind: str = "distinct"
    symbol: ClassVar[str] = "−"

    def __post_init__(self) -> None:
        if self.kind not in DIFFERENCE_KINDS:
            raise ValueError(f"difference kind must be one of {DIFFERENCE_KINDS}")

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.left.match_columns()  # rows are compared by value; reasons do not pass

    def describe(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Generate(Node):
    """γ: each input row once per element its generator gives (``explode``, ``posexplode``,
    ``inline``, their ``_outer`` forms), with the element's ``outputs`` appended. Its lineage
    is that of π(T ⋈_{p < size(list)} P) over a constant table of positions P: each output
    row comes from its input row alone (docs/semantics.md)."""

    child: Node
    function: str  # explode, posexplode, inline
    args: tuple[Expr, ...]
    outer: bool
    outputs: tuple[Col, ...]
    symbol: ClassVar[str] = "γ"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.child.columns + self.outputs

    @property
    def generator(self) -> Expr:
        """The call as Spark SQL."""
        name = f"{self.function}{'_outer' if self.outer else ''}"
        refs = frozenset().union(*(a.refs for a in self.args))
        return Expr(f"{name}({', '.join(a.sql for a in self.args)})", refs)

    def describe(self) -> str:
        return f"{_col_list(self.outputs)} := {self.generator.sql}"


@dataclass(frozen=True)
class Expand(Node):
    """ε: each input row once per grouping set of a ROLLUP, CUBE or GROUPING SETS (Spark's
    Expand): ``projections[i]`` gives set i's row, the keys it leaves out NULL and its number
    as ``spark_grouping_id``. Defined as ∪ᵢ πᵢ(T) (docs/semantics.md), whose output rows each
    come from one input row alone; evaluated and traced in one pass over T, not once per set."""

    child: Node
    projections: tuple[tuple[Expr, ...], ...]
    outputs: tuple[Col, ...]
    symbol: ClassVar[str] = "ε"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.outputs

    def passed(self) -> dict[str, str]:
        """Output column id -> the child column every grouping set passes to it unchanged."""
        found = {}
        for i, out in enumerate(self.outputs):
            refs = {p[i].is_column() for p in self.projections}
            if len(refs) == 1 and (ref := refs.pop()) is not None:
                found[out.id] = ref
        return found

    def describe(self) -> str:
        return f"{len(self.projections)} grouping sets of [{_col_list(self.outputs)}]"


@dataclass(frozen=True)
class Window(Node):
    """ω: the input rows with window functions appended (``functions``: each column and its
    window expression, ``OVER`` clause included). Defined by its rewrite into joins and
    aggregations (docs/semantics.md): a row's value, and its lineage, is that of its
    *frame*, the rows of its partition (an ordered frame: those that sort before it or tie
    with it). ``keys`` evaluate a row's partition and order values, ``frame_keys`` the same
    for a candidate frame row, and ``frame`` holds where the candidate is in the row's frame:
    tracing probes the input with the kept rows' keys, one step, no copy of the input."""

    child: Node
    functions: tuple[tuple[Col, Expr], ...]
    keys: tuple[tuple[Col, Expr], ...]
    frame_keys: tuple[tuple[Col, Expr], ...]
    frame: tuple[Expr, ...]
    partitioned: int  # the first keys are the partition's, the rest the order's
    peers: Expr | None = None  # row_number(), ROWS frames: a row's peers, more than one an error
    tie_error: str = ""  # the error the task fails with then
    symbol: ClassVar[str] = "ω"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.child.columns + tuple(c for c, _ in self.functions)

    def partition_columns(self) -> dict[str, str]:
        """Child columns the partition is by, bare: a restriction on them keeps whole
        partitions, so it passes to the input without changing a value."""
        refs = (e.is_column() for _, e in self.keys[: self.partitioned])
        return {r: r for r in refs if r is not None}

    def describe(self) -> str:
        return ", ".join(_assignment(c, e) for c, e in self.functions)


@dataclass(frozen=True)
class Function(Node):
    """φ: appends the UDF's Value (and, in reasoning mode, its Reason) to every input row."""

    child: Node
    udf: str
    args: tuple[Expr, ...]
    value: Col
    reason: Col
    symbol: ClassVar[str] = "φ"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @property
    def columns(self) -> tuple[Col, ...]:
        return self.child.columns + (self.value, self.reason)

    def arg_columns(self) -> tuple[Col, ...]:
        """The input attributes E the UDF reads."""
        refs = set().union(*(a.refs for a in self.args)) if self.args else set()
        return tuple(c for c in self.child.columns if c.id in refs)

    def describe(self) -> str:
        args = ", ".join(a.sql for a in self.args)
        return f"{self.value.name} := {self.udf}({args})"


@dataclass(frozen=True)
class SortKey:
    expr: Expr
    ascending: bool = True
    nulls_first: bool = True


@dataclass(frozen=True)
class Task:
    """An operator tree plus what Spark applies on top of it: the visible output columns,
    an optional ORDER BY and LIMIT (lineage of the kept rows is traced in ``root``)."""

    root: Node
    output: tuple[Col, ...]
    order: tuple[SortKey, ...] = ()
    limit: int | None = None
    text: str = ""
    language: str = "sql"  # of text: sql, code (the caller's) or plan (Spark's analyzed plan)

    def render(self) -> str:
        names = display_names(self.root)
        lines = []
        if self.limit is not None:
            lines.append(f"limit {self.limit}")
        if self.order:
            keys = ", ".join(f"{k.expr.sql} {'ASC' if k.ascending else 'DESC'}" for k in self.order)
            lines.append(f"order by {pretty(keys, names)}")
        lines.append(render_tree(self.root, names=names))
        return "\n".join(lines)


_ID = re.compile(r"`?([A-Za-z0-9_]+?)__u?\d+((?:_w\d+)*)`?")  # a column id; _w<k>: a CTE's copy
# Spark's typed number literals (1BD, 12L), outside quoted strings
_LITERAL = re.compile(r"('(?:[^'\\]|\\.)*')|\b(\d+(?:\.\d+)?)(?:BD|L|S|Y|D)\b")


def pretty(sql: str, names: dict[str, str] | None = None) -> str:
    """SQL for people: column ids shown as the names ``names`` gives them (see
    :func:`display_names`), else as the user's column names."""
    found = names or {}
    shown = _ID.sub(lambda m: found.get(m.group(0).strip("`"), m.group(1)), sql)
    return _LITERAL.sub(lambda m: m.group(1) or m.group(2), shown)


def display_names(root: Node) -> dict[str, str]:
    """Each column id of the tree as people call it: its name, qualified by its table where
    columns of two tables share it (``debt.ClientID = client.ClientID``, not
    ``ClientID = ClientID``)."""
    names: dict[str, str] = {}
    tables: dict[str, str] = {}
    for node in root.walk():
        for c in node.columns:
            names.setdefault(c.id, c.name)
        if isinstance(node, Source):
            tables.update({c.id: node.table for c in node.cols})
    homes: dict[str, set[str]] = {}
    for cid, table in tables.items():
        homes.setdefault(names[cid], set()).add(table)
    return {
        cid: f"{tables[cid]}.{name}" if cid in tables and len(homes[name]) > 1 else name
        for cid, name in names.items()
    }


def render_tree(node: Node, indent: int = 0, names: dict[str, str] | None = None) -> str:
    """Indented tree, one operator a line with its attributes and conditions."""
    names = names if names is not None else display_names(node)
    pad = "  " * indent
    lines = [f"{pad}{node.symbol} {type(node).__name__}: {pretty(node.describe(), names)}"]
    lines += [render_tree(child, indent + 1, names) for child in node.children]
    return "\n".join(lines)


def _col_list(cols: tuple[Col, ...]) -> str:
    return ", ".join(c.name for c in cols)


def _assignment(col: Col, expr: Expr) -> str:
    ref = expr.is_column()
    if ref is not None and (ref == col.id or pretty(expr.sql) == col.name):  # passed on or renamed
        return col.name
    return f"{col.name} := {expr.sql}"


# --- (de)serialisation: runs are persisted as JSON and read back in other processes ----------

_NODE_TYPES: dict[str, type[Node]] = {
    cls.__name__: cls
    for cls in (Source, Selection, Projection, Join, OuterJoin, Aggregation, Union, Difference)
    + (Function, Generate, Expand, Window)
}


def to_dict(obj: Any) -> Any:
    """Plain JSON-able structure for a node, task, column or expression."""
    if isinstance(obj, (Node, Task, Col, Expr, SortKey, Files)):
        data = {"@": type(obj).__name__}
        for f in dataclasses.fields(obj):
            data[f.name] = to_dict(getattr(obj, f.name))
        return data
    if isinstance(obj, (tuple, list)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, frozenset):
        return sorted(obj)
    return obj


def shape_key(node: Node) -> str:
    """The subtree's structure with its column ids numbered in order of first appearance:
    two subtrees with equal keys compute the same rows, column for column. The rewrites parse
    a window's or a CTE's input once per reference, each copy with ids of its own."""
    ids = {c.id for n in node.walk() for c in n.columns}
    text = json.dumps(to_dict(node), sort_keys=True, default=str)
    text = re.sub(r', "refs": \[[^\]]*\]', "", text)  # sorted by id: follows from "sql"
    if not ids:
        return text
    numbered: dict[str, str] = {}

    def number(m: re.Match[str]) -> str:
        word = m.group(0)
        return numbered.setdefault(word, f"#{len(numbered)}") if word in ids else word

    return ID_TOKEN.sub(number, text)


ID_TOKEN = re.compile(r"\w+__\w+")  # every column id is "<name>__<Spark's id>[<scope>]"


_VALUE_TYPES: dict[str, type] = {"Task": Task, "Col": Col, "Expr": Expr, "SortKey": SortKey, "Files": Files}


def from_dict(data: Any) -> Any:
    """Inverse of :func:`to_dict`."""
    if isinstance(data, list):
        return tuple(from_dict(x) for x in data)
    if not isinstance(data, dict) or "@" not in data:
        return data
    kind = data["@"]
    cls = _NODE_TYPES.get(kind) or _VALUE_TYPES[kind]
    kwargs = {k: from_dict(v) for k, v in data.items() if k != "@"}
    if cls is Expr:
        kwargs["refs"] = frozenset(kwargs["refs"])
    return cls(**kwargs)
