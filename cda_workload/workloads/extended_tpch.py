"""The CDA workload's database (section 7.2.1): TPC-H with a photo per part and a real review
per line item.

``part`` gains ``p_image``, a path (relative to ``AL_DATA_DIR``) drawn from the COCO photo
pool, with and without people; ``lineitem.l_comment`` is replaced by a review text drawn from
real Amazon review pools. Both draws are seeded, so a (scale factor, seed) pair always gives
the same database; rows keep their TPC-H primary keys as stable ids.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cda_workload.workloads.tpch import generate
from models.paths import data_dir, data_file

IMAGE_POOL = "coco_sample/images"
REVIEW_POOLS = (
    "reviews/uci_sentiment_labelled_sentences/amazon_cells_labelled.txt",
    "reviews/amazon_alexa.tsv",
)
_HOW = "it is part of the project's shared data set (see ../shared/MANIFEST.md)"
_STAMP = "_extended.json"


def image_pool() -> list[str]:
    """COCO photo paths relative to the data directory, sorted (so draws are reproducible)."""
    root = data_file(IMAGE_POOL, _HOW)
    paths = sorted(str(p.relative_to(data_dir())) for p in root.rglob("*.jpg"))
    if not paths:
        raise FileNotFoundError(f"no .jpg files under {root}")
    return paths


def review_pool() -> list[str]:
    """Non-blank Amazon review texts (UCI product sentences and Amazon Alexa reviews)."""
    uci, alexa = (data_file(p, _HOW) for p in REVIEW_POOLS)
    texts = [line.rsplit("\t", 1)[0].strip() for line in uci.read_text(encoding="utf-8").splitlines()]
    with alexa.open(encoding="utf-8-sig", newline="") as fh:
        texts += [row["verified_reviews"].strip() for row in csv.DictReader(fh, delimiter="\t")]
    return [t for t in texts if t]


def extend(tpch_dir: Path, seed: int) -> None:
    """Set ``p_image`` on part and swap ``l_comment`` for reviews, in place (each step is
    idempotent with its own seeded stream, so an interrupted extension is simply redone)."""
    stamp = tpch_dir / _STAMP
    if stamp.exists():
        recorded = json.loads(stamp.read_text())
        if recorded["seed"] != seed:
            raise ValueError(f"{tpch_dir} was extended with seed {recorded['seed']}, not {seed}")
        return
    images, reviews = image_pool(), review_pool()
    _set_drawn(tpch_dir / "part.parquet", "p_image", images, np.random.default_rng([seed, 1]))
    _set_drawn(tpch_dir / "lineitem.parquet", "l_comment", reviews, np.random.default_rng([seed, 2]))
    stamp.write_text(json.dumps({"seed": seed, "images": len(images), "reviews": len(reviews)}))


def _set_drawn(path: Path, column: str, pool: list[str], rng: np.random.Generator) -> None:
    """Replace (or add) ``column`` with values drawn uniformly from ``pool``; atomic rewrite."""
    table = pq.read_table(path)
    values = pa.array(np.asarray(pool, dtype=object)[rng.integers(0, len(pool), table.num_rows)], pa.string())
    at = table.schema.get_field_index(column)
    table = table.set_column(at, column, values) if at >= 0 else table.append_column(column, values)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def generate_extended(scale_factor: float, out_dir: str | Path, seed: int = 0) -> Path:
    """The extended TPC-H database at ``scale_factor`` under ``out_dir`` (reused when there)."""
    out = generate(scale_factor, out_dir)
    extend(out, seed)
    return out
