"""Presentation, in one place: answers and runs as people and other tools see them.

- :mod:`~tracing.present.html`: an answer, a run or a forward answer as HTML (notebooks).
- :mod:`~tracing.present.regions`: region answers drawn on their photo or text.
- :mod:`~tracing.present.reasons`: a model call's reason drawn (boxes on the photo, marked
  words, attribution bars).
- :mod:`~tracing.present.tree`: the operator tree with its segments as an SVG diagram.
- :mod:`~tracing.present.report`: the audit report (a Jinja2 template) and its JSON.
- :mod:`~tracing.present.openlineage_event`: a run as an OpenLineage RunEvent.

Imports flow one way: these modules read answers and runs, and no answer imports them. This
module registers each view with the open functions of :mod:`tracing.views` that the answers'
notebook hooks (``_repr_html_``) and ``Run.openlineage`` call; ``import tracing`` runs it.
"""

from __future__ import annotations

from typing import Any

from tracing import views
from tracing.confidence.answer import ConfidenceAnswer
from tracing.forward import ForwardLineage
from tracing.lineage import AugmentedLineage
from tracing.present.html import confidence_html, forward_html, fragment, lineage_html, run_html
from tracing.present.regions import region_answer_html, region_forward_html
from tracing.region_answers import RegionAnswer, RegionForward
from tracing.session import Run

views.html.register(AugmentedLineage, lambda answer: fragment(lineage_html(answer)))
views.html.register(Run, lambda run: fragment(run_html(run)))
views.html.register(ForwardLineage, forward_html)
views.html.register(ConfidenceAnswer, confidence_html)
views.html.register(RegionAnswer, region_answer_html)
views.html.register(RegionForward, region_forward_html)


@views.openlineage.register
def _run_event(run: Run, namespace: str | None = None) -> dict[str, Any]:
    from tracing.present.openlineage_event import openlineage_event  # its client takes 0.25 s to import

    return openlineage_event(run.record, run.task, run.session.store.uri, namespace)
