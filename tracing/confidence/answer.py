"""The answer to "how sure is this output row, and which facts decide it": one entry per row
with its probability, how it was computed, its lineage formula over base facts, and the facts
that move the probability most. Prints as a table, converts to JSON and pandas, and renders
as HTML in a notebook.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tracing import views
from tracing.confidence.estimate import Estimate

if TYPE_CHECKING:
    import pandas as pd

FORMULA_CHARS = 300


@dataclass(frozen=True)
class FactWeight:
    """A base fact's weight in one row's formula (see :func:`tracing.confidence.influence`)."""

    fact: str  # its label: ``table{"key": ...}`` or ``udf({E}) = value``
    kind: str  # "source" or "model"
    probability: float
    effect: float  # P(row | fact true) − P(row | fact false)
    banzhaf: float


@dataclass(frozen=True)
class RowConfidence:
    row: dict[str, Any]
    estimate: Estimate
    formula: str  # over base facts, by label
    facts: int  # how many base facts the formula has
    weights: tuple[FactWeight, ...] = ()

    @property
    def probability(self) -> float:
        return self.estimate.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "row": self.row,
            "probability": self.probability,
            "estimate": asdict(self.estimate),
            "formula": self.formula,
            "facts": self.facts,
            "weights": [asdict(w) for w in self.weights],
        }


@dataclass
class ConfidenceAnswer:
    rows: list[RowConfidence]
    algorithm: str  # "indep" (Algorithm 2) or "basic" (Algorithm 1)
    seconds: float
    lookups: int  # lineage-table lookups (one per level of the lineage DAG)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[RowConfidence]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> RowConfidence:
        return self.rows[i]

    def most_uncertain(self, n: int) -> list[RowConfidence]:
        """The ``n`` rows whose probability is closest to ½ (an auditor's first look)."""
        return sorted(self.rows, key=lambda r: abs(r.probability - 0.5))[:n]

    def probabilities(self) -> list[tuple[dict[str, Any], float]]:
        return [(r.row, r.probability) for r in self.rows]

    def to_pandas(self) -> pd.DataFrame:
        """One line per row: its values, probability, method and the decisive fact."""
        import pandas as pd  # deferred: a question from the command line needs no pandas

        records = []
        for r in self.rows:
            top = r.weights[0].fact if r.weights else None
            records.append(
                {
                    **r.row,
                    "probability": r.probability,
                    "method": r.estimate.method,
                    "facts": r.facts,
                    "decisive_fact": top,
                }
            )
        return pd.DataFrame.from_records(records)

    def to_dict(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm,
            "seconds": self.seconds,
            "lookups": self.lookups,
            "notes": self.notes,
            "rows": [r.to_dict() for r in self.rows],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def __str__(self) -> str:
        lines = [f"confidence of {len(self.rows)} output row(s) ({self.algorithm}, {self.seconds:.2f} s)"]
        for r in self.rows:
            bound = guarantee(r.estimate)
            lines.append(f"  {row_text(r.row)}: {r.probability:.4f}  [{r.estimate.method}{bound}]")
            lines.append(f"    lineage: {short_formula(r.formula)}")
            for w in r.weights:
                lines.append(
                    f"    {w.fact} (p={w.probability:.3g}): moves it by {w.effect:+.4f}, "
                    f"Banzhaf {w.banzhaf:.3f}"
                )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return views.html(self)


def guarantee(e: Estimate) -> str:
    if e.bound is None:
        return ""
    kind = " relative" if e.bound == "relative" else ""
    return f", ±{e.epsilon:g}{kind} with prob. ≥ {1 - (e.delta or 0):g}"


def row_text(row: dict[str, Any]) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in row.items()) + ")"


def short_formula(text: str) -> str:
    return text if len(text) <= FORMULA_CHARS else text[: FORMULA_CHARS - 1] + "…"
