"""Reading the images model UDFs are given: paths as the workloads store them."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from models.paths import data_dir


def resolve_image(path: str) -> Path:
    """Absolute paths as they are; relative ones (as the workload stores them) under AL_DATA_DIR."""
    candidate = Path(path)
    return candidate if candidate.is_absolute() else data_dir() / candidate


def read_image(path: str) -> np.ndarray:
    """The image at ``path`` as an HxWx3 BGR uint8 array; raises naming the path if it cannot."""
    resolved = resolve_image(path)
    where = f"{resolved}" if str(resolved) == path else f"{resolved} (from {path!r}, under AL_DATA_DIR)"
    if not resolved.is_file():
        raise FileNotFoundError(f"image not found: {where}")
    image = cv2.imread(str(resolved), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError(f"image cannot be decoded: {where}")
    return image
