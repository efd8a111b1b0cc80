"""Region answers as HTML: the regions drawn on their subjects (boxes on the images, spans
marked in the reviews, features named) beside the output rows they support."""

from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING, Any

from materialization.provrc.regions import IMAGE, TEXT
from tracing.present.html import fragment, rows_table
from tracing.present.reasons import image_with_boxes
from tracing.region_answers import short_text

if TYPE_CHECKING:
    from tracing.region_answers import RegionAnswer, RegionForward

MARK = "rgba(26,127,55,0.45)"


def region_answer_html(answer: RegionAnswer) -> str:
    head = f"<p>Regions through <b>{escape(answer.udf)}</b> ({escape(answer.kind)}) of:</p>"
    body = "".join(subject_html(answer.kind, s.subject, s.regions) for s in answer.subjects)
    return fragment(head + rows_table(answer.outputs) + (body or "<p class='al-note'>(no region)</p>"))


def region_forward_html(answer: RegionForward) -> str:
    head = f"<p>{len(answer.outputs)} output row(s) depend on this region:</p>"
    drawn = subject_html(answer.kind, answer.subject, [answer.region])
    return fragment(head + drawn + rows_table(answer.outputs))


def subject_html(kind: str, subject: Any, regions: list[dict[str, Any]]) -> str:
    """One subject with its regions drawn: boxes on the image, spans marked in the text."""
    if kind == IMAGE:
        return image_with_boxes(subject, [{**r, "label": "region"} for r in regions])
    if kind == TEXT:
        return marked_words(subject, {i for r in regions for i in range(r["start"], r["stop"])})
    names = ", ".join(escape(n) for r in regions for n in r["features"])
    return f"<div class='al-call'>{escape(short_text(subject))}: <b>{names}</b></div>"


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
