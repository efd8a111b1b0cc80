"""Which intermediate results a strategy stores while the task runs (paper §6.1).

- rerun: nothing; the task runs in normal mode and intermediates are recomputed on demand.
- full:  the output of every non-root segment, in reasoning mode.
- fm:    only the outputs of non-root segments topped by a function operator.
"""

from __future__ import annotations

from segmenter.segments import Segment

STRATEGIES = ("rerun", "full", "fm")


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    return strategy


def run_mode(strategy: str) -> str:
    """UDF mode for running the task itself."""
    return "normal" if check_strategy(strategy) == "rerun" else "reasoning"


def stores(strategy: str, seg: Segment, root: Segment) -> bool:
    """Whether ``seg``'s output is materialized while the task runs."""
    if seg is root or check_strategy(strategy) == "rerun":
        return False
    return strategy == "full" or bool(seg.functions)
