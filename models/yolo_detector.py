"""Person detection with the shared Ultralytics YOLOv8n weights, loaded once per process.

Spark runs UDFs in long-lived Python worker processes that import this module, so the model
cache below gives one model load per worker rather than one per task or batch. Inference runs
on chunks of images: an Arrow batch can hold 10,000 rows, far more than fit in memory decoded.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from models.paths import YOLO_WEIGHTS, UntrustedWeightsError, model_file, sha256

if TYPE_CHECKING:
    from ultralytics import YOLO

WEIGHTS = YOLO_WEIGHTS
HOW_TO_GET = (
    "it is YOLOv8n rebuilt from the official int8 TFLite export (see shared/MANIFEST.md section 1); "
    "with network access the standard Ultralytics weights work too: run YOLO('yolov8n.pt') once "
    "(it downloads yolov8n.pt) and copy that file to this path"
)
PERSON = 0  # COCO class id


@dataclass(frozen=True, slots=True)
class PersonDetections:
    """Person boxes found in one image: pixel ``(x1, y1, x2, y2)`` and their confidences."""

    boxes: list[tuple[float, float, float, float]]
    confidences: list[float]
    width: int
    height: int


def weights_path() -> Path:
    """The weights file (checked on every call, so a moved AL_MODELS_DIR is noticed)."""
    return model_file(WEIGHTS, HOW_TO_GET)


def load_model() -> YOLO:
    """The YOLO model for the current weights path, loaded at most once per process."""
    return _load(weights_path())


# sha256 of the weights files loading may unpickle: the shared rebuilt YOLOv8n (MANIFEST.md 1)
TRUSTED_WEIGHTS = frozenset({"fb2c96d204485a4f8cfa430a90b525cf20c7d9b620c6928234afcde027e7d716"})


def check_trusted(path: Path) -> str:
    """The sha256 of ``path`` if it is a known weights file (or one ``AL_TRUSTED_WEIGHTS``
    names, comma-separated), else a one-line error: Ultralytics loads a ``.pt`` with
    ``torch.load(weights_only=False)``, which unpickles, so a replaced file could run code."""
    digest = sha256(path, fresh=True)  # read now: the file may have changed since
    extra = {d.strip() for d in os.environ.get("AL_TRUSTED_WEIGHTS", "").split(",") if d.strip()}
    if digest not in TRUSTED_WEIGHTS | extra:
        raise UntrustedWeightsError(
            f"{path} has sha256 {digest}, not the known YOLOv8n weights: refusing to load it (loading "
            "unpickles, which can run code); restore the file, or add its sha256 to AL_TRUSTED_WEIGHTS"
        )
    return digest


@cache
def _load(path: Path) -> YOLO:
    check_trusted(path)
    from ultralytics import YOLO  # deferred: importing ultralytics/torch takes seconds

    return YOLO(str(path), task="detect")


def detect_in_images(images: Sequence[np.ndarray], conf: float = 0.25) -> list[PersonDetections]:
    """Person detections for BGR images, run as one batch (the caller keeps it small)."""
    if not images:
        return []
    # rect=False letterboxes every image to the same square whatever else is in the batch, and
    # rounding absorbs batch-size-dependent float noise: a row's reason must not depend on
    # which rows it was batched with, or lineage recomputed under Rerun would differ from FM's
    results = load_model().predict(list(images), verbose=False, conf=conf, classes=[PERSON], rect=False)
    out = []
    for result in results:
        height, width = result.orig_shape
        boxes = [tuple(round(float(v), 1) for v in box) for box in result.boxes.xyxy.tolist()]
        confidences = [round(float(c), 3) for c in result.boxes.conf.tolist()]
        out.append(PersonDetections(boxes, confidences, width, height))
    return out
