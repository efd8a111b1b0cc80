"""person_detection, face_recognition and name_from_path with the real shared weights and real
images (no mocks): values, reasons that point at the right pixels or characters, both modes,
path resolution, bad input, missing files, and one run each through Spark in reasoning mode."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import cv2
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from skimage import data

from materialization.execute import UDFError, translate_task_errors
from models import ModelNotFoundError, data_dir, face_gallery, images, yolo_detector
from reasoning_udfs import person_detection as person_detection_module
from reasoning_udfs.face_recognition import face_recognition
from reasoning_udfs.name_from_path import name_from_path
from reasoning_udfs.person_detection import person_detection
from reasoning_udfs.udf import ERROR_MARKER, UDFRowError
from tests.planted import Planted

VAL = "coco_sample/images/val2017"
WITH_PERSON = f"{VAL}/000000000785.jpg"  # label file: one large person (class 0)
WITHOUT_PERSON = f"{VAL}/000000000285.jpg"  # label file: a bear only
# measured 0.74 on the 50 held-out images (docs/models.md); 10 people, so chance is 0.1
MIN_HELD_OUT_ACCURACY = 0.6


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("photos")
    out = {}
    for name in ("astronaut", "coffee"):
        path = folder / f"{name}.jpg"
        cv2.imwrite(str(path), getattr(data, name)()[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])
        out[name] = str(path)
    return out


def _held_out() -> list[str]:
    """The 5 images of each person after _0001.._0005, as relative paths (not in the gallery)."""
    return [f"lfw_sample/{p.parent.name}/{p.name}" for p, _, n in face_gallery.lfw_images() if n > 5]


def _label_classes(image: str) -> set[int]:
    label = data_dir() / image.replace("/images/", "/labels/").replace(".jpg", ".txt")
    return {int(line.split()[0]) for line in label.read_text().splitlines() if line.strip()}


def test_astronaut_is_a_person(photos: dict[str, str]) -> None:
    value, reason = person_detection.main_with_reason(photos["astronaut"])
    assert value is True and person_detection.main(photos["astronaut"]) is True
    best = max(reason["boxes"], key=lambda b: b["confidence"])
    assert best["confidence"] == pytest.approx(0.85, abs=0.05)
    assert [best[k] for k in ("x1", "y1", "x2", "y2")] == pytest.approx([6, 16, 364, 512], abs=10)
    assert (reason["width"], reason["height"]) == (512, 512)


def test_coffee_has_no_person(photos: dict[str, str]) -> None:
    expected = (False, {"boxes": [], "width": 600, "height": 400})
    assert person_detection.main_with_reason(photos["coffee"]) == expected


def test_coco_images_agree_with_their_labels_in_both_modes() -> None:
    assert 0 in _label_classes(WITH_PERSON) and 0 not in _label_classes(WITHOUT_PERSON)
    absolute = str(data_dir() / WITH_PERSON)
    rows = [(WITH_PERSON,), (WITHOUT_PERSON,), (None,), (absolute,)]
    assert person_detection.main_batch(rows) == [True, False, None, True]
    pairs = person_detection.main_with_reason_batch(rows)
    assert [v for v, _ in pairs] == [True, False, None, True]
    assert pairs[2] == (None, None)
    assert pairs[0][1] == pairs[3][1]  # a relative path resolves under AL_DATA_DIR
    height, width = cv2.imread(absolute).shape[:2]
    assert (pairs[0][1]["width"], pairs[0][1]["height"]) == (width, height)
    for box in pairs[0][1]["boxes"]:
        assert 0 <= box["x1"] < box["x2"] <= width and 0 <= box["y1"] < box["y2"] <= height
        assert box["confidence"] >= 0.25


def test_detect_people_in_chunks_matches_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(person_detection_module, "BATCH", 2)
    rows = [(WITH_PERSON,), (WITHOUT_PERSON,), (WITH_PERSON,)]
    chunked = [reason for _, reason in person_detection.main_with_reason_batch(rows)]
    ((_, single),) = person_detection.main_with_reason_batch([(WITH_PERSON,)])
    boxes = [len(r["boxes"]) for r in (*chunked, single)]
    assert boxes[1] == 0 and boxes[0] == boxes[2] == boxes[3]
    confidences = [[b["confidence"] for b in r["boxes"]] for r in (chunked[2], single)]
    assert confidences[0] == pytest.approx(confidences[1], abs=0.02)


def test_missing_or_broken_image_names_the_path(tmp_path: Path) -> None:
    missing = f"{VAL}/no_such_image.jpg"
    with pytest.raises(UDFRowError, match=r"no_such_image\.jpg") as info:
        person_detection.main_batch([(WITH_PERSON,), (missing,)])
    assert str(data_dir() / missing) in str(info.value)
    broken = tmp_path / "broken.jpg"
    broken.write_text("not a jpeg")
    with pytest.raises(ValueError, match=re.escape(f"cannot be decoded: {broken}")):
        images.read_image(str(broken))
    # cv2 decodes a cut-off JPEG with only a warning; it must fail in one line naming UDF and row
    whole = (data_dir() / WITH_PERSON).read_bytes()
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(whole[: len(whole) * 6 // 10])
    row = re.escape(f"{truncated} on input row ('{truncated}',)")
    for udf in (person_detection, face_recognition):
        cause = rf"^{ERROR_MARKER}\[{udf.name}\] raised ValueError: image file is truncated \(.*\): {row}"
        with pytest.raises(UDFRowError, match=cause) as info:
            udf.main_with_reason_batch([(WITH_PERSON,), (str(truncated),)])
        assert "\n" not in str(info.value)
    damaged = bytearray(whole)
    damaged[4 + int.from_bytes(whole[4:6], "big")] = 0  # the second segment's marker
    broken.write_bytes(damaged)
    with pytest.raises(ValueError, match=re.escape("image file is corrupt (no JPEG marker at byte")):
        images.read_image(str(broken))


def test_missing_weights_name_the_expected_file(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The model cache is keyed by the weights path, which is checked on every call: no stale
    model is used and no cache needs clearing when AL_MODELS_DIR moves."""
    monkeypatch.setenv("AL_MODELS_DIR", str(tmp_path))
    expected = str(tmp_path / "yolo" / "yolov8n_int8_rebuilt.pt")
    with pytest.raises(ModelNotFoundError, match=r"yolov8n\.pt") as info:
        person_detection.main_batch([(WITH_PERSON,)])
    assert expected in str(info.value)
    # as Spark's workers call it: one line naming the UDF and the cause, not a worker's trace
    cannot_run = r"^UDF \[person_detection\] cannot run: ModelNotFoundError: expected"
    with pytest.raises(UDFError, match=cannot_run), translate_task_errors():
        person_detection.arrow_function("normal")(pa.array([WITH_PERSON]))
    monkeypatch.setenv("AL_DATA_DIR", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="lfw_sample"):
        face_gallery.lfw_images()


def test_replaced_weights_are_not_unpickled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A .pt whose sha256 is not a known weights file is refused before Ultralytics unpickles
    it (loading would run the code a planted pickle carries); AL_TRUSTED_WEIGHTS admits one."""
    marker = tmp_path / "ran"
    planted = tmp_path / "yolo" / "yolov8n_int8_rebuilt.pt"
    planted.parent.mkdir()
    planted.write_bytes(pickle.dumps(Planted(str(marker))))
    monkeypatch.setenv("AL_MODELS_DIR", str(tmp_path))
    with pytest.raises(
        yolo_detector.UntrustedWeightsError, match=r"has sha256 [0-9a-f]{64}, not the known"
    ) as info:
        person_detection.main_batch([(WITH_PERSON,)])
    assert str(planted) in str(info.value) and not marker.exists()
    digest = re.search(r"sha256 ([0-9a-f]{64})", str(info.value)).group(1)  # type: ignore[union-attr]
    monkeypatch.setenv("AL_TRUSTED_WEIGHTS", f"other, {digest}")
    assert yolo_detector.check_trusted(planted) == digest


def test_face_recognition_on_held_out_images() -> None:
    held_out = _held_out()
    truth = name_from_path.main_batch([(p,) for p in held_out])
    found = face_recognition.main_with_reason_batch([(p,) for p in held_out])
    accuracy = sum(v == t for (v, _), t in zip(found, truth)) / len(held_out)
    assert len(held_out) == 50 and accuracy >= MIN_HELD_OUT_ACCURACY
    assert sum(r["detected"] for _, r in found) >= 45  # the LBP cascade finds 48 of these 50
    for _, reason in found:
        box = reason["box"]
        assert 0 <= box["x1"] < box["x2"] <= 250 and 0 <= box["y1"] < box["y2"] <= 250
        assert -1.0 <= reason["similarity"] <= 1.0


def test_face_recognition_value_format_and_paths() -> None:
    relative = "lfw_sample/George_W_Bush/George_W_Bush_0001.jpg"  # a gallery image
    value, reason = face_recognition.main_with_reason(relative)
    assert value == "George W Bush" == name_from_path.main(relative)
    assert reason["detected"] and reason["similarity"] > 0.3
    assert face_recognition.main_with_reason(str(data_dir() / relative)) == (value, reason)
    assert face_recognition.main_with_reason(None) == (None, None)
    with pytest.raises(UDFRowError, match=r"Nobody_0001\.jpg"):
        face_recognition.main_batch([("lfw_sample/Nobody/Nobody_0001.jpg",)])


@pytest.mark.parametrize(
    "path, name",
    [
        ("lfw_sample/George_W_Bush/George_W_Bush_0006.jpg", "George W Bush"),
        ("/data/George_W_Bush_0001/Colin_Powell/Colin_Powell_0010.jpg", "Colin Powell"),
        ("Hugo_Chavez_0003.jpg", "Hugo Chavez"),
    ],
)
def test_name_from_path_value_and_position(path: str, name: str) -> None:
    value, reason = name_from_path.main_with_reason(path)
    assert value == name == name_from_path.main(path)
    assert path[reason["start"] : reason["end"]].replace("_", " ") == name
    assert reason["start"] == path.rfind("/") + 1  # the file-name occurrence


def test_name_from_path_without_an_lfw_name() -> None:
    assert name_from_path.main_with_reason(None) == (None, None)
    assert name_from_path.main_with_reason("images/photo.jpg") == (None, None)


def test_person_detection_in_spark_reasoning_mode(spark: SparkSession) -> None:
    df = spark.createDataFrame([(WITH_PERSON,), (WITHOUT_PERSON,), (None,)], "path string").coalesce(1)
    out = df.select(person_detection.spark_udf("reasoning")("path").alias("r")).collect()
    assert [r.r.value for r in out] == [True, False, None]
    assert out[0].r.reason.boxes[0].confidence >= 0.25 and out[1].r.reason.boxes == []
    assert out[2].r.reason is None


def test_face_recognition_in_spark_reasoning_mode(spark: SparkSession) -> None:
    paths = [*_held_out()[:2], None]
    df = spark.createDataFrame([(p,) for p in paths], "path string").coalesce(1)
    out = df.select(face_recognition.spark_udf("reasoning")("path").alias("r")).collect()
    local = face_recognition.main_with_reason_batch([(p,) for p in paths])
    assert [r.r.value for r in out] == [v for v, _ in local] and out[2].r.reason is None
    for row, (_, reason) in zip(out[:2], local[:2]):
        got = row.r.reason.asDict(recursive=True)
        assert got["box"] == pytest.approx(reason["box"]) and got["detected"] == reason["detected"]
        assert got["similarity"] == pytest.approx(reason["similarity"])


def test_name_from_path_in_spark_reasoning_mode(spark: SparkSession) -> None:
    paths = [*_held_out()[:3], None]
    df = spark.createDataFrame([(p,) for p in paths], "path string")
    out = df.select("path", name_from_path.spark_udf("reasoning")("path").alias("r")).collect()
    for row in out:
        if row.path is None:
            assert row.r.value is None and row.r.reason is None
        else:
            assert row.path[row.r.reason.start : row.r.reason.end].replace("_", " ") == row.r.value
