"""Where model weights and data sets are, and a clear error when one is not there."""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path

from segmenter.errors import LineageError

for _var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "YOLO_OFFLINE"):
    os.environ.setdefault(_var, "1")

YOLO_WEIGHTS = "yolo/yolov8n_int8_rebuilt.pt"  # under AL_MODELS_DIR (MANIFEST.md)
SENTIMENT_MODEL = "sentiment/minilm-l6-sst2"  # a Hugging Face folder
_REPO_ROOT = Path(__file__).resolve().parent.parent
_DEFAULT_SHARED = _REPO_ROOT.parent / "shared"


class ModelNotFoundError(LineageError, FileNotFoundError):
    """A model or data file the UDFs need is not on this machine."""


class UntrustedWeightsError(LineageError):
    """Weights that loading could turn into code: a file of unknown checksum that would be
    unpickled, or a model folder whose config names another weights file."""


def models_dir() -> Path:
    """``AL_MODELS_DIR``, else ``../shared/models`` beside the checkout."""
    return Path(os.environ.get("AL_MODELS_DIR", _DEFAULT_SHARED / "models")).expanduser()


def data_dir() -> Path:
    """``AL_DATA_DIR``, else ``../shared/data`` beside the checkout."""
    return Path(os.environ.get("AL_DATA_DIR", _DEFAULT_SHARED / "data")).expanduser()


def model_file(relative: str, how_to_get: str) -> Path:
    """The path of ``relative`` under the models directory; raises naming it if absent."""
    return _existing(models_dir(), relative, "AL_MODELS_DIR", how_to_get)


def data_file(relative: str, how_to_get: str) -> Path:
    """The path of ``relative`` under the data directory; raises naming it if absent."""
    return _existing(data_dir(), relative, "AL_DATA_DIR", how_to_get)


def _existing(root: Path, relative: str, env: str, how_to_get: str) -> Path:
    path = root / relative
    if not path.exists():
        raise ModelNotFoundError(
            f"expected {path} ({relative} under {env}={root}); {how_to_get}. "
            f"Point {env} at the folder that holds it."
        )
    return path


def sha256(path: Path, fresh: bool = False) -> str:
    """Checksum of a weights file or of every file in a weights folder (for audit records);
    hashed again only when a file's size or modification time changed, or when ``fresh``
    (before loading: a replaced file can keep both)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    stamped = tuple((f, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    return _hash(stamped) if fresh else _remembered(stamped)


def _hash(files: tuple[tuple[Path, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for file, _, _ in files:
        with file.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


_remembered = cache(_hash)
