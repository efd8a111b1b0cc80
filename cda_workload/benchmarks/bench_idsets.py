"""Id-set benchmark: sorted int64 arrays vs roaring bitmaps vs reduced ordered BDDs.

    python -m cda_workload.benchmarks.bench_idsets --out docs/bench/idsets [--repeat 3] [--max-size 10000000]

Regimes (universe of source row ids in brackets):
- ``clustered`` [1e8]: TPC-H-like orders → lineitems. Line items are numbered order by order
  (1-7 per order, contiguous); a set is the line items of the orders in 10 windows of
  consecutive orders (a date range each) that pass a 50 % filter: runs of ~4 ids with gaps.
- ``sparse`` [1e8]: ids drawn uniformly at random.
- ``dense`` [2n]: ids drawn uniformly at random at 50 % density.
- ``strided`` [2n]: cell ids of a slice ``x[:, :32]`` of a row-major array with 64 columns
  (array / region lineage): runs of 32 every 64 ids.

For each set size n (1e2 … 1e7) and representation: build time from the sorted ids,
serialized bytes, union of 100 groups (the set's runs/ids dealt at random to 100 per-output
sets, union_all must give the set back), intersection with a second set of the same regime
(half of the set's pieces plus half of a fresh set's: outputs that share sources),
membership of 1e4 probes (half members). BDD membership is measured cold (the node table is
exported from the BDD manager first, part of the time) and warm. Medians of ``--repeat`` runs;
every answer is checked against numpy. BDD configurations whose build passes ``--bdd-budget``
seconds stop growing in that regime (recorded as skipped). Writes ``idsets.json`` and
``idsets.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from cda_workload.benchmarks.bench import timed
from materialization.idsets import KINDS, BddIdSet, union_all
from materialization.idsets.bdd import fresh_managers
from materialization.idsets.policy import clustering_factor
from materialization.idsets.sorted_array import merge_unique

REGIMES = ("clustered", "sparse", "dense", "strided")
COLUMNS_2D = 64  # strided: cells of the left half of a row-major array with this many columns
UNIVERSE = 10**8
GROUPS = 100
PROBES = 10_000


def clustered_ids(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """About n line-item ids of orders in 10 windows passing a 50 % filter, and the run starts."""
    sizes = rng.integers(1, 8, size=int(UNIVERSE / 4))
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    keep_first = first + sizes <= UNIVERSE
    sizes, first = sizes[keep_first], first[keep_first]
    per_window = max(1, round(n / 4 / 0.5 / 10))  # ~4 items per order, half the orders pass
    starts = rng.choice(len(sizes) - per_window, size=10, replace=False)
    orders = merge_unique([np.arange(s, s + per_window) for s in np.sort(starts)])
    orders = orders[rng.random(len(orders)) < 0.5]
    ids = np.repeat(first[orders], sizes[orders]) + (
        np.arange(int(sizes[orders].sum()))
        - np.repeat(np.cumsum(sizes[orders]) - sizes[orders], sizes[orders])
    )
    return ids, np.searchsorted(ids, first[orders])


def random_ids(n: int, universe: int, rng: np.random.Generator) -> np.ndarray:
    """n distinct ids uniform in [0, universe)."""
    if n * 4 >= universe:
        return np.sort(rng.permutation(universe)[:n]).astype(np.int64)
    ids = merge_unique([rng.integers(0, universe, size=int(n * 1.1) + 10)])
    return np.sort(rng.permutation(ids)[:n]).astype(np.int64)


def make_set(regime: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """(sorted ids, starts of the pieces dealt to groups, universe) of one regime."""
    if regime == "clustered":
        ids, starts = clustered_ids(n, rng)
        return ids, starts, UNIVERSE
    universe = UNIVERSE if regime == "sparse" else 2 * n
    if regime == "strided":
        cells = np.arange(universe, dtype=np.int64)
        ids = cells[cells % COLUMNS_2D < COLUMNS_2D // 2]
        return ids, np.arange(0, len(ids), COLUMNS_2D // 2), universe
    ids = random_ids(n, universe, rng)
    return ids, np.arange(len(ids)), universe


def half_of(ids: np.ndarray, starts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random half of the pieces (runs or single ids) of a set."""
    keep = np.repeat(rng.random(len(starts)) < 0.5, np.diff(np.append(starts, len(ids))))
    return ids[keep]


def groups_of(ids: np.ndarray, starts: np.ndarray, rng: np.random.Generator) -> list[np.ndarray]:
    """The pieces (runs or single ids) dealt at random to GROUPS per-output id arrays."""
    owner = np.repeat(rng.integers(0, GROUPS, size=len(starts)), np.diff(np.append(starts, len(ids))))
    return [ids[owner == g] for g in range(GROUPS)]


def measure(
    kind: str, ids: np.ndarray, other: np.ndarray, groups: list[np.ndarray], probes: np.ndarray, repeat: int
) -> dict[str, Any]:
    """Medians of one representation on one set; answers checked against numpy.

    Every repetition builds its operands anew, BDDs in fresh managers: a BDD manager memoises
    apply results, so repeating an operation on the same nodes would time a cache hit.
    """
    cls = KINDS[kind]
    times: dict[str, list[float]] = {}
    want_inter = np.intersect1d(ids, other, assume_unique=True)
    want_member = np.isin(probes, ids)
    s = None
    for _ in range(repeat):
        fresh_managers()
        t, s = timed(lambda: cls.from_sorted(ids))
        o, parts = cls.from_sorted(other), [cls.from_sorted(g) for g in groups]
        figures = {"build_s": t}
        figures["union100_s"], u = timed(lambda: union_all(parts))  # noqa: B023
        figures["intersect_s"], i = timed(lambda: s & o)  # noqa: B023
        figures["contains_s"], member = timed(lambda: s.contains(probes))  # noqa: B023
        figures["contains_warm_s"], _ = timed(lambda: s.contains(probes))  # noqa: B023
        assert np.array_equal(u.to_array(), ids), f"{kind}: union of groups differs"
        assert np.array_equal(i.to_array(), want_inter), f"{kind}: intersection differs"
        assert np.array_equal(member, want_member), f"{kind}: membership differs"
        for k, v in figures.items():
            times.setdefault(k, []).append(v)
    row: dict[str, Any] = {k: statistics.median(v) for k, v in times.items()}
    row["bytes"] = s.nbytes
    row["bytes_per_id"] = s.nbytes / max(1, len(ids))
    if isinstance(s, BddIdSet):
        row["nodes"] = s.nodes
    return row


def run(sizes: list[int], repeat: int, bdd_budget: float, seed: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for regime in REGIMES:
        bdd_stopped = False
        for n in sizes:
            rng = np.random.default_rng(seed + n)
            ids, starts, universe = make_set(regime, n, rng)
            fresh, fresh_starts, _ = make_set(regime, n, rng)
            other = merge_unique([half_of(ids, starts, rng), half_of(fresh, fresh_starts, rng)])
            groups = groups_of(ids, starts, rng)
            probes = np.concatenate([rng.choice(ids, PROBES // 2), rng.integers(0, universe, PROBES // 2)])
            base = {"regime": regime, "n": n, "ids": len(ids), "universe": universe}
            base["clustering_factor"] = round(clustering_factor(ids), 3)
            for kind in KINDS:
                if kind == "bdd" and bdd_stopped:
                    rows.append(
                        {**base, "kind": kind, "skipped": f"a smaller BDD build took > {bdd_budget} s"}
                    )
                    continue
                t0 = time.perf_counter()
                row = {**base, "kind": kind, **measure(kind, ids, other, groups, probes, repeat)}
                row["total_s"] = time.perf_counter() - t0
                rows.append(row)
                print(line(row), flush=True)
                if kind == "bdd" and row["build_s"] > bdd_budget:
                    bdd_stopped = True
    return rows


COLUMNS = (
    "regime",
    "n",
    "kind",
    "bytes",
    "bytes_per_id",
    "build_s",
    "union100_s",
    "intersect_s",
    "contains_s",
)


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def line(row: dict[str, Any]) -> str:
    if "skipped" in row:
        return " | ".join([fmt(row[c]) for c in COLUMNS[:3]] + ["skipped"] * (len(COLUMNS) - 3))
    return " | ".join(fmt(row[c]) for c in COLUMNS)


def winners(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per regime and size: the smallest representation and the fastest for each operation."""
    out = []
    keys = sorted({(r["regime"], r["n"]) for r in rows}, key=lambda k: (REGIMES.index(k[0]), k[1]))
    for regime, n in keys:
        done = [r for r in rows if (r["regime"], r["n"]) == (regime, n) and "skipped" not in r]
        best = {m: min(done, key=lambda r, m=m: r[m])["kind"] for m in ("bytes", "union100_s", "intersect_s")}
        out.append({"regime": regime, "n": n, **{f"best_{m}": k for m, k in best.items()}})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/bench/idsets")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-size", type=int, default=10**7)
    ap.add_argument("--bdd-budget", type=float, default=5.0, help="seconds; larger BDD builds stop a regime")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.max_size < 100:
        raise SystemExit("--repeat must be >= 1 and --max-size >= 100")
    sizes = [10**e for e in range(2, 8) if 10**e <= args.max_size]
    print(" | ".join(COLUMNS))
    start = time.perf_counter()
    rows = run(sizes, args.repeat, args.bdd_budget, args.seed)
    wall = time.perf_counter() - start
    best = winners(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.platform(), "cpus": os.cpu_count(), "repeat": args.repeat, "wall_s": wall}
    meta["bdd_backend"] = BddIdSet.from_sorted([0]).backend
    (out / "idsets.json").write_text(json.dumps({"meta": meta, "rows": rows, "winners": best}, indent=1))
    md = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    md += ["| " + line(r) + " |" for r in rows]
    md += [
        "",
        "| regime | n | smallest | fastest union of 100 | fastest intersection |",
        "|---|---|---|---|---|",
    ]
    md += [
        f"| {b['regime']} | {b['n']} | {b['best_bytes']} | {b['best_union100_s']} | {b['best_intersect_s']} |"
        for b in best
    ]
    (out / "idsets.md").write_text("\n".join(md) + "\n")
    print(f"wall {wall:.0f} s; wrote {out / 'idsets.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
