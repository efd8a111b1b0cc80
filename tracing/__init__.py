"""Derive augmented lineage: tracing queries, Algorithm 1, the lineage answer, the AL manager."""

from tracing.lineage import AugmentedLineage
from tracing.session import LineageSession, Run, TargetNotFoundError

__all__ = ["AugmentedLineage", "LineageSession", "Run", "TargetNotFoundError"]
