"""Parse Spark's analyzed logical plan into an operator tree: the driver.

Spark's own rules run first (:data:`_PREPARE`); then the task's top (ORDER BY, LIMIT) is
peeled off and the rest is read by a :class:`PlanReader` with every construct's rule
(``segmenter/constructs``, one module per construct).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from segmenter.constructs import RULES
from segmenter.constructs.selections import models_last, remember_outer_conditions
from segmenter.errors import UnsupportedTaskError
from segmenter.operators import Projection, SortKey, Source, Task, column_expr
from segmenter.plan_reader import TRANSPARENT, JObj, PlanReader
from segmenter.sources import Keys, SourceResolver

# Spark's own rules applied before parsing, each keeping every operator where the user wrote it:
# constants folded (``date '1998-12-01' - interval '90' day`` has no SQL text Spark reads back),
# and subqueries turned into the joins that decorrelate them (semi, anti, left outer)
_PREPARE = (
    "ConstantFolding",
    "PullupCorrelatedPredicates",
    "RewriteCorrelatedScalarSubquery",
    "RewritePredicateSubquery",
)


def parse_dataframe(df: DataFrame, resolve: SourceResolver, text: str = "", keys: Keys | None = None) -> Task:
    """The task a (classic, not Spark Connect) DataFrame computes; ``keys``: the columns that
    identify the rows of sources read in place, by table name."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        raise UnsupportedTaskError("Spark Connect DataFrame", "task", "use a classic SparkSession")
    plan = jdf.queryExecution().analyzed()
    reader = PlanReader(df.sparkSession._jvm, resolve, keys or {}, RULES)
    task = _task(reader, _prepared(reader, plan), text)
    reader.sources.check_keys()
    return task


def _prepared(p: PlanReader, plan: JObj) -> JObj:
    """``plan`` with :data:`_PREPARE` applied until nothing changes (a subquery nested in
    another, TPC-H Q20's scalar subquery inside an IN, surfaces only once its parent is
    rewritten; a plan without constants to fold or subqueries stays as it is)."""
    rules = p.jvm.org.apache.spark.sql.catalyst.optimizer
    plan = models_last(p, rules.ConstantFolding.apply(plan))
    remember_outer_conditions(p, plan)
    for _ in range(len(_PREPARE) + 1):
        before = plan
        for rule in _PREPARE:
            plan = getattr(rules, rule).apply(plan)
        if plan.fastEquals(before):
            break
    return plan


def _task(p: PlanReader, plan: JObj, text: str) -> Task:
    """The task: its ORDER BY and LIMIT (traced at its top only), then its operator tree."""
    output = p.cols(plan)
    limit: int | None = None
    order: tuple[SortKey, ...] = ()
    node = plan
    while True:
        name = node.getClass().getSimpleName()
        if name == "GlobalLimit" and limit is None and not order:
            limit = int(node.limitExpr().toString())
        elif name == "LocalLimit" or name in TRANSPARENT:
            pass
        elif name == "Sort" and not order and getattr(node, "global")():
            p.path = ["Sort"]
            order = tuple(p.sort_key(s) for s in p.items(node.order()))
        elif name == "Project" and _is_pure_select(p, node):
            pass
        elif name == "WithCTE":  # ORDER BY / LIMIT of a WITH query sit inside it
            p.remember_ctes(node)
            node = node.plan()
            continue
        else:
            break
        node = node.child()
    p.path = []
    root = p.node(node)
    if isinstance(root, Source):  # no operator: O = T, each row its own lineage
        root = Projection(root, tuple((c, column_expr(c)) for c in root.columns))
    return Task(root=root, output=output, order=order, limit=limit, text=text)


def _is_pure_select(p: PlanReader, project: JObj) -> bool:
    """A projection onto existing columns above a sort/limit (no new values)."""
    child = project.child().getClass().getSimpleName()
    items = p.items(project.projectList())
    plain = all(i.getClass().getSimpleName() == "AttributeReference" for i in items)
    return plain and child in ("Sort", "GlobalLimit", "LocalLimit")
