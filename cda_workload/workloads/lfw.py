"""The LFW workload of section 7.1: Image and Event tables and the query "how many times did
each celebrity appear on stage at large event places".

``image(i_id, i_img, i_eid)``: one photo per appearance; ``i_img`` is a path (relative to
``AL_DATA_DIR``) to an LFW photo whose folder names the person. ``event(e_id, e_place,
e_visitors)``: where and how large each event was. Everything but the photos is synthesized
from a seed and kept consistent (every image belongs to an existing event). The recognizer is
either ``face_recognition`` (expensive: a face model) or ``name_from_path`` (cheap: string
processing); both return the same names.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from models.paths import data_dir, data_file
from tracing.session import LineageSession

SIZES: dict[str, tuple[int, int]] = {"small": (200, 20), "medium": (1000, 100), "large": (5000, 500)}
RECOGNIZERS = ("face_recognition", "name_from_path")
LARGE_EVENT = 5000
PLACES = 30


def lfw_query(recognizer: str) -> str:
    if recognizer not in RECOGNIZERS:
        raise ValueError(f"recognizer must be one of {RECOGNIZERS}, not {recognizer!r}")
    return f"""
SELECT celebrity, count(*) AS appearances
FROM (SELECT {recognizer}(i_img) AS celebrity
      FROM image JOIN event ON i_eid = e_id
      WHERE e_visitors >= {LARGE_EVENT})
GROUP BY celebrity
ORDER BY appearances DESC, celebrity
"""


def photo_pool() -> list[str]:
    root = data_file("lfw_sample", "it is part of the project's shared data set (see ../shared/MANIFEST.md)")
    photos = sorted(str(p.relative_to(data_dir())) for p in root.rglob("*.jpg"))
    if not photos:
        raise FileNotFoundError(f"no .jpg photos under {root}")
    return photos


def generate_lfw(size: str, out_dir: str | Path, seed: int = 0) -> Path:
    """``image.parquet`` and ``event.parquet`` for ``size`` (small/medium/large) under out_dir."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {list(SIZES)}, not {size!r}")
    out = Path(out_dir)
    if (out / "image.parquet").exists() and (out / "event.parquet").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    n_images, n_events = SIZES[size]
    rng = np.random.default_rng(seed)
    photos = np.asarray(photo_pool(), dtype=object)
    events = pa.table(
        {
            "e_id": pa.array(np.arange(1, n_events + 1), pa.int64()),
            "e_place": pa.array(rng.integers(1, PLACES + 1, n_events), pa.int64()),
            "e_visitors": pa.array(rng.integers(100, 20_000, n_events), pa.int64()),
        }
    )
    images = pa.table(
        {
            "i_id": pa.array(np.arange(1, n_images + 1), pa.int64()),
            "i_img": pa.array(photos[rng.integers(0, len(photos), n_images)], pa.string()),
            "i_eid": pa.array(rng.integers(1, n_events + 1, n_images), pa.int64()),
        }
    )
    pq.write_table(events, out / "event.parquet")
    pq.write_table(images, out / "image.parquet")
    return out


def register_lfw(als: LineageSession, data: Path) -> None:
    als.register_table("image", str(data.resolve() / "image.parquet"), key="i_id")
    als.register_table("event", str(data.resolve() / "event.parquet"), key="e_id")
