"""The operator tree in the paper's seven operators: every construct kept as one operator
replaced by its definition (its construct module's ``rewrite``, docs/semantics.md), which
the oracle checks against and the capturing backends (eager, compressed, confidence) run."""

from __future__ import annotations

import dataclasses

from segmenter.constructs import outer_joins
from segmenter.operators import Difference, Join, Node, OuterJoin, Union


def rewritten(root: Node) -> Node:
    """``root`` with every outer join replaced by its rewrite (a subtree read twice stays
    one object)."""
    done: dict[int, Node] = {}

    def visit(node: Node) -> Node:
        if id(node) not in done:
            kids = tuple(visit(k) for k in node.children)
            node_now = _with_children(node, kids) if kids != node.children else node
            done[id(node)] = outer_joins.rewrite(node_now) if isinstance(node_now, OuterJoin) else node_now
        return done[id(node)]

    return visit(root)


def _with_children(node: Node, kids: tuple[Node, ...]) -> Node:
    if isinstance(node, Join | Union):
        return dataclasses.replace(node, inputs=kids)
    if isinstance(node, Difference | OuterJoin):
        return dataclasses.replace(node, left=kids[0], right=kids[1])
    return dataclasses.replace(node, child=kids[0])  # type: ignore[call-arg]
