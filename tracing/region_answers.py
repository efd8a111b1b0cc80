"""Answers of region lineage: which regions of which images (spans of which reviews, features of
which model inputs) support some output rows, and which output rows depend on a region.

Regions are given as people think of them, not as cells: image boxes as half-open pixel
rectangles ``x1 <= x < x2``, ``y1 <= y < y2`` (the person boxes' convention, in whole pixels),
token spans as half-open word positions ``start <= i < stop`` with their words, features by
name. ``cells`` is there only when the question asked for cells.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html import escape
from typing import Any

from materialization.provrc.regions import IMAGE, TABULAR, TEXT
from tracing.lineage import SHOW_ROWS, fmt_row
from tracing.render_html import fragment, rows_table
from tracing.render_reasons import image_with_boxes

MARK = "rgba(26,127,55,0.45)"


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
            lines.append(f"  {_short(s.subject)}: {len(s.regions)} region(s), {s.cells} cell(s)")
            lines += [f"    {_region_text(self.kind, r)}" for r in s.regions[:SHOW_ROWS]]
        if not self.subjects:
            lines.append("  (no region supports these rows)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = f"<p>Regions through <b>{escape(self.udf)}</b> ({escape(self.kind)}) of:</p>"
        body = "".join(subject_html(self.kind, s.subject, s.regions) for s in self.subjects)
        return fragment(head + rows_table(self.outputs) + (body or "<p class='al-note'>(no region)</p>"))


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
                 f"{_short(self.subject)} ({self.seconds * 1000:.1f} ms)"]
        lines += [f"  {fmt_row(r)}" for r in self.outputs[:SHOW_ROWS]]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = f"<p>{len(self.outputs)} output row(s) depend on this region:</p>"
        drawn = subject_html(self.kind, self.subject, [self.region])
        return fragment(head + drawn + rows_table(self.outputs))


def subject_html(kind: str, subject: Any, regions: list[dict[str, Any]]) -> str:
    """One subject with its regions drawn: boxes on the image, spans marked in the text."""
    if kind == IMAGE:
        return image_with_boxes(subject, [{**r, "label": "region"} for r in regions])
    if kind == TEXT:
        return marked_words(subject, {i for r in regions for i in range(r["start"], r["stop"])})
    names = ", ".join(escape(n) for r in regions for n in r["features"])
    return f"<div class='al-call'>{escape(_short(subject))}: <b>{names}</b></div>"


def marked_words(text: str, positions: set[int]) -> str:
    """``text`` with the words at ``positions`` (indices among its ``\\w+`` words) marked."""
    out, index = [], 0
    for piece in re.split(r"(\w+)", text):
        if not re.fullmatch(r"\w+", piece):
            out.append(escape(piece))
            continue
        chosen = index in positions
        out.append(f"<mark style='background:{MARK}'>{escape(piece)}</mark>" if chosen else escape(piece))
        index += 1
    return f"<p class='al-text'>{''.join(out)}</p>"


def _region_text(kind: str, r: dict[str, Any]) -> str:
    if kind == IMAGE:
        return f"box x {r['x1']}..{r['x2']} y {r['y1']}..{r['y2']} (half-open)"
    if kind == TEXT:
        return f"words [{r['start']}, {r['stop']}): {r['words']!r}"
    if kind == TABULAR:
        return f"features {', '.join(r['features'])}"
    return repr(r)


def _short(subject: Any, width: int = 60) -> str:
    if isinstance(subject, dict):
        subject = fmt_row(subject)
    text = subject if isinstance(subject, str) else repr(subject)
    return text if len(text) <= width else text[: width - 1] + "…"
