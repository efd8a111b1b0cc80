"""The model audit report: one self-contained HTML file (styles inline, images as data URIs,
nothing fetched when it is opened) that shows an auditor a run's task, its models and, for
each chosen output row, the augmented lineage with every model's reason drawn.

:func:`audit_report` and :func:`report_dict` only turn a run and its lineage answers into
text; writing files and logging them to MLflow are separate steps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from tracing.lineage import collect_rows, fmt_row
from tracing.present.html import STYLE, lineage_html, rows_table, run_html

if TYPE_CHECKING:
    from tracing.lineage import AugmentedLineage
    from tracing.session import Run

HEADING = 120  # characters of an output row shown in its section's heading (the table has it all)
Models = dict[str, dict[str, str]]  # UDF -> {"weights": file, "sha256": checksum}


def audit_report(run: Run, lineages: Sequence[AugmentedLineage], models: Models | None = None) -> str:
    """The report as an HTML document: ``lineages`` holds one answer per output row shown (or
    one answer for a set of rows). The page is a Jinja2 template (autoescaped); the parts
    drawn by :mod:`tracing.present.html` come in as HTML already escaped there."""
    return _template().render(
        title=f"Model audit report: run {run.id}",
        generated=f"{datetime.now(UTC):%Y-%m-%d %H:%M}",
        style=STYLE + PAGE_STYLE,
        warnings=run.warnings,
        task_html=run_html(run),
        models_html=rows_table(_model_rows(run, models or {})),
        rows=[{"heading": _heading(lin), "size": _size(lin), "html": lineage_html(lin)} for lin in lineages],
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


def _size(lineage: AugmentedLineage) -> str:
    """How much stands behind a row: source rows and model calls."""
    counts = lineage.counts()
    calls = sum(n for k, n in counts.items() if k.endswith(" calls"))
    tables = {k: n for k, n in counts.items() if not k.endswith(" calls") and n}
    return f"{sum(tables.values())} source row(s) in {len(tables)} table(s), {calls} model call(s)"


def _heading(lineage: AugmentedLineage) -> str:
    """The output row an answer is about, or how many rows it covers."""
    targets = collect_rows(lineage.targets) if lineage.targets is not None else []
    if len(targets) != 1:
        return f"{len(targets)} output rows"
    row = fmt_row(targets[0])
    return f"Output row {row if len(row) <= HEADING else row[:HEADING] + ' …'}"


PAGE_STYLE = """
body.al { max-width: 1100px; margin: 20px auto; padding: 0 16px; }
.al section.al-row { border-top: 2px solid #333; margin-top: 24px; }
.al nav.al-toc li { margin: 2px 0; }
@media (prefers-color-scheme: dark) {
  body.al { background: #16181c; color: #e4e4e4; }
  .al th { background: #2a2d33; } .al th, .al td { border-color: #444; }
  .al pre { background: #202329; } .al a { color: #8ab4f8; }
  .al .al-warning { background: #3a3012; }
}
.al .al-warning { background: #fff3cd; border-left: 4px solid #a15c00; padding: 6px 10px; }
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
            "id": run.id,
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
