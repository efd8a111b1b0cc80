"""The models behind the reasoning UDFs, loaded from local files only.

Weights live under ``AL_MODELS_DIR`` (developers and CI: ``../shared/models``) and data under
``AL_DATA_DIR`` (``../shared/data``). Importing this package switches the Hugging Face and
Ultralytics clients to offline mode, so a missing file is an error that names the file, never
a download.
"""

from models.paths import ModelNotFoundError, data_dir, data_file, model_file, models_dir, sha256

__all__ = ["ModelNotFoundError", "data_dir", "data_file", "model_file", "models_dir", "sha256"]
