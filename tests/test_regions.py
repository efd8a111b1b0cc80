"""Region lineage of model reasons: person boxes as pixel regions, supporting words as token
cells, decisive attributes as feature cells, compressed with ProvRC and answered in situ.

Every answer is checked against a brute-force oracle that expands the reasons into explicit
cell sets in plain Python (pixel (y, x) is the unit square at (x, y); a box holds it when they
overlap with positive area). The last tests run the real YOLOv8n through a real Spark run and
the real sentiment model."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cda_workload.workloads.udfs import register_udfs_named_in
from materialization.provrc import Relation, compress
from materialization.provrc.regions import RegionRelation, token_positions, words
from segmenter.errors import LineageError
from tests.test_udf_vision import WITH_PERSON, WITHOUT_PERSON
from tracing import AugmentedLineage, LineageSession
from tracing.lineage import ReasoningRows
from tracing.regions import RegionLineage, load_region_lineage

Cell = tuple[int, ...]


def _answer(
    target: dict[str, Any], udf: str, calls: list[tuple[dict[str, Any], Any, Any]]
) -> AugmentedLineage:
    """A lineage answer for one output row with the given (inputs, value, reason) calls."""
    names = tuple(calls[0][0]) if calls else ("x",)
    rows = pa.Table.from_pylist([{**i, "value": v, "reason": r} for i, v, r in calls]) if calls else None
    reasoning = [ReasoningRows(udf, 1, names, "value", "reason", rows)] if calls else []
    return AugmentedLineage(
        source={}, reasoning=reasoning, queries=[], targets=pa.Table.from_pylist([target])
    )


def _oracle_pixels(box: dict[str, float], width: int, height: int) -> set[tuple[int, int]]:
    return {
        (y, x)
        for y in range(height)
        for x in range(width)
        if x < box["x2"] and x + 1 > box["x1"] and y < box["y2"] and y + 1 > box["y1"]
    }


# --- images -----------------------------------------------------------------------------------
SIZES = {"a.jpg": (30, 40), "b.jpg": (25, 20), "c.jpg": (12, 12), "d.jpg": (35, 28)}  # (height, width)


def _random_box(rng: random.Random, height: int, width: int) -> dict[str, float]:
    x1, y1 = rng.uniform(-3, width - 1), rng.uniform(-3, height - 1)
    return {
        "x1": x1,
        "y1": y1,
        "x2": x1 + rng.uniform(0.3, width / 2),
        "y2": y1 + rng.uniform(0.3, height / 2),
        "confidence": 0.5,
    }


@pytest.fixture(scope="module")
def image_world() -> tuple[RegionLineage, dict[int, set[Cell]], list[str]]:
    """8 output rows over 4 images: random (overlapping, clipped) boxes, shared images, a row
    whose image shows no person, and a row with no model call at all."""
    rng = random.Random(7)
    paths = list(SIZES)
    answers, expected = [], {}
    for o in range(8):
        calls, cells = [], set()
        for path in rng.sample(paths, k=0 if o == 7 else rng.randint(1, 2)):
            height, width = SIZES[path]
            boxes = (
                []
                if (o == 3 or path == "c.jpg")
                else [_random_box(rng, height, width) for _ in range(rng.randint(1, 3))]
            )
            reason = {"boxes": boxes, "width": width, "height": height}
            calls.append(({"path": path}, bool(boxes), reason))
            cells |= {(paths.index(path), y, x) for b in boxes for y, x in _oracle_pixels(b, width, height)}
        answers.append(_answer({"id": o, "person": bool(cells)}, "person_detection", calls))
        expected[o] = cells
    lineage = RegionLineage.from_lineage(answers)
    order = [lineage.subjects.index(p) for p in paths]  # oracle cells use `paths` order
    expected = {o: {(order[s], y, x) for s, y, x in c} for o, c in expected.items()}
    return lineage, expected, paths


def _cells(answer: Any, subjects: list[Any]) -> set[Cell]:
    return {(subjects.index(s.subject), *c) for s in answer.subjects for c in s.cell_list}


def test_image_backward_equals_oracle(image_world) -> None:
    lineage, expected, _ = image_world
    assert lineage.kind == "image" and lineage.udf == "person_detection" and len(lineage.outputs) == 8
    for o in range(8):
        answer = lineage.backward(rows=[(o, bool(expected[o]))], cells=True)
        assert _cells(answer, lineage.subjects) == expected[o], o
        assert sum(s.cells for s in answer.subjects) == len(expected[o])
    together = lineage.backward(rows=[{"id": 0}, {"id": 1}], cells=True)
    assert _cells(together, lineage.subjects) == expected[0] | expected[1]
    assert (
        lineage.backward(rows=[{"id": 3}]).subjects == []
        and lineage.backward(rows=[{"id": 7}]).subjects == []
    )
    with pytest.raises(ValueError, match="not among"):
        lineage.backward(rows=[{"id": 99}])


def test_image_regions_are_boxes_that_cover_exactly_the_cells(image_world) -> None:
    lineage, expected, _ = image_world
    answer = lineage.backward(rows=[{"id": 0}])
    for s in answer.subjects:
        assert s.cell_list is None
        drawn = {(y, x) for r in s.regions for y in range(r["y1"], r["y2"]) for x in range(r["x1"], r["x2"])}
        own = {(y, x) for sub, y, x in expected[0] if sub == lineage.subjects.index(s.subject)}
        assert drawn == own


def test_image_forward_equals_oracle(image_world) -> None:
    lineage, expected, paths = image_world
    rng = random.Random(11)
    queries = [(p, None) for p in paths]
    for _ in range(60):
        path = rng.choice(paths)
        queries.append((path, tuple(_random_box(rng, *SIZES[path])[k] for k in ("x1", "y1", "x2", "y2"))))
    hits = 0
    for path, box in queries:
        height, width = SIZES[path]
        region = (
            {"x1": 0, "y1": 0, "x2": width, "y2": height}
            if box is None
            else dict(zip(("x1", "y1", "x2", "y2"), box))
        )
        pixels = {(lineage.subjects.index(path), y, x) for y, x in _oracle_pixels(region, width, height)}
        want = sorted(o for o, cells in expected.items() if cells & pixels)
        got = [r["id"] for r in lineage.forward(path, box).outputs]
        assert got == want, (path, box)
        hits += bool(want)
    assert hits >= 10  # the random queries do hit regions, several of them overlaps
    assert lineage.forward("a.jpg", (500, 500, 600, 600)).outputs == []  # outside the image
    with pytest.raises(ValueError, match="not a subject"):
        lineage.forward("nope.jpg")
    with pytest.raises(ValueError, match="x1, y1, x2, y2"):
        lineage.forward("a.jpg", (1, 2, 3))


def test_a_box_is_one_provrc_row_and_round_trips(tmp_path: Path) -> None:
    """A 1000x800 box costs one row per orientation (its 800,000 pixels are never listed); the
    tables hold exactly the relation ProvRC's own compression of the explicit cells gives."""
    rel = RegionRelation.build(
        [0, 1], [[0, 100, 50], [0, 100, 50]], [[0, 899, 849], [0, 899, 849]], 2, (1, 1000, 1000)
    )
    assert len(rel.backward) == 1 and len(rel.forward) == 1
    assert rel.save(tmp_path) < 3000
    back = RegionRelation.load(tmp_path)
    assert back.outputs([[0, 500, 500]], [[0, 500, 500]]).tolist() == [0, 1]
    small = RegionRelation.build(
        [0, 1, 1], [[0, 1, 1], [0, 2, 2], [1, 0, 0]], [[0, 3, 4], [0, 5, 5], [1, 1, 0]], 3, (2, 6, 6)
    )
    explicit = small.backward.decompress()
    assert len(explicit) == 12 + 16 + 2
    for orientation in ("backward", "forward"):
        provrc = compress(explicit, orientation).decompress()
        ours = getattr(small, orientation).decompress()
        assert np.array_equal(provrc.out, ours.out) and np.array_equal(provrc.inp, ours.inp)
    with pytest.raises(ValueError, match="inside the input shape"):
        RegionRelation.build([0], [[0, 0, 0]], [[0, 6, 0]], 1, (1, 6, 6))
    assert isinstance(explicit, Relation)


def test_saved_lineage_answers_the_same(image_world, tmp_path: Path) -> None:
    lineage, _, paths = image_world
    lineage.save(tmp_path)
    again = RegionLineage.load(tmp_path)
    for o in range(8):
        assert (
            again.backward(rows=[{"id": o}]).to_dict()["subjects"]
            == lineage.backward(rows=[{"id": o}]).to_dict()["subjects"]
        )
    assert again.forward(paths[0]).outputs == lineage.forward(paths[0]).outputs


# --- text and tabular -------------------------------------------------------------------------
REVIEWS = [
    "Great sound, great price. Battery is poor",
    "Terrible. It broke after a day, terrible support",
    "",
    "ok",
]


def test_text_backward_and_forward_equal_oracle() -> None:
    """IG-style reasons (positive attribution supports the label; every occurrence of a word),
    a review whose reason credits nothing, an empty review and empty spans."""
    reasons = [
        (
            "Positive",
            {
                "likelihood": 0.9,
                "tokens": [
                    {"token": "great", "attribution": 0.8},
                    {"token": "poor", "attribution": -0.3},
                    {"token": "price", "attribution": 0.1},
                ],
            },
        ),
        (
            "Negative",
            {
                "likelihood": 0.95,
                "tokens": [{"token": "terrible", "attribution": 0.9}, {"token": "broke", "attribution": 0.4}],
            },
        ),
        ("Negative", {"likelihood": 0.5, "tokens": []}),
        ("Positive", {"likelihood": 0.6, "tokens": [{"token": "ok", "attribution": -0.1}]}),
    ]
    answers = [
        _answer({"review": i}, "text_sentiment", [({"text": t}, v, r)])
        for i, (t, (v, r)) in enumerate(zip(REVIEWS, reasons))
    ]
    answers.append(_answer({"review": 9}, "text_sentiment", [({"text": REVIEWS[0]}, *reasons[0])]))
    lineage = RegionLineage.from_lineage(answers)
    assert lineage.kind == "text"
    expected = {}
    for i, (text, (_, reason)) in enumerate(zip(REVIEWS, reasons)):
        good = {t["token"] for t in reason["tokens"] if t["attribution"] > 0}
        expected[i] = {
            (text, p)
            for p, w in enumerate(text.replace(",", " ").replace(".", " ").split())
            if w.lower() in good
        }
    expected[9] = expected[0]
    assert expected[0] == {(REVIEWS[0], 0), (REVIEWS[0], 2), (REVIEWS[0], 3)}
    for o, want in expected.items():
        answer = lineage.backward(rows=[{"review": o}], cells=True)
        assert {(s.subject, *c) for s in answer.subjects for c in s.cell_list} == want
    spans = lineage.backward(rows=[{"review": 0}]).subjects[0].regions
    assert spans == [
        {"start": 0, "stop": 1, "words": "Great"},
        {"start": 2, "stop": 4, "words": "great price"},
    ]
    n = len(words(REVIEWS[1]))
    for start in range(n + 1):
        for stop in range(start, n + 2):
            got = [r["review"] for r in lineage.forward(REVIEWS[1], (start, stop)).outputs]
            assert got == ([1] if any(start <= p < stop for _, p in expected[1]) else []), (start, stop)
    assert [r["review"] for r in lineage.forward(REVIEWS[0]).outputs] == [0, 9]
    assert lineage.forward(REVIEWS[2]).outputs == [] and lineage.forward(REVIEWS[3]).outputs == []
    with pytest.raises(ValueError, match="token span"):
        lineage.forward(REVIEWS[0], (3, 1))
    keyword = token_positions(
        "bad and good and bad", "Negative", {"positive": ["good"], "negative": ["bad", "bad"]}
    )
    assert keyword == [0, 4]


def test_tabular_features_equal_oracle() -> None:
    calls = [
        (
            {"Income": 2200, "Debt": 1350, "LoanAmount": 20000},
            "Reject",
            {"attributes": ["Debt", "LoanAmount"]},
        ),
        (
            {"Income": 5100, "Debt": 300, "LoanAmount": 6000},
            "Accept",
            {"attributes": ["Income", "LoanAmount"]},
        ),
        ({"Income": 3400, "Debt": 810, "LoanAmount": 4000}, "Marginal", {"attributes": ["Debt"]}),
    ]
    answers = [_answer({"loan": i}, "credit_rules", [c]) for i, c in enumerate(calls)]
    lineage = RegionLineage.from_lineage(answers)
    assert lineage.kind == "tabular"
    for i, (inputs, _, reason) in enumerate(calls):
        (s,) = lineage.backward(rows=[{"loan": i}]).subjects
        assert s.subject == inputs
        assert sorted(f for r in s.regions for f in r["features"]) == sorted(reason["attributes"])
    for i, (inputs, _, reason) in enumerate(calls):
        for feature in ("Income", "Debt", "LoanAmount"):
            got = [r["loan"] for r in lineage.forward(inputs, [feature]).outputs]
            assert got == ([i] if feature in reason["attributes"] else []), (i, feature)
    assert [r["loan"] for r in lineage.forward(calls[0][0], ["Income", "LoanAmount"]).outputs] == [0]
    with pytest.raises(ValueError, match="unknown feature"):
        lineage.forward(calls[0][0], ["Age"])


def test_udf_must_be_named_when_two_map_to_cells() -> None:
    answer = _answer(
        {"id": 1}, "person_detection", [({"path": "a.jpg"}, False, {"boxes": [], "width": 4, "height": 4})]
    )
    other = _answer({"id": 2}, "credit_rules", [({"Income": 1}, "Accept", {"attributes": ["Income"]})])
    with pytest.raises(ValueError, match="name the UDF"):
        RegionLineage.from_lineage([answer, other])
    assert RegionLineage.from_lineage([answer, other], udf="credit_rules").kind == "tabular"
    with pytest.raises(ValueError, match="no call of 'face'"):
        RegionLineage.from_lineage([answer], udf="face")


# --- real models ------------------------------------------------------------------------------
def test_real_yolo_through_a_spark_run(spark, tmp_path: Path) -> None:
    """Two parts share the photo with a person, one has a bear photo: the person box comes back
    as the region of both parts, and forward from the box finds both, from the bear none."""
    als = LineageSession(spark, store=str(tmp_path / "store"))
    sql = "SELECT id, person_detection(path) AS person FROM parts"
    parts = pd.DataFrame([(1, WITH_PERSON), (2, WITHOUT_PERSON), (3, WITH_PERSON)], columns=["id", "path"])
    als.register_table("parts", parts, key="id")
    register_udfs_named_in(spark, sql)
    run = als.run(sql, strategy="fm")
    lineage = run.regions()  # Run.regions = region_lineage(run)
    assert sorted(r["id"] for r in lineage.outputs) == [1, 2, 3]
    (call,) = [
        c for c in run.lineage(rows=[(1, True)]).reasoning_rows() if c["inputs"]["path"] == WITH_PERSON
    ]
    boxes = call["reason"]["boxes"]
    assert boxes
    answer = lineage.backward(rows=[(1, True)], cells=True)
    (subject,) = answer.subjects
    width, height = call["reason"]["width"], call["reason"]["height"]
    want = set().union(*(_oracle_pixels(b, width, height) for b in boxes))
    assert subject.subject == WITH_PERSON and set(subject.cell_list) == want
    assert len(lineage.relation.backward) <= 2 * len(boxes)  # two rows share the boxes: ranges, not pixels
    assert lineage.backward(rows=[(2, False)]).subjects == []
    box = tuple(math.floor(boxes[0][k]) for k in ("x1", "y1", "x2", "y2"))
    assert [r["id"] for r in lineage.forward(WITH_PERSON, box).outputs] == [1, 3]
    assert [r["id"] for r in lineage.forward(WITH_PERSON, boxes[0]).outputs] == [1, 3]  # a reason's box
    assert lineage.forward(WITHOUT_PERSON).outputs == []
    stored = load_region_lineage(run, "person_detection")
    (again,) = stored.backward(rows=[{"id": 3}]).subjects  # the stored tables, the shared photo
    assert again.subject == WITH_PERSON and again.regions == subject.regions
    html = answer._repr_html_()
    assert "<img" in html and "data:image/jpeg;base64," in html
    assert "person_detection" in str(answer) and "depend on" in str(lineage.forward(WITH_PERSON, box))
    assert "data:image/jpeg;base64," in lineage.forward(WITH_PERSON, box)._repr_html_()
    assert sorted(r["id"] for r in run.regions(where="id > 1").outputs) == [2, 3]
    with pytest.raises(LineageError, match=r"^invalid where='idd > 1': .*idd"):
        run.regions(where="idd > 1")


def test_real_sentiment_model_words() -> None:
    """The real MiniLM with Integrated Gradients: the spans are exactly the positively
    attributed words of its reason, and forward from them finds the review."""
    from reasoning_udfs.text_sentiment import text_sentiment

    texts = ["This product is great, I love it", "Terrible, it broke after a day"]
    pairs = text_sentiment.main_with_reason_batch([(t,) for t in texts])
    answers = [
        _answer({"n": i}, "text_sentiment", [({"text": t}, v, r)])
        for i, (t, (v, r)) in enumerate(zip(texts, pairs))
    ]
    lineage = RegionLineage.from_lineage(answers)
    for i, (text, (_, reason)) in enumerate(zip(texts, pairs)):
        good = {t["token"].lower() for t in reason["tokens"] if t["attribution"] > 0}
        answer = lineage.backward(rows=[{"n": i}], cells=True)
        got = {words(text)[c[0]].lower() for s in answer.subjects for c in s.cell_list}
        assert got == good and good
        first = answer.subjects[0].regions[0]
        assert [r["n"] for r in lineage.forward(text, (first["start"], first["stop"])).outputs] == [i]
        assert "<mark" in answer._repr_html_()
