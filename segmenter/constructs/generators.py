"""γ: explode, posexplode and inline, a model's list output included (its φ goes below)."""

from __future__ import annotations

from segmenter.errors import UnsupportedTaskError
from segmenter.operators import Generate, Node, Projection, column_expr
from segmenter.plan_reader import JObj, PlanReader, Rule

_GENERATORS = ("explode", "posexplode", "inline")


def read_generate(p: PlanReader, plan: JObj) -> Node:
    """γ for explode/posexplode/inline (a model's list output included: its φ goes below)."""
    gen = plan.generator()
    name = gen.prettyName()
    if name not in _GENERATORS:
        raise UnsupportedTaskError(
            f"generator {name}()", p.where(), f"only {', '.join(_GENERATORS)} are traced"
        )
    child = p.node(plan.child())
    calls = p.udf_calls([gen])
    node, udf_cols = p.functions(child, calls, {}) if calls else (child, {})
    args = tuple(p.expr(a, udf_cols) for a in p.items(gen.children()))
    outputs = tuple(p.attr_col(a) for a in p.items(plan.generatorOutput()))
    generated = Generate(node, name, args, bool(plan.outer()), outputs)
    shown = p.cols(plan)
    if shown == generated.columns:
        return generated
    return Projection(generated, tuple((c, column_expr(c)) for c in shown))


RULES: dict[str, Rule] = {"Generate": read_generate}
