"""Parse Spark plans into operator trees (σ π ⋈ α ∪ − φ) and split them into segments."""

from segmenter.errors import LineageError, OrderTieError, UnknownSourceError, UnsupportedTaskError
from segmenter.operators import Task, render_tree
from segmenter.parser import parse_dataframe
from segmenter.segments import Segment, render_segments, segment

__all__ = [
    "LineageError",
    "OrderTieError",
    "Segment",
    "Task",
    "UnknownSourceError",
    "UnsupportedTaskError",
    "parse_dataframe",
    "render_segments",
    "render_tree",
    "segment",
]
