"""Region lineage benchmark: the person boxes YOLOv8n finds on real COCO photos, stored as
cell-level lineage (output row -> pixels of its image) explicitly and as ProvRC tables.

    python -m cda_workload.benchmarks.bench_regions --out docs/bench/regions [--images 32] [--repeat 5]

Workloads over the first ``--images`` photos of ``coco_sample/images/val2017`` (AL_DATA_DIR):
``per_image`` (output row i = photo i, as ``SELECT id, person_detection(path)``) and
``grouped`` (one output row per value, as ``GROUP BY person_detection(path)``: the person row
depends on every box). Per workload: explicit (output, pixel) rows, their int64 bytes and
Parquet-zstd bytes, the ProvRC tables' rows and bytes (backward + forward, zstd), the time to
build the tables from the boxes and to compress the explicit rows with ProvRC instead (same
relation: checked), and in-situ query latency (backward of one output row, forward of one box).
Times are medians of ``--repeat`` runs. Writes ``bench_regions.json`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cda_workload.benchmarks.bench_provrc import median_time
from materialization.provrc import compress
from materialization.provrc.parquet import write_relation
from materialization.provrc.regions import RegionRelation, image_boxes
from models import data_dir

FOLDER = "coco_sample/images/val2017"
WORKLOADS = ("per_image", "grouped")


def detect(n: int) -> list[tuple[str, dict[str, Any]]]:
    """(path, reason) of person_detection on the first ``n`` photos (the real model, no Spark)."""
    from reasoning_udfs.person_detection import person_detection

    paths = sorted(p.name for p in (data_dir() / FOLDER).glob("*.jpg"))[:n]
    rows = [(f"{FOLDER}/{p}",) for p in paths]
    found = person_detection.main_with_reason_batch(rows)
    return [(path, reason) for (path,), (_, reason) in zip(rows, found)]


def boxes(found: list[tuple[str, dict[str, Any]]], grouped: bool):
    """(out, lo, hi, outputs, in_shape) of the region relation."""
    out, lo, hi = [], [], []
    for s, (_, reason) in enumerate(found):
        for y0, y1, x0, x1 in image_boxes(reason, reason["width"], reason["height"]):
            out.append(0 if grouped else s)
            lo.append([s, y0, x0])
            hi.append([s, y1, x1])
    height = max(r["height"] for _, r in found)
    width = max(r["width"] for _, r in found)
    return out, np.array(lo).reshape(-1, 3), np.array(hi).reshape(-1, 3), 2 if grouped else len(found), (
        len(found), height, width)


def measure(found: list[tuple[str, dict[str, Any]]], grouped: bool, repeat: int) -> dict[str, Any]:
    out, lo, hi, n_out, in_shape = boxes(found, grouped)
    build_s, rel = median_time(lambda: RegionRelation.build(out, lo, hi, n_out, in_shape), repeat)
    explicit = rel.backward.decompress()
    with tempfile.TemporaryDirectory() as tmp:
        provrc_bytes = rel.save(tmp)
        parquet_zstd = write_relation(explicit, Path(tmp) / "explicit.parquet", "zstd")
    compress_s, tables = median_time(lambda: [compress(explicit, o) for o in ("backward", "forward")], repeat)
    for table in tables:  # ProvRC's own compression of the cells gives the same relation
        same = table.decompress()
        assert np.array_equal(same.out, explicit.out) and np.array_equal(same.inp, explicit.inp)
    first = out[0] if out else 0
    back_s, _ = median_time(lambda: rel.regions([first]), max(repeat, 20))
    fwd_s, _ = median_time(lambda: rel.outputs(lo[:1], hi[:1]), max(repeat, 20))
    return {
        "boxes": len(out),
        "explicit_rows": len(explicit),
        "raw_int64_bytes": explicit.raw_bytes,
        "parquet_zstd_bytes": parquet_zstd,
        "provrc_rows": {"backward": len(rel.backward), "forward": len(rel.forward)},
        "provrc_zstd_bytes": provrc_bytes,
        "provrc_rows_from_cells": {t.orientation: len(t) for t in tables},
        "build_from_boxes_s": build_s,
        "compress_explicit_s": compress_s,
        "backward_one_row_s": back_s,
        "forward_one_box_s": fwd_s,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/bench/regions")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    found = detect(args.images)
    detect_s = time.perf_counter() - started
    result = {
        "images": len(found),
        "images_with_person": sum(bool(r["boxes"]) for _, r in found),
        "detect_s": detect_s,
        "repeat": args.repeat,
        "machine": platform.platform(),
        "workloads": {name: measure(found, name == "grouped", args.repeat) for name in WORKLOADS},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_regions.json").write_text(json.dumps(result, indent=2))
    for name, w in result["workloads"].items():
        ratio = w["parquet_zstd_bytes"] / max(w["provrc_zstd_bytes"], 1)
        print(f"{name}: {w['boxes']} boxes, {w['explicit_rows']:,} explicit rows "
              f"({w['raw_int64_bytes']:,} B raw, {w['parquet_zstd_bytes']:,} B Parquet-zstd) -> ProvRC "
              f"{w['provrc_rows']} rows, {w['provrc_zstd_bytes']:,} B ({ratio:.0f}x less than Parquet-zstd); "
              f"build {w['build_from_boxes_s'] * 1000:.2f} ms from boxes vs {w['compress_explicit_s']:.2f} s "
              f"from cells; backward {w['backward_one_row_s'] * 1e3:.2f} ms, "
              f"forward {w['forward_one_box_s'] * 1e3:.2f} ms")
    return result


if __name__ == "__main__":
    main()
