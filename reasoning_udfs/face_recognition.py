"""Who is in this LFW photo? The expensive side of the paper's LFW experiment.

Value: the best-matching of the 10 gallery people, formatted like ``name_from_path`` ("George W
Bush") so the two UDFs can be compared; it is closed-set, so every image gets a name. Reason:
the face box used (pixels), the cosine similarity to that person's gallery mean (4 decimals),
and whether the box came from the face detector or is the central fallback region. Method,
protocol and accuracy: ``models.face_gallery`` and docs/models.md.
"""

from __future__ import annotations

from typing import Any

from models.face_gallery import load_gallery, read_rgb
from reasoning_udfs.name_from_path import lfw_name
from reasoning_udfs.udf import ReasoningUDF


class FaceRecognition(ReasoningUDF):
    name = "face_recognition"
    value_type = "string"
    reason_type = (
        "struct<box: struct<x1: double, y1: double, x2: double, y2: double>, "
        "similarity: double, detected: boolean>"
    )

    def main(self, image_path: str | None) -> str | None:
        return self.main_with_reason(image_path)[0]

    def main_with_reason(self, image_path: str | None) -> tuple[str | None, dict[str, Any] | None]:
        if image_path is None:
            return None, None
        match = load_gallery().identify(read_rgb(image_path))
        x1, y1, x2, y2 = match.box
        reason = {
            "box": {"x1": x1, "y1": y1, "x2": x2, "y2": y2},
            "similarity": round(match.similarity, 4),  # stable across BLAS thread counts
            "detected": match.detected,
        }
        return lfw_name(match.name), reason


face_recognition = FaceRecognition()
