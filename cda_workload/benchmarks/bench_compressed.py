"""Compressed-backend benchmark: the captured row lineage of TPC-H / CDA queries stored as ProvRC.

    python -m cda_workload.benchmarks.bench_compressed --sf 0.1,1 --queries Q1,Q3,Q10,Q12 --repeat 5 \\
        --out docs/bench/compressed

Per scale factor and query: one eager run keeping its indexes both ways
(``Capture(storage=("pairs", "provrc"))``), then per captured index (a source table, or the
model calls of a segment):

1. storage of the (output row, lineage row) relation, both sides dense ordinals: raw int64
   rows, Parquet (none, snappy, gzip, zstd) and ProvRC in the same container (none, snappy,
   gzip, zstd; the run stores zstd); beside them the dictionary (ordinal -> key values) every
   ordinal form needs, and the eager backend's own backward pair index (``(lid, key...)``);
2. compression time per million pairs (the run's encode step, in the driver);
3. backward latency for 1 and 100 random output rows (all, when fewer) and forward latency for
   1 and ~1 % of the index's lineage rows: the eager pair index, ProvRC in situ, ProvRC kept
   per segment and walked along the path of segments (a second run with
   ``Capture(compose=False)``), and decompress-then-query (the ProvRC file read and expanded
   to rows, then filtered); medians of ``--repeat``, every answer checked equal to the eager
   one.

Writes ``bench_compressed.json`` and ``bench_compressed.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cda_workload.benchmarks.bench import machine
from cda_workload.benchmarks.bench_eager import cases, register
from cda_workload.benchmarks.bench_provrc import median_time
from materialization.capture import LID, Capture
from materialization.provrc.parquet import read, write, write_relation
from tracing import LineageSession, Run
from tracing.compressed import ProvrcPairs
from tracing.eager import ParquetPairs

WAYS = ("eager", "provrc", "segments", "decompress")
FORMS = ("none", "snappy", "gzip", "zstd")
SIZES = ("raw", *(f"{kind}_{form}" for kind in ("parquet", "provrc") for form in ("snappy", "gzip", "zstd")))


class Decompressing:
    """Decompress-then-query: read the ProvRC file, expand it to rows, filter, then look the
    ordinals up as the in-situ path does."""

    def __init__(self, provrc: ProvrcPairs) -> None:
        self.provrc = provrc

    def _pairs(self, name: str, orientation: str) -> np.ndarray:
        info = self.provrc.meta["indexes"][name][orientation]
        relation = read(f"{self.provrc.root}/{info['file']}").decompress()
        return np.stack([relation.out[:, 0], relation.inp[:, 0]], axis=1)

    def backward(self, name: str, lids: pa.Table) -> pa.Table:
        p = self.provrc
        pairs = self._pairs(name, "backward")
        cells = np.unique(pairs[np.isin(pairs[:, 0], p.output_ordinals(lids)), 1])
        info = p.meta["indexes"][name]
        return p.values(info["dict"]["dir"], info["attrs"], cells)

    def forward(self, name: str, keys: pa.Table) -> set[int]:
        p = self.provrc
        ords = p.value_ordinals(p.meta["indexes"][name]["dict"]["dir"], keys)
        pairs = self._pairs(name, "forward")
        return p.output_lids(np.unique(pairs[np.isin(pairs[:, 1], ords), 0]))


def _rows(table: pa.Table) -> set[tuple]:
    return {tuple(r.values()) for r in table.to_pylist()}


def storage(provrc: ProvrcPairs, pairs_meta: dict[str, Any], name: str, tmp: Path) -> dict[str, Any]:
    """Bytes of one index's ordinal relation in every form."""
    table = provrc.table(name, "backward")
    info = provrc.meta["indexes"][name]
    relation = table.decompress()
    assert len(relation) == info["pairs"], "ProvRC must give back every pair"
    out: dict[str, Any] = {"pairs": len(relation), "provrc_rows": len(table), "raw": relation.raw_bytes}
    for form in FORMS:
        out[f"parquet_{form}"] = write_relation(relation, tmp / f"rel-{form}.parquet", form)
        out[f"provrc_{form}"] = write(table, tmp / f"provrc-{form}.parquet", form)
    out["dictionary"] = info["dict"]["bytes"]
    out["eager_pairs"] = pairs_meta["indexes"][name]["backward"]["bytes"]
    return out


def latency(run: Run, segments: Run, name: str, repeat: int, rng: random.Random) -> dict[str, Any]:
    """Backward (1, 100 output rows) and forward (1, ~1 % of lineage rows) per storage;
    ``segments`` is the same task captured with ``compose=False`` (equal lineage ids)."""
    eager, compressed = run._index("eager"), run._index("compressed")
    pairs, provrc = eager.pairs, compressed.pairs
    assert isinstance(pairs, ParquetPairs) and isinstance(provrc, ProvrcPairs)
    ways = {"eager": pairs, "provrc": provrc, "segments": segments._index("compressed").pairs,
            "decompress": Decompressing(provrc)}
    out_lids = provrc.reader.scan(provrc.uri(provrc.meta["outputs"]["dir"]), [(LID, LID)]).column(LID)
    lids = out_lids.to_pylist()
    dictionary = provrc.reader.scan(provrc.uri(provrc.meta["indexes"][name]["dict"]["dir"]))
    attrs = provrc.meta["indexes"][name]["attrs"]
    found: dict[str, Any] = {}
    for size in (1, 100):
        chosen = pa.table({LID: pa.array(rng.sample(lids, min(size, len(lids))), pa.int64())})
        answers = {}
        for way, index in ways.items():
            ask = partial(index.backward, name, chosen)
            found[f"backward_{size}_{way}_s"], answers[way] = median_time(ask, repeat)
        assert all(_rows(a) == _rows(answers["eager"]) for a in answers.values()), f"backward {name} {size}"
        found[f"backward_{size}_rows"] = answers["eager"].num_rows
        found[f"backward_{size}_outputs"] = chosen.num_rows
    for label, size in (("1", 1), ("1pct", max(1, dictionary.num_rows // 100))):
        picked = sorted(rng.sample(range(dictionary.num_rows), min(size, dictionary.num_rows)))
        keys = dictionary.take(picked).select(attrs)
        answers = {}
        for way, index in ways.items():
            ask = partial(index.forward, name, keys)
            found[f"forward_{label}_{way}_s"], answers[way] = median_time(ask, repeat)
        assert all(a == answers["eager"] for a in answers.values()), f"forward {name} {label}"
        found[f"forward_{label}_keys"] = keys.num_rows
        found[f"forward_{label}_outputs"] = len(answers["eager"])
    return found


def measure(als: LineageSession, case: Any, repeat: int, seed: int, log: Callable[[str], None]) -> list[dict]:
    started = time.perf_counter()
    run = als.run(case.sql, backend="eager", capture=Capture(storage=("pairs", "provrc")))
    log(f"  run {run.id}: {time.perf_counter() - started:.1f} s, {run.record['output']['rows']} output rows")
    segments = als.run(case.sql, backend="compressed", capture=Capture(compose=False))
    meta = run.record["capture"]
    compressed = meta["compressed"]
    per_segment = segments.record["capture"]["compressed"]
    log(f"  per segment: {len(per_segment['steps'])} steps, {per_segment['bytes']:,} B "
        f"(composed {compressed['bytes']:,} B)")
    provrc = run._index("compressed").pairs
    assert isinstance(provrc, ProvrcPairs)
    records = []
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="al-bench-compressed-") as tmp:
        for name in sorted(compressed["indexes"]):
            rec: dict[str, Any] = {
                "workload": case.workload, "query": case.query, "sf": float(case.scale), "index": name,
                "output_rows": run.record["output"]["rows"], "task_s": run.record["task_seconds"],
                "encode_s_run": compressed["seconds"], "composed_bytes_run": compressed["bytes"],
                "segments_bytes_run": per_segment["bytes"], "segments_steps": len(per_segment["steps"]),
                "segments_encode_s_run": per_segment["seconds"],
                "load_before": os.getloadavg(),
            }
            rec |= storage(provrc, meta, name, Path(tmp))
            rec |= latency(run, segments, name, repeat, rng)
            rec["load_after"] = os.getloadavg()
            log(
                f"  {name}: {rec['pairs']} pairs, ProvRC {rec['provrc_rows']} rows, "
                f"zstd {rec['parquet_zstd']} B vs ProvRC-zstd {rec['provrc_zstd']} B"
            )
            records.append(rec)
    total_pairs = sum(r["pairs"] for r in records) or 1
    for rec in records:
        rec["encode_s_per_million_pairs"] = compressed["seconds"] / total_pairs * 1e6
    return records


def _kb(n: float) -> str:
    return f"{n / 1024:,.1f}"


def markdown(records: list[dict], info: dict[str, Any]) -> str:
    lines = [
        "# Compressed backend: captured row lineage as ProvRC",
        "",
        f"Machine: {info['machine']}. Medians of {info['repeat']} per latency; every answer checked equal",
        "to the eager pair index's.",
        "",
        "## Storage (kB) of the (output, lineage row) ordinal relation",
        "",
        "| SF | query | index | pairs | ProvRC rows | raw | Parquet | Parquet-gzip "
        "| Parquet-zstd "
        "| ProvRC | ProvRC-gzip | ProvRC-zstd | zstd / ProvRC-zstd | dictionary | eager pair index |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        ratio = r["parquet_zstd"] / r["provrc_zstd"]
        lines.append(
            f"| {r['sf']} | {r['query']} | {r['index']} | {r['pairs']:,} | {r['provrc_rows']:,} "
            + "".join(f"| {_kb(r[k])} " for k in SIZES)
            + f"| {ratio:.1f}x | {_kb(r['dictionary'])} | {_kb(r['eager_pairs'])} |"
        )
    lines += [
        "",
        "## The whole run's ProvRC files: composed vs per segment (`Capture(compose=False)`)",
        "",
        "| SF | query | steps | composed kB | per segment kB | encode s composed / per segment |",
        "|---|---|---:|---:|---:|---|",
    ]
    runs = {(r["sf"], r["query"]): r for r in records}
    for (sf, query), r in runs.items():
        lines.append(
            f"| {sf} | {query} | {r['segments_steps']} | {_kb(r['composed_bytes_run'])} "
            f"| {_kb(r['segments_bytes_run'])} | {r['encode_s_run']:.2f} / {r['segments_encode_s_run']:.2f} |"
        )
    lines += [
        "",
        "## Latency (ms): eager pair index / ProvRC in situ (composed) / ProvRC in situ along the "
        "segments' path / decompress-then-query",
        "",
        "| SF | query | index | backward 1 | backward 100 | forward 1 | forward 1 % (keys) "
        "| encode s per M pairs |",
        "|---|---|---|---|---|---|---|---:|",
    ]

    def trio(r: dict, what: str) -> str:
        return " / ".join(f"{1000 * r[f'{what}_{w}_s']:.1f}" for w in WAYS)

    for r in records:
        lines.append(
            f"| {r['sf']} | {r['query']} | {r['index']} "
            f"| {trio(r, 'backward_1')} | {trio(r, 'backward_100')} "
            f"| {trio(r, 'forward_1')} | {trio(r, 'forward_1pct')} ({r['forward_1pct_keys']:,}) "
            f"| {r['encode_s_per_million_pairs']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.bench_compressed", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--sf", default="0.1", help="scale factors, comma-separated (default 0.1)")
    parser.add_argument("--queries", default="Q1,Q3,Q10,Q12", help="TPC-H names, or cda:Q2 etc.")
    parser.add_argument("--repeat", type=int, default=5, help="repetitions per latency (default 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench_compressed", help="folder for the JSON and Markdown")
    parser.add_argument("--data", default="al_data/bench_compressed", help="generated data and store")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args(argv)
    from materialization.spark import spark_session

    def log(msg: str) -> None:
        print(msg, flush=True)

    data = Path(args.data)
    spark = spark_session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    records: list[dict] = []
    failures = []
    current = None
    als = None
    for case in cases([float(s) for s in args.sf.split(",")], args.queries):
        if (case.scale, case.workload) != current:
            current = (case.scale, case.workload)
            als = LineageSession(spark, store=str(data / f"store-{case.workload}-sf{case.scale}"))
            log(f"registering {case.workload} SF {case.scale}")
            register(als, case, data, args.seed)
        log(f"{case.workload} {case.query} SF {case.scale}")
        try:
            assert als is not None
            records += measure(als, case, args.repeat, args.seed, log)
        except Exception:  # one failing case must not lose the others' figures
            failures.append({"case": f"{case.query} SF {case.scale}", "error": traceback.format_exc()})
            log(failures[-1]["error"])
    info = {"machine": machine(), "repeat": args.repeat, "argv": argv or [], "failures": failures}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_compressed.json").write_text(json.dumps({"info": info, "records": records}, indent=1))
    (out / "bench_compressed.md").write_text(markdown(records, info))
    print(markdown(records, info))
    log(f"wrote {out / 'bench_compressed.json'} and {out / 'bench_compressed.md'}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
