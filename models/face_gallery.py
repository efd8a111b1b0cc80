"""Closed-set face identification on the shared LFW sample, built only from what runs offline.

No pretrained face-recognition network can be had offline here (shared/MANIFEST.md), so this
is a classical pipeline, chosen by measurement (docs/models.md, "face_recognition"):

1. detect: scikit-image's LBP frontal-face cascade (the OpenCV LBP model shipped in the
   scikit-image wheel); of several hits, the one nearest the image centre, since LFW centres the
   named person. No hit: the central region where LFW faces sit, flagged ``detected=False``.
2. embed: HOG of the grey face crop (64x64) and of its mirror image, projected by a PCA
   whitening fitted on the gallery; the two projections are summed (robust to head turn).
   Gallery faces also enter with the box slightly shifted and scaled (``JITTER``), so a
   query whose detector box is a little off still lands near its person.
3. match: cosine similarity to each person's mean gallery embedding; the best one wins.

Protocol: the gallery is images ``_0001``..``_0005`` of each of the 10 people; their other 5
images (``_0006``..``_0010``; Jacques Chirac's are 7-9, 19, 20) are never seen when building it
and give the held-out accuracy. The settings below were chosen by leave-one-out accuracy
inside the gallery alone (``python -m models.face_gallery --evaluate`` prints both figures).
The gallery and detector are built once per process (a few seconds), so Spark workers pay it
once.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from models.images import read_image
from models.paths import data_file

LFW_DIR = "lfw_sample"
HOW_TO_GET = (
    "it holds 100 LFW photos, <Name>/<Name>_000N.jpg for 10 people x 10 "
    "(shared/MANIFEST.md section 5: images/ of GitHub krasserm/face-recognition)"
)
GALLERY_NUMBERS = range(1, 6)  # _0001.._0005 build the gallery; each person's other 5 are held out
CROP_SIZE = 64
HOG_CELL = 8
PCA_COMPONENTS = 120
# Gallery box variants (dx, dy, grow) as fractions of the box width; the first is the box itself.
JITTER = (
    (0, 0, 0),
    (-0.035, 0, 0),
    (0.035, 0, 0),
    (0, -0.035, 0),
    (0, 0.035, 0),
    (0, 0, -0.06),
    (0, 0, 0.06),
)
# LFW photos are 250x250 with the face at about [70, 70, 180, 180]; used when the cascade misses.
_CENTRE = (0.28, 0.28, 0.72, 0.72)

Box = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True)
class FaceMatch:
    """The best gallery identity (LFW folder name) for one image, where its face was, and how
    alike they are (cosine similarity to that person's mean gallery embedding)."""

    name: str
    box: Box
    similarity: float
    detected: bool


@cache
def _cascade() -> Any:
    from skimage import data, feature

    return feature.Cascade(data.lbp_frontal_face_cascade_filename())


def find_face(rgb: np.ndarray) -> tuple[Box, bool]:
    """The face box (x1, y1, x2, y2) and whether the cascade found it (else the central region)."""
    from skimage import color  # here, not on import: a question on stored answers needs no skimage

    height, width = rgb.shape[:2]
    side = min(height, width)
    hits = _cascade().detect_multi_scale(
        img=color.rgb2gray(rgb),
        scale_factor=1.1,
        step_ratio=1,
        min_size=(side // 5, side // 5),
        max_size=(side, side),
    )
    if not hits:
        x1, y1, x2, y2 = _CENTRE
        return (x1 * width, y1 * height, x2 * width, y2 * height), False

    def off_centre(h: dict[str, int]) -> float:
        return (h["c"] + h["width"] / 2 - width / 2) ** 2 + (h["r"] + h["height"] / 2 - height / 2) ** 2

    hit = min(hits, key=off_centre)
    x, y = float(hit["c"]), float(hit["r"])
    return (x, y, x + hit["width"], y + hit["height"]), True


def face_features(rgb: np.ndarray, box: Box) -> np.ndarray:
    """HOG of the face crop and of its mirror image, as two rows."""
    from skimage import color, feature, transform

    x1, y1, x2, y2 = box
    top, bottom = max(0, round(y1)), min(rgb.shape[0], round(y2))
    left, right = max(0, round(x1)), min(rgb.shape[1], round(x2))
    face = color.rgb2gray(rgb[top:bottom, left:right])
    grey = transform.resize(face, (CROP_SIZE, CROP_SIZE), anti_aliasing=True)

    def hog(image: np.ndarray) -> np.ndarray:
        cell = (HOG_CELL, HOG_CELL)
        return feature.hog(image, orientations=9, pixels_per_cell=cell, cells_per_block=(2, 2))

    return np.stack([hog(grey), hog(grey[:, ::-1])])


def gallery_features(rgb: np.ndarray) -> np.ndarray:
    """Feature rows of a gallery image: ``face_features`` for each ``JITTER`` variant of its box
    (the first two rows are the unshifted box, as a query would see it)."""
    (x1, y1, x2, y2), _ = find_face(rgb)
    width = x2 - x1
    variants = [
        (
            x1 + (dx - grow) * width,
            y1 + (dy - grow) * width,
            x2 + (dx + grow) * width,
            y2 + (dy + grow) * width,
        )
        for dx, dy, grow in JITTER
    ]
    return np.concatenate([face_features(rgb, box) for box in variants])


def read_rgb(path: str) -> np.ndarray:
    """An image as RGB; paths resolve like person_detection's (relative: under AL_DATA_DIR)."""
    return read_image(path)[:, :, ::-1]


@dataclass(frozen=True)
class Gallery:
    """PCA whitening fitted on the gallery features and one unit-length mean per person."""

    names: list[str]
    mean: np.ndarray
    projection: np.ndarray
    centroids: np.ndarray

    @classmethod
    def fit(cls, samples: Sequence[tuple[np.ndarray, str]]) -> Gallery:
        """From (``gallery_features`` rows, person) for each gallery image."""
        rows = np.concatenate([features for features, _ in samples])
        mean = rows.mean(axis=0)
        centred = rows - mean
        # PCA through the Gram matrix (far fewer rows than HOG dimensions); a whitened
        # coordinate is x . v / s with v = X^T u / s, hence the division by s^2 = eigenvalue.
        eigenvalues, vectors = np.linalg.eigh(centred @ centred.T)
        top = np.argsort(eigenvalues)[::-1][: min(PCA_COMPONENTS, len(rows) - 1)]
        projection = centred.T @ vectors[:, top] / eigenvalues[top]
        embedded = _unit((rows - mean) @ projection)
        row_names = np.concatenate([[name] * len(features) for features, name in samples])
        people = sorted({name for _, name in samples})
        centroids = _unit(np.stack([embedded[row_names == p].mean(axis=0) for p in people]))
        return cls(people, mean, projection, centroids)

    def best(self, features: np.ndarray) -> tuple[str, float]:
        """The nearest person to a face's ``face_features`` rows, and the cosine similarity."""
        similarities = self.centroids @ _unit(((features - self.mean) @ self.projection).sum(axis=0))
        best = int(similarities.argmax())
        return self.names[best], float(similarities[best])

    def identify(self, rgb: np.ndarray) -> FaceMatch:
        box, detected = find_face(rgb)
        name, similarity = self.best(face_features(rgb, box))
        return FaceMatch(name, box, similarity, detected)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def lfw_images() -> list[tuple[Path, str, int]]:
    """Every sample photo as (path, LFW identity = folder name, image number), in a stable order."""
    root = data_file(LFW_DIR, HOW_TO_GET)
    return [(p, p.parent.name, int(p.stem.rsplit("_", 1)[1])) for p in sorted(root.glob("*/*.jpg"))]


def _gallery_samples() -> list[tuple[np.ndarray, str]]:
    return [
        (gallery_features(read_rgb(str(path))), name)
        for path, name, number in lfw_images()
        if number in GALLERY_NUMBERS
    ]


@cache
def load_gallery() -> Gallery:
    """The gallery built from images _0001.._0005 of every person, once per process."""
    return Gallery.fit(_gallery_samples())


def evaluate() -> dict[str, float | int]:
    """Held-out, gallery and all-image accuracy, leave-one-out accuracy inside the gallery
    (the figure the settings were chosen by), detection count and time per image."""
    samples = _gallery_samples()
    loo = [
        Gallery.fit(samples[:i] + samples[i + 1 :]).best(features[:2])[0] == name
        for i, (features, name) in enumerate(samples)
    ]
    gallery = Gallery.fit(samples)
    correct: dict[str, list[bool]] = {"held_out": [], "gallery": []}
    detected = 0
    start = time.perf_counter()
    images = lfw_images()
    for path, name, number in images:
        match = gallery.identify(read_rgb(str(path)))
        correct["gallery" if number in GALLERY_NUMBERS else "held_out"].append(match.name == name)
        detected += match.detected
    elapsed = time.perf_counter() - start
    every = correct["held_out"] + correct["gallery"]
    return {
        "held_out_accuracy": float(np.mean(correct["held_out"])),
        "held_out_images": len(correct["held_out"]),
        "gallery_accuracy": float(np.mean(correct["gallery"])),
        "all_accuracy": float(np.mean(every)),
        "all_images": len(every),
        "gallery_leave_one_out_accuracy": float(np.mean(loo)),
        "faces_detected": detected,
        "ms_per_image": 1000.0 * elapsed / len(images),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluate", action="store_true", help="print accuracy and time per image")
    if parser.parse_args().evaluate:
        for key, value in evaluate().items():
            print(f"{key}: {value:.4g}" if isinstance(value, float) else f"{key}: {value}")
    else:
        parser.print_help()


if __name__ == "__main__":
    main()
