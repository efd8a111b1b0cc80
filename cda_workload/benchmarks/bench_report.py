"""Benchmark records → ``bench.json``, ``bench.md`` (tables) and PNG plots shaped like the
paper's figures (task time per query; derivation time per query and strategy, log scale)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TASK_ORDER = ("baseline", "rerun", "fm", "full")
LABELS = {"baseline": "Baseline", "rerun": "Rerun (output only)", "fm": "SptFM", "full": "SptFull"}
DERIVE_LABELS = {"rerun": "Rerun", "fm": "FM", "full": "Full"}


def write_report(records: list[dict[str, Any]], out: Path, machine: dict[str, Any]) -> list[Path]:
    """Write every artifact; returns their paths (for MLflow)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "bench.json", out / "bench.md"]
    paths[0].write_text(json.dumps(records, indent=2))
    paths[1].write_text(markdown(records, machine))
    for key, group in _groups(records).items():
        paths += _plots(group, out, key)
    return paths


def _groups(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[f"{r['workload']}-{r['sf'] if r['workload'] == 'cda' else r['size']}"].append(r)
    return dict(groups)


def _median(
    records: list[dict[str, Any]], query: str, strategy: str, phase: str, al_size: int | None
) -> float | None:
    for r in records:
        if (r["query"], r["strategy"], r["phase"], r["al_size"]) == (query, strategy, phase, al_size):
            return r["median_s"]
    return None


def _stored(records: list[dict[str, Any]], query: str, strategy: str) -> dict[str, Any] | None:
    return next(
        (r for r in records if (r["query"], r["strategy"], r["phase"]) == (query, strategy, "task")), None
    )


def _fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None or b == 0 else f"{a / b:.1f}×"


def markdown(records: list[dict[str, Any]], machine: dict[str, Any]) -> str:
    lines = ["# Benchmark results", "", "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()), ""]
    lines += ["Medians of all repetitions, in seconds (`bench.json` has every repetition).", ""]
    for key, group in _groups(records).items():
        queries = list(dict.fromkeys(r["query"] for r in group))
        lines += [f"## {key}", "", "### Task time (s)", ""]
        lines += [
            "| query | " + " | ".join(LABELS[s] for s in TASK_ORDER) + " | FM overhead | Full overhead |"
        ]
        lines += ["|---" * (len(TASK_ORDER) + 3) + "|"]
        for q in queries:
            m = {s: _median(group, q, s, "task", None) for s in TASK_ORDER}
            over = [
                "—" if m[s] is None or not m["baseline"] else f"{100 * (m[s] / m['baseline'] - 1):+.1f} %"
                for s in ("fm", "full")
            ]
            lines.append(
                f"| {q} | " + " | ".join(_fmt(m[s]) for s in TASK_ORDER) + f" | {over[0]} | {over[1]} |"
            )
        for size in sorted({r["al_size"] for r in group if r["phase"] == "derive"}):
            lines += ["", f"### Augmented-lineage derivation, AL_size = {size} (s)", ""]
            lines += [
                "| query | Rerun | FM | Full | Rerun / FM | Rerun / Full |",
                "|---|---|---|---|---|---|",
            ]
            for q in queries:
                d = {s: _median(group, q, s, "derive", size) for s in ("rerun", "fm", "full")}
                if all(v is None for v in d.values()):
                    continue
                lines.append(
                    f"| {q} | {_fmt(d['rerun'])} | {_fmt(d['fm'])} | {_fmt(d['full'])} | "
                    f"{_ratio(d['rerun'], d['fm'])} | {_ratio(d['rerun'], d['full'])} |"
                )
        lines += ["", "### Stored intermediate results", ""]
        lines += ["| query | output rows | FM tuples | Full tuples | FM vs Full | FM bytes | Full bytes |"]
        lines += ["|---|---|---|---|---|---|---|"]
        for q in queries:
            fm, full = _stored(group, q, "fm"), _stored(group, q, "full")
            if fm is None or full is None:
                continue
            cut = (
                "—"
                if not full["stored_tuples"]
                else f"{100 * (fm['stored_tuples'] / full['stored_tuples'] - 1):+.1f} %"
            )
            lines.append(
                f"| {q} | {fm.get('output_rows', '—')} | {fm['stored_tuples']} | {full['stored_tuples']} "
                f"| {cut} | {fm['stored_bytes']} | {full['stored_bytes']} |"
            )
        lines.append("")
    return "\n".join(lines)


def _plots(group: list[dict[str, Any]], out: Path, key: str) -> list[Path]:
    queries = list(dict.fromkeys(r["query"] for r in group))
    paths = [
        _bars(
            group, queries, "task", None, TASK_ORDER, f"Task processing time ({key})", out / f"task-{key}.png"
        )
    ]
    for size in sorted({r["al_size"] for r in group if r["phase"] == "derive"}):
        title = f"Augmented-lineage derivation, AL_size = {size} ({key})"
        paths.append(
            _bars(
                group,
                queries,
                "derive",
                size,
                ("rerun", "fm", "full"),
                title,
                out / f"derive{size}-{key}.png",
            )
        )
    return paths


def _bars(
    group: list[dict[str, Any]],
    queries: list[str],
    phase: str,
    al_size: int | None,
    strategies: tuple[str, ...],
    title: str,
    path: Path,
) -> Path:
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(queries) + 2), 3.6))
    width = 0.8 / len(strategies)
    for i, s in enumerate(strategies):
        values = [_median(group, q, s, phase, al_size) or 0.0 for q in queries]
        label = (DERIVE_LABELS if phase == "derive" else LABELS)[s]
        ax.bar([x + i * width for x in range(len(queries))], values, width, label=label)
    ax.set_xticks([x + width * (len(strategies) - 1) / 2 for x in range(len(queries))], queries)
    ax.set_ylabel("seconds (median)")
    if phase == "derive":
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
