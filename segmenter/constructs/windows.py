"""ω: window functions appended to their input's rows, defined by their rewrite into joins
and aggregations (docs/semantics.md) and kept as one operator (:class:`Window`) with each
row's frame: the condition that picks, among its partition's rows, those its functions read
(the whole partition, or the rows that sort before it or tie with it)."""

from __future__ import annotations

from dataclasses import replace

from segmenter.errors import TIE_MARKER, UnsupportedTaskError
from segmenter.operators import Col, Expr, Node, SortKey, Window, column_expr
from segmenter.plan_reader import JObj, PlanReader, Rule


def read_window(p: PlanReader, plan: JObj) -> Node:
    """ω: window functions appended to their input's rows (docs/semantics.md defines them
    by their rewrite into joins and aggregations). Traced are aggregates over whole
    partitions, and over the rows up to the current one and its peers (``rank()``,
    ``dense_rank()``, a running aggregate ``sum(x) OVER (… ORDER BY o)``; ``row_number()``
    and a ROWS running frame where no two rows of a partition tie on the order, which
    a filter checks while the task runs). A row's frame: its partition's rows, those
    that sort before it or tie with it where no function reads the whole partition."""
    items = p.items(plan.windowExpressions())
    kinds = [_window_kind(p, i.child()) for i in items]
    partition = p.items(plan.partitionSpec())
    sorts = p.items(plan.orderSpec())
    child = p.node(plan.child())
    by_partition = [p.expr(e) for e in partition]  # each expression rebuilt once (a JVM trip)
    sort_keys = [p.sort_key(o) for o in sorts]
    spec = _over(by_partition, sort_keys)
    functions = tuple(
        (p.attr_col(i.toAttribute()), _window_function(p, i.child().windowFunction(), kind, spec))
        for i, kind in zip(items, kinds, strict=True)
    )
    ordered = all(k != "whole" for k in kinds)
    framed = [("partition_key", j, e) for j, e in zip(partition, by_partition)]
    framed += [("order_key", o.child(), k.expr) for o, k in zip(sorts, sort_keys)] if ordered else []
    keys = tuple((p.hidden(n, j), e) for n, j, e in framed)
    frame_keys = tuple((p.hidden(f"frame_{n}", j), e) for n, j, e in framed)
    parts = len(partition)
    if not keys:  # OVER (): one frame, the whole input, under a constant key (a probe needs one)
        keys = ((Col(p.fresh_id("whole"), "whole", "int"), Expr("1")),)
        frame_keys = ((Col(p.fresh_id("frame_whole"), "whole", "int"), Expr("1")),)
        parts = 1
    row = [column_expr(c) for c, _ in keys]
    candidate = [column_expr(c) for c, _ in frame_keys]
    frame = [_null_safe_eq(a, b) for a, b in zip(candidate[:parts], row[:parts])]
    if parts < len(row):
        ties = [_null_safe_eq(a, b) for a, b in zip(candidate[parts:], row[parts:])]
        frame.append(_or(_precedes(list(zip(candidate[parts:], row[parts:], sorts))), _and(ties)))
    window = Window(child, functions, keys, frame_keys, tuple(frame), parts)
    if not any(kind in _TOTAL_ORDER for kind in kinds):
        return window
    # a row's peers over the window's own partition and order, so that Spark evaluates the
    # check on the window's shuffle and sort (partitioned by the order keys too, it shuffled
    # and sorted the input a second time: bench_jobs' retail job, 1 M orders with their texts)
    peers = Expr(f"count(1) OVER ({spec.sql} RANGE BETWEEN CURRENT ROW AND CURRENT ROW)", spec.refs)
    return replace(window, peers=peers, tie_error=_tie_error(p, plan))


def _window_function(p: PlanReader, function: JObj, kind: str, spec: Expr) -> Expr:
    """``f(…) OVER (spec frame)``, with the frame Spark gives the function."""
    name = function.getClass().getSimpleName()
    call = Expr(f"{_RANKING[name]}()", frozenset()) if name in _RANKING else p.expr(function)
    return Expr(f"{call.sql} OVER ({spec.sql}{_FRAMES[kind]})", call.refs | spec.refs)


def _tie_error(p: PlanReader, plan: JObj) -> str:
    """Why the task fails where two rows of a partition tie on the order (docs/semantics.md):
    ``row_number()`` and a ROWS frame read ties in an order Spark does not fix, so neither
    their values nor their lineage are defined."""
    partition = ", ".join(e.sql() for e in p.items(plan.partitionSpec()))
    order = ", ".join(o.sql() for o in p.items(plan.orderSpec()))
    spec = (f"PARTITION BY {partition} " if partition else "") + f"ORDER BY {order}"
    return (
        f"{TIE_MARKER}a window ({spec}) at {p.where()} orders two rows of a partition "
        "that tie on its ORDER BY, in an order Spark does not fix: row_number() and ROWS frames "
        f"are traced only where the order is unique; add a column that breaks the tie{TIE_MARKER}"
    )


def _window_kind(p: PlanReader, window: JObj) -> str:
    """``whole`` (an aggregate over its whole partition), ``running`` (an aggregate over
    RANGE UNBOUNDED PRECEDING .. CURRENT ROW: the rows before and the peers), ``rank`` or
    ``dense_rank``; ``row_number`` and ``rows_running`` (ROWS UNBOUNDED PRECEDING ..
    CURRENT ROW) where the order is total on the data (``_ordered_values``); anything else
    is refused: a sliding frame or ``lag``/``lead`` reads rows by position."""
    function = window.windowFunction()
    name = function.getClass().getSimpleName()
    frame = window.windowSpec().frameSpecification()
    bounds = ("", "", "")
    if frame.getClass().getSimpleName() == "SpecifiedWindowFrame":
        ends = (frame.frameType(), frame.lower(), frame.upper())
        bounds = tuple(e.getClass().getSimpleName().rstrip("$") for e in ends)
    if name == "AggregateExpression" and bounds[1:] == ("UnboundedPreceding", "UnboundedFollowing"):
        return "whole"
    if name == "AggregateExpression" and bounds == ("RangeFrame", "UnboundedPreceding", "CurrentRow"):
        return "running"
    if name == "AggregateExpression" and bounds == ("RowFrame", "UnboundedPreceding", "CurrentRow"):
        return "rows_running"
    if name in _RANKING:
        return _RANKING[name]
    shown = function.aggregateFunction() if name == "AggregateExpression" else function
    raise UnsupportedTaskError(
        f"window function {shown.prettyName()}() over {_frame_sql(frame)}",
        p.where(),
        "traced are aggregates over whole partitions, rank(), dense_rank(), row_number() and "
        "running aggregates over RANGE or ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW: "
        "a sliding frame, lag() or lead() reads rows by position",
    )


def _null_safe_eq(a: Expr, b: Expr) -> Expr:
    return Expr(f"({a.sql} <=> {b.sql})", a.refs | b.refs)


def _and(exprs: list[Expr]) -> Expr:
    return Expr("(" + " AND ".join(e.sql for e in exprs) + ")", frozenset().union(*(e.refs for e in exprs)))


def _or(a: Expr, b: Expr) -> Expr:
    return Expr(f"({a.sql} OR {b.sql})", a.refs | b.refs)


def _over(partition: list[Expr], order: list[SortKey]) -> Expr:
    """A window's ``PARTITION BY … ORDER BY …`` (frame left out)."""
    parts = []
    if partition:
        parts.append("PARTITION BY " + ", ".join(e.sql for e in partition))
    if order:
        keys = (
            f"{k.expr.sql} {'ASC' if k.ascending else 'DESC'} NULLS {'FIRST' if k.nulls_first else 'LAST'}"
            for k in order
        )
        parts.append("ORDER BY " + ", ".join(keys))
    refs = frozenset().union(*(e.refs for e in partition), *(k.expr.refs for k in order))
    return Expr(" ".join(parts), refs)


def _precedes(keys: list[tuple[Expr, Expr, JObj]]) -> Expr:
    """``a`` sorts strictly before ``b`` in the window's order (lexicographic over the sort
    keys, with each key's direction and NULL placement); never NULL."""
    (a, b, sort), rest = keys[0], keys[1:]
    nulls_first = sort.nullOrdering().sql() == "NULLS FIRST"
    first, last = (a, b) if nulls_first else (b, a)
    op = "<" if sort.direction().sql() == "ASC" else ">"
    refs = a.refs | b.refs
    here = Expr(
        f"(({first.sql} IS NULL AND {last.sql} IS NOT NULL) OR coalesce({a.sql} {op} {b.sql}, false))", refs
    )
    if not rest:
        return here
    return _or(here, _and([_null_safe_eq(a, b), _precedes(rest)]))


def _frame_sql(frame: JObj) -> str:
    """A window frame as the user wrote it. Spark's own ``sql()`` keeps the analyzer's
    offset: ``2 PRECEDING`` is stored as -2 and shown as ``-2 FOLLOWING``."""
    if frame.getClass().getSimpleName() != "SpecifiedWindowFrame":
        return str(frame.sql())
    ends = []
    for bound in (frame.lower(), frame.upper()):
        kind = bound.getClass().getSimpleName().rstrip("$")
        if kind in _FRAME_ENDS:
            ends.append(_FRAME_ENDS[kind])
        elif bound.foldable() and isinstance(offset := bound.eval(None), int):
            ends.append(f"{-offset} PRECEDING" if offset < 0 else f"{offset} FOLLOWING")
        else:
            ends.append(str(bound.sql()))
    rows = frame.frameType().getClass().getSimpleName().startswith("RowFrame")
    return f"{'ROWS' if rows else 'RANGE'} BETWEEN {ends[0]} AND {ends[1]}"


_FRAME_ENDS = {
    "UnboundedPreceding": "UNBOUNDED PRECEDING",
    "UnboundedFollowing": "UNBOUNDED FOLLOWING",
    "CurrentRow": "CURRENT ROW",
}


_RANKING = {"Rank": "rank", "DenseRank": "dense_rank", "RowNumber": "row_number"}


_FRAMES = {  # a window kind's frame, as Spark gives it to the function
    "whole": " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING",
    "running": " RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "rows_running": " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "rank": "",
    "dense_rank": "",
    "row_number": "",
}


_TOTAL_ORDER = ("row_number", "rows_running")  # defined only where the data has no ties


RULES: dict[str, Rule] = {"Window": read_window}
