"""Segmentation rules of §5.1-5.2 on hand-built operator trees (pure: no Spark)."""

from __future__ import annotations

import pytest

from segmenter.operators import (
    Aggregation,
    Col,
    Difference,
    Expr,
    Function,
    Join,
    Node,
    OuterJoin,
    Projection,
    Selection,
    Source,
    Union,
    column_expr,
    from_dict,
    to_dict,
)
from segmenter.rewrites import rewritten
from segmenter.row_keys import row_key
from segmenter.segments import control_reads, nested_keys, render_segments, segment


def table(name: str, *cols: str) -> Source:
    columns = tuple(Col(f"{name}_{c}", c, "int") for c in cols)
    return Source(name, columns, (columns[0].id,), f"/data/{name}")


def sigma(child: Node, sql: str = "TRUE") -> Selection:
    return Selection(child, (Expr(sql),))


def pi(child: Node, *names: str) -> Projection:
    cols = [c for c in child.columns if c.name in names] if names else list(child.columns)
    return Projection(child, tuple((c, column_expr(c)) for c in cols))


def join(*inputs: Node) -> Join:
    return Join(tuple(inputs), ())


def alpha(child: Node, *keys: str) -> Aggregation:
    key_cols = [c for c in child.columns if c.name in keys]
    count = Col(f"count_{id(child)}", "count", "bigint")
    outputs = tuple((c, column_expr(c)) for c in key_cols) + ((count, Expr("count(1)")),)
    return Aggregation(child, outputs, tuple(c.id for c in key_cols))


def phi(child: Node, udf: str = "f") -> Function:
    value = Col(f"{udf}_{id(child)}", udf, "string")
    reason = Col(f"{value.id}_reason", f"{udf}_reason", "string", is_reason=True)
    return Function(child, udf, (column_expr(child.columns[0]),), value, reason)


def union(*inputs: Node) -> Union:
    return Union(tuple(inputs), inputs[0].match_columns())


def patterns(root: Node) -> list[str]:
    return [s.pattern() for s in segment(root).walk()]


CLIENT, DEBT, LOAN = (
    table("client", "id", "income"),
    table("debt", "id", "debt"),
    table("loan", "id", "amount"),
)


def test_row_keys_pass_up_only_through_operators_that_keep_a_row_one_row() -> None:
    r, s = table("R", "a", "b"), table("S", "c", "d")
    assert row_key(phi(sigma(r))) == ("R_a",)
    assert row_key(join(sigma(r), pi(s, "c", "d"))) == ("R_a", "S_c")
    assert row_key(Join((r, s), (), semi=True)) == ("R_a",)
    renamed = Col("a2", "a2", "int")
    assert row_key(Projection(r, ((renamed, column_expr(r.columns[0])),))) == ("a2",)
    assert row_key(pi(r, "b")) is None  # the key projected away
    assert row_key(join(r, alpha(s, "d"))) is None
    assert row_key(union(r, r)) is None  # a row may come by both branches


def test_example_10_two_non_d_segments() -> None:
    task = alpha(phi(pi(join(CLIENT, DEBT, sigma(LOAN)), "income", "debt", "amount")), "f")
    root = segment(task)
    assert [s.pattern() for s in root.walk()] == ["α", "φ-π-⋈-σ"]
    assert [s.kind for s in root.walk()] == ["non-d", "non-d"]
    low = root.children[0]
    assert [leaf.table for leaf in low.leaves] == ["client", "debt", "loan"]
    assert low.functions == (task.child,)
    assert "segment 1 [Non-D] φ-π-⋈-σ  <- table client, table debt, table loan" in render_segments(root)


def test_full_pattern_is_one_segment_and_keeps_operator_order() -> None:
    body = union(pi(sigma(join(CLIENT, DEBT))), pi(sigma(join(CLIENT, LOAN))))
    task = phi(phi(alpha(alpha(sigma(body), "id", "income"), "id"), "g"), "f")
    (only,) = segment(task).walk()
    assert only.pattern() == "φ-φ-α-α-σ-∪-π-σ-⋈-π-σ-⋈"
    assert list(only.operators) == [n for n in task.walk() if not isinstance(n, Source)]


def test_selection_above_aggregation_starts_a_new_segment() -> None:
    having = sigma(alpha(CLIENT, "income"), "count > 1")
    assert patterns(having) == ["σ", "α"]


def test_function_below_selection_starts_a_new_segment() -> None:
    task = pi(sigma(phi(CLIENT)), "id")
    assert patterns(task) == ["π-σ", "φ"]


def test_union_below_join_starts_a_new_segment() -> None:
    task = join(union(pi(CLIENT, "id"), pi(DEBT, "id")), LOAN)
    assert patterns(task) == ["⋈", "∪-π-π"]


def test_aggregation_below_join_starts_a_new_segment() -> None:
    task = pi(join(alpha(CLIENT, "id"), LOAN))
    assert patterns(task) == ["π-⋈", "α"]


def test_nested_grouping_keys_stack_in_one_segment() -> None:
    inner = alpha(join(CLIENT, DEBT), "id", "income")
    outer = alpha(inner, "id")
    assert nested_keys(outer, inner)
    assert patterns(outer) == ["α-α-⋈"]


def test_non_nested_grouping_keys_split() -> None:
    inner = alpha(CLIENT, "id")
    outer = Aggregation(
        inner,
        ((Col("k", "k", "int"), Expr("`count_x` + 1", frozenset({inner.columns[1].id}))),),
        ("k",),
    )
    assert not nested_keys(outer, inner)
    assert patterns(outer) == ["α", "α"]


def test_difference_is_a_d_segment_with_children() -> None:
    task = pi(Difference(pi(CLIENT, "id"), pi(sigma(DEBT), "id")), "id")
    root = segment(task)
    assert [(s.kind, s.pattern()) for s in root.walk()] == [
        ("non-d", "π"),
        ("d", "−"),
        ("non-d", "π"),
        ("non-d", "π-σ"),
    ]


def test_an_anti_joins_left_input_is_one_segment_computed_once() -> None:
    """T₁ ▷ T₂ = T₁ − (T₁ ⋉ T₂) holds T₁ twice (equal copies, as a tree rewrite leaves them):
    T₁ is a segment in both inputs, its copy computed as the first, not inside T₁ ⋉ T₂."""
    cond = (Expr("client_id = debt_id", frozenset({"client_id", "debt_id"})),)
    t1 = pi(sigma(join(CLIENT, LOAN)), "id", "income")
    copy = pi(sigma(join(CLIENT, LOAN)), "id", "income")
    root = segment(alpha(Difference(t1, Join((copy, DEBT), cond, semi=True), "anti"), "income"))
    assert [(s.kind, s.pattern()) for s in root.walk()] == [
        ("non-d", "α"),
        ("d", "−"),
        ("non-d", "π-σ-⋈"),
        ("non-d", "⋈"),
        ("non-d", "π-σ-⋈"),
    ]
    ids = [s.id for s in root.walk()]
    assert root.firsts()[ids[4]].id == ids[2]
    assert patterns(join(pi(CLIENT, "id"), DEBT)) == ["⋈-π"]  # held once: in its segment


def test_difference_directly_over_sources() -> None:
    root = segment(Difference(CLIENT, DEBT))
    assert root.is_d and root.children == ()
    assert [leaf.table for leaf in root.leaves] == ["client", "debt"]


def test_outer_join_is_one_segment_and_its_rewrite_the_seven_operators() -> None:
    """⟕ keeps the σ/π/⋈ below its inputs (as an inner join does) in one outer segment, read
    once; its check's reads are labelled apart, control; its rewrite, which the capturing
    backends run, is (T₁ ⋈ T₂) ∪ π(T₁ − (T₁ ⋉ T₂)) with T₁ one object read three times."""
    cond = (Expr("client_id = debt_id", frozenset({"client_id", "debt_id"})),)
    task = alpha(OuterJoin(pi(sigma(CLIENT)), DEBT, cond, "left"), "income")
    root = segment(task)
    assert [(s.kind, s.pattern()) for s in root.walk()] == [("non-d", "α"), ("outer", "⟕-π-σ")]
    outer = root.children[0]
    assert [leaf.table for leaf in outer.leaves] == ["client", "debt"]
    assert "segment 1 [Outer] ⟕-π-σ  <- table client, table debt" in render_segments(root)
    check = ("left outer join (for its unmatched rows)", 1)
    assert control_reads(root) == {"client": {-2: check}, "debt": {-2: check}}
    assert root.routes()[outer.check_id] == (0, 1)
    assert from_dict(to_dict(task)) == task
    both = OuterJoin(CLIENT, DEBT, cond, "full")
    assert [c.id for c in both.columns] == ["client_id", "client_income", "debt_id", "debt_debt"]
    written = rewritten(both)
    assert isinstance(written, Union) and written.outputs == both.columns
    inner, *padded = written.inputs
    assert inner == Join((CLIENT, DEBT), cond) and len(padded) == 2
    assert [p.child.kind for p in padded] == ["anti", "anti"]  # type: ignore[attr-defined]
    assert padded[0].child.left is CLIENT and padded[0].child.right.inputs == (CLIENT, DEBT)  # type: ignore[attr-defined]
    assert [s.kind for s in segment(written).walk()].count("d") == 2
    flag = Col("has_debt", "has_debt", "boolean")
    exists = OuterJoin(CLIENT, DEBT, cond, "exists", flag)  # EXISTS under OR: a flag per client row
    assert exists.columns == (*CLIENT.columns, flag) and segment(exists).kind == "outer"
    flagged = rewritten(exists)
    assert isinstance(flagged, Union) and [p.outputs[-1][1].sql for p in flagged.inputs] == ["true", "false"]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="flag"):
        OuterJoin(CLIENT, DEBT, cond, "left", flag)


def test_segment_ids_are_unique_and_preorder() -> None:
    task = union(pi(Difference(CLIENT, DEBT)), pi(alpha(LOAN, "id")))
    ids = [s.id for s in segment(task).walk()]
    assert ids == list(range(len(ids)))


def test_source_alone_is_not_a_segment() -> None:
    with pytest.raises(ValueError, match="cannot start a segment"):
        segment(CLIENT)


def test_tree_round_trips_through_json() -> None:
    task = alpha(phi(pi(join(CLIENT, DEBT, sigma(LOAN)), "income")), "f")
    assert from_dict(to_dict(task)) == task
