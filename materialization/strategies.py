"""Which intermediate results a strategy stores while the task runs (paper §6.1).

- rerun: nothing; the task runs in normal mode and intermediates are recomputed on demand.
- full:  the output of every non-root segment, in reasoning mode.
- fm:    only the outputs of non-root segments topped by a function operator.

``reasons="lazy"`` (fm and full): the task runs in normal mode, so the stored model calls
keep their values only; a question computes the reasons of the calls it reaches, and caches
them in the run. ``"auto"`` (the default) is lazy where a model's reasons are expensive.
"""

from __future__ import annotations

from segmenter.segments import Segment

STRATEGIES = ("rerun", "full", "fm")
REASONS = ("auto", "eager", "lazy")  # when reasons are computed: task time, question time


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    return strategy


def check_reasons(reasons: str) -> str:
    if reasons not in REASONS:
        raise ValueError(f"reasons must be one of {', '.join(REASONS)}, not {reasons!r}")
    return reasons


def resolve_reasons(reasons: str, strategy: str, costs: list[str]) -> str:
    """``reasons`` with "auto" decided: lazy for fm and full when some model's reasons are
    expensive (``ReasoningUDF.reason_cost``), else computed while the task runs."""
    if check_reasons(reasons) != "auto":
        return reasons
    return "lazy" if check_strategy(strategy) != "rerun" and "expensive" in costs else "eager"


def run_mode(strategy: str, reasons: str = "eager") -> str:
    """UDF mode for running the task itself."""
    lazy = check_strategy(strategy) == "rerun" or check_reasons(reasons) == "lazy"
    return "normal" if lazy else "reasoning"


def stores(strategy: str, seg: Segment, root: Segment) -> bool:
    """Whether ``seg``'s output is materialized while the task runs."""
    if seg is root or check_strategy(strategy) == "rerun":
        return False
    return strategy == "full" or bool(seg.functions)
