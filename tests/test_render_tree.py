"""The operator-tree diagram on a real parsed task with a difference: valid SVG, one node per
operator and source, every operator inside the band of the segment that owns it, the D
segment told apart, a legend."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from pyspark.sql import SparkSession

from cda_workload.workloads.loan_example import register_loan_tables
from segmenter.segments import segment
from tracing import LineageSession
from tracing.present.tree import tree_svg

SVG = "{http://www.w3.org/2000/svg}"
SQL = """SELECT Country, COUNT(*) AS n FROM (
  SELECT c.Country FROM client c JOIN loan l ON l.ClientID = c.ClientID WHERE l.LoanAmount > 10
  EXCEPT SELECT Country FROM client WHERE Income < 100) GROUP BY Country
UNION ALL SELECT Name AS Country, 1 AS n FROM client"""


def test_tree_diagram_draws_every_operator_in_its_segment(spark: SparkSession, tmp_path: Path) -> None:
    als = LineageSession(spark, store=str(tmp_path / "store"))
    register_loan_tables(als)
    task = als.parse(als.sql(SQL))
    root = segment(task.root)
    svg = ET.fromstring(tree_svg(task.root, root))  # well-formed XML, as a browser parses it inline

    nodes = svg.findall(f".//{SVG}g[@class='al-node']")
    assert Counter(n.get("data-op") for n in nodes) == Counter(op.symbol for op in task.root.walk())
    tables = sorted(t.text or "" for n in nodes if n.get("data-op") == "T" for t in n.iter(f"{SVG}text"))
    assert tables == ["client", "client", "client", "loan"]
    titles = [n.findtext(f"{SVG}title", "") for n in nodes]
    owners = Counter(m[1] for t in titles if (m := re.search(r"\(S(\d+)\)", t)))
    assert owners == {str(s.id): len(s.operators) for s in root.walk()}

    bands = svg.findall(f"{SVG}g[@class='al-seg']")
    assert [(b.get("data-segment"), b.get("data-kind")) for b in bands] == [
        (str(s.id), "D" if s.is_d else "Non-D") for s in root.walk()
    ]
    assert sum(b.get("data-kind") == "D" for b in bands) == 1
    for band, seg in zip(bands, root.walk()):  # a halo round each of the segment's operators
        halos = [c for c in band.iter(f"{SVG}circle") if c.get("stroke") == "none"]
        assert len(halos) == len(seg.operators)
        outline = [c for c in band.iter(f"{SVG}circle") if c.get("fill") == "none"]
        assert ("stroke-dasharray" in outline[0].attrib) == seg.is_d
    legend = _legend(svg)
    assert "Non-D segment" in legend and "D segment" in legend and "source table" in legend
    plain = als.parse(als.sql("SELECT Country FROM client WHERE Income > 10"))
    legend = _legend(ET.fromstring(tree_svg(plain.root, segment(plain.root))))
    assert legend == "Non-D segmentsource table"  # no difference: no D segment in the key


def _legend(svg: ET.Element) -> str:
    return "".join(svg.find(f"{SVG}g[@class='al-legend']").itertext())  # type: ignore[union-attr]
