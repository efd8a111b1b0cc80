"""The model audit report: one self-contained HTML file (styles inline, images as data URIs,
nothing fetched when it is opened, a print stylesheet for filing it) that shows an auditor
each chosen output row first, with the models' decisions and reasons and the source rows
behind it, and then, folded, the run's task, tree, steps, models and timings.

:func:`audit_report` and :func:`report_dict` only turn a run and its lineage answers into
text; writing files and logging them to MLflow are separate steps.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from segmenter.step_words import listed, tables_below
from tracing.lineage import collect_rows, fmt_row, shown
from tracing.present.html import STYLE, Steps, queries_table, row_html, rows_table, run_html, run_steps

if TYPE_CHECKING:
    from tracing.lineage import AugmentedLineage
    from tracing.session import Run

HEADING = 120  # characters of an output row shown in its section's heading (the table has it all)
Models = dict[str, dict[str, str]]  # UDF -> {"weights": file, "sha256": checksum}


def audit_report(
    run: Run, lineages: Sequence[AugmentedLineage], models: Models | None = None, question: str | None = None
) -> str:
    """The report as an HTML document written for an auditor: the rows asked about first,
    each with its model decisions and reasons and the source rows it was made from, then,
    folded, how the run computed them. ``lineages`` holds one answer per output row shown
    (or one answer for a set of rows). The page is a Jinja2 template (autoescaped); the
    parts drawn by :mod:`tracing.present.html` come in as HTML already escaped there.
    ``question``: how the rows were chosen (``--where``'s predicate), said at the top."""
    steps = run_steps(run)
    asked = _distinct_questions(lineages)
    return _template().render(
        title=_title(lineages),
        lead=_lead(run, len(lineages)),
        question=question,
        generated=f"{datetime.now(UTC):%Y-%m-%d %H:%M}",
        style=STYLE + PAGE_STYLE,
        warnings=run.warnings,
        rows=[_row(lin, steps) for lin in lineages],
        task_html=run_html(run),
        models_html=rows_table(_model_rows(run, models or {})),
        seconds=f"{sum(lin.seconds for lin in asked):.2f}",
        queries_html="".join(queries_table(lin.queries, steps) for lin in asked),
    )


@cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("tracing.present", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("audit_report.html.j2")


def _row(lineage: AugmentedLineage, steps: Steps) -> dict[str, str]:
    return {"heading": _heading(lineage), "decided": _decided(lineage), "html": row_html(lineage, steps)}


def _distinct_questions(lineages: Sequence[AugmentedLineage]) -> list[AugmentedLineage]:
    """One answer per question asked: the rows of one question share its tracing queries."""
    return list({id(lin.queries): lin for lin in lineages}.values())


def _title(lineages: Sequence[AugmentedLineage]) -> str:
    rows = sum(len(lin) for lin in lineages)
    return "Audit of one output row" if rows == 1 else f"Audit of {rows} output rows"


def _lead(run: Run, sections: int) -> str:
    """The question the page answers, and of which task."""
    tables = listed(tables_below(run.task.root))
    models = sorted(run.record.get("udfs", {}))
    calls = f" and calls the model(s) {listed(models)}" if models else ""
    rows = "each output row below" if sections > 1 else "the output row below"
    return (
        f"Run {run.id} of a task that reads {tables}{calls}. For {rows}: what the models "
        "decided on the way, with their reasons, and the source rows it was made from. How the "
        "run computed it comes last."
    )


def _decided(lineage: AugmentedLineage) -> str:
    """The models' values behind a row, in a line for the list of rows."""
    counts = Counter(f"{c['udf']}: {shown(c['value'])}" for c in lineage.reasoning_rows())
    return "; ".join(f"{v} ×{n}" for v, n in counts.most_common(3)) or "no model call"


def _heading(lineage: AugmentedLineage) -> str:
    """The output row an answer is about, or how many rows it covers."""
    targets = collect_rows(lineage.targets) if lineage.targets is not None else []
    if len(targets) != 1:
        return f"{len(targets)} output rows"
    row = fmt_row(targets[0])
    return row if len(row) <= HEADING else row[:HEADING] + " …"


PAGE_STYLE = """
body.al { max-width: 1100px; margin: 20px auto; padding: 0 16px; }
.al .al-lead { font-size: 15px; max-width: 60em; }
.al section.al-row { border-top: 2px solid #333; margin-top: 24px; }
.al nav.al-toc li { margin: 2px 0; }
.al nav.al-pager { display: flex; gap: 16px; justify-content: flex-end; margin-top: 6px; }
.al details > summary { cursor: pointer; }
.al details > summary h2 { display: inline; }
.al section.al-how { border-top: 2px solid #333; margin-top: 32px; padding-top: 8px; }
@media (prefers-color-scheme: dark) {
  body.al { background: #16181c; color: #e4e4e4; }
  .al th { background: #2a2d33; } .al th, .al td { border-color: #444; }
  .al pre { background: #202329; } .al a { color: #8ab4f8; }
  .al .al-warning { background: #3a3012; }
}
.al .al-warning { background: #fff3cd; border-left: 4px solid #a15c00; padding: 6px 10px; }
@media print {
  body.al { max-width: none; margin: 0; padding: 0; color: #000; background: #fff; font-size: 11pt; }
  .al nav.al-pager, .al nav.al-toc a::after { display: none; }
  .al section.al-row { break-before: page; border-top: none; }
  .al section.al-how { break-before: page; }
  .al h2, .al h3, .al h4, .al h5 { break-after: avoid; }
  .al .al-call, .al tr, .al svg, .al img { break-inside: avoid; }
  .al th, .al td { white-space: normal; max-width: none; overflow: visible; }
  .al .al-scroll, .al pre { overflow: visible; white-space: pre-wrap; }
  .al details::details-content { content-visibility: visible; display: contents; }
  .al details > summary { list-style: none; }
  .al a { color: inherit; text-decoration: none; }
}
"""


def _model_rows(run: Run, models: Models) -> list[dict[str, Any]]:
    return [
        {
            "UDF": udf,
            "module": module,
            "weights": models.get(udf, {}).get("weights", "none (rules or trained in-process)"),
            "sha256": models.get(udf, {}).get("sha256", "-"),
        }
        for udf, module in sorted(run.record.get("udfs", {}).items())
    ]


def report_dict(
    run: Run, lineages: Sequence[AugmentedLineage], models: Models | None = None
) -> dict[str, Any]:
    """The report's content as plain data (the JSON export)."""
    record = run.record
    answers = [lineage.to_dict() for lineage in lineages]
    return {
        "run": {
            "run_id": run.id,
            "strategy": run.strategy,
            "backend": run.backend,
            "created": record.get("created"),
            "task_seconds": record.get("task_seconds"),
            "output_rows": record["output"]["rows"],
            "task_text": run.task.text,
            "task_language": run.task.language,  # sql, code (the caller's) or plan (Spark's)
            "operator_tree": run.tree(),
            "segments": run.segments(),
        },
        "models": _model_rows(run, models or {}),
        "warnings": run.warnings,
        "answers": answers,
    }


def write_text(text: str, path: str | Path) -> Path:
    """Write ``text`` (the HTML or JSON) to ``path``, creating its folder."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


def to_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, default=str)


def log_to_mlflow(paths: Sequence[Path], folder: str = "audit") -> None:
    """Attach the written report files to the active MLflow run."""
    import mlflow

    for path in paths:
        mlflow.log_artifact(str(path), artifact_path=folder)
