"""ProvRC benchmark: storage of the paper's Table VII operations, in-situ query latency, compression time.

    python -m cda_workload.benchmarks.bench_provrc --out docs/bench/provrc \\
        [--scale 1] [--pipelines 4] [--repeat 3]

1. Storage: the lineage of the 12 operations of Table VII (DSLog paper), at >= 1e6 cells where
   the paper used them (``--scale`` multiplies cell counts), stored as raw int64 rows, Parquet
   (pyarrow default, snappy), Parquet-gzip, Parquet-zstd, and as the backward ProvRC table in
   the same Parquet container (snappy: "ProvRC"; gzip, zstd on top). Lime and DRISE are
   synthetic stand-ins (superpixel / saliency masks over a 416x416x3 image, no detector run):
   region lineage from real model reasons is not part of this benchmark.
2. Compression time per million lineage rows (ProvRC backward table from the captured rows,
   median of ``--repeat`` runs).
3. Query latency: forward queries from the first array of random 5- and 10-step numpy
   pipelines (100,000-cell input, like the paper) for selectivities from one cell to 10 % of it
   (a random contiguous run of cells): in situ over the ProvRC tables (answer as boxes, and
   expanded to rows), decompress-then-query (every table expanded, then row-wise semi-joins in
   numpy), and DuckDB joins over the raw lineage in Parquet. Medians of ``--repeat`` runs per
   query; all methods must return the same cells. The range-join index of each table (sorted
   low ends) is built once before timing and its build time recorded apart.

Writes ``bench_provrc.json`` (every figure) and ``bench_provrc.md`` (tables) under ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from materialization.provrc import Relation, compress, forward, write
from materialization.provrc.capture import capture
from materialization.provrc.parquet import write_relation
from materialization.provrc.pipelines import random_pipeline
from materialization.provrc.rowwise import flat_ids, semijoin_path
from materialization.provrc.table import Table

FORMATS = ("parquet", "parquet_gzip", "parquet_zstd", "provrc", "provrc_gzip", "provrc_zstd")
SELECTIVITIES = (0.0, 0.001, 0.01, 0.1)  # 0.0: one cell


def median_time(action: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _masked_image_lineage(mask: np.ndarray, outputs: int) -> Relation:
    """Every output cell (e.g. a detection box) depends on the pixels (all channels) in ``mask``."""
    pixels = np.flatnonzero(np.repeat(mask[:, :, None], 3, axis=2))
    out = np.repeat(np.arange(outputs), len(pixels))
    return Relation.from_flat(out, np.tile(pixels, outputs), (outputs,), (*mask.shape, 3))


def _lime_mask(rng: np.random.Generator, side: int) -> np.ndarray:
    """Superpixels as Voronoi cells of random seeds; a fifth of them deemed significant."""
    seeds = rng.integers(0, side, (150, 2))
    ys, xs = np.indices((side, side))
    nearest = np.argmin((ys[..., None] - seeds[:, 0]) ** 2 + (xs[..., None] - seeds[:, 1]) ** 2, axis=2)
    return np.isin(nearest, rng.choice(150, 30, replace=False))


def _drise_mask(rng: np.random.Generator, side: int) -> np.ndarray:
    """A saliency map of random Gaussian blobs, thresholded at its 90th percentile."""
    ys, xs = np.indices((side, side))
    saliency = np.zeros((side, side))
    for cy, cx, r in zip(rng.integers(0, side, 8), rng.integers(0, side, 8), rng.integers(10, 60, 8)):
        saliency += np.exp(-((ys - cy) ** 2 + (xs - cx) ** 2) / (2.0 * r * r))
    return saliency > np.quantile(saliency, 0.9)


def table7(scale: float, seed: int = 0) -> Iterator[tuple[str, str, list[Relation]]]:
    """(operation, kind, lineage relations) for the 12 operations of Table VII."""
    rng = np.random.default_rng(seed)
    side = int(1000 * scale**0.5)
    x, y = rng.random((side, side)), rng.random((side, side))

    def rels(name: str, *arrays: np.ndarray, **args: Any) -> list[Relation]:
        return capture(name, *arrays, **args)[1]

    yield "Negative", "structured", rels("negative", x)
    yield "Addition", "structured", rels("add", x, y)
    yield "Aggregate", "structured", rels("sum", x, axis=1)
    yield "Repetition", "structured", rels("tile", x, reps=(2, 2))
    yield "Matrix*Vector", "structured", rels("matmul", x, y[0])
    m = int(160 * scale ** (1 / 3))
    yield "Matrix*Matrix", "structured", rels("matmul", x[:m, :m], y[:m, :m])
    yield "Sort", "unstructured", rels("sort", x.ravel())
    img = rng.random((int(512 * scale**0.5),) * 2)
    yield "ImgFilter", "partial", rels("img_filter", img, threshold=0.5)
    yield "Lime", "partial", [_masked_image_lineage(_lime_mask(rng, 416), 4)]
    yield "DRISE", "partial", [_masked_image_lineage(_drise_mask(rng, 416), 4)]
    yield "Group By", "unstructured", rels("group_by", rng.integers(0, 1000, side * side))
    series = np.sort(rng.integers(0, side * side // 10, side * side))  # episodes, by parent title
    titles = rng.permutation(np.unique(series))
    yield "Inner Join", "partial", rels("inner_join", series, titles)


def storage(scale: float, repeat: int, tmp: Path, log: Callable[[str], None]) -> list[dict[str, Any]]:
    records = []
    for name, kind, relations in table7(scale):
        rows = sum(len(r) for r in relations)
        record: dict[str, Any] = {"operation": name, "kind": kind, "rows": rows,
                                  "raw": sum(r.raw_bytes for r in relations), **dict.fromkeys(FORMATS, 0)}
        seconds, tables = 0.0, []
        for r in relations:
            t, table = median_time(lambda r=r: compress(r, "backward"), repeat)
            seconds, tables = seconds + t, [*tables, table]
            for codec, suffix in (("snappy", ""), ("gzip", "_gzip"), ("zstd", "_zstd")):
                record["parquet" + suffix] += write_relation(r, tmp / "raw.parquet", codec)
                record["provrc" + suffix] += write(table, tmp / "provrc.parquet", codec)
        record["provrc_rows"] = sum(len(t) for t in tables)
        record["compress_s"] = seconds
        record["compress_s_per_million_rows"] = seconds / rows * 1e6
        records.append(record)
        log(f"{name:14} {rows:>10,} rows  raw {record['raw'] / 1e6:9.2f} MB  parquet-zstd "
            f"{record['parquet_zstd'] / 1e6:8.3f} MB  provrc-zstd {record['provrc_zstd'] / 1e6:8.4f} MB "
            f"({record['provrc_rows']:,} rows, {seconds:.2f} s)")
    return records


def _duckdb_forward(con: duckdb.DuckDBPyConnection, files: list[Path], relations: list[Relation],
                    cells: np.ndarray) -> int:
    """Forward query as a chain of DISTINCT joins over the raw lineage Parquet files."""
    con.register("q", {f"c{j}": cells[:, j] for j in range(cells.shape[1])})
    ctes = ["s0 AS (SELECT * FROM q)"]
    for i, (f, r) in enumerate(zip(files, relations), start=1):
        select = ", ".join(f"r.out{j} AS c{j}" for j in range(len(r.out_shape)))
        on = " AND ".join(f"r.in{j} = s{i - 1}.c{j}" for j in range(len(r.in_shape)))
        ctes.append(f"s{i} AS (SELECT DISTINCT {select} FROM read_parquet('{f}') r JOIN s{i - 1} ON {on})")
    answer = con.execute(f"WITH {', '.join(ctes)} SELECT * FROM s{len(files)}").fetchnumpy()
    con.unregister("q")
    return len(answer["c0"])


def _query_cells(rng: np.random.Generator, shape: tuple[int, ...], selectivity: float) -> np.ndarray:
    size = int(np.prod(shape))
    k = max(1, round(selectivity * size))
    start = int(rng.integers(0, size - k + 1))
    return np.stack(np.unravel_index(np.arange(start, start + k), shape), axis=1)


def latency(pipelines: int, steps_list: list[int], repeat: int, max_rows: int, tmp: Path,
            log: Callable[[str], None]) -> list[dict[str, Any]]:
    con = duckdb.connect()
    con.execute("SET threads = 2")
    records = []
    for steps in steps_list:
        for p in range(pipelines):
            rng = np.random.default_rng(1000 * steps + p)
            wf, chain = random_pipeline(rng, (316, 316), steps, max_rows)
            tables: list[Table] = [wf.edges[(b, a)]["forward"] for a, b in itertools.pairwise(chain)]
            relations = [t.decompress() for t in tables]
            files = [tmp / f"step{i}.parquet" for i in range(len(relations))]
            for f, r in zip(files, relations):
                write_relation(r, f)
            ops = [c.rsplit("_", 1)[0] for c in chain[1:]]
            start = time.perf_counter()
            for t in tables:  # the range-join index is built once, when tables are loaded
                _ = t.key_index
            index_s = time.perf_counter() - start
            for selectivity in SELECTIVITIES:
                cells = _query_cells(rng, wf.arrays[chain[0]].shape, selectivity)
                record = _time_query(con, tables, relations, files, cells, repeat)
                if record.pop("answer") is not None:
                    raise AssertionError(f"answers differ on pipeline {ops} at selectivity {selectivity}")
                records.append({"steps": steps, "pipeline": p, "ops": ops, "selectivity": selectivity,
                                **record, "index_build_s": index_s,
                                "lineage_rows": sum(len(r) for r in relations),
                                "provrc_rows": sum(len(t) for t in tables)})
                ms = {k: f"{v * 1e3:8.1f} ms" for k, v in record.items() if k.endswith("_s")}
                log(f"{steps:2} steps #{p} sel {selectivity:6.3f}: in-situ {ms['insitu_s']} (rows "
                    f"{ms['insitu_rows_s']}) decompress {ms['decompress_s']} duckdb {ms['duckdb_s']}")
    return records


def _time_query(con: duckdb.DuckDBPyConnection, tables: list[Table], relations: list[Relation],
                files: list[Path], cells: np.ndarray, repeat: int) -> dict[str, Any]:
    """One forward query by every method; ``answer`` is None when all methods agree."""
    t_boxes, boxes = median_time(lambda: forward(tables, cells), repeat)
    t_rows, rows = median_time(lambda: forward(tables, cells, rows=True), repeat)
    def decompress_then_query() -> np.ndarray:
        return semijoin_path([t.decompress() for t in tables], cells, "forward")

    t_dec, ids = median_time(decompress_then_query, repeat)
    t_duck, n_duck = median_time(lambda: _duckdb_forward(con, files, relations, cells), repeat)
    agree = len(rows) == len(ids) == n_duck and np.array_equal(flat_ids(rows, tables[-1].val_shape), ids)
    return {"query_cells": len(cells), "answer_cells": len(ids), "answer_boxes": len(boxes),
            "insitu_s": t_boxes, "insitu_rows_s": t_rows, "decompress_s": t_dec, "duckdb_s": t_duck,
            "answer": None if agree else (len(rows), len(ids), n_duck)}


def _mb(b: float) -> str:
    return f"{b / 1e6:.4g}"


def markdown(storage_records: list[dict[str, Any]], latency_records: list[dict[str, Any]]) -> str:
    lines = ["## Storage (MB; % of raw in brackets; ratio = Parquet-zstd / best ProvRC variant)", "",
             "| operation | kind | lineage rows | raw | Parquet | Parquet-gzip | Parquet-zstd | ProvRC | "
             "ProvRC-gzip | ProvRC-zstd | ProvRC rows | Parquet-zstd / ProvRC | compress s per M rows |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in storage_records:
        best = min(r["provrc"], r["provrc_gzip"], r["provrc_zstd"])
        sizes = " | ".join(f"{_mb(r[f])} ({100 * r[f] / r['raw']:.3g} %)" for f in FORMATS)
        lines.append(f"| {r['operation']} | {r['kind']} | {r['rows']:,} | {_mb(r['raw'])} | {sizes} | "
                     f"{r['provrc_rows']:,} | {r['parquet_zstd'] / best:.3g}× | "
                     f"{r['compress_s_per_million_rows']:.2f} |")
    lines += ["", "## Forward query latency (ms; median over pipelines of the median of repeats, [min, max])",
              "",
              "| steps | selectivity | in situ (boxes) | in situ (rows) | decompress + query | "
              "DuckDB/Parquet | best baseline / in situ (rows) |", "|---|---|---|---|---|---|---|"]
    for steps in sorted({r["steps"] for r in latency_records}):
        for sel in SELECTIVITIES:
            group = [r for r in latency_records if r["steps"] == steps and r["selectivity"] == sel]
            if not group:
                continue

            def cell(key: str, group: list[dict[str, Any]] = group) -> str:
                values = [1e3 * r[key] for r in group]
                return f"{statistics.median(values):.1f} [{min(values):.1f}, {max(values):.1f}]"

            speedup = statistics.median(min(r["decompress_s"], r["duckdb_s"]) / r["insitu_rows_s"]
                                        for r in group)
            label = "1 cell" if sel == 0 else f"{100 * sel:g} %"
            lines.append(f"| {steps} | {label} | {cell('insitu_s')} | {cell('insitu_rows_s')} | "
                         f"{cell('decompress_s')} | {cell('duckdb_s')} | {speedup:.2g}× |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/bench/provrc")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the Table VII cell counts")
    parser.add_argument("--pipelines", type=int, default=4, help="random pipelines per length")
    parser.add_argument("--steps", default="5,10")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--max-rows", type=int, default=1_000_000, help="lineage rows per pipeline step")
    parser.add_argument("--skip-storage", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        storage_records = [] if args.skip_storage else storage(args.scale, args.repeat, Path(tmp), print)
        latency_records = latency(args.pipelines, [int(s) for s in args.steps.split(",")], args.repeat,
                                  args.max_rows, Path(tmp), print)
    meta = {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg(),
            **vars(args)}
    (out / "bench_provrc.json").write_text(json.dumps(
        {"meta": meta, "storage": storage_records, "latency": latency_records}, indent=1))
    table = markdown(storage_records, latency_records)
    (out / "bench_provrc.md").write_text(f"# ProvRC benchmark\n\n`{json.dumps(meta)}`\n\n{table}")
    print(table)


if __name__ == "__main__":
    main()
