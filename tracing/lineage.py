"""The answer to "where did these rows come from, and why": AL(Ō) = (SL, RL).

Rows are Spark DataFrames (the tracing queries' results, settled so that asking twice costs
nothing more) or Arrow tables (answers read in-process from an eager run's indexes); the
accessors collect either into the same plain dicts. ``str()`` gives a readable report,
:meth:`to_json` a portable one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, Row

from tracing.confidence.answer import ConfidenceAnswer

SHOW_ROWS = 10

Rows = DataFrame | pa.Table


@dataclass(frozen=True)
class ReasoningRows:
    """⟨E, Value, Reason⟩ of one reasoning-mode function operator's rows in the lineage."""

    udf: str
    segment: int
    inputs: tuple[str, ...]  # names of the attributes E
    value: str
    reason: str
    rows: Rows


@dataclass(frozen=True)
class TraceStat:
    segment: int
    kind: str
    pattern: str
    seconds: float
    rows_in: int | None  # None: all rows of the segment
    rows_out: dict[str, int | None]  # per input; None: all of it


@dataclass
class AugmentedLineage:
    source: dict[str, Rows]
    reasoning: list[ReasoningRows]
    queries: list[TraceStat]
    targets: Rows | None = None
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scope: str | None = None  # set when the answer covers less than every table, row by row
    confidence: ConfidenceAnswer | None = None  # the rows' probabilities (confidence runs)
    engine: str | None = None  # which engine ran the tracing queries (lazy answers)
    warnings: list[str] = field(default_factory=list)  # e.g. a model's weights changed since the run
    _cache: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    # --- accessors ----------------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        """Source tables with at least one row in the lineage."""
        return [t for t in sorted(self.source) if self.source_rows(t)]

    def source_rows(self, table: str) -> list[dict[str, Any]]:
        """Rows of ``table`` in the source lineage, sorted; [] when none contribute."""
        if table not in self.source:
            return []
        if table not in self._cache:
            self._cache[table] = collect_rows(self.source[table])
        return self._cache[table]

    def source_ids(self, table: str) -> set[tuple[Any, ...]]:
        """Stable ids (key values) of ``table``'s rows in the source lineage."""
        key = self.keys.get(table)
        if not key:
            raise KeyError(f"no key known for table {table!r}")
        return {tuple(r[k] for k in key) for r in self.source_rows(table)}

    def reasoning_rows(self, udf: str | None = None) -> list[dict[str, Any]]:
        """⟨E, Value, Reason⟩ rows, each tagged with its UDF and segment."""
        out = []
        for entry in self.reasoning:
            if udf is not None and entry.udf != udf:
                continue
            for r in collect_rows(entry.rows):
                out.append(
                    {
                        "udf": entry.udf,
                        "segment": entry.segment,
                        "inputs": {k: r[k] for k in entry.inputs},
                        "value": r[entry.value],
                        "reason": r[entry.reason],
                    }
                )
        return out

    def to_shap(self, udf: str) -> Any:
        """The calls of ``udf`` (a SHAP or LIME UDF) as one ``shap.Explanation``."""
        from tracing.present.explanations import to_shap

        return to_shap(self.reasoning_rows(udf))

    def calls(self, entry: ReasoningRows) -> list[dict[str, Any]]:
        """The ⟨E, Value, Reason⟩ rows of one function operator (a UDF may sit in two segments)."""
        return [r for r in self.reasoning_rows(entry.udf) if r["segment"] == entry.segment]

    def counts(self) -> dict[str, int]:
        """Rows per source table and calls per UDF, without turning rows into Python objects
        (a lineage set can hold millions of rows)."""
        found = {t: _count(rows) for t, rows in sorted(self.source.items())}
        for entry in self.reasoning:
            key = f"{entry.udf} calls"
            found[key] = found.get(key, 0) + _count(entry.rows)
        return found

    @property
    def seconds(self) -> float:
        return sum(q.seconds for q in self.queries)

    # --- presentation -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "targets": collect_rows(self.targets) if self.targets is not None else None,
            "source_lineage": {t: self.source_rows(t) for t in self.tables},
            "reasoning_lineage": self.reasoning_rows(),
            "tracing_queries": [q.__dict__ for q in self.queries],
            "engine": self.engine,
            "confidence": self.confidence.to_dict() if self.confidence is not None else None,
            "warnings": self.warnings,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def __str__(self) -> str:
        lines = [f"Warning: {w}" for w in self.warnings]
        if self.targets is not None:
            targets = collect_rows(self.targets)
            lines.append(f"Augmented lineage of {len(targets)} output row(s)")
            lines += [f"  {fmt_row(r)}" for r in targets[:SHOW_ROWS]]
            lines += _more(len(targets))
        if self.confidence is not None:
            lines.append(f"Confidence: {self.confidence}")
        lines.append("Source lineage" + (f" ({self.scope})" if self.scope else ""))
        for table in self.tables:
            rows = self.source_rows(table)
            lines.append(f"  {table}: {len(rows)} row(s)")
            lines += [f"    {fmt_row(r)}" for r in rows[:SHOW_ROWS]]
            lines += _more(len(rows), "    ")
        lines.append("Reasoning lineage")
        if not self.reasoning:
            lines.append("  (no function operator ran in reasoning mode on the way)")
        for entry in self.reasoning:
            rows = self.calls(entry)
            lines.append(f"  {entry.udf} (segment {entry.segment}): {len(rows)} call(s)")
            for r in rows[:SHOW_ROWS]:
                call = f"{fmt_row(r['inputs'])} -> {entry.value}={shown(r['value'])}"
                lines.append(f"    {call}  reason={_plain(r['reason'])}")
            lines += _more(len(rows), "    ")
        ran = f", {self.engine}" if self.engine else ""
        lines.append(f"Tracing queries ({self.seconds:.2f} s{ran})")
        for q in self.queries:
            outs = ", ".join(f"{k}: {'all' if v is None else v}" for k, v in q.rows_out.items())
            rows_in = "all" if q.rows_in is None else q.rows_in
            lines.append(
                f"  segment {q.segment} [{q.kind}] {q.pattern}: {q.seconds:.3f} s, "
                f"rows in {rows_in}, out {outs}"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from tracing.present.html import fragment, lineage_html  # it imports this module

        return fragment(lineage_html(self))

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}: {len(self.source_rows(t))}" for t in self.tables)
        return f"<AugmentedLineage source=({counts}) reasoning={len(self.reasoning_rows())} calls>"


def _plain(value: Any) -> Any:
    """Python values as Spark's collect gives them, whichever engine read the row."""
    if isinstance(value, Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone().replace(tzinfo=None)  # Spark gives local, naive timestamps
    return value


def _count(rows: Rows) -> int:
    return rows.num_rows if isinstance(rows, pa.Table) else rows.count()


def collect_rows(rows: Rows) -> list[dict[str, Any]]:
    """All rows as plain dicts, sorted (a stable order for reports and comparisons)."""
    found = rows.to_pylist() if isinstance(rows, pa.Table) else [r.asDict() for r in rows.collect()]
    dicts = [{k: _plain(v) for k, v in r.items()} for r in found]
    return sorted(dicts, key=lambda d: json.dumps(d, sort_keys=True, default=str))


def fmt_row(row: dict[str, Any]) -> str:
    """``k=v, …`` as a person reads it: text quoted, numbers, decimals and dates as written."""
    return ", ".join(f"{k}={shown(_plain(v))}" for k, v in row.items())


def shown(value: Any) -> str:
    """A value as people write it, not as Python's repr (``199314.5778``, not
    ``Decimal('199314.5778')``; ``1995-03-13``, not ``datetime.date(1995, 3, 13)``)."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if value is None:
        return "NULL"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return repr(value)


def _more(n: int, pad: str = "  ") -> list[str]:
    return [f"{pad}... {n - SHOW_ROWS} more"] if n > SHOW_ROWS else []
