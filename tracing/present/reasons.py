"""One model call (⟨E, Value, Reason⟩) drawn for a person: the picture with the boxes the
model found, the text with the words that drove the label, the attributions as a bar chart.

The drawing is chosen by the reason's shape, not the UDF's name, so a new model whose reason
has boxes, token attributions or attribute attributions is drawn the same way; anything else
is a plain table. Images are embedded as data URIs: the HTML needs no files and no network.
"""

from __future__ import annotations

import base64
import io
import json
import re
from html import escape
from typing import Any

MAX_SIDE = 480  # pixels: enough to see the boxes, small enough for a report of many calls
POSITIVE, NEGATIVE = "#1a7f37", "#c62828"  # toward the value / against it
BOX = (230, 30, 30)


def render_call(inputs: dict[str, Any], value: Any, reason: Any) -> str:
    """HTML for one model call."""
    drawn = _drawing(inputs, reason)
    value_line = f"<div class='al-value'>value: <b>{escape(repr(value))}</b></div>"
    return f"<div class='al-call'>{value_line}{drawn}{_call_table(inputs, reason, not drawn)}</div>"


def _drawing(inputs: dict[str, Any], reason: Any) -> str:
    if not isinstance(reason, dict):
        return ""
    texts = [v for v in inputs.values() if isinstance(v, str)]
    if ("boxes" in reason or "box" in reason) and len(texts) == 1:
        return image_with_boxes(texts[0], _boxes(reason))
    parts = []
    if "tokens" in reason and texts:
        parts.append(highlighted_text(max(texts, key=len), reason["tokens"]))
    if "likelihood" in reason:
        parts.append(likelihood_bar(reason["likelihood"]))
    if "attributions" in reason:
        parts.append(attribution_chart(reason["attributions"]))
        if reason.get("base_value") is not None:
            parts.append(_adds_up(reason))
    return "".join(parts)


def _adds_up(reason: dict[str, Any]) -> str:
    """How the bars add up to what the explainer explains (SHAP: the value's probability)."""
    base, total = reason["base_value"], sum(a["attribution"] for a in reason["attributions"])
    return (
        f"<div class='al-note'>base value {base:.3f} {'+' if total >= 0 else '−'} attributions "
        f"{abs(total):.3f} = {base + total:.3f}, the explained probability of the value</div>"
    )


def _boxes(reason: dict[str, Any]) -> list[dict[str, Any]]:
    """Person boxes (with confidences) or the one face box (with its similarity)."""
    if "boxes" in reason:
        return [{**b, "label": f"person {b['confidence']:.2f}"} for b in reason["boxes"] or []]
    box = reason["box"]
    if not box or not reason.get("detected", True):
        return []
    score = reason.get("similarity")
    return [{**box, "label": "face" if score is None else f"face {score:.2f}"}]


def image_with_boxes(path: str, boxes: list[dict[str, Any]]) -> str:
    """The image at ``path`` (resolved as the UDFs resolve it) with labelled boxes, as an <img>."""
    from PIL import Image, ImageDraw, ImageFont, UnidentifiedImageError

    from models.images import resolve_image  # deferred: reports without images need no cv2

    resolved = resolve_image(path)
    try:
        image = Image.open(resolved).convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        why = f"image not shown ({type(exc).__name__}): {path}"
        return f"<div class='al-missing'>{escape(why)}</div>"
    scale = min(1.0, MAX_SIDE / max(image.size))
    image = image.resize((round(image.width * scale), round(image.height * scale)))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=14)
    for box in boxes:
        x1, y1, x2, y2 = (box[k] * scale for k in ("x1", "y1", "x2", "y2"))
        draw.rectangle((x1, y1, x2, y2), outline=BOX, width=3)
        label_at = (x1 + 3, max(0.0, y1 - 18))
        draw.text(label_at, box["label"], font=font, fill="white", stroke_width=2, stroke_fill=BOX)
    alt = f"{path}: {len(boxes)} box(es)"
    return f"<img class='al-image' alt='{escape(alt)}' src='{image_data_uri(image)}'>"


def image_data_uri(image: Any) -> str:
    """A PIL image as a JPEG data URI."""
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=85)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def highlighted_text(text: str, tokens: list[dict[str, Any]]) -> str:
    """``text`` with the attributed words marked: green pushed toward the value, red against,
    stronger colour for a larger |attribution|."""
    weights = {t["token"].lower(): t["attribution"] for t in tokens}
    top = max((abs(a) for a in weights.values()), default=0.0) or 1.0
    out = []
    for piece in re.split(r"(\w+)", text):
        weight = weights.get(piece.lower())
        if weight is None:
            out.append(escape(piece))
            continue
        rgb = "26,127,55" if weight > 0 else "198,40,40"
        alpha = 0.25 + 0.6 * abs(weight) / top
        title = f"attribution {weight:+.3f}"
        out.append(f"<mark style='background:rgba({rgb},{alpha:.2f})' title='{title}'>{escape(piece)}</mark>")
    key = (
        "<span class='al-note'>marked: <mark style='background:rgba(26,127,55,0.6)'>toward the value</mark> "
        "<mark style='background:rgba(198,40,40,0.6)'>against it</mark>, stronger for a larger attribution "
        "(hover a word for its number)</span>"
    )
    return f"<p class='al-text'>{''.join(out)}</p>{key}"


def likelihood_bar(likelihood: float, label: str = "likelihood") -> str:
    """A probability in [0, 1] as a filled bar."""
    percent = max(0.0, min(1.0, float(likelihood))) * 100
    return (
        f"<div class='al-bar' title='{label} {likelihood:.3f}'>"
        f"<div style='width:{percent:.1f}%'></div><span>{label} {likelihood:.3f}</span></div>"
    )


def attribution_chart(attributions: list[dict[str, Any]]) -> str:
    """Horizontal bars around a zero line, one per attribute (inline SVG)."""
    row_h, label_w, half = 24, 170, 150
    top = max((abs(a["attribution"]) for a in attributions), default=0.0) or 1.0
    height = row_h * len(attributions) + 8
    zero = label_w + half
    parts = [f"<line x1='{zero}' y1='0' x2='{zero}' y2='{height}' stroke='#555'/>"]
    for i, a in enumerate(attributions):
        y = 4 + i * row_h
        length = half * abs(a["attribution"]) / top
        x = zero if a["attribution"] >= 0 else zero - length
        colour = POSITIVE if a["attribution"] >= 0 else NEGATIVE
        label = f"{a['attribute']} = {_number(a.get('value'))}"
        parts.append(f"<text x='{label_w - 6}' y='{y + 15}' text-anchor='end'>{escape(label)}</text>")
        parts.append(
            f"<rect x='{x:.1f}' y='{y + 3}' width='{length:.1f}' height='{row_h - 8}' fill='{colour}'/>"
        )
        end = zero + half + 6
        parts.append(f"<text x='{end}' y='{y + 15}'>{a['attribution']:+.3f}</text>")
    width = label_w + 2 * half + 70
    return (
        f"<svg class='al-chart' role='img' width='{width}' height='{height}' font-size='12' "
        f"xmlns='http://www.w3.org/2000/svg'>{''.join(parts)}</svg>"
    )


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else escape(str(value))


def _call_table(inputs: dict[str, Any], reason: Any, open_reason: bool) -> str:
    """The call's inputs, those its reason names as decisive (``attributes``) marked, and the
    reason itself (folded when it is drawn above)."""
    decisive = set(reason.get("attributes") or ()) if isinstance(reason, dict) else set()
    marked = " class='al-decisive' title='decisive for the value'"
    cells = "".join(
        f"<tr{marked if k in decisive else ''}><th>{escape(k)}{' ★' if k in decisive else ''}</th>"
        f"<td>{escape(str(v))}</td></tr>"
        for k, v in inputs.items()
    )
    shown = json.dumps(reason, indent=1, default=str)
    details = f"<details{' open' if open_reason else ''}><summary>reason</summary><pre>{escape(shown)}</pre>"
    table = f"<table class='al-kv'>{cells}<tr><th>reason</th><td>{details}</details></td></tr></table>"
    return f"<div class='al-scroll'>{table}</div>"  # a long input scrolls, the page does not
