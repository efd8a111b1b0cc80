"""text_sentiment and the ML credit_exam with real weights and real explainers: values,
reasons that mean something, the two modes, bad input, a missing model, and one run each
through Spark in reasoning mode."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from pyspark.sql import SparkSession

from models import ModelNotFoundError, models_dir, sentiment_model
from models.credit_model import CLASSES, FEATURES, trained
from models.paths import UntrustedWeightsError
from reasoning_udfs.credit_exam import CreditExam, credit_exam, credit_exam_lime
from reasoning_udfs.text_sentiment import text_sentiment
from reasoning_udfs.udf import UDFRowError
from tests.planted import Planted
from tracing.lineage import AugmentedLineage, ReasoningRows

GREAT, TERRIBLE = "This product is great", "Terrible, it broke after a day"
PIECES = "The cinematography was unbelievably mesmerizing"  # both long words split into ##pieces
PAPER_ROWS = {  # Havey, Joa, Kim, Pia of cda_workload/workloads/loan_example.py
    (3400, 810, 4000): "Accept",
    (2200, 1350, 20000): "Reject",
    (5100, 300, 6000): "Accept",
    (3000, 1200, 9000): "Marginal",
}
BOTH = pytest.mark.parametrize("udf", [credit_exam, credit_exam_lime], ids=["shap", "lime"])


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_positive_text_is_explained_by_great() -> None:
    value, reason = text_sentiment.main_with_reason(GREAT)
    assert value == "Positive" and reason["likelihood"] > 0.9
    assert reason["method"].startswith("integrated_gradients")
    top = reason["tokens"][0]
    assert top["token"] == "great" and top["attribution"] > 0


def test_negative_text_is_explained_by_terrible() -> None:
    value, reason = text_sentiment.main_with_reason(TERRIBLE)
    assert value == "Negative" and reason["likelihood"] > 0.9
    assert reason["tokens"][0]["token"] == "Terrible" and reason["tokens"][0]["attribution"] > 0


def test_modes_agree_and_blank_text_is_null() -> None:
    long_text = " ".join(["a dull and tedious film"] * 60)  # 300 words: truncated to 128 tokens
    texts = [GREAT, None, TERRIBLE, "", "   ", PIECES, long_text]
    rows = [(t,) for t in texts]
    values = text_sentiment.main_batch(rows)
    pairs = text_sentiment.main_with_reason_batch(rows)
    assert values == [v for v, _ in pairs]
    assert values[1] is None and values[3] is None and values[4] is None
    assert all(pairs[i] == (None, None) for i in (1, 3, 4))
    assert values[6] == "Negative"
    for text, (_, reason) in zip(texts, pairs):
        if reason is None:
            continue
        tokens = reason["tokens"]
        assert 1 <= len(tokens) <= sentiment_model.TOP_K
        magnitudes = [abs(t["attribution"]) for t in tokens]
        assert magnitudes == sorted(magnitudes, reverse=True)
        assert all(t["token"] in text for t in tokens)
    pieces_words = {t["token"] for t in pairs[5][1]["tokens"]}
    assert pieces_words <= set(PIECES.split())  # WordPieces merged back into the input's words
    assert pairs[0] == text_sentiment.main_with_reason(GREAT)  # padding in a batch changes nothing


def test_integrated_gradients_match_captum() -> None:
    """Our IG is hand-written (batched, padded chunks) for Spark workers, so it is checked against
    captum's LayerIntegratedGradients on the word embeddings, one unpadded sentence at a time, with
    the same [PAD] baseline, midpoint rule, step count and target (the predicted label's margin)."""
    from captum.attr import LayerIntegratedGradients  # 0.5 s (matplotlib): only this test pays

    texts = [GREAT, TERRIBLE, PIECES, "not bad at all"]  # no word twice: words key the comparison
    ours = sentiment_model.explain(texts, top_k=sentiment_model.MAX_LENGTH)  # every word
    tokenizer, model = sentiment_model.load()

    def margin(
        ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor, sign: torch.Tensor
    ) -> torch.Tensor:
        logits = model(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
        return sign * (logits[:, 1] - logits[:, 0])

    ig = LayerIntegratedGradients(margin, model.get_input_embeddings())
    # ours are rounded to DIGITS (at most half a unit off); unrounded, float32 sums over a padded
    # batch and over one sentence differed by 3.3e-6 at most (values up to 5.5), hence 1e-5 more
    tolerance = 0.5 * 10**-sentiment_model.DIGITS + 1e-5
    for text, explained in zip(texts, ours):
        enc = tokenizer(text, return_tensors="pt")
        words = enc.word_ids(0)
        ids = enc["input_ids"]
        baseline = torch.where(torch.tensor([w is not None for w in words]), tokenizer.pad_token_id, ids)
        with torch.no_grad():
            sign = model(**enc).logits.argmax(-1) * 2.0 - 1.0
        attr = ig.attribute(
            ids,
            baseline,
            additional_forward_args=(enc["attention_mask"], enc["token_type_ids"], sign),
            n_steps=sentiment_model.IG_STEPS,
            method="riemann_middle",
        )
        theirs: dict[str, float] = {}  # WordPieces summed into words, as ours are
        for word, a in zip(words, attr.sum(-1)[0].tolist()):
            if word is not None:
                start, end = enc.word_to_chars(word)
                theirs[text[start:end]] = theirs.get(text[start:end], 0.0) + a
        assert dict(explained.tokens) == pytest.approx(theirs, abs=tolerance)
        assert explained.tokens[0][0] == max(theirs, key=lambda w: abs(theirs[w]))


def test_missing_model_dir_names_the_expected_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cache is keyed by the model's path, so pointing AL_MODELS_DIR elsewhere is seen at once.
    real = models_dir() / sentiment_model.MODEL
    monkeypatch.setenv("AL_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="save_pretrained") as info:
        text_sentiment.main("fine")
    assert str(tmp_path / sentiment_model.MODEL) in str(info.value)
    # weights only from safetensors: a pickle planted in their place is refused, never unpickled
    folder = tmp_path / sentiment_model.MODEL
    folder.mkdir(parents=True)
    for file in real.iterdir():
        if file.name != sentiment_model.WEIGHTS:
            (folder / file.name).symlink_to(file)
    marker = tmp_path / "ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Planted(str(marker))))
    with pytest.raises(ModelNotFoundError, match="only safetensors weights are loaded") as info:
        text_sentiment.main("fine")
    assert str(folder / sentiment_model.WEIGHTS) in str(info.value) and "\n" not in str(info.value)
    assert not marker.exists()
    # nor a config that points transformers at another weights file beside the safetensors
    (folder / sentiment_model.WEIGHTS).symlink_to(real / sentiment_model.WEIGHTS)
    config = json.loads((real / "config.json").read_text())
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({**config, "transformers_weights": "pytorch_model.bin"}))
    with pytest.raises(UntrustedWeightsError, match=re.escape("names other weights ('pytorch_model.bin')")):
        text_sentiment.main("fine")
    assert not marker.exists()


@BOTH
def test_credit_exam_on_the_paper_rows(udf: CreditExam) -> None:
    rows = list(PAPER_ROWS)
    assert udf.main_batch(rows) == list(PAPER_ROWS.values())
    pairs = udf.main_with_reason_batch(rows)
    assert [v for v, _ in pairs] == list(PAPER_ROWS.values())
    for row, (_, reason) in zip(rows, pairs):
        ranked = reason["attributions"]
        assert sorted(a["attribute"] for a in ranked) == sorted(FEATURES)
        magnitudes = [abs(a["attribution"]) for a in ranked]
        assert magnitudes == sorted(magnitudes, reverse=True)
        assert {a["attribute"]: a["value"] for a in ranked} == dict(zip(FEATURES, map(float, row)))
        assert reason["attributes"] and set(reason["attributes"]) <= set(FEATURES)
        assert reason["attributes"][0] == ranked[0]["attribute"] or ranked[0]["attribution"] < 0
    assert udf.main_with_reason(*rows[3]) == pairs[3]  # a row's reason does not depend on its batch


def test_shap_attributions_add_up_to_the_predicted_probability() -> None:
    """A reason's base value plus its attributions is the value's probability; an answer's
    calls become one shap.Explanation that SHAP's own waterfall plot draws."""
    import matplotlib

    matplotlib.use("Agg")
    import shap

    model = trained()
    rows = list(PAPER_ROWS)
    proba = model.forest.predict_proba(np.array(rows, dtype=float))
    pairs = credit_exam.main_with_reason_batch(rows)
    for i, (value, reason) in enumerate(pairs):
        c = CLASSES.index(value)
        assert reason["base_value"] == pytest.approx(model.shap.expected_value[c])
        total = sum(a["attribution"] for a in reason["attributions"])
        assert total + reason["base_value"] == pytest.approx(proba[i, c], abs=1e-6)
    calls = pa.table(
        {"Income": [r[0] for r in rows], "Debt": [r[1] for r in rows], "LoanAmount": [r[2] for r in rows],
         "Judge": [v for v, _ in pairs], "why": [r for _, r in pairs]}
    )  # fmt: skip
    entry = ReasoningRows("credit_exam", 1, ("Income", "Debt", "LoanAmount"), "Judge", "why", calls)
    explained = AugmentedLineage(source={}, reasoning=[entry], queries=[]).to_shap("credit_exam")
    order = {tuple(map(float, r)): i for i, r in enumerate(rows)}  # reasoning_rows() sorts the calls
    at = [order[tuple(d[explained.feature_names.index(f)] for f in FEATURES)] for d in explained.data]
    probability = [proba[i, CLASSES.index(pairs[i][0])] for i in at]
    assert explained.values.sum(axis=1) + explained.base_values == pytest.approx(probability, abs=1e-6)
    assert sorted(explained.feature_names) == sorted(FEATURES)
    shap.plots.waterfall(explained[0], show=False)  # SHAP's own plot takes it
    with pytest.raises(ValueError, match="reasons hold attributions"):
        AugmentedLineage(source={}, reasoning=[], queries=[]).to_shap("credit_exam")


def test_credit_model_is_accurate_on_held_out_applicants() -> None:
    assert trained().held_out_accuracy > 0.8


@pytest.mark.parametrize("income", [None, 0, -100])
def test_bad_income_is_an_error(income: float | None) -> None:
    with pytest.raises(ValueError, match="income must be positive"):
        credit_exam.main(income, 100, 1000)
    with pytest.raises(UDFRowError, match="income must be positive") as info:
        credit_exam_lime.main_with_reason_batch([(3400, 810, 4000), (income, 100, 1000)])
    assert repr((income, 100, 1000)) in str(info.value)


def test_text_sentiment_in_spark_reasoning_mode(spark: SparkSession) -> None:
    df = spark.createDataFrame([(GREAT,), (TERRIBLE,), (None,)], "text string").coalesce(1)  # 1 load
    out = df.select(text_sentiment.spark_udf("reasoning")("text").alias("r")).collect()
    assert [r.r.value for r in out] == ["Positive", "Negative", None]
    assert out[0].r.reason.tokens[0].token == "great" and out[2].r.reason is None


@BOTH
def test_credit_exam_in_spark_reasoning_mode(spark: SparkSession, udf: CreditExam) -> None:
    df = spark.createDataFrame(list(PAPER_ROWS), "Income long, Debt long, LoanAmount long").coalesce(1)
    out = df.select(udf.spark_udf("reasoning")("Income", "Debt", "LoanAmount").alias("r")).collect()
    assert [r.r.value for r in out] == list(PAPER_ROWS.values())
    assert [r.r.reason.method for r in out] == [udf.method] * len(out)
    assert out[1].r.reason.attributions[0].attribute in FEATURES
