"""What lineage costs as TPC-H grows: task time, one-row question and peak memory of plain
Spark, fm and eager against the scale factor, as a table and a plot (issue 48).

    python -m cda_workload.benchmarks.tpch_scale --sf 0.01,0.1,1 --queries Q1,Q3,Q10,Q21 --out tpch_scale

Each scale factor is one ``tpch_coverage`` run (``OUT/sf<SF>/``: every query in a child
process of its own, outputs and lazy == eager answers checked, ``--repeat`` rounds timed),
its files read in place (``--in-place``: no copy into the store). A scale factor already
measured under ``--out`` for every asked query is kept, not run again, so a larger one can be
added later (``--sf 10 --repeat 1``, with ``AL_SHUFFLE_PARTITIONS`` and
``AL_DRIVER_MEMORY`` set as its size needs: the JSON records them). Then ``scale.md`` and
``scale.png`` are drawn from every ``sf*/tpch_coverage.json`` found.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from cda_workload.benchmarks import tpch_coverage

WAYS = ("plain", "fm", "eager")
STYLES = {"plain": "-", "fm": "--", "eager": ":"}


def seconds_of(outcome: dict[str, Any], way: str) -> float | None:
    """The median of the timed rounds, else the checked pass's single run."""
    timed = outcome.get("rounds_s", {}).get(way)
    if timed:
        return statistics.median(timed)
    return outcome.get("spark_s") if way == "plain" else outcome.get("task_s", {}).get(way)


def question_of(outcome: dict[str, Any], way: str) -> float | None:
    asked = outcome.get("question_s", {}).get(way)
    return statistics.median(asked) if asked else None


def load(out: Path) -> list[dict[str, Any]]:
    """Every scale factor's coverage run under ``out``, smallest first."""
    found = [json.loads(p.read_text()) for p in out.glob("sf*/tpch_coverage.json")]
    return sorted(found, key=lambda run: run["sf"])


def measured(folder: Path, queries: list[str]) -> bool:
    """Whether ``folder`` holds a finished run of every one of ``queries``."""
    result = folder / "tpch_coverage.json"
    if not result.exists():
        return False
    return set(queries) <= {o["query"] for o in json.loads(result.read_text())["outcomes"]}


def markdown(runs: list[dict[str, Any]]) -> str:
    lines = [
        "# TPC-H lineage cost against the scale factor",
        "",
        "Seconds: medians of the timed rounds (else the checked pass's one run); × is the way's",
        "task time over plain Spark's; questions: one asked row, the answer's own time; peak",
        "memory: the query's child process over all of its runs (driver: Python, JVM: Spark).",
        "",
        "| SF | query | status | plain Spark s | fm × | eager × | fm question s | eager question s"
        " | eager answer rows | driver peak MiB | JVM peak MiB | rounds | load before/after"
        " | Spark settings |",
        "|---" * 14 + "|",
    ]
    for run in runs:
        for o in run["outcomes"]:
            plain = seconds_of(o, "plain")
            ratio = [seconds_of(o, w) for w in ("fm", "eager")]
            rows = sum(sum(parts) for parts in o["parts"][0].values()) if o.get("parts") else None
            cells = [
                f"{run['sf']:g}", o["query"], o["status"] + (f" ({o['detail'][:80]})" if o["detail"] else ""),
                _num(plain),
                *("—" if r is None or not plain else f"{r / plain:.2f}" for r in ratio),
                *(_num(question_of(o, w)) for w in ("fm", "eager")),
                "—" if rows is None else f"{rows:,}",
                *(f"{o['peak_mb'][k]:,.0f}" if k in o.get("peak_mb", {}) else "—" for k in ("driver", "jvm")),
                str(run.get("repeat", 0)),
                f"{run['load_before'][0]:.1f}/{run.get('load_after', [float('nan')])[0]:.1f}",
                ", ".join(f"{k}={v}" for k, v in run.get("spark", {}).items()) or "defaults",
            ]  # fmt: skip
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def plot(runs: list[dict[str, Any]], path: Path) -> Path:
    """Three log-log panels against SF: task seconds per way, one-row question seconds per
    way, peak memory (driver and JVM); one colour per query."""
    queries = list(dict.fromkeys(o["query"] for run in runs for o in run["outcomes"]))
    colours = dict(zip(queries, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    panels = (
        (axes[0], "task seconds (plain Spark, fm, eager)", WAYS, seconds_of),
        (axes[1], "one-row question seconds (fm, eager)", WAYS[1:], question_of),
    )
    for ax, title, ways, value in panels:
        for q in queries:
            for way in ways:
                points = _points(runs, q, lambda o, w=way, f=value: f(o, w))
                if points:
                    label = f"{q} {way}"
                    ax.plot(*zip(*points), STYLES[way], marker="o", ms=3, color=colours[q], label=label)
        ax.set_title(title, fontsize=10)
    memory = {"driver": "-", "jvm": "--"}
    for q in queries:
        for kind, style in memory.items():
            points = _points(runs, q, lambda o, k=kind: (o.get("peak_mb") or {}).get(k))
            if points:
                axes[2].plot(*zip(*points), style, marker="o", ms=3, color=colours[q], label=f"{q} {kind}")
    axes[2].set_title("peak memory MiB (driver —, JVM - -)", fontsize=10)
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("TPC-H scale factor")
        ax.grid(True, which="both", lw=0.3)
    axes[0].legend(fontsize=6, ncol=2)
    axes[2].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _points(runs: list[dict[str, Any]], query: str, value: Any) -> list[tuple[float, float]]:
    """(SF, value) for ``query`` in each run where it was traced and measured."""
    found = []
    for run in runs:
        for o in run["outcomes"]:
            v = value(o) if o["query"] == query and o["status"] == "traced" else None
            if v:
                found.append((run["sf"], v))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cda_workload.benchmarks.tpch_scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--sf", default="0.01,0.1,1", help="comma list of scale factors (default 0.01,0.1,1)")
    parser.add_argument("--queries", default="Q1,Q3,Q10,Q21", help="comma list (default Q1,Q3,Q10,Q21)")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per query (default 3)")
    parser.add_argument("--data", default="bench_data", help="generated data and the results stores")
    parser.add_argument("--out", default="tpch_scale", help="output folder (default ./tpch_scale)")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per query (default 3600)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    queries = tpch_coverage.parse_queries(args.queries)
    for sf in [s.strip() for s in args.sf.split(",") if s.strip()]:
        if measured(out / f"sf{sf}", queries):
            continue
        tpch_coverage.main([
            "--sf", sf, "--queries", args.queries, "--sample", "1", "--repeat", str(args.repeat),
            "--in-place", "--data", args.data, "--out", str(out / f"sf{sf}"), "--timeout", str(args.timeout),
        ])  # fmt: skip
    runs = load(out)
    (out / "scale.md").write_text(markdown(runs))
    plot(runs, out / "scale.png")
    print(f"wrote {out / 'scale.md'} and {out / 'scale.png'} ({len(runs)} scale factors)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
