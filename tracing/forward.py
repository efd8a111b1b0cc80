"""The answer to "which results depend on this": the output rows a forward query found."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tracing import views
from tracing.lineage import SHOW_ROWS, collect_rows, fmt_row

DEPENDENCE = "dependence"  # how an output row depends on what was asked about:
CONTRIBUTING = "contributing"  # its values came from it
CONTROL = "control"  # it was only checked for absence (docs/semantics.md)


@dataclass(frozen=True)
class ForwardLineage:
    """Output rows depending on ``given`` (source rows or attribute values, or model calls),
    each with its ``dependence``: contributing, or control (only checked for absence)."""

    what: str  # what was asked about, for people
    given: pa.Table
    outputs: pa.Table  # the dependent output rows, as a bag (as the output holds them)
    lineage_ids: int  # distinct output values found
    seconds: float

    def rows(self) -> list[dict[str, Any]]:
        """The dependent output rows, sorted, each with its ``dependence``."""
        return collect_rows(self.outputs)

    def __len__(self) -> int:
        return self.outputs.num_rows

    def to_dict(self) -> dict[str, Any]:
        return {"given": collect_rows(self.given), "outputs": self.rows(), "seconds": self.seconds}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def __str__(self) -> str:
        rows = self.rows()
        lines = [f"{len(rows)} output row(s) depend on {self.what} ({self.seconds * 1000:.0f} ms)"]
        for r in rows[:SHOW_ROWS]:
            kind = r.get(DEPENDENCE)
            shown = fmt_row({k: v for k, v in r.items() if k != DEPENDENCE})
            lines.append(f"  {shown}" + ("  (only checked for absence)" if kind == CONTROL else ""))
        if len(rows) > SHOW_ROWS:
            lines.append(f"  ... {len(rows) - SHOW_ROWS} more")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return views.html(self)

    def __repr__(self) -> str:
        return f"<ForwardLineage {len(self)} output row(s) depend on {self.what}>"
