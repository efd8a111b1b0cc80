"""Plain words for a run's steps (its segments), from the names the user gave: "the join of
customers and orders", "the keyword_sentiment model over orders and reviews". An auditor
reads these where the engine would say "segment 2"; an internal column of a rewrite (a
window's ``partition_key``) never reaches them, as only tables, models and the user's own
column names are used."""

from __future__ import annotations

from collections.abc import Iterable

from segmenter.operators import Difference, Join, Node, OuterJoin, Source, Union
from segmenter.segments import Segment

DIFFERENCES = {"anti": "the anti-join", "distinct": "the EXCEPT", "all": "the EXCEPT ALL"}


def step_names(root: Segment, user_names: Iterable[str]) -> dict[int, str]:
    """Each segment id (and each outer join's check id) as a phrase; two steps that would
    read the same (a CTE used twice) are numbered."""
    names = set(user_names)
    found: dict[int, str] = {}
    seen: dict[str, int] = {}
    for seg in root.walk():
        words = _step(seg, names)
        seen[words] = seen.get(words, 0) + 1
        if seen[words] > 1:
            n = seen[words]
            words = f"{words} ({n}{ {2: 'nd', 3: 'rd'}.get(n, 'th')} use)"
        found[seg.id] = words
        if seg.kind == "outer":
            found[seg.check_id] = words
    return found


def tables_below(node: Node) -> list[str]:
    """The source tables under ``node``, in the order they are read, each once."""
    return list(dict.fromkeys(n.table for n in node.walk() if isinstance(n, Source)))


def listed(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _step(seg: Segment, names: set[str]) -> str:
    """The segment's leading operator, said over the tables it reads (below it)."""
    tables = listed(tables_below(seg.top)) if tables_below(seg.top) else "its input"
    if seg.functions:
        models = listed(list(dict.fromkeys(f.udf for f in seg.functions)))
        return f"the {models} model{'s' if len(seg.functions) > 1 else ''} over {tables}"
    top = seg.top
    if isinstance(top, Difference):
        left, right = (listed(tables_below(c)) for c in (top.left, top.right))
        return f"{DIFFERENCES[top.kind]} of {left} against {right}"
    if isinstance(top, OuterJoin):
        kind = "existence join" if top.kind == "exists" else f"{top.kind} outer join"
        return f"the {kind} of {tables}"
    if seg.aggregations:
        keys = [c.name for agg in seg.aggregations for c, _ in agg.keys]
        if keys and set(keys) <= names:
            return f"the grouping by {listed(list(dict.fromkeys(keys)))} of {tables}"
        return f"the grouping of {tables}"
    if any(isinstance(op, Join) for op in seg.operators):
        return f"the join of {tables}"
    if any(isinstance(op, Union) for op in seg.operators):
        return f"the union of {tables}"
    return f"the rows read from {tables}"


def user_columns(root: Node) -> set[str]:
    """The column names the user's own tree has (a rewrite's internal ones are not there)."""
    return {c.name for node in root.walk() for c in node.columns}
