"""Region lineage of a run's model reasons: which pixels of which images (words of which reviews,
features of which model inputs) support an output row, and which output rows depend on a region.

Built on ``run.lineage(rows=[row])`` (whatever backend the run has: one question per output
row, so each row gets exactly its own model calls), the reasons become cell-level lineage
(:mod:`materialization.provrc.regions`), kept as ProvRC tables in the run's folder
(``regions/<udf>/``) and answered in situ: a question turns output rows into ordinals, walks
the backward table with range joins and splits the boxes it gets per subject; forward is the
same from a region's box. Subjects and outputs are numbered in first-seen order and kept in
``meta.json`` (values as JSON: decimals and dates come back as strings).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from materialization.integrity import add_to_record, listed_cache, local_manifest
from materialization.provrc.ranges import box_cells
from materialization.provrc.regions import (
    IMAGE,
    TABULAR,
    TEXT,
    RegionRelation,
    decisive_features,
    image_boxes,
    kind_of,
    pixel_box,
    token_positions,
    words,
)
from tracing.errors import filter_where
from tracing.lineage import AugmentedLineage, collect_rows
from tracing.region_answers import RegionAnswer, RegionForward, SubjectRegions

if TYPE_CHECKING:
    from tracing.session import Run

FOLDER = "regions"
Row = Mapping[str, Any] | Sequence[Any]


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


@dataclass
class RegionLineage:
    """Output rows -> regions of the subjects one reasoning UDF looked at, compressed both ways."""

    udf: str
    kind: str
    outputs: list[dict[str, Any]]  # by output ordinal
    subjects: list[Any]  # by subject ordinal: image path, review text, or the model's inputs
    sizes: list[list[int]]  # per subject: image (height, width), review (words,), input (features,)
    features: list[str]  # tabular: the feature axis
    relation: RegionRelation

    # --- building -----------------------------------------------------------------------------
    @classmethod
    def from_lineage(cls, answers: Sequence[AugmentedLineage], udf: str | None = None) -> RegionLineage:
        """From lineage answers, each of whose output rows (``targets``) gets all its calls: give
        one answer per output row for row-level precision."""
        pairs = []  # (output row, call)
        for answer in answers:
            if answer.targets is None:
                raise ValueError("a lineage answer without its output rows (targets) cannot be used")
            calls = answer.reasoning_rows()
            pairs += [(t, c) for t in collect_rows(answer.targets) for c in calls]
        seen: dict[str, str | None] = {}
        for _, c in pairs:
            seen[c["udf"]] = seen.get(c["udf"]) or kind_of(c["reason"] or {})
        udf = _the_udf(seen, udf)
        pairs = [(t, c) for t, c in pairs if c["udf"] == udf]
        kinds = {kind_of(c["reason"]) for _, c in pairs if c["reason"]} - {None}
        if len(kinds) > 1:
            raise ValueError(f"{udf} gives reasons of several kinds {sorted(kinds)}: cannot map to cells")
        builder = _Builder(kinds.pop() if kinds else IMAGE)
        for answer in answers:
            for target in collect_rows(answer.targets):
                builder.output(target)  # every asked row is numbered, with or without regions
        for target, call in pairs:
            builder.add(target, call)
        return builder.done(udf)

    # --- questions ----------------------------------------------------------------------------
    def backward(self, rows: Sequence[Row] | None = None, cells: bool = False) -> RegionAnswer:
        """The regions the output ``rows`` (dicts by column, tuples in column order; all when
        None) rest on, per subject; ``cells=True`` also lists the cells."""
        started = time.perf_counter()
        ords = self._ordinals(rows)
        boxes = self.relation.regions(ords)
        per: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        for lo, hi in zip(boxes.lo, boxes.hi):
            for s in range(lo[0], hi[0] + 1):  # a box may span subjects with equal regions
                per.setdefault(int(s), []).append((lo[1:], hi[1:]))
        subjects = [self._subject_regions(s, per[s], cells) for s in sorted(per)]
        outputs = [self.outputs[o] for o in ords]
        return RegionAnswer(self.udf, self.kind, outputs, subjects, time.perf_counter() - started)

    def forward(self, subject: Any, region: Any = None) -> RegionForward:
        """The output rows that depend on ``region`` of ``subject`` (all of it when None): an
        image box (x1, y1, x2, y2) or dict, a token span (start, stop), or feature names."""
        started = time.perf_counter()
        s = self._subject(subject)
        (lo, hi), shown = self._region_box(s, region)
        ords = self.relation.outputs(_with_subject(s, lo), _with_subject(s, hi))
        outputs = [self.outputs[o] for o in ords]
        seconds = time.perf_counter() - started
        return RegionForward(self.udf, self.kind, self.subjects[s], shown, outputs, seconds)

    def __str__(self) -> str:
        b, f = self.relation.backward, self.relation.forward
        return (f"Region lineage of {len(self.outputs)} output row(s) through {self.udf} ({self.kind}): "
                f"{len(self.subjects)} subject(s); ProvRC rows backward {len(b)}, forward {len(f)}")

    # --- persistence --------------------------------------------------------------------------
    def save(self, folder: str | Path) -> int:
        """Writes the tables and ``meta.json`` into a local ``folder``; returns the tables' bytes."""
        size = self.relation.save(folder)
        meta = {"udf": self.udf, "kind": self.kind, "outputs": self.outputs, "subjects": self.subjects,
                "sizes": self.sizes, "features": self.features}
        (Path(folder) / "meta.json").write_text(json.dumps(meta, default=str))
        return size

    @classmethod
    def load(cls, folder: str | Path) -> RegionLineage:
        meta = json.loads((Path(folder) / "meta.json").read_text())
        return cls(meta["udf"], meta["kind"], meta["outputs"], meta["subjects"], meta["sizes"],
                   meta["features"], RegionRelation.load(folder))

    # --- helpers ------------------------------------------------------------------------------
    def _ordinals(self, rows: Sequence[Row] | None) -> list[int]:
        if rows is None:
            return list(range(len(self.outputs)))
        names = list(self.outputs[0]) if self.outputs else []
        found: list[int] = []
        for row in rows:
            given = dict(row) if isinstance(row, Mapping) else dict(zip(names, row))
            if not isinstance(row, Mapping) and len(row) != len(names):
                raise ValueError(f"row {tuple(row)!r} has {len(row)} values; the output has {names}")
            match = [o for o, out in enumerate(self.outputs)
                     if all(k in out and _key(out[k]) == _key(v) for k, v in given.items())]
            if not match:
                raise ValueError(f"row {given!r} is not among the {len(self.outputs)} rows asked about")
            found += [o for o in match if o not in found]
        return found

    def _subject(self, subject: Any) -> int:
        key = _key(subject)
        for s, known in enumerate(self.subjects):
            if _key(known) == key:
                return s
        raise ValueError(f"{str(subject)[:80]!r} is not a subject of {self.udf} in this lineage")

    def _region_box(self, s: int, region: Any) -> tuple[tuple[np.ndarray, np.ndarray], dict[str, Any]]:
        """A region as inclusive boxes of subject-local cells (one per row), and as it is shown."""
        size = self.sizes[s]
        if self.kind == IMAGE:
            height, width = size
            given = region if region is not None else (0, 0, width, height)
            corners = ("x1", "y1", "x2", "y2")
            if isinstance(given, Mapping) and all(k in given for k in corners):  # e.g. a reason's box
                box = {k: given[k] for k in corners}
            elif not isinstance(given, Mapping) and len(given) == 4:
                box = dict(zip(corners, given))
            else:
                raise ValueError(f"an image region is (x1, y1, x2, y2) or a dict of them, not {region!r}")
            pixels = pixel_box(box, width, height)
            if pixels is None:
                return _boxes([], [], 2), box
            y0, y1, x0, x1 = pixels
            return _boxes([[y0, x0]], [[y1, x1]], 2), _image_region(y0, y1, x0, x1)
        if self.kind == TEXT:
            start, stop = (0, size[0]) if region is None else region
            if start < 0 or stop < start:
                raise ValueError(f"a token span is (start, stop) with 0 <= start <= stop, not {region!r}")
            stop = min(stop, size[0])
            return _boxes([[start]] if start < stop else [], [[stop - 1]] if start < stop else [], 1), \
                self._span(s, start, stop)
        names = self.features if region is None else [region] if isinstance(region, str) else list(region)
        unknown = [n for n in names if n not in self.features]
        if unknown:
            raise ValueError(f"unknown feature(s) {unknown}; {self.udf} explains {self.features}")
        idx = [[self.features.index(n)] for n in names]
        return _boxes(idx, idx, 1), {"features": list(names)}

    def _span(self, s: int, start: int, stop: int) -> dict[str, Any]:
        return {"start": start, "stop": stop, "words": " ".join(words(self.subjects[s])[start:stop])}

    def _subject_regions(self, s: int, boxes: list[tuple[np.ndarray, np.ndarray]], cells: bool,
                         ) -> SubjectRegions:
        lo = np.array([b[0] for b in boxes]).reshape(len(boxes), -1)
        hi = np.array([b[1] for b in boxes]).reshape(len(boxes), -1)
        listed = box_cells(lo, hi)
        if self.kind == IMAGE:
            regions = [_image_region(a[0], b[0], a[1], b[1]) for a, b in zip(lo, hi)]
        elif self.kind == TEXT:
            regions = [self._span(s, int(a[0]), int(b[0]) + 1) for a, b in zip(lo, hi)]
        else:
            regions = [{"features": self.features[a[0] : b[0] + 1]} for a, b in zip(lo, hi)]
        cell_list = [tuple(int(v) for v in c) for c in listed] if cells else None
        return SubjectRegions(self.subjects[s], regions, len(listed), cell_list)


def _boxes(lo: list[list[int]], hi: list[list[int]], ndim: int) -> tuple[np.ndarray, np.ndarray]:
    return np.array(lo, np.int64).reshape(-1, ndim), np.array(hi, np.int64).reshape(-1, ndim)


def _with_subject(s: int, cells: np.ndarray) -> np.ndarray:
    return np.hstack([np.full((len(cells), 1), s, np.int64), cells])


def _image_region(y0: int, y1: int, x0: int, x1: int) -> dict[str, int]:
    return {"x1": int(x0), "y1": int(y0), "x2": int(x1) + 1, "y2": int(y1) + 1}


def _the_udf(kinds: dict[str, str | None], udf: str | None) -> str:
    """The reasoning UDF asked about: the given one, or the only one whose reasons map to cells."""
    if udf is not None:
        if udf not in kinds:
            raise ValueError(f"no call of {udf!r} in the lineage; calls of {sorted(kinds) or 'no UDF'}")
        return udf
    mapped = sorted(u for u, k in kinds.items() if k is not None)
    if len(mapped) != 1:
        raise ValueError(f"name the UDF with udf=: reasons that map to cells come from {mapped or 'none'}")
    return mapped[0]


class _Builder:
    """Numbers outputs and subjects in first-seen order and collects (output, box) rows."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.outputs: dict[str, int] = {}
        self.output_rows: list[dict[str, Any]] = []
        self.subjects: dict[str, int] = {}
        self.subject_list: list[Any] = []
        self.sizes: list[list[int]] = []
        self.features: list[str] = []
        self.rows: list[tuple[int, list[int], list[int]]] = []  # (output, lo, hi) without the subject
        self.owner: list[int] = []

    def output(self, row: dict[str, Any]) -> int:
        key = _key(row)
        if key not in self.outputs:
            self.outputs[key] = len(self.output_rows)
            self.output_rows.append(row)
        return self.outputs[key]

    def add(self, target: dict[str, Any], call: dict[str, Any]) -> None:
        o, reason, inputs = self.output(target), call["reason"], call["inputs"]
        if not reason:
            return
        if self.kind == IMAGE:
            path = _one_text(inputs, call["udf"])
            height, width = _image_size(path, reason)
            s = self._subject(path, [height, width])
            boxes = [([y0, x0], [y1, x1]) for y0, y1, x0, x1 in image_boxes(reason, width, height)]
        elif self.kind == TEXT:
            text = max((v for v in inputs.values() if isinstance(v, str)), key=len, default="")
            s = self._subject(text, [len(words(text))])
            boxes = [([p], [p]) for p in token_positions(text, call["value"], reason)]
        else:
            s = self._subject(dict(inputs), [0])
            boxes = [([f], [f]) for f in (self._feature(n) for n in decisive_features(reason))]
        self.rows += [(o, lo, hi) for lo, hi in boxes]
        self.owner += [s] * len(boxes)

    def _subject(self, subject: Any, size: list[int]) -> int:
        key = _key(subject)
        if key not in self.subjects:
            self.subjects[key] = len(self.subject_list)
            self.subject_list.append(subject)
            self.sizes.append(size)
        return self.subjects[key]

    def _feature(self, name: str) -> int:
        if name not in self.features:
            self.features.append(name)
        return self.features.index(name)

    def done(self, udf: str) -> RegionLineage:
        if self.kind == TABULAR:
            self.sizes = [[max(len(self.features), 1)] for _ in self.sizes]
        local_dims = {IMAGE: 2, TEXT: 1, TABULAR: 1}[self.kind]
        extent = np.array(self.sizes, dtype=np.int64).reshape(-1, local_dims)
        in_shape = (max(len(self.subject_list), 1), *[max(int(e), 1) for e in extent.max(axis=0, initial=1)])
        lo = np.array([[s, *lo] for s, (_, lo, _) in zip(self.owner, self.rows)], np.int64)
        hi = np.array([[s, *hi] for s, (_, _, hi) in zip(self.owner, self.rows)], np.int64)
        out = [o for o, _, _ in self.rows]
        relation = RegionRelation.build(out, lo.reshape(-1, 1 + local_dims), hi.reshape(-1, 1 + local_dims),
                                        len(self.output_rows), in_shape)
        return RegionLineage(udf, self.kind, self.output_rows, self.subject_list, self.sizes, self.features,
                             relation)


def _one_text(inputs: dict[str, Any], udf: str) -> str:
    texts = [v for v in inputs.values() if isinstance(v, str)]
    if len(texts) != 1:
        raise ValueError(f"{udf}: an image reason needs exactly one path among its inputs, got {inputs!r}")
    return texts[0]


def _image_size(path: str, reason: Mapping[str, Any]) -> tuple[int, int]:
    """(height, width): from the reason when it says (person_detection), else the file's header."""
    if reason.get("width") and reason.get("height"):
        return int(reason["height"]), int(reason["width"])
    from PIL import Image

    from models.images import resolve_image

    with Image.open(resolve_image(path)) as image:
        return image.height, image.width


# --- a run's region lineage ---------------------------------------------------------------------
def region_lineage(run: Run, rows: Sequence[Row] | None = None, where: str | None = None,
                   udf: str | None = None, save: bool = True) -> RegionLineage:
    """Region lineage of the output rows ``rows`` (or matching ``where``, or all) of ``run``
    through the reasoning UDF ``udf`` (the only one whose reasons map to cells by default),
    stored under the run's ``regions/<udf>/`` unless ``save`` is False."""
    if rows is not None and where is not None:
        raise ValueError("give at most one of rows=, where=")
    names = [c.name for c in run.task.output]
    if rows is None:
        chosen = run.output if where is None else filter_where(run.output, where)
        rows = collect_rows(chosen)
        if not rows:
            raise ValueError(f"no output row of run {run.id} matches where={where!r}")
    wanted = [dict(r) if isinstance(r, Mapping) else dict(zip(names, r)) for r in rows]
    unique = list({_key(r): r for r in wanted}.values())
    lineage = RegionLineage.from_lineage([run.lineage(rows=[r]) for r in unique], udf)
    if save and run.session.store.writable():  # a read-only store keeps none
        with tempfile.TemporaryDirectory() as tmp, run.session.store.catalog.record_lock(run.id):
            local = os.path.join(tmp, lineage.udf)
            lineage.save(local)
            target = _folder(run, lineage.udf)
            run.session.store.delete(target)
            run.session.store.put(local, target)
            add_to_record(run.dir, f"{FOLDER}/{lineage.udf}", local_manifest(local), replace=True)
    return lineage


def load_region_lineage(run: Run, udf: str) -> RegionLineage:
    """The region lineage last stored for ``run`` and ``udf``."""
    store = run.session.store
    target = _folder(run, udf)
    if not listed_cache(run.dir, f"{FOLDER}/{udf}"):  # checks each file against the run's record
        raise ValueError(f"run {run.id} has no stored region lineage for {udf!r}; call region_lineage first")
    copy = os.path.join(tempfile.gettempdir(), f"al-regions-{uuid.uuid4().hex}")
    return RegionLineage.load(store.fetch(target, copy))


def _folder(run: Run, udf: str) -> str:
    return f"{run.dir}/{FOLDER}/{udf}"
