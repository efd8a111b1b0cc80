"""Presentation, in one place: answers and runs as people and other tools see them.

- :mod:`~tracing.present.html`: an answer, a run or a forward answer as HTML (notebooks).
- :mod:`~tracing.present.reasons`: a model call's reason drawn (boxes on the photo, marked
  words, attribution bars).
- :mod:`~tracing.present.tree`: the operator tree with its segments as an SVG diagram.
- :mod:`~tracing.present.report`: the audit report (a Jinja2 template) and its JSON.
- :mod:`~tracing.present.explanations`: SHAP/LIME reasons as ``shap.Explanation``.
- :mod:`~tracing.present.openlineage_event`: a run as an OpenLineage RunEvent.

Imports flow one way: these modules read answers (:mod:`tracing.lineage`, ...) and runs;
answers reach them only lazily, from the notebook hook ``_repr_html_`` and the conversions
(``to_shap``, ``openlineage``) that hand an answer to one of them.
"""
