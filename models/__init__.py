"""Model loading from local weights (AL_MODELS_DIR); see issue 3."""
