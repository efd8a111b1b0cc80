"""Derive augmented lineage: tracing queries, Algorithm 1, the lineage answer, the AL manager."""

import tracing.present  # noqa: F401  registers the views answers show (tracing.views)
from materialization.fingerprints import SourceChangedError
from tracing.errors import NotCapturedError, TargetNotFoundError
from tracing.forward import ForwardLineage
from tracing.lineage import AugmentedLineage
from tracing.session import LineageSession, Run

__all__ = [
    "AugmentedLineage",
    "ForwardLineage",
    "LineageSession",
    "NotCapturedError",
    "Run",
    "SourceChangedError",
    "TargetNotFoundError",
]
