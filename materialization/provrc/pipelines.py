"""Random chains of numpy operations (the paper's random-pipeline workload), for tests and benchmarks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from materialization.provrc.workflow import Workflow

Step = tuple[str, dict, int]  # operation, arguments, lineage rows it will produce


def _candidates(rng: np.random.Generator, x: np.ndarray) -> list[Callable[[], Step]]:
    """Operations applicable to ``x``, each a thunk giving (op, args, estimated lineage rows)."""
    n, last = x.size, x.shape[-1]
    steps: list[Callable[[], Step]] = [
        lambda: ("negative", {}, n),
        lambda: ("exp", {}, n),
        lambda: ("flip", {"axis": 0}, n),
        lambda: ("roll", {"shift": int(rng.integers(1, 4)), "axis": 0}, n),
        lambda: ("repeat", {"repeats": 2, "axis": x.ndim - 1}, 2 * n),
        lambda: ("tile", {"reps": (2,) + (1,) * (x.ndim - 1)}, 2 * n),
        lambda: ("filter", {"mask": x > np.median(x)}, n),
        lambda: ("sort", {"axis": -1}, n),
        lambda: ("cumsum", {"axis": -1}, n * (last + 1) // 2),
        lambda: ("slice", {"key": tuple(slice(int(rng.integers(0, max(s // 3, 1))), None) for s in x.shape)},
                 n),
    ]
    if x.ndim == 1 and n % 2 == 0 and n >= 4:
        steps.append(lambda: ("reshape", {"shape": (2, n // 2)}, n))
    if x.ndim >= 2:
        steps += [
            lambda: ("transpose", {}, n),
            lambda: ("reshape", {"shape": (n,)}, n),
            lambda: ("sum", {"axis": int(rng.integers(0, x.ndim))}, n),
        ]
    if x.ndim == 2:
        steps.append(lambda: ("img_filter", {"threshold": float(np.median(x))}, 9 * n))
    return steps


def random_pipeline(rng: np.random.Generator, shape: tuple[int, ...], steps: int, max_rows: int,
                    workflow: Workflow | None = None) -> tuple[Workflow, list[str]]:
    """Builds a chain of ``steps`` random operations on a random array of ``shape``.

    Operations whose lineage would exceed ``max_rows`` rows (or leave fewer than two cells) are
    skipped. Returns the workflow and the chain of array names, first input first.
    """
    wf = workflow or Workflow()
    chain = [wf.array(f"x{len(wf.arrays)}", rng.random(shape))]
    while len(chain) <= steps:
        x = wf.arrays[chain[-1]]
        for make in rng.permutation(np.array(_candidates(rng, x), dtype=object)):
            op, args, rows = make()
            if rows <= max_rows:
                out = wf.run(op, chain[-1], **args)
                if wf.arrays[out].size >= 2:
                    chain.append(out)
                    break
        else:
            raise RuntimeError(f"no operation fits {x.shape} within {max_rows} rows")
    return wf, chain
