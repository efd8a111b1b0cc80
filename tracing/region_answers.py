"""Answers of region lineage: which regions of which images (spans of which reviews, features of
which model inputs) support some output rows, and which output rows depend on a region.

Regions are given as people think of them, not as cells: image boxes as half-open pixel
rectangles ``x1 <= x < x2``, ``y1 <= y < y2`` (the person boxes' convention, in whole pixels),
token spans as half-open word positions ``start <= i < stop`` with their words, features by
name. ``cells`` is there only when the question asked for cells.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from materialization.provrc.regions import IMAGE, TABULAR, TEXT
from tracing import views
from tracing.lineage import SHOW_ROWS, fmt_row


@dataclass(frozen=True)
class SubjectRegions:
    """The regions of one image / review / model input."""

    subject: Any  # image path, review text, or the model's inputs
    regions: list[dict[str, Any]]
    cells: int  # distinct cells the regions cover
    cell_list: list[tuple[int, ...]] | None = None  # only when asked for

    def to_dict(self) -> dict[str, Any]:
        found = {"subject": self.subject, "regions": self.regions, "cells": self.cells}
        return found if self.cell_list is None else {**found, "cell_list": self.cell_list}


@dataclass(frozen=True)
class RegionAnswer:
    """Backward: the regions the output rows ``outputs`` rest on, per subject."""

    udf: str
    kind: str
    outputs: list[dict[str, Any]]
    subjects: list[SubjectRegions]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"udf": self.udf, "kind": self.kind, "outputs": self.outputs,
                "subjects": [s.to_dict() for s in self.subjects], "seconds": self.seconds}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    def __str__(self) -> str:
        lines = [f"Regions of {len(self.outputs)} output row(s) through {self.udf} ({self.kind}, "
                 f"{self.seconds * 1000:.1f} ms)"]
        lines += [f"  {fmt_row(r)}" for r in self.outputs[:SHOW_ROWS]]
        for s in self.subjects:
            lines.append(f"  {short_text(s.subject)}: {len(s.regions)} region(s), {s.cells} cell(s)")
            lines += [f"    {_region_text(self.kind, r)}" for r in s.regions[:SHOW_ROWS]]
        if not self.subjects:
            lines.append("  (no region supports these rows)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return views.html(self)


@dataclass(frozen=True)
class RegionForward:
    """Forward: the output rows that depend on a region of one subject."""

    udf: str
    kind: str
    subject: Any
    region: dict[str, Any]
    outputs: list[dict[str, Any]]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"udf": self.udf, "kind": self.kind, "subject": self.subject, "region": self.region,
                "outputs": self.outputs, "seconds": self.seconds}

    def __len__(self) -> int:
        return len(self.outputs)

    def __str__(self) -> str:
        lines = [f"{len(self.outputs)} output row(s) depend on {_region_text(self.kind, self.region)} of "
                 f"{short_text(self.subject)} ({self.seconds * 1000:.1f} ms)"]
        lines += [f"  {fmt_row(r)}" for r in self.outputs[:SHOW_ROWS]]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return views.html(self)


def _region_text(kind: str, r: dict[str, Any]) -> str:
    if kind == IMAGE:
        return f"box x {r['x1']}..{r['x2']} y {r['y1']}..{r['y2']} (half-open)"
    if kind == TEXT:
        return f"words [{r['start']}, {r['stop']}): {r['words']!r}"
    if kind == TABULAR:
        return f"features {', '.join(r['features'])}"
    return repr(r)


def short_text(subject: Any, width: int = 60) -> str:
    """A subject (image path, review, model inputs) in at most ``width`` characters."""
    if isinstance(subject, dict):
        subject = fmt_row(subject)
    text = subject if isinstance(subject, str) else repr(subject)
    return text if len(text) <= width else text[: width - 1] + "…"
