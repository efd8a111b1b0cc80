"""Lineage answers, forward answers and runs as HTML fragments: what Jupyter shows
(``_repr_html_``) and what the audit report is assembled from, so both read the same."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from segmenter.operators import ROW_ID_COLUMN, Source
from segmenter.segments import Segment, segment
from segmenter.sources import ROW_SHIFT
from segmenter.step_words import listed, step_names, user_columns
from tracing.confidence.answer import ConfidenceAnswer, guarantee, row_text, short_formula
from tracing.lineage import AugmentedLineage, TraceStat, collect_rows, fmt_row, reads_line, shown
from tracing.present.reasons import render_call
from tracing.present.tree import tree_svg
from tracing.task_code import LANGUAGES, readable

if TYPE_CHECKING:
    from tracing.forward import ForwardLineage
    from tracing.session import Run

MAX_ROWS = 50  # rows per table; the JSON export has them all
ROW_MASK = (1 << ROW_SHIFT) - 1  # a keyless row's position in its file

STYLE = """
.al { font-family: system-ui, sans-serif; font-size: 14px; color: #222; }
.al table { border-collapse: collapse; margin: 4px 0 10px; }
.al th, .al td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top;
  white-space: nowrap; max-width: 48em; overflow: hidden; text-overflow: ellipsis; }
.al .al-scroll { overflow-x: auto; max-width: 100%; }
.al h1, .al h2, .al h3, .al h4, .al h5, .al p, .al li, .al summary { overflow-wrap: anywhere; }
.al th { background: #f2f2f2; }
.al pre { background: #f7f7f7; padding: 6px; margin: 4px 0; overflow-x: auto; }
.al .al-call { border-left: 3px solid #888; padding: 4px 10px; margin: 8px 0; }
.al .al-image { display: block; max-width: 100%; margin: 4px 0; }
.al svg.al-tree { display: block; max-width: 100%; height: auto; }
.al ul.al-decisions { padding-left: 20px; }
.al .al-text { max-width: 60em; line-height: 1.6; }
.al .al-bar { position: relative; width: 300px; height: 18px; background: #eee; margin: 4px 0; }
.al .al-bar div { height: 100%; background: #4a7bd0; }
.al .al-bar span { position: absolute; left: 6px; top: 0; font-size: 12px; }
.al .al-missing, .al .al-note { color: #a15c00; }
.al tr.al-decisive th, .al tr.al-decisive td { background: #fff3cd; font-weight: bold; }
"""


def rows_table(
    rows: list[dict[str, Any]], limit: int = MAX_ROWS, first: Sequence[str] = (), total: int | None = None
) -> str:
    """Rows (dicts with the same keys) as an HTML table, the first ``limit`` of them, columns
    ``first`` (a table's key) leading; one line per row, a wide table scrolls sideways and a
    long value is cut, whole on hover. ``total``: how many there are, where ``rows`` holds
    only the first."""
    if not rows:
        return "<p class='al-note'>(no rows)</p>"
    names = [n for n in first if n in rows[0]] + [n for n in rows[0] if n not in first]
    head = "".join(f"<th>{escape(str(n))}</th>" for n in names)
    body = "".join("<tr>" + "".join(_td(r.get(n)) for n in names) + "</tr>" for r in rows[:limit])
    total = len(rows) if total is None else total
    more = f"<p class='al-note'>… {total - limit} more row(s)</p>" if total > limit else ""
    return f"<div class='al-scroll'><table><tr>{head}</tr>{body}</table></div>{more}"


def _td(value: Any) -> str:
    text = escape(_cell(value))
    return f"<td title='{text}'>{text}</td>" if len(text) > 40 else f"<td>{text}</td>"


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(value)


Steps = dict[int, str]  # segment id -> its plain words (segmenter.step_words.step_names)


def step_said(steps: Steps, segment: int) -> str:
    """A step in words; without a run's names (a notebook answer), its label in the diagram."""
    return steps.get(segment, f"step S{segment if segment >= 0 else -1 - segment}")


def lineage_html(lineage: AugmentedLineage, limit: int = MAX_ROWS, steps: Steps | None = None) -> str:
    """The answer as a notebook shows it: each chosen output row apart (its values, its
    model decisions with their reasons, the source rows it was made from), then what the
    tracing queries cost, once for all the rows."""
    steps = steps or {}
    if lineage.by_row is not None and len(lineage) > 1:
        parts = [f"<p>{len(lineage)} output rows, each with its own answer (<code>lin[i]</code>)</p>"]
        for i in range(min(len(lineage), limit)):  # only the rows shown are taken apart
            parts.append(f"<h3>lin[{i}]</h3>{row_html(lineage[i], steps, limit)}")
        if len(lineage) > limit:
            parts.append(f"<p class='al-note'>… {len(lineage) - limit} more row(s)</p>")
    else:
        parts = [row_html(lineage, steps, limit)]
    parts += [f"<h4>Tracing queries ({lineage.seconds:.2f} s)</h4>", queries_table(lineage.queries, steps)]
    return "".join(parts)


def row_html(lineage: AugmentedLineage, steps: Steps, limit: int = MAX_ROWS) -> str:
    """One output row (or the rows an answer merges): values, decisions, source rows."""
    parts = [values_html(lineage, limit), f"<p class='al-size'>{escape(size_line(lineage))}</p>"]
    if lineage.confidence is not None:
        parts += ["<h4>Confidence</h4>", confidence_html(lineage.confidence)]
    decisions = f"<h4>Model decisions ({len(lineage.reasoning_rows())})</h4>"
    parts += [decisions, decisions_html(lineage, steps, limit)]
    scope = f" ({escape(lineage.scope)})" if lineage.scope else ""
    parts += [f"<h4>Source rows it was made from{scope}</h4>", sources_html(lineage, steps, limit)]
    return "".join(parts)


def values_html(lineage: AugmentedLineage, limit: int = MAX_ROWS) -> str:
    """The row's values, one column a line (readable on a phone); several rows as a table."""
    if lineage.targets is None:
        return "<p class='al-note'>every output row of the run</p>"
    targets = collect_rows(lineage.targets)
    if len(targets) != 1:
        return rows_table(targets, limit)
    lines = "".join(f"<tr><th>{escape(str(k))}</th>{_td(v)}</tr>" for k, v in targets[0].items())
    return f"<div class='al-scroll'><table class='al-values'>{lines}</table></div>"


def size_line(lineage: AugmentedLineage) -> str:
    """How much stands behind the rows: contributing source rows by table, the rows only
    checked, and model calls."""
    made, checked = [], 0
    for table in lineage.tables:
        rows, control = lineage.part_counts(table)
        made.append(f"{table}: {rows} row(s)")
        checked += control
    line = f"Made from {', '.join(made) or 'no source row'}"
    line += f" (+{checked} only checked for a match)" if checked else ""
    return f"{line}; {len(lineage.reasoning_rows())} model call(s)."


def decisions_html(lineage: AugmentedLineage, steps: Steps, limit: int = MAX_ROWS) -> str:
    """What each model decided on the way, summed up first, then every call with its reason
    drawn (a call reached along two steps, a CTE used twice, is drawn once)."""
    if not lineage.reasoning:
        return "<p class='al-note'>No model ran on the way to this row.</p>"
    summary, parts = [], []
    drawn: set[str] = set()
    for entry in lineage.reasoning:
        calls = lineage.calls(entry)
        said = f"{entry.value} = {entry.udf}({', '.join(entry.inputs)})"
        values = Counter(shown(c["value"]) for c in calls)
        counted = ", ".join(f"{v} ×{n}" for v, n in values.most_common())
        where = step_said(steps, entry.segment)
        summary.append(f"<li><b>{escape(said)}</b>: {escape(counted)} <small>({escape(where)})</small></li>")
        parts.append(f"<h5>{escape(said)}, {escape(where)}: {len(calls)} call(s)</h5>")
        parts += [_call_html(entry.udf, c, drawn, lineage.origins) for c in calls[:limit]]
        if len(calls) > limit:
            parts.append(f"<p class='al-note'>… {len(calls) - limit} more call(s)</p>")
    return f"<ul class='al-decisions'>{''.join(summary)}</ul>{''.join(parts)}"


def _call_html(udf: str, call: dict[str, Any], drawn: set[str], origins: dict[str, Any]) -> str:
    """A call with its reason drawn and the source rows it read (a keyless row read in place
    by its file and row, as the tables below show it)."""
    key = repr((udf, sorted(call["inputs"].items()), call["value"]))
    if key in drawn:
        return f"<p class='al-note'>{escape(_call_line(call))}: drawn above</p>"
    drawn.add(key)
    read = ""
    if call["reads"]:
        read = f"<p class='al-note'>read: {escape(_reads_said(call['reads'], origins))}</p>"
    return render_call(call["inputs"], call["value"], call["reason"]) + read


def _reads_said(reads: dict[str, list[dict[str, Any]]], origins: dict[str, Any], most: int = 5) -> str:
    """``table id, id; table file rows n, n`` for the source rows a call read."""
    parts = []
    for table, ids in reads.items():
        placed = placed_rows(ids, origins.get(table))
        if not placed or any("file" not in r for r in placed):  # keyed rows: their key values
            parts.append(reads_line({table: ids}, most))
            continue
        by_file: dict[str, list[str]] = {}
        for row in placed:
            by_file.setdefault(row["file"], []).append(str(row["row"]))
        parts.append(f"{table} " + ", ".join(f"{f} rows {_first(n, most)}" for f, n in by_file.items()))
    return "; ".join(parts)


def _first(items: list[str], most: int) -> str:
    return ", ".join(items[:most]) + (f", … {len(items) - most} more" if len(items) > most else "")


def sources_html(lineage: AugmentedLineage, steps: Steps, limit: int = MAX_ROWS) -> str:
    """Per table its contributing rows, key first; the rows only checked for a match are
    counted, with what checked them, and folded away."""
    parts = []
    for table in lineage.tables:
        count, checked = lineage.part_counts(table)  # only the rows shown are made dicts
        rows = lineage.first_rows(table, "contributing", limit)
        key = lineage.keys.get(table, ())
        via = lineage.path_notes(table, lambda path: step_said(steps, path[-1]), among=rows)
        if any(via(r) for r in rows):  # rows that came by different paths (subqueries): say which
            rows = [{"read by": via(r), **r} for r in rows]
            key = ("read by", *key)
        origin = lineage.origins.get(table)
        where = f" <small>(read from {escape(origin['location'])})</small>" if origin else ""
        parts.append(f"<h5>{escape(table)}: {count} row(s){where}</h5>")
        parts.append(rows_table(placed_rows(rows, origin), limit, key, count))
        if checked:
            by = listed(sorted({step_said(steps, s) for _, s in lineage.control.get(table, {}).values()}))
            summary = f"+ {checked} row(s) only checked for a match, by {by}: they gave no value"
            shown = placed_rows(lineage.first_rows(table, "control", limit), origin)
            parts.append(
                f"<details class='al-control'><summary class='al-note'>{escape(summary)}</summary>"
                f"{rows_table(shown, limit, key, checked)}</details>"
            )
    return "".join(parts) or "<p class='al-note'>no source row</p>"


def placed_rows(rows: list[dict[str, Any]], origin: dict[str, Any] | None) -> list[dict[str, Any]]:
    """A keyless row read in place named by its file and row number, not its packed id."""
    if not origin or not origin.get("row_id"):
        return rows
    files = origin["files"]
    return [
        {"file": files[r[ROW_ID_COLUMN] >> ROW_SHIFT].rsplit("/", 1)[-1], "row": r[ROW_ID_COLUMN] & ROW_MASK}
        | {k: v for k, v in r.items() if k != ROW_ID_COLUMN}
        if isinstance(r.get(ROW_ID_COLUMN), int)
        else r
        for r in rows
    ]


def _call_line(call: dict[str, Any]) -> str:
    return f"{fmt_row(call['inputs'])} -> {shown(call['value'])}"


def queries_table(queries: list[TraceStat], steps: Steps) -> str:
    """Each tracing query: the step it traced, its kind, time and row counts."""
    rows = [
        {
            "step": step_said(steps, q.segment),
            "kind": q.kind,
            "operators": _in_words(q.pattern, steps),
            "seconds": f"{q.seconds:.3f}",
            "rows in": "all" if q.rows_in is None else q.rows_in,
            "rows out": ", ".join(
                f"{_in_words(k, steps)}: {'all' if v is None else v}" for k, v in q.rows_out.items()
            ),
        }
        for q in queries
    ]
    return rows_table(rows, len(rows))


_NAMED = re.compile(r"\bsegment (-?\d+)|\btable (\w+)")


def _in_words(text: str, steps: Steps) -> str:
    """The engine's "segment 2" and "table orders" as the step's words and the table's name."""
    return _NAMED.sub(lambda m: m[2] or step_said(steps, int(m[1])), text)


def confidence_html(confidence: ConfidenceAnswer) -> str:
    """Per output row: its probability (drawn as a bar), method, formula and decisive facts."""
    titles = ("row", "probability", "method", "lineage", "decisive facts")
    head = "".join(f"<th>{escape(c)}</th>" for c in titles)
    body = []
    for r in confidence.rows:
        facts = "<br>".join(
            f"{escape(w.fact)} <small>(p={w.probability:.3g}, effect {w.effect:+.3f})</small>"
            for w in r.weights
        )
        bar = f'<div style="background:#4a7;height:8px;width:{100 * r.probability:.1f}px"></div>'
        body.append(
            f"<tr><td>{escape(row_text(r.row))}</td><td>{r.probability:.4f}{bar}</td>"
            f"<td>{escape(r.estimate.method + guarantee(r.estimate))}</td>"
            f"<td><code>{escape(short_formula(r.formula))}</code></td><td>{facts}</td></tr>"
        )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def forward_html(forward: ForwardLineage, limit: int = MAX_ROWS) -> str:
    rows = forward.rows()
    head = (
        f"<p>{len(rows)} output row(s) depend on {escape(forward.what)} ({forward.seconds * 1000:.0f} ms)</p>"
    )
    return fragment(head + rows_table(collect_rows(forward.given), limit) + rows_table(rows, limit))


def run_steps(run: Run) -> Steps:
    """The run's segments in plain words, from the names in the user's own tree."""
    return step_names(run.root, user_columns(run.task.root))


def run_html(run: Run) -> str:
    """How a run computed its rows: when and how long, the task's text, the operator tree
    drawn to fit the width (the root at the top), its steps in words, the tree as text."""
    record = run.record
    facts = {
        "run": run.id,
        "strategy": run.strategy,
        "backend": run.backend,
        "created": record.get("created", "not recorded"),
        "task seconds": f"{record['task_seconds']:.2f}" if "task_seconds" in record else "not recorded",
        "output rows": record["output"]["rows"],
        "stored tuples": run.stored_tuples,
    }
    summary = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in facts.items())
    task = run.task
    heading = LANGUAGES.get(task.language, "Task text")
    code = readable(task.language, task.text.strip())
    text = f"<h4>{escape(heading)}</h4><pre class='al-code'>{escape(code)}</pre>" if code else ""
    steps = "Steps" if run.root.top is task.root else REWRITTEN
    return (
        f"<div class='al-scroll'><table>{summary}</table></div>{text}{tree_html(run)}"
        f"<h4>{steps}</h4>{steps_html(run.root, run_steps(run))}"
        f"<details><summary>The operator tree as text</summary><pre>{escape(run.tree())}</pre></details>"
    )


REWRITTEN = "Steps the run traced (its rewrite of the task, numbered apart from the diagram's)"


def tree_html(run: Run) -> str:
    """The diagram of the task as written: a run that captured a rewrite of it (a window's,
    on the eager backends) is drawn with the task's own segments."""
    root = run.task.root
    drawn = run.root if run.root.top is root else segment(root)
    rewrite = "<p class='al-note'>the task as written; the run traced its rewrite</p>"
    note = "" if drawn is run.root else rewrite
    svg = tree_svg(root, drawn, step_names(drawn, user_columns(root)))
    return f"<details open><summary><b>Operator tree and its steps</b></summary>{note}{svg}</details>"


def steps_html(root: Segment, steps: Steps) -> str:
    """One line per step: its label in the diagram, its words, its operators, its inputs."""
    lines = []
    for seg in root.walk():
        inputs = [step_said(steps, c.id) for c in seg.children]
        inputs += [leaf.table for leaf in seg.leaves if isinstance(leaf, Source)]
        kind = " (a difference)" if seg.is_d else ""
        lines.append(
            f"<li><b>S{seg.id}</b> {escape(steps[seg.id])}{kind} <small>{escape(seg.pattern())}; "
            f"reads {escape(listed(inputs))}</small></li>"
        )
    return f"<ul class='al-steps'>{''.join(lines)}</ul>"


def fragment(body: str) -> str:
    """A self-styled fragment, as a notebook cell shows it."""
    return f"<div class='al'><style>{STYLE}</style>{body}</div>"
