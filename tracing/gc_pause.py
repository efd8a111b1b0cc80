"""The cyclic garbage collector paused while an answer's rows become Python objects.

With torch, transformers and Spark's gateway loaded, the heap holds about 0.3 M objects, and
each full collection that a burst of allocations triggers walks them all, and the rows made so
far: CDA Q21's one-row answer (69 k source rows as dicts) spent more than half of ``to_dict``
in them (1.3 s, 0.6 s paused). Rows as dicts and lists of plain values form no cycles; the one
collection put off is made at the next trigger."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause collection for the block (also usable as a decorator); nested uses are free."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
