"""Constructs written in the paper's seven operators: their definitions (docs/semantics.md).

The parser keeps an outer join as one operator (:class:`OuterJoin`), which the lazy engines
evaluate as one join and trace in one step. Its rewrite here is what that step must equal:
the oracle's definition, and the tree the capturing backends (eager, compressed,
confidence) run, whose indexes and formulas are built for the seven operators.
"""

from __future__ import annotations

import dataclasses

from segmenter.operators import Difference, Expr, Join, Node, OuterJoin, Projection, Union, column_expr


def anti(left: Node, right: Node, condition: tuple[Expr, ...]) -> Difference:
    """T₁ ▷ T₂ = T₁ − (T₁ ⋉ T₂): the left rows no right row matches, duplicates kept."""
    return Difference(left, Join((left, right), condition, semi=True), "anti")


def outer_join_rewrite(node: OuterJoin) -> Union:
    """T₁ ⟕ T₂ = (T₁ ⋈ T₂) ∪ π_{T₁, NULL…}(T₁ ▷ T₂); ⟖ pads T₂'s unmatched rows, ⟗ both;
    Spark's existence join, T₁ with a flag telling whether a T₂ row matches, is
    π_{T₁, TRUE}(T₁ ⋉ T₂) ∪ π_{T₁, FALSE}(T₁ ▷ T₂)."""
    if node.flag is not None:
        shown = tuple((c, column_expr(c)) for c in node.left.match_columns())
        semi = Join((node.left, node.right), node.condition, semi=True)
        flagged = tuple(
            Projection(rows, (*shown, (node.flag, Expr(value, frozenset()))))
            for rows, value in ((semi, "true"), (anti(node.left, node.right, node.condition), "false"))
        )
        return Union(flagged, node.columns)
    inner = Join((node.left, node.right), node.condition)
    branches: list[Node] = [inner]
    sides = (node.left, node.right)
    for kept in node.kept:
        unmatched = anti(sides[kept], sides[1 - kept], node.condition)
        shown = {c.id for c in sides[kept].match_columns()}
        outputs = tuple(
            (c, column_expr(c) if c.id in shown else Expr(f"CAST(NULL AS {c.dtype})", frozenset()))
            for c in node.columns
        )
        branches.append(Projection(unmatched, outputs))
    return Union(tuple(branches), node.columns)


def rewritten(root: Node) -> Node:
    """``root`` with every outer join replaced by its rewrite (a subtree read twice stays
    one object)."""
    done: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        if id(node) not in done:
            kids = tuple(visit(k) for k in node.children)
            node_now = _with_children(node, kids) if kids != node.children else node
            done[id(node)] = outer_join_rewrite(node_now) if isinstance(node_now, OuterJoin) else node_now
        return done[id(node)]

    return visit(root)


def _with_children(node: Node, kids: tuple[Node, ...]) -> Node:
    if isinstance(node, Join | Union):
        return dataclasses.replace(node, inputs=kids)
    if isinstance(node, Difference | OuterJoin):
        return dataclasses.replace(node, left=kids[0], right=kids[1])
    return dataclasses.replace(node, child=kids[0])  # type: ignore[call-arg]
