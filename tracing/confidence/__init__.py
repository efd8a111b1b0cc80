"""Confidence of lineage formulas (Trio-style): exact, sampled, deep lineage, checks, influence."""

from tracing.confidence.checks import always_together, can_coexist, extraneous, satisfiable, valid
from tracing.confidence.deep import LineageGraph, slin_breakpoints
from tracing.confidence.estimate import Estimate
from tracing.confidence.exact import BudgetExceeded, exact_probability
from tracing.confidence.facts import Facts, independent
from tracing.confidence.formula import (
    FALSE,
    TRUE,
    And,
    Formula,
    Not,
    Or,
    Var,
    condition,
    conj,
    disj,
    holds,
    neg,
    render,
    substitute,
    variables,
)
from tracing.confidence.influence import FactInfluence, influence
from tracing.confidence.montecarlo import karp_luby, naive_monte_carlo
from tracing.confidence.probability import METHODS, probability

__all__ = [
    "FALSE",
    "METHODS",
    "TRUE",
    "And",
    "BudgetExceeded",
    "Estimate",
    "FactInfluence",
    "Facts",
    "Formula",
    "LineageGraph",
    "Not",
    "Or",
    "Var",
    "always_together",
    "can_coexist",
    "condition",
    "conj",
    "disj",
    "exact_probability",
    "extraneous",
    "holds",
    "independent",
    "influence",
    "karp_luby",
    "naive_monte_carlo",
    "neg",
    "probability",
    "render",
    "satisfiable",
    "slin_breakpoints",
    "substitute",
    "valid",
    "variables",
]
