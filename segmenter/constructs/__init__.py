"""The constructs the parser accepts, one module each, as sqlglot's optimizer keeps one rule
per module: each module's ``RULES`` maps the Spark plan classes it accepts to the function
that reads one into the operator tree, and holds that construct's definition where it has a
native operator (an outer join's rewrite into the seven operators). One driver,
``segmenter.parser``, applies them; a plan class no module accepts is refused with a hint."""

from __future__ import annotations

from segmenter.constructs import (
    aggregations,
    generators,
    grouping_sets,
    joins,
    projections,
    relations,
    selections,
    set_operations,
    windows,
)
from segmenter.plan_reader import Rule

MODULES = (
    relations,
    selections,
    projections,
    joins,
    aggregations,
    grouping_sets,
    windows,
    generators,
    set_operations,
)
RULES: dict[str, Rule] = {name: rule for module in MODULES for name, rule in module.RULES.items()}
