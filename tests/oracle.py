"""A brute-force oracle for source and reasoning lineage (paper §4, Definitions 5-8).

Test-side operator trees over tiny tables. Every node can

* evaluate itself in pure Python as a bag (list) of value tuples, with Spark's semantics
  (SQL three-valued comparisons, null-safe grouping and set operations, a global aggregate
  over nothing still giving one row);
* render itself as ordinary PySpark DataFrame code over ``als.table(name)`` (a DataFrame and
  the same code as text, for failure messages);

and :class:`Oracle` derives lineage from the definitions, independently of the engine:

* Definition 5 by literal enumeration: every tuple (T̂₁..T̂ₘ) of subsets of the distinct
  values of the operator's inputs is tried, the operator is evaluated on the input bags
  restricted to the chosen values (multiplicities kept), condition (1) Op(T̂) = {o} and
  condition (2) "every chosen tuple alone still gives output" are checked, and the lineage
  is the component-wise greatest valid tuple (an error if there is none);
* a per-operator formula for Definition 5 as a second oracle: it is checked against the
  enumeration wherever both exist, and stands in where the enumeration would be too large;
* Definition 6 by composing those per-operator lineages down the tree, which also yields
  the intermediate lineage of Definition 7 at every node, hence the reasoning lineage of
  Definition 8 at every function operator.

Constructs beyond the paper's operators are learned from their rewrites (docs/semantics.md),
as the engine's parser rewrites them: a left anti join A ▷_θ B is A − (A ⋉_θ B); an outer
join A ⟕_θ B is (A ⋈_θ B) ∪ π_{A, NULL…}(A ▷_θ B) (⟖ and ⟗ pad B's, or both sides' unmatched
rows); A ∩ B is DISTINCT(A ⋉ B on every column, NULL matching NULL).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, reduce
from typing import Any, ClassVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as F

from reasoning_udfs import ReasoningUDF

Value = Any  # int | str | None
Row = tuple[Value, ...]
Bag = list[Row]

# --- the model UDF --------------------------------------------------------------------------


PARITY_CONFIDENCE = {"even": 0.9, "odd": 0.7}


class OracleParity(ReasoningUDF):
    """φ's UDF: parity of an integer; the reason states the rule applied to the value."""

    name = "oracle_parity"
    value_type = "string"
    reason_type = "struct<rule: string>"

    def main(self, x: int | None) -> str | None:
        return self.main_with_reason(x)[0]

    def probability(self, value: str, reason: dict[str, str]) -> float:
        """For the confidence backend: each call is an uncertain fact (odd answers less sure)."""
        return PARITY_CONFIDENCE[value]

    def main_with_reason(self, x: int | None) -> tuple[str | None, dict[str, str]]:
        if x is None:
            return None, {"rule": "null has no parity"}
        return ("even" if x % 2 == 0 else "odd"), {"rule": f"{x} mod 2 = {x % 2}"}


parity = OracleParity()


# --- values ----------------------------------------------------------------------------------


def sort_key(row: Iterable[Value]) -> tuple:
    return tuple((v is None, type(v).__name__, 0 if v is None else v) for v in row)


def distinct(bag: Iterable[Row]) -> list[Row]:
    return sorted(set(bag), key=sort_key)


COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

SPARK_COMPARE: dict[str, Callable[[Column, Any], Column]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

PY_OP = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def sql_compare(op: str, a: Value, b: Value) -> bool:
    """SQL comparison in a WHERE / ON clause: unknown (a null operand) does not qualify."""
    return a is not None and b is not None and COMPARE[op](a, b)


def _add(a: Value, b: Value) -> Value:
    return None if a is None or b is None else a + b


# --- operator tree ---------------------------------------------------------------------------


class Node:
    """An operator (or a source). ``cols`` / ``types`` describe its output."""

    cols: tuple[str, ...]
    types: tuple[str, ...]
    #: False where the lineage is specified by :meth:`formula` alone, not by Definition 5
    #: (which the enumeration would check it against)
    enumerable: ClassVar[bool] = True

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    def apply(self, bags: Sequence[Bag]) -> Bag:
        """The operator alone, on the given input bags."""
        raise NotImplementedError

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        raise NotImplementedError

    def code(self, codes: Sequence[str]) -> str:
        raise NotImplementedError

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        """Definition 5 for this operator written out by hand (the cross-checking oracle)."""
        raise NotImplementedError

    # lineage view: the node whose Definition 5 is used (an anti join is a difference)
    def lineage_node(self) -> Node:
        return self

    def idx(self, name: str) -> int:
        return self.cols.index(name)

    def walk(self) -> Iterable[Node]:
        yield self
        for c in self.children:
            yield from c.walk()

    def depth(self) -> int:
        return 1 + max((c.depth() for c in self.children), default=-1)


@dataclass(eq=False)
class Leaf(Node):
    """A source table; ``cols`` may rename its raw columns (a second use in the same task)."""

    table: str
    raw: tuple[str, ...]
    types: tuple[str, ...]
    cols: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.cols:
            self.cols = self.raw

    @property
    def renamed(self) -> bool:
        return self.cols != self.raw

    def spark_leaf(self, als: Any) -> DataFrame:
        df = als.table(self.table)
        if self.renamed:
            df = df.select(*[F.col(r).alias(c) for r, c in zip(self.raw, self.cols)])
        return df

    def leaf_code(self) -> str:
        if not self.renamed:
            return f"als.table({self.table!r})"
        items = ", ".join(f"F.col({r!r}).alias({c!r})" for r, c in zip(self.raw, self.cols))
        return f"als.table({self.table!r}).select({items})"


@dataclass(eq=False)
class Select(Node):
    """σ: ``col op rhs``; ``rhs`` is a constant, or a column name when ``rhs_col``."""

    child: Node
    col: str
    op: str
    rhs: Value
    rhs_col: bool = False

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.child.cols

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.child.types

    def test(self, row: Row) -> bool:
        rhs = row[self.child.idx(self.rhs)] if self.rhs_col else self.rhs
        return sql_compare(self.op, row[self.child.idx(self.col)], rhs)

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return [r for r in bags[0] if self.test(r)]

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        rhs = F.col(self.rhs) if self.rhs_col else F.lit(self.rhs)
        return frames[0].filter(SPARK_COMPARE[self.op](F.col(self.col), rhs))

    def code(self, codes: Sequence[str]) -> str:
        rhs = f"F.col({self.rhs!r})" if self.rhs_col else repr(self.rhs)
        return f"{codes[0]}.filter(F.col({self.col!r}) {PY_OP[self.op]} {rhs})"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return (frozenset({o}),)


@dataclass(eq=False)
class Project(Node):
    """π onto ``keep`` (in that order), plus optionally ``add`` = (a, b, name): name := a + b."""

    child: Node
    keep: tuple[str, ...]
    add: tuple[str, str, str] | None = None

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.keep + ((self.add[2],) if self.add else ())

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        kept = tuple(self.child.types[self.child.idx(c)] for c in self.keep)
        return kept + (("long",) if self.add else ())

    def project(self, row: Row) -> Row:
        out = tuple(row[self.child.idx(c)] for c in self.keep)
        if self.add:
            a, b, _ = self.add
            out += (_add(row[self.child.idx(a)], row[self.child.idx(b)]),)
        return out

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return [self.project(r) for r in bags[0]]

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        items: list[Column] = [F.col(c) for c in self.keep]
        if self.add:
            a, b, name = self.add
            items.append((F.col(a) + F.col(b)).alias(name))
        return frames[0].select(*items)

    def code(self, codes: Sequence[str]) -> str:
        items = [f"F.col({c!r})" for c in self.keep]
        if self.add:
            a, b, name = self.add
            items.append(f"(F.col({a!r}) + F.col({b!r})).alias({name!r})")
        return f"{codes[0]}.select({', '.join(items)})"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return (frozenset(t for t in bags[0] if self.project(t) == o),)


@dataclass(eq=False)
class Appending(Node):
    """A unary operator that appends one column, ``name``, of type ``added_type``."""

    child: Node
    added_type: ClassVar[str] = "long"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.child.cols + (self.name,)  # type: ignore[attr-defined]

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.child.types + (self.added_type,)


@dataclass(eq=False)
class LeftShaped(Node):
    """A binary operator whose rows have its left input's columns."""

    left: Node
    right: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.left.cols

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.left.types


@dataclass(eq=False)
class Join(Node):
    """Inner join on ``left_col op right_col`` (op '=' or '<'); op None is a cross join.
    ``how`` 'left_semi' / 'left_anti' give the semi and anti joins, 'left' / 'right' /
    'full' the outer joins."""

    left: Node
    right: Node
    left_col: str | None = None
    op: str | None = "="
    right_col: str | None = None
    how: str = "inner"

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.left.cols + (self.right.cols if self.how in PAIRED else ())

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.left.types + (self.right.types if self.how in PAIRED else ())

    def match(self, lrow: Row, rrow: Row) -> bool:
        if self.op is None:
            return True
        assert self.left_col is not None and self.right_col is not None
        a, b = lrow[self.left.idx(self.left_col)], rrow[self.right.idx(self.right_col)]
        return sql_compare(self.op, a, b)

    def apply(self, bags: Sequence[Bag]) -> Bag:
        left, right = bags
        if self.how in PAIRED:
            out = [lr + rr for lr in left for rr in right if self.match(lr, rr)]
            if self.how in ("left", "full"):
                nulls = (None,) * len(self.right.cols)
                out += [lr + nulls for lr in left if not any(self.match(lr, rr) for rr in right)]
            if self.how in ("right", "full"):
                nulls = (None,) * len(self.left.cols)
                out += [nulls + rr for rr in right if not any(self.match(lr, rr) for lr in left)]
            return out
        semi = self.how == "left_semi"
        return [lr for lr in left if any(self.match(lr, rr) for rr in right) == semi]

    def _cond(self) -> Column:
        assert self.op is not None
        return SPARK_COMPARE[self.op](F.col(self.left_col), F.col(self.right_col))  # type: ignore[arg-type]

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        left, right = frames
        if self.op is None:
            if self.how == "inner":
                return left.crossJoin(right)
            return left.join(right, F.lit(True), self.how)
        return left.join(right, self._cond(), self.how)

    def code(self, codes: Sequence[str]) -> str:
        left, right = codes
        if self.op is None:
            if self.how == "inner":
                return f"{left}.crossJoin({right})"
            return f"{left}.join({right}, F.lit(True), {self.how!r})"
        cond = f"F.col({self.left_col!r}) {PY_OP[self.op]} F.col({self.right_col!r})"
        how = "" if self.how == "inner" else f", {self.how!r}"
        return f"{left}.join({right}, {cond}{how})"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        if self.how == "inner":
            n = len(self.left.cols)
            return frozenset({o[:n]}), frozenset({o[n:]})
        assert self.how == "left_semi"  # an anti join is traced as a difference
        return frozenset({o}), frozenset(b for b in bags[1] if self.match(o, b))

    @cached_property
    def as_difference(self) -> Minus:
        """A ▷_θ B = A − (A ⋉_θ B), keeping A's duplicates (how Spark's anti join counts)."""
        semi = Join(self.left, self.right, self.left_col, self.op, self.right_col, "left_semi")
        return Minus(self.left, semi, kind="anti")

    @cached_property
    def as_union(self) -> Node:
        """An outer join as the inner join ∪ each padded side's unmatched rows."""
        node: Node = Join(self.left, self.right, self.left_col, self.op, self.right_col)
        width = len(self.left.cols)
        if self.how in ("left", "full"):
            unmatched = Join(self.left, self.right, self.left_col, self.op, self.right_col, "left_anti")
            node = Union(node, Pad.around(unmatched.as_difference, self.cols, self.types, 0))
        if self.how in ("right", "full"):
            op = MIRRORED[self.op] if self.op else None
            unmatched = Join(self.right, self.left, self.right_col, op, self.left_col, "left_anti")
            node = Union(node, Pad.around(unmatched.as_difference, self.cols, self.types, width))
        return node

    def lineage_node(self) -> Node:
        if self.how in OUTER:
            return self.as_union
        return self.as_difference if self.how == "left_anti" else self


OUTER = ("left", "right", "full")
PAIRED = ("inner", *OUTER)  # joins whose rows pair a left and a right row
MIRRORED = {"=": "=", "<": ">", ">": "<", "<=": ">=", ">=": "<=", "!=": "!="}


@dataclass(eq=False)
class Pad(Node):
    """Each row spread over ``slots`` (a child column's index, or None for a NULL): the
    unmatched side of an outer join, a grouping set's missing keys (a lineage view only)."""

    child: Node
    cols: tuple[str, ...]
    types: tuple[str, ...]
    slots: tuple[int | None, ...]

    @classmethod
    def around(cls, child: Node, cols: tuple[str, ...], types: tuple[str, ...], before: int) -> Pad:
        """``before`` NULLs, the row, NULLs up to ``cols``."""
        width = len(child.cols)
        slots = (None,) * before + tuple(range(width)) + (None,) * (len(cols) - before - width)
        return cls(child, cols, types, slots)

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def pad(self, row: Row) -> Row:
        return tuple(None if i is None else row[i] for i in self.slots)

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return [self.pad(r) for r in bags[0]]

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return (frozenset(t for t in bags[0] if self.pad(t) == o),)


@dataclass(eq=False)
class Intersect(LeftShaped):
    """INTERSECT (distinct): rows of ``left`` equal, NULL matching NULL, to a row of ``right``."""

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return distinct(SemiOnAll(self.left, self.right).apply(bags))

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        return frames[0].intersect(frames[1])

    def code(self, codes: Sequence[str]) -> str:
        return f"{codes[0]}.intersect({codes[1]})"

    @cached_property
    def as_distinct_semi(self) -> Agg:
        return Distinct(SemiOnAll(self.left, self.right))

    def lineage_node(self) -> Node:
        return self.as_distinct_semi


@dataclass(eq=False)
class SemiOnAll(LeftShaped):
    """``left`` ⋉ ``right`` on every column, NULL matching NULL (a lineage view only)."""

    def apply(self, bags: Sequence[Bag]) -> Bag:
        found = set(bags[1])  # tuple equality: None equals None, as <=> does
        return [r for r in bags[0] if r in found]

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return frozenset({o}), frozenset(b for b in bags[1] if b == o)


AGG_FUNCS = ("count", "count_col", "sum", "max", "min")
RANKING = ("rank", "dense_rank", "row_number")  # ordered windows only


@dataclass(eq=False)
class Agg(Node):
    """α: group by ``group`` (0 or more columns), ``aggs`` = ((func, column, name), ...),
    func in count (count(*)), count_col, sum, max, min. ``distinct`` makes it α on all
    columns with no aggregate, rendered as ``df.distinct()`` ('dataframe') or as SQL
    ``SELECT DISTINCT *`` over a temporary view of the input ('sql'). ``rollup``: ROLLUP of
    the group columns, the union of one aggregation per prefix of them (docs/semantics.md).
    ``pivot``: (column, values): each aggregate once per value, over the group's rows with
    that value (NULL where there are none, as Spark's pivot gives), columns value by value."""

    child: Node
    group: tuple[str, ...]
    aggs: tuple[tuple[str, str | None, str], ...] = ()
    distinct: str | None = None
    rollup: bool = False
    pivot: tuple[str, tuple[Value, ...]] | None = None

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.group + tuple(f"{name}{suffix}" for suffix in self._per_value for _, _, name in self.aggs)

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        group = tuple(self.child.types[self.child.idx(c)] for c in self.group)
        aggs = tuple(_agg_type(self.child, f, col) for f, col, _ in self.aggs)
        return group + aggs * len(self._per_value)

    @cached_property
    def _per_value(self) -> tuple[str, ...]:
        """Suffixes of the aggregates' columns: one per pivot value, or none without a pivot."""
        return tuple(f"_v{i}" for i in range(len(self.pivot[1]))) if self.pivot else ("",)

    def key(self, row: Row) -> Row:
        return tuple(row[self.child.idx(c)] for c in self.group)

    def _aggregate(self, func: str, col: str | None, rows: Bag) -> Value:
        if func == "count":
            return len(rows)
        assert col is not None
        vals = [r[self.child.idx(col)] for r in rows if r[self.child.idx(col)] is not None]
        if func == "count_col":
            return len(vals)
        if not vals:
            return None
        return {"sum": sum, "max": max, "min": min}[func](vals)

    def apply(self, bags: Sequence[Bag]) -> Bag:
        if self.rollup:  # Spark expands the rows: no row in, no row out (not even the total)
            return [b.pad(r) for b in self._prefixes for r in b.child.apply(bags)] if bags[0] else []
        groups: dict[Row, Bag] = defaultdict(list)
        for r in bags[0]:
            groups[self.key(r)].append(r)
        if not self.group and not groups:
            groups[()] = []  # a global aggregate over no rows still gives one row
        return [k + self._values(rows) for k, rows in groups.items()]

    def _values(self, rows: Bag) -> Row:
        if self.pivot is None:
            return tuple(self._aggregate(f, c, rows) for f, c, _ in self.aggs)
        at = self.child.idx(self.pivot[0])
        found: list[Value] = []
        for v in self.pivot[1]:
            picked = [r for r in rows if r[at] == v]
            found += [self._aggregate(f, c, picked) if picked else None for f, c, _ in self.aggs]
        return tuple(found)

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        df = frames[0]
        if self.distinct == "sql":
            return sql_distinct(df)
        if self.distinct:
            return df.distinct()
        items = [_agg_column(func, col).alias(name) for func, col, name in self.aggs]
        if self.pivot:
            pivoted = df.groupBy(*self.group).pivot(self.pivot[0], list(self.pivot[1]))
            return pivoted.agg(*items).toDF(*self.cols)
        return (df.rollup if self.rollup else df.groupBy)(*self.group).agg(*items)

    def code(self, codes: Sequence[str]) -> str:
        if self.distinct == "sql":
            return f"sql_distinct({codes[0]})"
        if self.distinct:
            return f"{codes[0]}.distinct()"
        items = [f"{_agg_code(func, col)}.alias({name!r})" for func, col, name in self.aggs]
        group = ", ".join(repr(c) for c in self.group)
        if self.pivot:
            pivot = f".pivot({self.pivot[0]!r}, {list(self.pivot[1])!r})"
            return f"{codes[0]}.groupBy({group}){pivot}.agg({', '.join(items)}).toDF(*{self.cols!r})"
        return f"{codes[0]}.{'rollup' if self.rollup else 'groupBy'}({group}).agg({', '.join(items)})"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        g = o[: len(self.group)]
        return (frozenset(t for t in bags[0] if self.key(t) == g),)

    @cached_property
    def _prefixes(self) -> list[Pad]:
        """ROLLUP's aggregations, one per prefix of the group columns (longest first), each
        row spread over the output's columns with the missing keys NULL."""
        n = len(self.group)
        out = []
        for i in range(n, -1, -1):
            slots = (*range(i), *(None,) * (n - i), *range(i, i + len(self.aggs)))
            out.append(Pad(Agg(self.child, self.group[:i], self.aggs), self.cols, self.types, slots))
        return out

    @cached_property
    def as_union(self) -> Node:
        return reduce(Union, self._prefixes)

    def lineage_node(self) -> Node:
        return self.as_union if self.rollup else self


def _agg_type(child: Node, func: str, col: str | None) -> str:
    """Spark's type of an aggregate (or ranking) function over ``child``'s ``col``."""
    if func in ("max", "min"):
        return child.types[child.idx(col)]  # type: ignore[arg-type]
    return INT if func in RANKING else LONG  # count, and sum of an integral type: bigint


def _agg_column(func: str, col: str | None) -> Column:
    if func == "count":
        return F.count(F.lit(1))
    fn = {"count_col": F.count, "sum": F.sum, "max": F.max, "min": F.min}[func]
    return fn(F.col(col))  # type: ignore[arg-type]


def _agg_code(func: str, col: str | None) -> str:
    if func == "count":
        return "F.count(F.lit(1))"
    return f"F.{'count' if func == 'count_col' else func}(F.col({col!r}))"


class TiedOrder(Exception):
    """A row_number() or ROWS frame met ties: the task has no defined output (Spark orders
    ties arbitrarily), and the engine must refuse it (``OrderTieError``)."""


@contextmanager
def ties_as_peers() -> Iterator[None]:
    """Evaluate row_number() as rank() and a ROWS frame as RANGE, ties included: for a run
    that Spark completed without reading the tied rows (they cannot reach its output)."""
    RankedWindow.refuse_ties = False
    try:
        yield
    finally:
        RankedWindow.refuse_ties = True


@dataclass(eq=False)
class Windowed(Appending):
    """A window function ``func(col) OVER (PARTITION BY partition …)`` appended as ``name``,
    ``agg`` = (func, col, name) with func in AGG_FUNCS (or RANKING where an order is
    given). The value of a row r is computed over its *frame*: rows of r's partition (NULL
    partition keys form one partition) chosen by :meth:`in_frame`."""

    child: Node
    partition: tuple[str, ...]
    agg: tuple[str, str | None, str]

    @property
    def name(self) -> str:
        return self.agg[2]

    @property
    def added_type(self) -> str:  # type: ignore[override]
        return _agg_type(self.child, self.agg[0], self.agg[1])

    def key(self, row: Row) -> Row:
        return tuple(row[self.child.idx(c)] for c in self.partition)

    @cached_property
    def per_partition(self) -> Agg:
        """α_{partition; agg}(child) (whole-partition aggregates only)."""
        return Agg(self.child, self.partition, (self.agg,))

    def in_frame(self, t: Row, r: Row) -> bool:
        """Whether ``t`` (a row of ``r``'s partition) is in ``r``'s frame."""
        raise NotImplementedError

    def frame(self, bag: Bag, r: Row) -> Bag:
        return [t for t in bag if self.key(t) == self.key(r) and self.in_frame(t, r)]

    def value(self, frame: Bag, r: Row) -> Value:
        func, col, _ = self.agg
        return self.per_partition._aggregate(func, col, frame)

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return [r + (self.value(self.frame(bags[0], r), r),) for r in bags[0]]

    def window(self) -> SparkWindow:
        return SparkWindow.partitionBy(*self.partition)

    def window_code(self) -> str:
        return f"Window.partitionBy({', '.join(map(repr, self.partition))})"

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        func, col, name = self.agg
        fn = getattr(F, func)() if func in RANKING else _agg_column(func, col)
        return frames[0].withColumn(name, fn.over(self.window()))

    def code(self, codes: Sequence[str]) -> str:
        func, col, name = self.agg
        fn = f"F.{func}()" if func in RANKING else _agg_code(func, col)
        return f"{codes[0]}.withColumn({name!r}, {fn}.over({self.window_code()}))"


@dataclass(eq=False)
class WindowAgg(Windowed):
    """``func(col) OVER (PARTITION BY partition)`` (a whole-partition frame); its lineage
    view is the rewrite T ⋈_{p <=> p'} α_{p'; func}(T)."""

    def in_frame(self, t: Row, r: Row) -> bool:
        return True

    @cached_property
    def as_join(self) -> Project:
        joined = PartitionJoin(self.child, self.per_partition, self.partition)
        return Project(joined, self.cols)

    def lineage_node(self) -> Node:
        return self.as_join


@dataclass(eq=False)
class RankedWindow(Windowed):
    """An ordered window ``func(…) OVER (PARTITION BY partition ORDER BY order)``: func
    ``rank`` / ``dense_rank``, or a running aggregate in AGG_FUNCS over Spark's default frame
    with an ORDER BY, RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW; the order is
    ascending with NULLs first (``F.col(order)``), or ``descending`` with NULLs last
    (``F.col(order).desc()``).

    Values: a row r's frame is the rows t of its partition that sort before r or are its
    peers (an equal order value, NULL equal to NULL). rank = 1 + the partition's rows
    strictly before r; dense_rank = 1 + the distinct order values strictly before r's; a
    running aggregate = the aggregate over the frame. row_number() and a ``rows`` frame (ROWS
    BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) are rank() and the RANGE frame where r has no
    peer but itself; a peer raises :class:`TiedOrder` (docs/semantics.md).

    Lineage (the specification; docs/semantics.md): the lineage of an output row (input row
    r with the appended value) is every row t of the child with the same partition key as r
    (NULL matching NULL) whose order value precedes r's or equals it (a peer) in the window's
    order, r itself included: the frame. This is a direct formula, not enumerated:
    Definition 5 applied to the window as one operator has no greatest lineage for a row
    whose value depends on other rows (Op(T̂) = {o} only holds for T̂ = {r}, whose value
    differs), and not derived from the engine's rewrite either."""

    order: str = ""
    descending: bool = False
    rows: bool = False  # a ROWS frame (UNBOUNDED PRECEDING .. CURRENT ROW) instead of RANGE
    enumerable: ClassVar[bool] = False
    refuse_ties: ClassVar[bool] = True  # False within :func:`ties_as_peers`

    @property
    def total(self) -> bool:
        """row_number() and a ROWS frame are defined only where no row has a peer."""
        return self.rows or self.agg[0] == "row_number"

    def before(self, t: Row, r: Row) -> bool:
        """``t`` sorts strictly before ``r`` in the window's order."""
        a, b = t[self.child.idx(self.order)], r[self.child.idx(self.order)]
        if a == b:
            return False
        if a is None or b is None:  # NULLS FIRST ascending, NULLS LAST descending
            return (a is None) != self.descending
        return a > b if self.descending else a < b

    def in_frame(self, t: Row, r: Row) -> bool:
        return not self.before(r, t)  # before r, or a peer

    def value(self, frame: Bag, r: Row) -> Value:
        func = self.agg[0]
        if self.total and self.refuse_ties and sum(not self.before(t, r) for t in frame) > 1:
            raise TiedOrder(f"{func} over {self.order}: ties in the partition of {r!r}")
        if func in ("rank", "row_number"):  # with no ties a row's position is its rank
            return 1 + sum(self.before(t, r) for t in frame)
        if func == "dense_rank":
            return len({t[self.child.idx(self.order)] for t in frame})
        return super().value(frame, r)

    def window(self) -> SparkWindow:
        ordered = super().window().orderBy(F.col(self.order).desc() if self.descending else F.col(self.order))
        if not self.rows:
            return ordered
        return ordered.rowsBetween(SparkWindow.unboundedPreceding, SparkWindow.currentRow)

    def window_code(self) -> str:
        order = f"F.col({self.order!r})" + (".desc()" if self.descending else "")
        rows = ".rowsBetween(Window.unboundedPreceding, Window.currentRow)" if self.rows else ""
        return f"{super().window_code()}.orderBy({order}){rows}"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return (frozenset(self.frame(bags[0], o[:-1])),)


@dataclass(eq=False)
class PartitionJoin(LeftShaped):
    """Each left row with the aggregate row of its partition (NULL matching NULL): a
    lineage view only; its columns repeat the partition columns, the left ones first."""

    partition: tuple[str, ...] = ()

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.left.cols + self.right.cols

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.left.types + self.right.types

    def apply(self, bags: Sequence[Bag]) -> Bag:
        n = len(self.partition)
        key = [self.left.idx(c) for c in self.partition]
        return [lr + rr for lr in bags[0] for rr in bags[1] if tuple(lr[i] for i in key) == rr[:n]]

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        n = len(self.left.cols)
        return frozenset({o[:n]}), frozenset({o[n:]})


@dataclass(eq=False)
class Explode(Appending):
    """``explode(array(a, b)) AS name``: each row twice, with a's and then b's value."""

    added_type: ClassVar[str] = "long"

    child: Node
    a: str
    b: str
    name: str

    def element(self, row: Row, position: int) -> Row:
        return row + (row[self.child.idx((self.a, self.b)[position])],)

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return [self.element(r, p) for r in bags[0] for p in (0, 1)]

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        return frames[0].select("*", F.explode(F.array(self.a, self.b)).alias(self.name))

    def code(self, codes: Sequence[str]) -> str:
        return f"{codes[0]}.select('*', F.explode(F.array({self.a!r}, {self.b!r})).alias({self.name!r}))"

    @cached_property
    def as_join(self) -> Node:
        return PositionJoin(self, Positions())

    def lineage_node(self) -> Node:
        return self.as_join


@dataclass(eq=False)
class Positions(Node):
    """The constant relation {0, 1} of list positions (not a source: no lineage)."""

    cols: tuple[str, ...] = ("position",)
    types: tuple[str, ...] = ("long",)

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return [(0,), (1,)]


@dataclass(eq=False)
class PositionJoin(Node):
    """explode's rewrite π_{T, list[p]}(T ⋈_{p < size(list)} P) (a lineage view only)."""

    explode: Explode
    positions: Positions

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.explode.child, self.positions)

    @cached_property
    def cols(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.explode.cols

    @cached_property
    def types(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.explode.types

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return [self.explode.element(r, p) for r in bags[0] for (p,) in bags[1]]

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        made = [(r, p) for r in bags[0] for p in bags[1] if self.explode.element(r, p[0]) == o]
        return frozenset(r for r, _ in made), frozenset(p for _, p in made)


def Distinct(child: Node, via: str = "dataframe") -> Agg:
    return Agg(child, child.cols, (), distinct=via)


_views = itertools.count()


def sql_distinct(df: DataFrame) -> DataFrame:
    """``SELECT DISTINCT *`` over ``df`` (a Distinct node in Spark's plan, where
    ``df.distinct()`` gives a Deduplicate node)."""
    name = f"oracle_view_{next(_views)}"
    df.createOrReplaceTempView(name)
    return df.sparkSession.sql(f"SELECT DISTINCT * FROM {name}")


@dataclass(eq=False)
class Union(LeftShaped):
    """Bag union by position (Spark's union / UNION ALL); columns named by the left input."""

    def apply(self, bags: Sequence[Bag]) -> Bag:
        return list(bags[0]) + list(bags[1])

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        return frames[0].union(frames[1])

    def code(self, codes: Sequence[str]) -> str:
        return f"{codes[0]}.union({codes[1]})"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return tuple(frozenset({o}) & frozenset(b) for b in bags)


@dataclass(eq=False)
class Minus(LeftShaped):
    """Difference: kind 'distinct' (subtract, EXCEPT DISTINCT), 'all' (exceptAll), or
    'anti' (only as the model of an anti join: left rows, duplicates kept, not in right)."""

    kind: str = "distinct"

    def apply(self, bags: Sequence[Bag]) -> Bag:
        left, right = bags
        if self.kind == "all":
            return list((Counter(left) - Counter(right)).elements())
        gone = set(right)
        kept = [r for r in left if r not in gone]
        return kept if self.kind == "anti" else list(dict.fromkeys(kept))

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        assert self.kind != "anti", "an anti join renders as a Join(how='left_anti')"
        return frames[0].exceptAll(frames[1]) if self.kind == "all" else frames[0].subtract(frames[1])

    def code(self, codes: Sequence[str]) -> str:
        method = "exceptAll" if self.kind == "all" else "subtract"
        return f"{codes[0]}.{method}({codes[1]})"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return frozenset({o}), frozenset(bags[1])  # the paper's D-segment rule {Ō, T₂}


@dataclass(eq=False)
class Func(Appending):
    """φ: appends ``name`` := oracle_parity(arg) (the Reason stays hidden in the output)."""

    child: Node
    arg: str
    name: str

    udf: str = parity.name
    added_type: ClassVar[str] = "string"

    def apply(self, bags: Sequence[Bag]) -> Bag:
        i = self.child.idx(self.arg)
        return [r + (parity.main(r[i]),) for r in bags[0]]

    def reasoning(self, row: Row) -> tuple[str, tuple[tuple[str, Value], ...], Value, tuple]:
        """⟨E, Value, Reason⟩ of the call that made output ``row``."""
        x = row[self.child.idx(self.arg)]
        value, reason = parity.main_with_reason(x)
        assert value == row[-1]
        return self.udf, ((self.arg, x),), value, tuple(sorted(reason.items()))

    def spark(self, frames: Sequence[DataFrame]) -> DataFrame:
        return frames[0].withColumn(self.name, parity(F.col(self.arg)))

    def code(self, codes: Sequence[str]) -> str:
        return f"{codes[0]}.withColumn({self.name!r}, parity(F.col({self.arg!r})))"

    def formula(self, bags: Sequence[Bag], o: Row) -> tuple[frozenset[Row], ...]:
        return (frozenset(t for t in bags[0] if t == o[:-1]),)


# --- rendering -------------------------------------------------------------------------------


def to_dataframe(node: Node, als: Any) -> DataFrame:
    if isinstance(node, Leaf):
        return node.spark_leaf(als)
    return node.spark([to_dataframe(c, als) for c in node.children])


def to_code(node: Node) -> str:
    if isinstance(node, Leaf):
        return node.leaf_code()
    return node.code([to_code(c) for c in node.children])


def tables_of(node: Node) -> set[str]:
    return {n.table for n in node.walk() if isinstance(n, Leaf)}


# --- Definition 5 by enumeration -------------------------------------------------------------


class NoMaximumError(AssertionError):
    """Definition 5 has valid subsets for o but no greatest one."""


class OracleDisagreementError(AssertionError):
    """The enumeration and the per-operator formula disagree: an oracle bug."""


def _subsets(values: Sequence[Row]) -> list[frozenset[Row]]:
    return [frozenset(c) for n in range(len(values) + 1) for c in itertools.combinations(values, n)]


def definition5(
    apply: Callable[[Sequence[Bag]], Bag], bags: Sequence[Bag], limit: int
) -> dict[Row, tuple[frozenset[Row], ...]] | None:
    """SL_Op(o) for every output value o of ``apply`` over ``bags``, by enumerating every
    tuple of subsets of the inputs' distinct values; None when that is over 2**limit tuples.

    For a unary operator condition (2) concerns one tuple alone, so values t with
    Op({t}) = ∅ can never be chosen and are left out of the enumeration (an exact rewrite).
    """
    counts = [Counter(b) for b in bags]
    values = [distinct(b) for b in bags]
    if len(bags) == 1:
        values = [[t for t in values[0] if apply([[t] * counts[0][t]])]]
    if sum(len(v) for v in values) > limit:
        return None

    memo: dict[tuple[frozenset[Row], ...], frozenset[Row]] = {}

    def run(choice: tuple[frozenset[Row], ...]) -> frozenset[Row]:
        if choice not in memo:
            restricted = [
                [t for t in sorted(s, key=sort_key) for _ in range(counts[i][t])]
                for i, s in enumerate(choice)
            ]
            memo[choice] = frozenset(apply(restricted))
        return memo[choice]

    valid: dict[Row, list[tuple[frozenset[Row], ...]]] = defaultdict(list)
    for choice in itertools.product(*[_subsets(v) for v in values]):
        out = run(choice)
        if len(out) != 1:  # condition (1): exactly {o}
            continue
        contributes = all(  # condition (2)
            run(choice[:i] + (frozenset({t}),) + choice[i + 1 :])
            for i in range(len(choice))
            for t in choice[i]
        )
        if contributes:
            valid[next(iter(out))].append(choice)
    result = {}
    for o in distinct(apply(bags)):  # the lineage of the operator's actual output tuples
        choices = valid[o]
        top = tuple(frozenset().union(*(c[i] for c in choices)) for i in range(len(bags)))
        if top not in choices:  # condition (3): the maximum must be one of the valid tuples
            raise NoMaximumError(f"Definition 5 has no greatest valid lineage for {o!r}: {choices!r}")
        result[o] = top
    return result


# --- the oracle ------------------------------------------------------------------------------


@dataclass
class Lineage:
    """Augmented lineage of a set of output rows by the definitions."""

    source: dict[str, set[tuple[Value, ...]]]  # table -> key tuples
    reasoning: set[tuple]  # (udf, ((arg, value),), value, reason items)
    intermediate: dict[int, set[Row]]  # id(node) -> intermediate lineage (Definition 7)
    # the two parts of ``source`` (docs/semantics.md), each found by a walk of its own
    contributing: dict[str, set[tuple[Value, ...]]] = field(default_factory=dict)
    control: dict[str, set[tuple[Value, ...]]] = field(default_factory=dict)


@dataclass
class Oracle:
    """Lineage of tasks over ``db`` (table -> rows; the key is each table's first column)."""

    db: dict[str, Bag]
    limit: int = 14  # enumerate at most 2**limit subset tuples per operator
    stats: Counter = field(default_factory=Counter)
    _eval: dict[int, tuple[Node, Bag]] = field(default_factory=dict, repr=False)  # keeps nodes alive
    _sl: dict[int, tuple[Node, dict[Row, tuple[frozenset[Row], ...]]]] = field(
        default_factory=dict, repr=False
    )

    def eval(self, node: Node) -> Bag:
        """The node's output bag (memoised per node)."""
        if id(node) not in self._eval:
            if isinstance(node, Leaf):
                bag = [tuple(r) for r in self.db[node.table]]
            else:
                bag = node.apply([self.eval(c) for c in node.children])
            self._eval[id(node)] = (node, bag)
        return self._eval[id(node)][1]

    def operator_lineage(self, node: Node, o: Row) -> tuple[frozenset[Row], ...]:
        """Definition 5 for ``node``'s operator: enumerated, cross-checked with the formula."""
        op = node.lineage_node()
        if id(op) not in self._sl:
            bags = [self.eval(c) for c in op.children]
            enumerated = definition5(op.apply, bags, self.limit) if op.enumerable else None
            self.stats[
                "enumerated" if enumerated is not None else "formula only" if op.enumerable else "specified"
            ] += 1
            if enumerated is None:
                enumerated = {o2: op.formula(bags, o2) for o2 in distinct(op.apply(bags))}
            else:
                for o2, lin in enumerated.items():
                    by_formula = op.formula(bags, o2)
                    if lin != by_formula:
                        raise OracleDisagreementError(
                            f"{type(op).__name__} {o2!r}: enumerated {lin!r}, formula {by_formula!r}"
                        )
            self._sl[id(op)] = (op, enumerated)
        table = self._sl[id(op)][1]
        if o not in table:
            raise KeyError(f"{o!r} is not an output of {type(op).__name__}")
        return table[o]

    def lineage(self, root: Node, rows: Iterable[Row] | None = None) -> Lineage:
        """Definition 6 (and 7, 8): compose the per-operator lineages from ``root`` down."""
        targets = set(self.eval(root)) if rows is None else {tuple(r) for r in rows}
        inter: dict[int, set[Row]] = defaultdict(set)
        source: dict[str, set[tuple[Value, ...]]] = {t: set() for t in tables_of(root)}
        reasoning: set[tuple] = set()

        def trace(node: Node, wanted: set[Row]) -> None:
            new = wanted - inter[id(node)]
            if not new:
                return
            inter[id(node)] |= new
            if isinstance(node, Leaf):
                source[node.table] |= {t[:1] for t in new}
                return
            if isinstance(node, Func):
                reasoning.update(node.reasoning(o) for o in new)
            op = node.lineage_node()
            if not op.children:  # a constant relation (explode's positions): no source rows
                return
            parts = [self.operator_lineage(node, o) for o in new]
            for i, child in enumerate(op.children):
                trace(child, set().union(*(p[i] for p in parts)))

        trace(root, targets)
        reached = self._reached(root, targets)
        contributing = {t: reached[False][t] for t in source}
        control = {t: reached[True][t] - reached[False][t] for t in source}
        for t in source:
            assert contributing[t] | control[t] == source[t], f"the two parts of {t} are not its lineage"
        return Lineage(source, reasoning, dict(inter), contributing, control)

    def _reached(self, root: Node, targets: set[Row]) -> dict[bool, dict[str, set[tuple[Value, ...]]]]:
        """Source rows reached from ``targets`` by paths that never enter a difference's right
        input (False: contributing) and by paths that do (True: rows only checked for
        absence, and every row below them). Definition 6's walk with one more bit per path."""
        reached: dict[bool, dict[str, set[tuple[Value, ...]]]] = {
            kind: {t: set() for t in tables_of(root)} for kind in (False, True)
        }
        seen: dict[tuple[int, bool], set[Row]] = defaultdict(set)

        def walk(node: Node, wanted: set[Row], checked: bool) -> None:
            new = wanted - seen[id(node), checked]
            if not new:
                return
            seen[id(node), checked] |= new
            if isinstance(node, Leaf):
                reached[checked][node.table] |= {t[:1] for t in new}
                return
            op = node.lineage_node()
            if not op.children:  # a constant relation: no source rows
                return
            parts = [self.operator_lineage(node, o) for o in new]
            for i, child in enumerate(op.children):
                subtrahend = isinstance(op, Minus) and i == 1
                walk(child, set().union(*(p[i] for p in parts)), checked or subtrahend)

        walk(root, targets, False)
        return reached


# --- engine answers in the oracle's shape ----------------------------------------------------


def engine_reasoning(lin: Any) -> set[tuple]:
    out = set()
    for r in lin.reasoning_rows():
        reason = r["reason"]
        items = tuple(sorted(reason.items())) if isinstance(reason, dict) else reason
        out.add((r["udf"], tuple(sorted(r["inputs"].items())), r["value"], items))
    return out


def engine_source(lin: Any, tables: Iterable[str]) -> dict[str, set[tuple[Value, ...]]]:
    return {t: lin.source_ids(t) for t in tables}


def engine_parts(lin: Any, tables: Iterable[str]) -> tuple[dict[str, set[tuple[Value, ...]]], ...]:
    """An answer's contributing and control rows by key, in the oracle's shape."""

    def ids(rows: list[dict[str, Any]], table: str) -> set[tuple[Value, ...]]:
        return {tuple(r[k] for k in lin.keys[table]) for r in rows}

    contributing = {t: ids(lin.contributing_rows(t), t) for t in tables}
    return contributing, {t: ids(lin.control_rows(t), t) for t in tables}


# --- source tables ---------------------------------------------------------------------------

LONG = "long"
INT = "int"  # rank() and dense_rank()
NUMBERS = (LONG, INT)

#: name -> (columns, rows); every column is a long, the first one is the key. r, s and t are
#: for the hand-written cases; u repeats some of r's values and has duplicate (ua, ub) pairs;
#: w is empty.
TABLES: dict[str, tuple[tuple[str, ...], Bag]] = {
    "r": (("rk", "ra", "rb"), [(1, 0, 1), (2, 1, 1), (3, 1, 2), (4, None, 2), (5, 2, None)]),
    "s": (("sk", "sa", "sb"), [(1, 1, 0), (2, 1, 2), (3, 2, 1), (4, None, 1)]),
    "t": (("tk", "ta", "tb"), [(1, 1, 1), (2, 3, 1)]),
    "u": (("uk", "ua", "ub"), [(1, 0, 1), (2, 1, 1), (3, 1, 1)]),
    "w": (("wk", "wa", "wb"), []),
}

DB: dict[str, Bag] = {name: rows for name, (_, rows) in TABLES.items()}


def leaf(table: str, use: int = 0) -> Leaf:
    """Source ``table``; its ``use``-th occurrence in a task gets columns renamed ``<col>_<use>``."""
    raw = TABLES[table][0]
    cols = raw if use == 0 else tuple(f"{c}_{use}" for c in raw)
    return Leaf(table, raw, (LONG,) * len(raw), cols)


def register_tables(als: Any) -> None:
    spark = als.spark
    for name, (cols, rows) in TABLES.items():
        schema = ", ".join(f"{c} bigint" for c in cols)
        als.register_table(name, spark.createDataFrame(rows, schema), key=cols[0])


# --- random trees ----------------------------------------------------------------------------

UNARY = ("select", "project", "agg", "rollup", "window", "explode", "distinct", "func")
BINARY = ("join", "semi", "anti", "outer", "union", "minus", "intersect")


class TreeBuilder:
    """Draws a random task tree (hypothesis ``draw``) over :data:`TABLES`.

    Column names stay unique in a tree (a table's second use is renamed, new columns get
    fresh names), so any two subtrees can be joined. Intermediate results are kept small
    (``max_rows``) so that Definition 5 can be enumerated."""

    def __init__(
        self,
        draw: Callable[[Any], Any],
        max_rows: int = 12,
        minus_kinds: Sequence[str] = ("distinct", "all"),
        distinct_via: Sequence[str] = ("dataframe", "sql"),
        nested_difference: bool = True,
        ordered_windows: bool = False,
    ) -> None:
        from hypothesis import strategies as st  # test-only dependency

        self.st = st
        self.draw = draw
        self.max_rows = max_rows
        self.minus_kinds = tuple(minus_kinds)
        self.distinct_via = tuple(distinct_via)
        self.nested_difference = nested_difference  # may a difference be a difference's T₂
        self.ordered_windows = ordered_windows  # may "window" draw a RankedWindow (no draw if not)
        self.tables = tuple(TABLES)
        self.uses: Counter[str] = Counter()
        self.fresh = 0
        self.oracle = Oracle(DB)

    def _name(self, prefix: str) -> str:
        self.fresh += 1
        return f"{prefix}{self.fresh}"

    def _longs(self, node: Node) -> list[str]:
        return [c for c, t in zip(node.cols, node.types) if t in NUMBERS]

    def _small(self, node: Node) -> Node:
        from hypothesis import assume

        try:
            rows = self.oracle.eval(node)
        except TiedOrder:  # no output is defined: the tests expect the run to be refused
            return node
        assume(len(rows) <= self.max_rows)
        return node

    def build(self, depth: int, leaves: int, kind: str | None = None) -> tuple[Node, int]:
        """A tree of at most ``depth`` operators on a path and ``leaves`` source uses;
        ``kind`` (one of UNARY, BINARY) fixes the root operator."""
        st, draw = self.st, self.draw
        kinds = ["leaf"]
        if depth > 0:
            kinds += UNARY
            if leaves >= 2:
                kinds += BINARY
        if kind is None:
            kind = draw(st.sampled_from(kinds))
        assert kind in kinds, f"cannot start a tree of depth {depth} with {kind}"
        if kind == "leaf":
            table = draw(st.sampled_from(self.tables))
            node = leaf(table, self.uses[table])
            self.uses[table] += 1
            return node, 1
        if kind in UNARY:
            child, used = self.build(depth - 1, leaves)
            return self._small(getattr(self, f"_{kind}")(child)), used
        left, used_left = self.build(depth - 1, leaves - 1)
        right, used_right = self.build(depth - 1, leaves - used_left)
        return self._small(getattr(self, f"_{kind}")(left, right)), used_left + used_right

    # unary operators (each falls back to its child where the schema does not allow it)
    def _select(self, child: Node) -> Node:
        st, draw = self.st, self.draw
        longs = self._longs(child)
        strings = [c for c in child.cols if c not in longs]
        if strings and (not longs or draw(st.booleans())):
            return Select(child, draw(st.sampled_from(strings)), "=", draw(st.sampled_from(["even", "odd"])))
        if not longs:
            return child
        col = draw(st.sampled_from(longs))
        op = draw(st.sampled_from(sorted(COMPARE)))
        others = [c for c in longs if c != col]
        if others and draw(st.booleans()):
            return Select(child, col, op, draw(st.sampled_from(others)), rhs_col=True)
        return Select(child, col, op, draw(st.integers(0, 2)))

    def _project(self, child: Node) -> Node:
        st, draw = self.st, self.draw
        n = len(child.cols)
        keep = tuple(draw(st.lists(st.sampled_from(child.cols), min_size=1, max_size=n, unique=True)))
        longs = self._longs(child)
        add = None
        if longs and draw(st.booleans()):
            add = (draw(st.sampled_from(longs)), draw(st.sampled_from(longs)), self._name("x"))
        return Project(child, keep, add)

    def _agg(self, child: Node) -> Node:
        """An aggregation; a third of the time a pivot on a column outside the group, its
        values drawn from those the column has (and one it has not)."""
        agg = self._aggregation(child)
        st, draw = self.st, self.draw
        others = [c for c in child.cols if c not in agg.group]
        if not others or draw(st.integers(0, 2)) > 0:
            return agg
        col = draw(st.sampled_from(others))
        try:
            present = {r[child.idx(col)] for r in self.oracle.eval(child)} - {None}
        except TiedOrder:
            present = set()
        absent = 9 if col in self._longs(child) else "none"
        candidates = sorted(present | {absent})
        values = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=2, unique=True))
        return Agg(child, agg.group, agg.aggs, pivot=(col, tuple(values)))

    def _aggregation(self, child: Node) -> Agg:
        st, draw = self.st, self.draw
        group = tuple(draw(st.lists(st.sampled_from(child.cols), max_size=1)))
        longs = self._longs(child)
        aggs = []
        for _ in range(draw(st.integers(1, 2))):
            func = draw(st.sampled_from(AGG_FUNCS if longs else ("count", "count_col")))
            col = None
            if func == "count_col":
                col = draw(st.sampled_from(child.cols))
            elif func != "count":
                col = draw(st.sampled_from(longs))
            aggs.append((func, col, self._name("g")))
        return Agg(child, group, tuple(aggs))

    def _rollup(self, child: Node) -> Node:
        agg = self._aggregation(child)
        st, draw = self.st, self.draw
        group = tuple(draw(st.lists(st.sampled_from(child.cols), min_size=1, max_size=2, unique=True)))
        return Agg(child, group, agg.aggs, rollup=True)

    def _window(self, child: Node) -> Node:
        """A whole-partition window, or (``ordered_windows``, half of the time) an ordered
        one: rank(), dense_rank(), row_number() or a running aggregate over a RANGE or ROWS
        frame, ascending or descending."""
        st, draw = self.st, self.draw
        agg = self._aggregation(child)
        if not self.ordered_windows or draw(st.booleans()):
            return WindowAgg(child, agg.group, agg.aggs[0])
        func, col, name = agg.aggs[0]
        rows = False
        if draw(st.booleans()):
            func, col = draw(st.sampled_from(RANKING)), None
        else:
            rows = draw(st.booleans())
        order = draw(st.sampled_from(child.cols))
        return RankedWindow(child, agg.group, (func, col, name), order, draw(st.booleans()), rows)

    def _explode(self, child: Node) -> Node:
        longs = self._longs(child)
        if not longs:
            return child
        st, draw = self.st, self.draw
        return Explode(child, draw(st.sampled_from(longs)), draw(st.sampled_from(longs)), self._name("e"))

    def _distinct(self, child: Node) -> Node:
        return Distinct(child, self.draw(self.st.sampled_from(self.distinct_via)))

    def _func(self, child: Node) -> Node:
        longs = self._longs(child)
        if not longs:
            return child
        return Func(child, self.draw(self.st.sampled_from(longs)), self._name("p"))

    # binary operators
    def _join_args(self, left: Node, right: Node) -> tuple[str | None, str | None, str | None]:
        st, draw = self.st, self.draw
        ll, rl = self._longs(left), self._longs(right)
        op = draw(st.sampled_from(["=", "<", "=", None])) if ll and rl else None
        if op is None:
            return None, None, None
        return draw(st.sampled_from(ll)), op, draw(st.sampled_from(rl))

    def _join(self, left: Node, right: Node) -> Node:
        return Join(left, right, *self._join_args(left, right))

    def _semi(self, left: Node, right: Node) -> Node:
        return Join(left, right, *self._join_args(left, right), how="left_semi")

    def _anti(self, left: Node, right: Node) -> Node:
        return Join(left, right, *self._join_args(left, right), how="left_anti")

    def _outer(self, left: Node, right: Node) -> Node:
        how = self.draw(self.st.sampled_from(OUTER))
        return Join(left, right, *self._join_args(left, right), how=how)

    def _compatible(self, left: Node, right: Node) -> tuple[Node, Node] | None:
        """Both sides with the same column types, projecting onto long columns if needed."""
        st, draw = self.st, self.draw
        if left.types == right.types and draw(st.booleans()):
            return left, right
        ll, rl = self._longs(left), self._longs(right)
        if not ll or not rl:
            return None
        n = draw(st.integers(1, min(len(ll), len(rl), 2)))
        pick_l = tuple(draw(st.lists(st.sampled_from(ll), min_size=n, max_size=n, unique=True)))
        pick_r = tuple(draw(st.lists(st.sampled_from(rl), min_size=n, max_size=n, unique=True)))
        return Project(left, pick_l), Project(right, pick_r)

    def _union(self, left: Node, right: Node) -> Node:
        pair = self._compatible(left, right)
        return Union(*pair) if pair else left

    def _intersect(self, left: Node, right: Node) -> Node:
        pair = self._compatible(left, right)
        return Intersect(*pair) if pair else left

    def _minus(self, left: Node, right: Node) -> Node:
        pair = self._compatible(left, right)
        kind = self.draw(self.st.sampled_from(self.minus_kinds))
        if pair is None or (not self.nested_difference and is_difference(pair[1])):
            return left
        return Minus(*pair, kind=kind)


def is_difference(node: Node) -> bool:
    """A difference (subtract, exceptAll, anti join), seen through projections that Spark
    drops (onto all columns in order)."""
    while isinstance(node, Project) and node.add is None and node.keep == node.child.cols:
        node = node.child
    return isinstance(node, Minus) or (isinstance(node, Join) and node.how == "left_anti")


def describe(node: Node) -> str:
    """The task as PySpark code plus the data of the tables it reads (for failure messages)."""
    lines = [f"task = {to_code(node)}"]
    for t in sorted(tables_of(node)):
        cols, rows = TABLES[t]
        lines.append(f"{t}{cols} = {rows}")
    return "\n".join(lines)
