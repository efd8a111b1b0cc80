"""Tracing queries (paper §5.3), written once for every engine.

Non-D segment: ∪ᵢ Split(σ_Cᵢ(T₁ ⋈ … ⋈ Tₘ) ⋉ Ō). The segment's σ/π/⋈/∪ body is evaluated
over its inputs with a tag per input; the α chain's grouping keys are evaluated on those rows;
the rows that agree with a target (on the top grouping keys, or on the body's columns when
there is no aggregation) are kept; each input's tag then gives its rows (Split). φ appends
values that are functions of the row, so it never needs to be re-evaluated here. A segment
that only renames or drops one child segment's columns (π) is not evaluated at all: its
targets, equal on the columns it keeps, are the child's.

A semi-join L ⋉_θ R is evaluated as one, not as the inner join L ⋈_θ R its lineage is defined
by: each kept row carries a *probe* (its columns that θ reads), and R's part of the lineage
is R ⋉_θ (the distinct probes of the rows kept), traced on down R the same way. The rows are
those the inner join would give (r is in the lineage iff θ(l, r) for a kept l), without the
join's product: Q21's NOT EXISTS difference has 0.7 M pairs for 12 k rows.

A window ω is traced the same way, as the self-join its rewrite is: each kept row carries a
probe of its frame's keys (its partition's values, and its order values for a frame that
ends at the row and its peers), and the window's input rows in the frame of some probe are
its part of the lineage: one pass over the input, not a copy of it per window function.

D segment T₁ − T₂: {Ō, T₂}.

Outer segment T₁ ⟕ T₂ (⟖, ⟗), as its rewrite (T₁ ⋈ T₂) ∪ π(T₁ − (T₁ ⋉ T₂)) defines it, in
one step: evaluated as one outer join over tagged inputs, a matched row's tags give its two
rows, a padded row's its own (the other tag is NULL). A padded row also carries the check
its difference makes, all of T₁ ⋉ T₂: that semi-join is traced once, for every padded
target, and its rows are control (docs/semantics.md).

Per row: when the targets are *numbered* (each carries ``ROW_ID``), the semi-join with them
becomes a join that keeps each row's ``ROW_ID``, and the probes and Split carry it: one pass
answers for every chosen output row apart. "All of it" (a difference's T₂) is then a
restriction on no column: all rows, for each target that reached the difference.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from materialization.compile import ROW_ID, TAG_PREFIX
from materialization.pushdown import Restriction, passing_columns, push_to_leaves
from segmenter.operators import Col, Join, Node, OuterJoin, Projection, Selection, Source, Union, Window
from segmenter.row_keys import row_key
from segmenter.segments import Segment
from tracing.engines import Engine, Settled


@dataclass(frozen=True)
class LeafLineage:
    """The part of one segment input that belongs to the intermediate lineage: ``rows``
    (source rows or child-segment output rows, by column id, settled), or for the inputs of
    a difference the ``targets`` to trace in the child (None there means all of it)."""

    leaf: Node
    child: Segment | None
    rows: Settled | None = None
    targets: Restriction | None = None
    control: bool = False  # rows an outer join's check read (Segment.check_id), not its rows'
    keyed: bool = False  # source rows by their key's columns alone (rows only checked)
    ids: list[int] | None = None  # unnumbered rows that serve each of these targets


def trace_non_d(
    seg: Segment, targets: Restriction | None, engine: Engine, keyed: frozenset[int] | None = None
) -> list[LeafLineage]:
    """Split(σ_C(T₁ ⋈ … ⋈ Tₘ) ⋉ Ō) for a Non-D segment; ``targets`` None means ALL.
    ``keyed``: the source inputs (by ``id``) whose rows are wanted by their key alone (rows
    only checked: their other columns are read when asked for); None: every input whole,
    an outer join's check too."""
    passed = _passed_on(seg, targets)
    if passed is not None:
        return [passed]
    found, _, _ = _evaluated(seg, targets, engine, keyed or frozenset())
    return _found(seg, found, keyed or frozenset())


def _found(seg: Segment, found: dict[int, Settled], keyed: frozenset[int]) -> list[LeafLineage]:
    return [
        LeafLineage(leaf, seg.child_for(leaf), rows=found[id(leaf)], keyed=_by_key(leaf, keyed))
        for leaf in seg.leaves
    ]


def _by_key(leaf: Node, keyed: frozenset[int]) -> bool:
    """Whether a segment input's rows are traced by their key alone: a source's rows only
    checked (``keyed``), where it has a key."""
    return isinstance(leaf, Source) and bool(leaf.key) and id(leaf) in keyed


def _wanted(leaf: Node, keyed: frozenset[int]) -> tuple[Col, ...]:
    """The columns of a segment input that its tracing carries (see :func:`_by_key`)."""
    if _by_key(leaf, keyed):
        return leaf.key_cols  # type: ignore[attr-defined]
    return leaf.columns


def _passed_on(seg: Segment, targets: Restriction | None) -> LeafLineage | None:
    """A segment that only renames and drops the columns of one child segment (π, as above
    a rollup): a target's rows there are the child's output rows equal to it on the columns
    it keeps, so the targets pass to the child as they are, and the child's output is not
    computed to find them (the rollup job's question at 1 M orders: one query over its whole
    aggregation fewer, 0.39 → 0.35 s). Not to a difference, whose tracing takes its targets
    for rows of its output whole; None where the segment does more."""
    if len(seg.leaves) != 1 or seg.aggregations:
        return None
    leaf = seg.leaves[0]
    child = seg.child_for(leaf)
    if child is None or child.kind == "d":
        return None
    mapping = {c.id: c.id for c in seg.body_top.match_columns()}  # top column -> column below
    node = seg.body_top
    while node is not leaf:
        if not isinstance(node, Projection):
            return None
        (passing,) = passing_columns(node)
        if not all(below in passing for below in mapping.values()):
            return None  # a computed column: equal rows below are not all equal above
        mapping = {top: passing[below] for top, below in mapping.items()}
        node = node.child
    return LeafLineage(leaf, child, targets=targets.narrowed(mapping) if targets is not None else None)


def _evaluated(
    seg: Segment, targets: Restriction | None, engine: Engine, keyed: frozenset[int]
) -> tuple[dict[int, Settled], Settled, dict[int, str]]:
    """The segment's body over its tagged inputs, kept where it gives a target: each
    input's rows (by ``id`` of its leaf), the kept rows, and each input's tag."""
    pushed = push_to_leaves(seg.top, seg.leaves, targets)
    inputs = {}
    tags: dict[int, str] = {}
    for j, leaf in enumerate(seg.leaves):
        tags[id(leaf)] = tag = f"{TAG_PREFIX}{j}"
        rel = engine.leaf_input(seg, leaf, pushed[id(leaf)])
        inputs[id(leaf)] = engine.tagged(rel, tag, _wanted(leaf, keyed), row_key(leaf))
    probed = _probed_nodes(seg.body_top, tags, probed=False)
    probes = {id(s): f"{TAG_PREFIX}probe{k}" for k, s in enumerate(probed)}
    joined = engine.body(seg.body_top, inputs, probes)
    for agg in reversed(seg.aggregations):
        joined = engine.with_keys(joined, agg.keys)
    if targets is not None:
        if seg.aggregations:
            match = {c.id for c, _ in seg.aggregations[0].keys}
        else:
            match = {c.id for c in seg.body_top.match_columns()}
        on = {v: n for v, n in targets.on.items() if n in match}
        key = None if seg.aggregations else row_key(seg.body_top)  # Q9: 8 of 52 columns
        joined = engine.semi(joined, replace(targets, on=on, complete=False), key)
    # held: the tags and probes alone, which the split reads (TPC-H-like rows of a dozen
    # columns, 250 k kept for bench_jobs' rollup row, were half of its query's time in Arrow)
    reached = [tags[id(n)] for n in _reached(seg.body_top, tags)]
    held = dict.fromkeys([*reached, *(probes[id(n)] for n in _probed_nodes(seg.body_top, tags))])
    settled = engine.settle(engine.picked(joined, list(held)))
    numbered = targets is not None and targets.numbered
    return _split(settled, seg.body_top, inputs, tags, probes, engine, numbered), settled, tags


def trace_outer(
    seg: Segment, targets: Restriction | None, engine: Engine, keyed: frozenset[int] | None = None
) -> list[LeafLineage]:
    """The rows of each kept output row (its two, or a padded row's one), and, where some
    kept row is padded, T₁ ⋉ T₂ traced once as control for those rows (each matched row
    of either input: ⟕'s difference checks them all; by their key, where they have one)."""
    join = seg.top
    assert isinstance(join, OuterJoin)
    found, settled, tags = _evaluated(seg, targets, engine, keyed or frozenset())
    out = _found(seg, found, keyed or frozenset())
    sides = join.children
    # a padded row: no row of the other input, so NULL in every tag of it the row carries
    padded = engine.absent(settled, [tags[id(_reached(sides[1 - k], tags)[0])] for k in join.kept])
    if not padded.count:
        return out
    semi = Join(sides, join.condition, semi=True)  # the check, over the same inputs
    check = replace(seg, kind="non-d", top=semi, body=semi, operators=(semi,))
    numbered = targets is not None and targets.numbered
    ids = padded.local.column(ROW_ID).to_pylist() if numbered and padded.local is not None else None
    checked = None if keyed is None else frozenset(id(leaf) for leaf in seg.leaves)
    for part in trace_non_d(check, None, engine, checked):
        assert part.rows is not None
        if numbered and (ids is None or (part.child is not None and part.child.calls_models)):
            # each row numbered for every padded target: a model call below tells its reads
            # apart per target, or the targets' ids stayed on Spark (too many to hold here)
            each = Restriction(padded.rows, {}, padded.count, numbered=True, local=padded.local)
            rows = engine.settle(engine.semi(part.rows.rows, each))
            out.append(replace(part, rows=rows, control=True))
        else:
            out.append(replace(part, control=True, ids=ids))
    return out


def _split(
    settled: Settled,
    top: Node,
    inputs: dict[int, Any],
    tags: dict[int, str],
    probes: dict[int, str],
    engine: Engine,
    numbered: bool,
    once_each: bool = True,
) -> dict[int, Settled]:
    """Split of the rows ``settled`` (evaluated from ``top``) into each input's rows: the
    inputs ``top`` reaches by their tags, those on the right of a probed semi-join, or
    below a window, by tracing that side against the probes (the rows a kept row matched,
    the rows of its frame). ``once_each``: each row of ``top``'s evaluation is in
    ``settled`` at most once (per target, where ``numbered``)."""
    reached = [id(n) for n in _reached(top, tags)]  # an input reached twice is listed twice
    once = {i for i in _once_each(top, tags) if reached.count(i) == 1} if once_each else set()
    found = {i: engine.split(settled, tags[i], distinct=i not in once) for i in reached}
    for node in _probed_nodes(top, tags):
        probe = engine.split(settled, probes[id(node)])
        if isinstance(node, Window):
            read = engine.with_keys(engine.body(node.child, inputs, probes), node.frame_keys)
            below, condition = node.child, node.frame
        else:
            read = engine.body(node.inputs[1], inputs, probes)
            below, condition = node.inputs[1], node.condition
        matched = engine.settle(engine.matching(read, probe, condition))
        # a semi-join with the probes keeps each read row once; a join with numbered ones may
        # keep it twice for one target (two probes of its target match it)
        found |= _split(matched, below, inputs, tags, probes, engine, numbered, once_each and not numbered)
    return found


def _once_each(top: Node, tags: dict[int, str]) -> set[int]:
    """The source inputs whose rows each evaluated row of ``top`` holds once, so that its
    tag's rows are distinct without a DISTINCT (the reconcile job's check at 1 M orders: 0.14 s
    of its 0.41 s): a source row (its key is in its tag) is repeated only by a join that
    pairs it with several rows, an outer join, a generator or grouping sets; σ, π, ∪ and a
    semi-join's left side keep each row at most once (an input reached twice, as by a
    common subtree, is not among them: :func:`_split` checks)."""
    if id(top) in tags:
        return {id(top)} if isinstance(top, Source) and top.key else set()
    if isinstance(top, Selection | Projection | Union):
        kids = top.children
    elif isinstance(top, Join) and top.semi:
        kids = top.children[:1]
    else:
        return set()
    return set().union(*(_once_each(kid, tags) for kid in kids))


def _walk(node: Node, tags: dict[int, str], probed: bool = True) -> Iterator[Node]:
    """The operators from ``node`` down to the segment's inputs; with ``probed``, not into
    the right side of a semi-join that is probed, nor below a window (traced by probes)."""
    yield node
    if id(node) in tags:
        return
    kids = node.children
    if probed and _probed(node):
        kids = kids[:1] if isinstance(node, Join) else ()
    for kid in kids:
        yield from _walk(kid, tags, probed)


def _probed(node: Node) -> bool:
    """A window, or a semi-join whose condition reads its left side (with no such column
    every right row matches: the join then keeps the right side's tags, as an inner join)."""
    return isinstance(node, Window) or (isinstance(node, Join) and node.semi and bool(node.probe_columns()))


def _reached(top: Node, tags: dict[int, str]) -> list[Node]:
    return [n for n in _walk(top, tags) if id(n) in tags]


def _probed_nodes(top: Node, tags: dict[int, str], probed: bool = True) -> list[Join | Window]:
    return [n for n in _walk(top, tags, probed) if _probed(n) and id(n) not in tags]  # type: ignore[misc]


def trace_d(
    seg: Segment, targets: Restriction | None, engine: Engine, keyed: frozenset[int] | None = None
) -> list[LeafLineage]:
    """{Ō, T₂} for a D segment T₁ − T₂: the targets themselves in T₁, all of T₂.

    Asked for all of its output (as the subtrahend of another difference is), Ō is the
    whole output T₁ − T₂, not all of T₁."""
    left, right = seg.leaves
    if targets is None or not targets.on:
        output = engine.output(seg, None)
        everything = engine.settle(engine.semi(output, targets) if targets else output)
        on = {c.id: c.id for c in seg.top.columns}
        targets = everything.restricting(on, numbered=targets is not None)
    if targets.rows == 0:  # SL(∅) = ∅: not even T₂ contributes to no row
        return []
    out = []
    everything = targets.narrowed({}) if targets.numbered else None  # T₂: for each target here
    for leaf, r in ((left, targets), (right, everything)):
        narrowed = r.narrowed({c.id: c.id for c in leaf.match_columns()}) if r else None
        child = seg.child_for(leaf)
        if child is None:
            rel = engine.leaf_input(seg, leaf, narrowed)
            if narrowed is not None and narrowed.numbered:
                rel = engine.semi(rel, narrowed)
            by_key = _by_key(leaf, keyed or frozenset())
            if by_key:
                rel = engine.picked(rel, [c.id for c in _wanted(leaf, keyed or frozenset())])
            out.append(LeafLineage(leaf, None, rows=engine.settle(rel), keyed=by_key))
        else:
            out.append(LeafLineage(leaf, child, targets=narrowed))
    return out
