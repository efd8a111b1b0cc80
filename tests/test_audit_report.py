"""The audit report and the notebook HTML on a real run of person_detection (YOLOv8n on two
COCO photos, one with a person): images embedded with the person box drawn, the page
rendered by a real headless browser with every image decoded and no console message; the
reason renderers on the reason shapes of the other models; the confidence a lineage answer
may carry."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import markupsafe
import pandas as pd
import pyarrow as pa
import pytest
from PIL import Image, ImageChops

from cda_workload.workloads.udfs import register_udfs_named_in, udf_models
from tests.browser import INTERNAL, first_screens
from tests.test_udf_vision import WITH_PERSON, WITHOUT_PERSON
from tracing import AugmentedLineage, ForwardLineage, LineageSession, Run
from tracing.lineage import ReasoningRows, collect_rows
from tracing.present.html import lineage_html, run_html, size_line
from tracing.present.reasons import MAX_SIDE, attribution_chart, highlighted_text, render_call
from tracing.present.report import audit_report, report_dict, write_text
from tracing.tracking import run_params

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
SQL = "SELECT id, person_detection(path) AS person FROM parts"


@pytest.fixture(scope="module")
def run(spark, tmp_path_factory: pytest.TempPathFactory) -> Run:
    als = LineageSession(spark, store=str(tmp_path_factory.mktemp("report") / "store"))
    parts = pd.DataFrame([(1, WITH_PERSON), (2, WITHOUT_PERSON)], columns=["id", "path"])
    als.register_table("parts", parts, key="id")
    assert register_udfs_named_in(spark, SQL) == ["person_detection"]
    return als.run(SQL, strategy="fm")


@pytest.fixture(scope="module")
def lineage(run: Run) -> AugmentedLineage:
    return run.lineage()


@pytest.fixture(scope="module")
def rows(run: Run) -> AugmentedLineage:
    """Both output rows, each kept apart (``lin.rows``), as ``al report --where`` asks."""
    return run.lineage(where="id IN (1, 2)")


@pytest.fixture(scope="module")
def page(run: Run, rows: AugmentedLineage, tmp_path_factory: pytest.TempPathFactory) -> Path:
    html = audit_report(run, rows.rows, udf_models(["person_detection"]))
    return write_text(html, tmp_path_factory.mktemp("page") / "report.html")


def _images(html: str) -> list[Image.Image]:
    sources = re.findall(r"<img [^>]*src='([^']*)'", html)
    assert all(s.startswith("data:image/jpeg;base64,") for s in sources)
    return [Image.open(io.BytesIO(base64.b64decode(s.split(",", 1)[1]))).convert("RGB") for s in sources]


def test_report_is_self_contained_and_draws_the_person_box(page: Path, lineage: AugmentedLineage) -> None:
    html = page.read_text()
    assert not re.search(r"(src|href)=['\"](?!data:|#)", html)  # nothing to fetch (links within the page)
    assert "yolov8n_int8_rebuilt.pt" in html and "SELECT id, person_detection(path)" in html
    calls = {c["inputs"]["path"]: c for c in lineage.reasoning_rows("person_detection")}
    order = re.findall(r"alt='([^']*): (\d+) box", html)
    assert {path: int(n) for path, n in order} == {p: len(c["reason"]["boxes"]) for p, c in calls.items()}
    images = dict(zip([path for path, _ in order], _images(html)))
    assert all(max(i.size) <= MAX_SIDE for i in images.values())
    box = calls[WITH_PERSON]["reason"]["boxes"][0]
    scale = images[WITH_PERSON].width / calls[WITH_PERSON]["reason"]["width"]
    bottom_middle = (round((box["x1"] + box["x2"]) / 2 * scale), round(box["y2"] * scale) - 1)
    edge = images[WITH_PERSON].getpixel(bottom_middle)
    assert edge[0] > 180 and edge[1] < 90 and edge[2] < 90  # the box's red bottom edge


def test_report_renders_in_a_headless_browser(page: Path, run: Run) -> None:
    ARTIFACTS.mkdir(exist_ok=True)  # the row and its decision on the first screen, 1400 and 412 px
    shown = first_screens(page, ARTIFACTS)["desktop"]
    assert shown.console == []
    assert (shown.images, shown.broken_images) == (2, 0)
    operators = len(list(run.task.root.walk()))  # the diagram: one node per operator and source
    assert (shown.trees, shown.drawn_trees, shown.tree_nodes) == (1, 1, [operators])
    shot = Image.open(shown.screenshot).convert("RGB")
    blank = Image.new("RGB", shot.size, "white")
    assert ImageChops.difference(shot, blank).getbbox() is not None
    assert len(shot.getcolors(maxcolors=1 << 20) or []) > 1000  # a photo, not just text on white


def test_report_is_written_for_an_auditor(page: Path, rows: AugmentedLineage) -> None:
    """Each row first (its values, its model decisions, its source rows), with its own
    counts and links to the next, the previous and the list of rows; how it was computed
    last and folded; a print stylesheet; none of the engine's names."""
    html = page.read_text()
    assert not INTERNAL.search(html), INTERNAL.search(html)
    head, *sections = html.split('<section class="al-row"')
    assert len(sections) == len(rows) == 2 and '<a href="#row-2">' in head  # the list of rows
    *sections, how = [*sections[:-1], *sections[-1].split('<section class="al-how"')]
    for i, (one, section) in enumerate(zip(rows.rows, sections, strict=True), 1):
        (row,) = collect_rows(one.targets)  # type: ignore[arg-type]
        assert f"<tr><th>id</th><td>{row['id']}</td></tr>" in section
        order = [section.index(s) for s in ("al-values", "al-decisions", "Source rows it was made from")]
        assert order == sorted(order)
        assert markupsafe.escape(size_line(one)) in section  # its own counts, not the batch's
        links = set(re.findall(r'href="#([\w-]+)"', section))
        assert links == {"summary", f"row-{3 - i}"}  # previous or next, and back to the list
    assert "Tracing queries" not in "".join(sections) and how.count("Tracing queries") == 1
    assert how.lstrip().startswith('id="how">\n<details>\n<summary><h2>How it was computed')
    assert "@media print" in html and "break-before: page" in html
    decided = "person = person_detection(path)</b>: True ×1 <small>(the person_detection model over parts)"
    assert decided in html  # the decision, in the user's names, and the step in words


def test_json_export(run: Run, lineage: AugmentedLineage) -> None:
    data = report_dict(run, [lineage], udf_models(["person_detection"]))
    assert data["run"]["segments"] == run.segments() and data["run"]["strategy"] == "fm"
    (model,) = data["models"]
    assert model["UDF"] == "person_detection" and len(model["sha256"]) == 64
    assert run_params(run)["model.person_detection.sha256"] == model["sha256"]  # what MLflow logs
    assert [t["person"] for t in data["answers"][0]["targets"]] == [True, False]


def test_notebook_html(run: Run, lineage: AugmentedLineage, rows: AugmentedLineage) -> None:
    assert "<img" in lineage._repr_html_() and "Tracing queries" in lineage._repr_html_()
    apart = rows._repr_html_()  # a multi-row answer: each row apart, the queries once
    assert "<h3>lin[0]</h3>" in apart and "<h3>lin[1]</h3>" in apart and "lin[2]" not in apart
    assert apart.count("class='al-values'") == 2 and apart.count("Tracing queries") == 1
    assert "φ Function: person := person_detection(path)" in run_html(run)
    given = pa.table({"LoanID": ["L02"]})
    forward = ForwardLineage("loan rows", given, pa.table({"Judge": ["Reject"], "count": [1]}), 1, 0.01)
    assert "1 output row(s) depend on loan rows" in forward._repr_html_()


def test_sentiment_and_attribution_reasons_are_drawn() -> None:
    tokens = [{"token": "great", "attribution": 2.2}, {"token": "This", "attribution": -0.03}]
    text = highlighted_text("This product is great", tokens)
    assert "rgba(26,127,55,0.85)' title='attribution +2.200'>great</mark>" in text
    assert "rgba(198,40,40," in text and ">product<" not in text
    assert "toward the value</mark>" in text and "against it</mark>" in text  # the colours' key
    attributions = [
        {"attribute": "Debt", "value": 1350.0, "attribution": 0.4},
        {"attribute": "Income", "value": 2200.0, "attribution": -0.1},
    ]
    chart = attribution_chart(attributions)
    assert chart.count("<rect") == 2 and "Debt = 1350" in chart and "-0.100" in chart
    call = render_call({"Income": 2200}, "Reject", {"method": "shap", "attributions": attributions})
    assert "<svg" in call and "<details>" in call  # drawn, raw reason folded away
    based = render_call({"Income": 2200}, "Reject", {"attributions": attributions, "base_value": 0.35})
    assert "base value 0.350 + attributions 0.300 = 0.650, the explained probability" in based
    plain = render_call({"x": 1}, "a", {"attributes": ["Debt"]})
    assert "<svg" not in plain and "<details open>" in plain


def test_changed_weights_are_reported_in_answers_and_reports(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run records the sha256 of the weights it was made with; opened where those weights
    now differ, its answers and reports say so, and the report lists the recorded ones."""
    from models import yolo_detector

    real = yolo_detector.weights_path()
    models = tmp_path / "models"
    (models / "yolo").mkdir(parents=True)
    (models / "sentiment").symlink_to(real.parent.parent / "sentiment")
    (models / yolo_detector.WEIGHTS).write_bytes(real.read_bytes() + b"\0")  # hashed, never loaded
    assert run.session.load_run(run.id).warnings == []
    monkeypatch.setenv("AL_MODELS_DIR", str(models))
    loaded = run.session.load_run(run.id)
    (warning,) = loaded.warnings
    recorded = run.record["models"]["person_detection"]["sha256"]
    assert warning.startswith("the weights of person_detection (yolo/") and recorded[:12] in warning
    answer = loaded.lineage()
    assert str(answer).startswith(f"Warning: {warning}") and answer.to_dict()["warnings"] == [warning]
    html = audit_report(loaded, [answer], loaded.models)
    assert f"Warning: {markupsafe.escape(warning)}" in html and recorded in html  # as Jinja2 escapes
    assert report_dict(loaded, [answer], loaded.models)["warnings"] == [warning]


def test_a_call_reached_along_two_segments_is_drawn_once() -> None:
    calls = pa.table({"Income": [2200], "Judge": ["Reject"], "why": [{"attributes": ["Debt"]}]})
    entries = [ReasoningRows("credit_rules", s, ("Income",), "Judge", "why", calls) for s in (1, 3)]
    html = lineage_html(AugmentedLineage(source={}, reasoning=entries, queries=[]))
    assert html.count("class='al-call'") == 1
    assert "Income=2200 -&gt; &#x27;Reject&#x27;: drawn above" in html
