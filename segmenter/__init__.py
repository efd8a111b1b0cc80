"""Parse Spark plans into operator trees (σ π ⋈ α ∪ − φ) and split them into segments.
Nothing is imported here: ``segmenter.errors`` is read by commands that start no Spark."""
