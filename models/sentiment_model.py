"""The model behind ``text_sentiment``: a BERT-architecture MiniLM fine-tuned on SST-2
(``AL_MODELS_DIR/sentiment/minilm-l6-sst2``, see the shared MANIFEST), on CPU.

It is loaded once per Python process and path (a Spark worker keeps it across tasks) and run in
chunks of ``CHUNK`` texts, sorted by length so that a chunk pads little: an Arrow batch may hold
10,000 rows. Texts are truncated to ``MAX_LENGTH`` tokens.

Attributions are Integrated Gradients (Sundararajan et al., 2017) on the input word embeddings:
the baseline is the same sequence with every word token replaced by ``[PAD]`` ([CLS], [SEP] and
positions kept), the path integral is a midpoint sum of ``IG_STEPS`` steps, and the target is
the predicted label's log-odds (the logit margin), so a positive attribution pushes toward the
predicted label; with so few steps their sum is only a rough account of the margin gained over
the baseline (captum's convergence delta reaches about 1 on short sentences), but the ranking
of words is stable. Plain gradient x input was measured first and rejected: the confident
predictions of this model saturate it (in "This product is great", "great" got -0.01, the
wrong sign). Eight steps agreed with a 64-step reference on the top word for 96/96 SST-2 dev
sentences (top-5 overlap 0.97); four steps only on 91 %.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from models.paths import SENTIMENT_MODEL, ModelNotFoundError, UntrustedWeightsError, model_file

if TYPE_CHECKING:
    import torch  # imported where the model runs: 2.7 s that a question reading cached reasons never pays

MODEL = SENTIMENT_MODEL
HOW_TO_GET = (
    "online, any Hugging Face SST-2 sequence classifier will do (e.g. "
    "distilbert-base-uncased-finetuned-sst-2-english): save its model and tokenizer with "
    "save_pretrained() into that folder"
)
WEIGHTS = "model.safetensors"
MAX_LENGTH = 128
CHUNK = 32
IG_STEPS = 8
TOP_K = 5
METHOD = f"integrated_gradients(steps={IG_STEPS}, baseline=[PAD])"
DIGITS = 4  # rounded so that reruns on differently padded batches give equal reasons

_LOADED: dict[Path, tuple[Any, Any]] = {}


class Explained(NamedTuple):
    label: str
    likelihood: float
    tokens: list[tuple[str, float]]  # top words by |attribution|, signed toward ``label``


def load() -> tuple[Any, Any]:
    """(tokenizer, model) for the current ``AL_MODELS_DIR``, loaded on first use only.

    Safely: weights only from ``model.safetensors`` (plain tensors; a ``pytorch_model.bin`` is
    a pickle, and unpickling a planted one runs its code), no code from the folder, no network.
    """
    path = model_file(MODEL, HOW_TO_GET)
    if path not in _LOADED:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        if not (path / WEIGHTS).is_file():
            raise ModelNotFoundError(
                f"expected {path / WEIGHTS}: only safetensors weights are loaded, never pickled ones "
                f"such as pytorch_model.bin; {HOW_TO_GET}"
            )
        named = _config(path).get("transformers_weights")  # transformers would load that file instead
        if named is not None:
            raise UntrustedWeightsError(
                f"{path / 'config.json'} names other weights ({named!r}): only {WEIGHTS} is loaded; "
                "remove the transformers_weights entry"
            )
        from transformers.utils import logging as transformers_logging

        safe = {"trust_remote_code": False, "local_files_only": True}
        shown = transformers_logging.is_progress_bar_enabled()
        transformers_logging.disable_progress_bar()  # its "Loading weights" bar, on every worker's stderr
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, **safe)
            loaded = AutoModelForSequenceClassification.from_pretrained(path, use_safetensors=True, **safe)
        finally:
            if shown:
                transformers_logging.enable_progress_bar()
        model = loaded.eval()
        model.requires_grad_(False)  # attributions need input gradients only
        _LOADED[path] = (tokenizer, model)
    return _LOADED[path]


def _config(path: Path) -> dict[str, Any]:
    try:
        found = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # transformers reports a missing or broken config itself
    return found if isinstance(found, dict) else {}


def classify(texts: Sequence[str]) -> list[tuple[str, float]]:
    """(label, likelihood) per text from one no-grad forward pass: normal mode's cost."""
    import torch

    tokenizer, model = load()
    out: dict[int, tuple[str, float]] = {}
    for idx in _chunks(texts):
        enc = tokenizer(
            [texts[i] for i in idx], padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
        )
        with torch.no_grad():
            probs = model(**enc).logits.softmax(-1)
        out.update(zip(idx, _labels(model, probs)))
    return [out[i] for i in range(len(texts))]


def explain(texts: Sequence[str], top_k: int = TOP_K) -> list[Explained]:
    """Label, likelihood and the ``top_k`` words by |Integrated Gradients| per text."""
    tokenizer, model = load()
    out: dict[int, Explained] = {}
    for idx in _chunks(texts):
        out.update(zip(idx, _explain_chunk(tokenizer, model, [texts[i] for i in idx], top_k)))
    return [out[i] for i in range(len(texts))]


def _chunks(texts: Sequence[str]) -> Iterator[list[int]]:
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), CHUNK):
        yield order[start : start + CHUNK]


def _labels(model: Any, probs: torch.Tensor) -> list[tuple[str, float]]:
    p, pred = probs.max(-1)
    id2label = model.config.id2label
    return [(id2label[int(c)].capitalize(), round(float(q), DIGITS)) for c, q in zip(pred, p)]


def _explain_chunk(tokenizer: Any, model: Any, texts: list[str], top_k: int) -> list[Explained]:
    import torch

    enc = tokenizer(
        texts,
        padding=True,
        truncation=True,
        max_length=MAX_LENGTH,
        return_tensors="pt",
        return_offsets_mapping=True,
    )
    offsets = enc.pop("offset_mapping").tolist()
    word_ids = [enc.word_ids(b) for b in range(len(texts))]
    is_word = torch.tensor([[w is not None for w in ids] for ids in word_ids])
    ids = enc["input_ids"]
    rest = {k: v for k, v in enc.items() if k != "input_ids"}  # mask (+ token types for BERT)
    embed = model.get_input_embeddings()
    with torch.no_grad():
        probs = model(**enc).logits.softmax(-1)
        x = embed(ids)
        baseline = embed(torch.where(is_word, tokenizer.pad_token_id, ids))
    labels = _labels(model, probs)
    sign = probs.argmax(-1) * 2.0 - 1.0  # +1: margin of POSITIVE(1) over NEGATIVE(0), else -1
    grad = torch.zeros_like(x)
    for step in range(IG_STEPS):
        point = (baseline + (step + 0.5) / IG_STEPS * (x - baseline)).requires_grad_(True)
        logits = model(inputs_embeds=point, **rest).logits
        (sign * (logits[:, 1] - logits[:, 0])).sum().backward()
        grad += point.grad
    token_attr = ((x - baseline) * grad / IG_STEPS).sum(-1).tolist()
    return [
        Explained(label, p, _top_words(text, word_ids[b], offsets[b], token_attr[b], top_k))
        for b, (text, (label, p)) in enumerate(zip(texts, labels))
    ]


def _top_words(
    text: str, word_ids: list[int | None], offsets: list[list[int]], attr: list[float], top_k: int
) -> list[tuple[str, float]]:
    """Sum WordPiece pieces ("##") into the words of ``text``; special tokens have no word."""
    spans: dict[int, list[float]] = {}  # word -> [start, end, attribution]
    for word, (start, end), a in zip(word_ids, offsets, attr):
        if word is None:
            continue
        span = spans.setdefault(word, [start, end, 0.0])
        span[1], span[2] = end, span[2] + a
    words = [(text[int(s) : int(e)], round(a, DIGITS)) for s, e, a in spans.values()]
    return sorted(words, key=lambda w: -abs(w[1]))[:top_k]
