"""Model reasons that point into arrays, as cell-level lineage compressed with ProvRC.

A person box is a pixel region of its image, the words an attribution credits are token
positions of a review, the decisive attributes of a SHAP/LIME explanation are feature cells of
the model's input row. Each becomes a box of input cells ``(subject ordinal, ...)`` tied to an
output row ordinal; the union of those boxes is the lineage relation. Its backward and forward
ProvRC tables are built from the boxes themselves with ProvRC's range merge, never from
explicit cells: a 300x400-pixel box is one table row, not 120,000.

Rules (what counts as "supporting" the output):

- image: every pixel a box overlaps (pixel (y, x) is the square [x, x+1) x [y, y+1)),
  clipped to the image; ``boxes`` (person_detection) or ``box`` (face_recognition, when detected);
- text: the words that push toward the predicted label: ``tokens`` with attribution > 0
  (text_sentiment signs attributions toward its value), or the ``positive``/``negative``
  word list named by the value (keyword_sentiment). The reason names words, not positions, so
  every occurrence of such a word among the text's ``\\w+`` words is a cell;
- tabular: the decisive attributes: ``attributes`` (credit_exam: those pushing toward the
  predicted class; credit_rules: the rule's), else ``attributions`` with attribution > 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from materialization.provrc.parquet import read, write
from materialization.provrc.query import Boxes, backward, forward
from materialization.provrc.ranges import merge_boxes
from materialization.provrc.relation import Shape
from materialization.provrc.table import ABSOLUTE, Table

IMAGE, TEXT, TABULAR = "image", "text", "tabular"
KINDS = (IMAGE, TEXT, TABULAR)
WORD = re.compile(r"\w+")
Reason = Mapping[str, Any]


def kind_of(reason: Reason) -> str | None:
    """Which array a reason points into, from its shape (as the report draws it); None: none."""
    if "boxes" in reason or "box" in reason:
        return IMAGE
    if "tokens" in reason or ("positive" in reason and "negative" in reason):
        return TEXT
    if "attributes" in reason or "attributions" in reason:
        return TABULAR
    return None


def pixel_box(box: Mapping[str, float], width: int, height: int) -> tuple[int, int, int, int] | None:
    """Inclusive pixel ranges (y0, y1, x0, x1) of the pixels ``box`` (x1, y1, x2, y2) overlaps,
    clipped to a ``width`` x ``height`` image; None when no pixel is left."""
    x0, x1 = max(0, math.floor(box["x1"])), min(width - 1, math.ceil(box["x2"]) - 1)
    y0, y1 = max(0, math.floor(box["y1"])), min(height - 1, math.ceil(box["y2"]) - 1)
    return None if x0 > x1 or y0 > y1 else (y0, y1, x0, x1)


def image_boxes(reason: Reason, width: int, height: int) -> list[tuple[int, int, int, int]]:
    """The pixel boxes of a person or face reason."""
    if "boxes" in reason:
        boxes = list(reason["boxes"] or [])
    else:
        boxes = [reason["box"]] if reason.get("box") and reason.get("detected", True) else []
    found = (pixel_box(b, width, height) for b in boxes)
    return [b for b in found if b is not None]


def words(text: str) -> list[str]:
    """The text's words, by position: the token axis of a review."""
    return WORD.findall(text)


def supporting_words(value: Any, reason: Reason) -> set[str]:
    """Lower-cased words that push toward ``value`` (see the module's rules)."""
    if "tokens" in reason:
        return {t["token"].lower() for t in reason["tokens"] or [] if t["attribution"] > 0}
    named = "positive" if str(value).lower() == "positive" else "negative"
    return {w.lower() for w in reason.get(named) or []}


def token_positions(text: str, value: Any, reason: Reason) -> list[int]:
    """Positions (in :func:`words`) of every occurrence of a supporting word."""
    support = supporting_words(value, reason)
    return [i for i, w in enumerate(words(text)) if w.lower() in support]


def decisive_features(reason: Reason) -> list[str]:
    """Names of the attributes that drove a tabular decision."""
    if reason.get("attributes") is not None:
        return list(reason["attributes"])
    return [a["attribute"] for a in reason.get("attributions") or [] if a["attribution"] > 0]


@dataclass(frozen=True, eq=False)
class RegionRelation:
    """Output row ordinals -> boxes of input cells ``(subject, ...)``, as ProvRC tables both ways."""

    backward: Table
    forward: Table

    @classmethod
    def build(cls, out: Sequence[int] | np.ndarray, lo: np.ndarray, hi: np.ndarray, n_outputs: int,
              in_shape: Shape) -> RegionRelation:
        """``out[i]`` depends on every cell of the inclusive box ``[lo[i], hi[i]]``."""
        out = np.asarray(out, dtype=np.int64).reshape(-1, 1)
        lo = np.asarray(lo, dtype=np.int64).reshape(len(out), len(in_shape))
        hi = np.asarray(hi, dtype=np.int64).reshape(len(out), len(in_shape))
        if len(out) and ((lo < 0).any() or (hi < lo).any() or (hi >= np.asarray(in_shape)).any()):
            raise ValueError(f"region boxes must lie inside the input shape {tuple(in_shape)}")
        if len(out) and (out.min() < 0 or out.max() >= n_outputs):
            raise ValueError(f"output ordinals must lie in [0, {n_outputs - 1}]")
        out_shape = (max(n_outputs, 1),)
        return cls(
            _table("backward", out, out, lo, hi, out_shape, tuple(in_shape)),
            _table("forward", lo, hi, out, out, tuple(in_shape), out_shape),
        )

    @property
    def in_shape(self) -> Shape:
        return self.backward.val_shape

    def regions(self, outputs: Sequence[int] | np.ndarray) -> Boxes:
        """The input cells the output rows ``outputs`` depend on, as merged boxes (in situ)."""
        cells = np.asarray(outputs, dtype=np.int64).reshape(-1, 1)
        if not len(cells):
            return _empty(len(self.in_shape))
        return backward([self.backward], cells)

    def outputs(self, lo: Sequence[Sequence[int]] | np.ndarray, hi: Sequence[Sequence[int]] | np.ndarray,
                ) -> np.ndarray:
        """Ordinals of the output rows that depend on some cell of the inclusive boxes [lo, hi]
        (one box per row of ``lo``/``hi``), sorted."""
        ndim = len(self.in_shape)
        lo, hi = (np.asarray(x, dtype=np.int64).reshape(-1, ndim) for x in (lo, hi))
        if not len(lo):
            return np.empty(0, np.int64)
        return forward([self.forward], Boxes(lo, hi), rows=True).reshape(-1)

    def save(self, folder: str | Path, compression: str = "zstd") -> int:
        """Writes both tables (ProvRC Parquet) into ``folder``; returns their bytes."""
        Path(folder).mkdir(parents=True, exist_ok=True)
        return sum(write(t, Path(folder) / f"{t.orientation}.parquet", compression)
                   for t in (self.backward, self.forward))

    @classmethod
    def load(cls, folder: str | Path) -> RegionRelation:
        return cls(read(Path(folder) / "backward.parquet"), read(Path(folder) / "forward.parquet"))


def _table(orientation: str, key_lo: np.ndarray, key_hi: np.ndarray, val_lo: np.ndarray,
           val_hi: np.ndarray, key_shape: Shape, val_shape: Shape) -> Table:
    """ProvRC's range encoding over boxes: rows equal but for one touching attribute merge until
    nothing does (exact unions). Values stay absolute: an output ordinal and a pixel coordinate
    have no offset to share, so the relative transformation finds nothing here."""
    lo, hi, _ = merge_boxes(np.hstack([key_lo, val_lo]), np.hstack([key_hi, val_hi]))
    a = key_lo.shape[1]
    ref = np.full((len(lo), val_lo.shape[1]), ABSOLUTE, dtype=np.int8)
    return Table(orientation, lo[:, :a], hi[:, :a], lo[:, a:], hi[:, a:], ref, key_shape, val_shape)


def _empty(ndim: int) -> Boxes:
    return Boxes(np.empty((0, ndim), np.int64), np.empty((0, ndim), np.int64))
