"""The result type shared by every confidence method."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    """A probability with how it was obtained and, for sampling, its guarantee.

    bound "relative": P(|value - p| > epsilon * p) <= delta; "absolute": P(|value - p| > epsilon) <= delta.
    """

    value: float
    method: str  # "exact" | "karp-luby" | "monte-carlo" | "trivial"
    epsilon: float | None = None
    delta: float | None = None
    bound: str | None = None
    samples: int | None = None
    seconds: float = 0.0
