"""Does an image show a person? YOLOv8n (COCO class 0) on the image at a path.

Value: true when any person box has confidence >= ``THRESHOLD``. Reason: those boxes (pixel
coordinates, with confidences) and the image size, so a user can see what the model saw and
where. Paths are absolute or relative to AL_DATA_DIR (see ``models.yolo_detector``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from models.images import read_image
from models.yolo_detector import PersonDetections, detect_in_images
from reasoning_udfs.udf import ReasoningUDF

THRESHOLD = 0.25  # Ultralytics' default; 98.4 % image-level accuracy on COCO val2017-128
BATCH = 16  # images decoded and run at once; bounds memory for 10,000-row Arrow batches
Reason = dict[str, Any]


class PersonDetection(ReasoningUDF):
    name = "person_detection"
    value_type = "boolean"
    reason_type = (
        "struct<boxes: array<struct<x1: double, y1: double, x2: double, y2: double, confidence: double>>, "
        "width: int, height: int>"
    )

    def main(self, image_path: str | None) -> bool | None:
        return self.main_batch([(image_path,)])[0]

    def main_with_reason(self, image_path: str | None) -> tuple[bool | None, Reason | None]:
        return self.main_with_reason_batch([(image_path,)])[0]

    def probability(self, value: bool, reason: Reason | None) -> float | None:
        """A person is there with the best box's confidence; for "no person" the detector
        gives no finer figure than that no box reached ``THRESHOLD``: 1 − THRESHOLD."""
        if reason is None:
            return None
        if value:
            return max(b["confidence"] for b in reason["boxes"])
        return 1.0 - THRESHOLD

    def main_batch(self, rows: Sequence[tuple]) -> list[bool | None]:
        return [None if d is None else bool(d.boxes) for d in self._detect(rows)]

    def main_with_reason_batch(self, rows: Sequence[tuple]) -> list[tuple[bool | None, Reason | None]]:
        return [(None, None) if d is None else (bool(d.boxes), _reason(d)) for d in self._detect(rows)]

    def _detect(self, rows: Sequence[tuple]) -> list[PersonDetections | None]:
        """Detections per row (None for a null path); an unreadable image fails naming its row."""
        present = [i for i, row in enumerate(rows) if row[0] is not None]
        found: list[PersonDetections | None] = [None] * len(rows)
        for start in range(0, len(present), BATCH):
            chunk = present[start : start + BATCH]
            images = [self._call_row(read_image, rows[i]) for i in chunk]
            for i, detections in zip(chunk, detect_in_images(images, THRESHOLD)):
                found[i] = detections
        return found


def _reason(d: PersonDetections) -> Reason:
    boxes = [
        {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "confidence": c}
        for (x1, y1, x2, y2), c in zip(d.boxes, d.confidences)
    ]
    return {"boxes": boxes, "width": d.width, "height": d.height}


person_detection = PersonDetection()
