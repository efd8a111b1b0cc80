"""The open functions through which answers reach their views, so that imports flow one way.

An answer's notebook hook calls :func:`html` and ``Run.openlineage`` calls :func:`openlineage`;
:mod:`tracing.present` registers, for each answer type, the function that draws or exports it
(``functools.singledispatch``, the standard library's open generic function). The answer
modules thus never import a renderer, and the renderers import the answers.
"""

from __future__ import annotations

from functools import singledispatch
from typing import Any


@singledispatch
def html(answer: object) -> str:
    """``answer`` as a self-styled HTML fragment (a notebook cell's view)."""
    raise TypeError(f"no HTML view is registered for {type(answer).__name__} (import tracing.present)")


@singledispatch
def openlineage(run: object, namespace: str | None = None) -> dict[str, Any]:
    """``run`` as one OpenLineage RunEvent (JSON-able)."""
    raise TypeError(f"no OpenLineage export is registered for {type(run).__name__} (import tracing.present)")
