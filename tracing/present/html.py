"""Lineage answers, forward answers and runs as HTML fragments: what Jupyter shows
(``_repr_html_``) and what the audit report is assembled from, so both read the same."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from tracing.confidence.answer import ConfidenceAnswer, guarantee, row_text, short_formula
from tracing.lineage import AugmentedLineage, TraceStat, collect_rows, fmt_row, reads_line, shown
from tracing.present.reasons import render_call
from tracing.present.tree import tree_svg
from tracing.task_code import LANGUAGES

if TYPE_CHECKING:
    from tracing.forward import ForwardLineage
    from tracing.session import Run

MAX_ROWS = 50  # rows per table; the JSON export has them all

STYLE = """
.al { font-family: system-ui, sans-serif; font-size: 14px; color: #222; }
.al table { border-collapse: collapse; margin: 4px 0 10px; }
.al th, .al td { border: 1px solid #ccc; padding: 2px 8px; text-align: left; vertical-align: top;
  white-space: nowrap; max-width: 48em; overflow: hidden; text-overflow: ellipsis; }
.al .al-scroll { overflow-x: auto; max-width: 100%; }
.al h1, .al h2, .al h3 { overflow-wrap: anywhere; }
.al th { background: #f2f2f2; }
.al pre { background: #f7f7f7; padding: 6px; margin: 4px 0; overflow-x: auto; }
.al .al-call { border-left: 3px solid #888; padding: 4px 10px; margin: 8px 0; }
.al .al-image { display: block; max-width: 100%; margin: 4px 0; }
.al .al-text { max-width: 60em; line-height: 1.6; }
.al .al-bar { position: relative; width: 300px; height: 18px; background: #eee; margin: 4px 0; }
.al .al-bar div { height: 100%; background: #4a7bd0; }
.al .al-bar span { position: absolute; left: 6px; top: 0; font-size: 12px; }
.al .al-missing, .al .al-note { color: #a15c00; }
.al tr.al-decisive th, .al tr.al-decisive td { background: #fff3cd; font-weight: bold; }
"""


def rows_table(rows: list[dict[str, Any]], limit: int = MAX_ROWS, first: Sequence[str] = ()) -> str:
    """Rows (dicts with the same keys) as an HTML table, the first ``limit`` of them, columns
    ``first`` (a table's key) leading; one line per row, a wide table scrolls sideways and a
    long value is cut, whole on hover."""
    if not rows:
        return "<p class='al-note'>(no rows)</p>"
    names = [n for n in first if n in rows[0]] + [n for n in rows[0] if n not in first]
    head = "".join(f"<th>{escape(str(n))}</th>" for n in names)
    body = "".join("<tr>" + "".join(_td(r.get(n)) for n in names) + "</tr>" for r in rows[:limit])
    more = f"<p class='al-note'>… {len(rows) - limit} more row(s)</p>" if len(rows) > limit else ""
    return f"<div class='al-scroll'><table><tr>{head}</tr>{body}</table></div>{more}"


def _td(value: Any) -> str:
    text = escape(_cell(value))
    return f"<td title='{text}'>{text}</td>" if len(text) > 40 else f"<td>{text}</td>"


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(value)


def _apart(lineage: AugmentedLineage, limit: int) -> list[dict[str, Any]]:
    """Each output row with its index and what stands behind it alone."""
    rows = []
    for i in range(min(len(lineage), limit)):
        one = lineage[i]
        counts = one.counts()
        calls = sum(n for k, n in counts.items() if k.endswith(" calls"))
        (target,) = collect_rows(one.targets)  # type: ignore[arg-type]
        sources = sum(counts.values()) - calls
        rows.append({"lin[i]": i, **target, "source rows": sources, "model calls": calls})
    return rows


def lineage_html(lineage: AugmentedLineage, limit: int = MAX_ROWS) -> str:
    """The output rows asked about, their source rows, every model call with its reason drawn,
    the confidence (when the answer carries one) and the tracing queries' cost."""
    parts = []
    if lineage.by_row is not None and len(lineage) > 1:
        heading = "<h4>Output rows (lin[i]: row i's own answer)</h4>"
        parts += [heading, rows_table(_apart(lineage, limit), limit)]
    elif lineage.targets is not None:
        parts += ["<h4>Output row(s)</h4>", rows_table(collect_rows(lineage.targets), limit)]
    if lineage.confidence is not None:
        parts += ["<h4>Confidence</h4>", confidence_html(lineage.confidence)]
    scope = f" ({escape(lineage.scope)})" if lineage.scope else ""
    parts.append(f"<h4>Source lineage{scope}</h4>")
    for table in lineage.tables:
        rows, checked = lineage.split(table)  # contributing rows first; control rows counted
        key = lineage.keys.get(table, ())
        via = lineage.path_notes(table)
        if any(via(r) for r in rows):  # rows that came by different paths (subqueries): say which
            rows = [{"via segments": via(r), **r} for r in rows]
            key = ("via segments", *key)
        parts.append(f"<h5>{escape(table)}: {len(rows)} row(s)</h5>")
        if checked:
            by = "; ".join(lineage.checks(table))
            parts.append(f"<p class='al-note'>+ {len(checked)} row(s) only checked, by {escape(by)}</p>")
        parts.append(rows_table(rows, limit, key))
    parts.append("<h4>Reasoning lineage</h4>")
    if not lineage.reasoning:
        parts.append("<p class='al-note'>no function operator ran in reasoning mode on the way</p>")
    drawn: set[str] = set()  # a call reached along two segments (a CTE used twice) is drawn once
    for entry in lineage.reasoning:
        calls = lineage.calls(entry)
        parts.append(f"<h5>{escape(entry.udf)} (segment {entry.segment}): {len(calls)} call(s)</h5>")
        for c in calls[:limit]:
            key = repr((entry.udf, sorted(c["inputs"].items()), c["value"]))
            if key in drawn:
                parts.append(f"<p class='al-note'>{escape(_call_line(c))}: drawn above</p>")
            else:
                drawn.add(key)
                parts.append(render_call(c["inputs"], c["value"], c["reason"]))
                if c["reads"]:
                    parts.append(f"<p class='al-note'>read: {escape(reads_line(c['reads']))}</p>")
        if len(calls) > limit:
            parts.append(f"<p class='al-note'>… {len(calls) - limit} more call(s)</p>")
    parts += [f"<h4>Tracing queries ({lineage.seconds:.2f} s)</h4>", queries_table(lineage.queries)]
    return "".join(parts)


def _call_line(call: dict[str, Any]) -> str:
    return f"{fmt_row(call['inputs'])} -> {shown(call['value'])}"


def queries_table(queries: list[TraceStat]) -> str:
    rows = [
        {
            "segment": q.segment,
            "kind": q.kind,
            "pattern": q.pattern,
            "seconds": f"{q.seconds:.3f}",
            "rows in": "all" if q.rows_in is None else q.rows_in,
            "rows out": ", ".join(f"{k}: {'all' if v is None else v}" for k, v in q.rows_out.items()),
        }
        for q in queries
    ]
    return rows_table(rows, len(rows))


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


def run_html(run: Run) -> str:
    """A run's summary, operator tree and segments."""
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
    code = task.text.strip()
    if task.language == "plan":  # Spark's expression ids (Income#27L) mean nothing to a reader
        code = re.sub(r"#\d+L?\b", "", code)
    text = f"<h4>{escape(heading)}</h4><pre class='al-code'>{escape(code)}</pre>" if code else ""
    return (
        f"<div class='al-scroll'><table>{summary}</table></div>{text}<h4>Operator tree and segments</h4>"
        f"<div class='al-scroll'>{tree_svg(task.root, run.root)}</div>"
        f"<pre>{escape(run.tree())}</pre>"
        f"<h4>Segments</h4><pre>{escape(run.segments())}</pre>"
    )


def fragment(body: str) -> str:
    """A self-styled fragment, as a notebook cell shows it."""
    return f"<div class='al'><style>{STYLE}</style>{body}</div>"
