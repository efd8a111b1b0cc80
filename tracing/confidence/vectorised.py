"""Formulas evaluated over many worlds at once with numpy (sampling and coalition enumeration)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tracing.confidence.formula import And, Const, Formula, Not, Var


def truth(f: Formula, columns: Mapping[int, int], worlds: np.ndarray) -> np.ndarray:
    """f in each row of worlds (bool, one row per world, `columns[var]` its column)."""
    memo: dict[Formula, np.ndarray] = {}

    def go(g: Formula) -> np.ndarray:
        if isinstance(g, Var):
            return worlds[:, columns[g.id]]
        if isinstance(g, Const):
            return np.full(len(worlds), g.value)
        done = memo.get(g)
        if done is not None:
            return done
        if isinstance(g, Not):
            out = ~go(g.child)
        else:
            kids = iter(g.children)
            out = go(next(kids)).copy()
            for c in kids:
                if isinstance(g, And):
                    out &= go(c)
                else:
                    out |= go(c)
        memo[g] = out
        return out

    return go(f)
