"""Model reasons in the objects their users know: SHAP and LIME attributions (reasons with
``attributions`` and ``base_value``, as ``credit_exam`` gives them) as one
``shap.Explanation``, so that ``shap.plots.waterfall(explanation[0])`` draws a call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def to_shap(calls: Sequence[dict[str, Any]]) -> Any:
    """One ``shap.Explanation`` row per call (``reasoning_rows()`` entries): its attributions
    as ``values``, the attribute values as ``data``, the explainer's ``base_values`` (base +
    the row's values = the explained probability of the call's value)."""
    import numpy as np
    import shap  # deferred: importing shap takes a second

    reasons = [c.get("reason") for c in calls]
    if not reasons or any(not isinstance(r, dict) or "attributions" not in r for r in reasons):
        raise ValueError("to_shap needs calls whose reasons hold attributions (a SHAP or LIME UDF)")
    if any(r.get("base_value") is None for r in reasons):
        raise ValueError("these reasons hold no base_value (a run made before reasons recorded it)")
    names = sorted({a["attribute"] for r in reasons for a in r["attributions"]})
    by_name = [{a["attribute"]: a for a in r["attributions"]} for r in reasons]
    return shap.Explanation(
        values=np.array([[row[n]["attribution"] if n in row else 0.0 for n in names] for row in by_name]),
        base_values=np.array([r["base_value"] for r in reasons]),
        data=np.array([[row[n]["value"] if n in row else np.nan for n in names] for row in by_name]),
        feature_names=names,
    )
