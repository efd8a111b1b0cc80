"""The confidence backend on real Spark: probabilities of output rows from boolean lineage.

The oracle is the definition itself: every possible world of the uncertain facts (rows of
uncertain tables, mutually exclusive alternatives, model decisions) is enumerated, the task
is evaluated on that world in pure Python (tests/oracle.py's operators, sharing nothing with
the engine), and a row's probability is the mass of the worlds whose result holds it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from reasoning_udfs import ReasoningUDF
from segmenter.errors import LineageError, UnsupportedTaskError
from tests.oracle import (
    BINARY,
    DB,
    PARITY_CONFIDENCE,
    TABLES,
    UNARY,
    Agg,
    Bag,
    Explode,
    Func,
    Join,
    Leaf,
    Minus,
    Node,
    Project,
    Select,
    TreeBuilder,
    Union,
    WindowAgg,
    distinct,
    leaf,
    parity,
    to_code,
    to_dataframe,
)
from tests.worlds import worlds
from tracing import LineageSession, Run
from tracing.confidence import Facts
from tracing.errors import NotCapturedError

EXAMPLES = int(os.environ.get("AL_CONFIDENCE_EXAMPLES", "1"))  # random Spark tasks per root kind

# Which oracle tables are uncertain: key -> probability; s's rows with equal sa are exclusive
# alternatives (a NULL sa stands alone); t is certain, w empty.
PROBS: dict[str, dict[int, float]] = {
    "r": {1: 0.9, 2: 0.6, 3: 0.5, 4: 0.75, 5: 0.8},
    "s": {1: 0.5, 2: 0.3, 3: 0.6, 4: 0.8},
    "u": {1: 0.7, 2: 0.4, 3: 0.85},
}
ALTERNATIVES = {"s": "sa"}
MAX_FACTS = 14


class _Tables:
    """``als`` as the oracle's Spark code sees it: the tables without their probability column."""

    def __init__(self, als: LineageSession) -> None:
        self.als = als

    def table(self, name: str) -> DataFrame:
        df = self.als.table(name)
        return df.drop("p") if "p" in df.columns else df


@pytest.fixture(scope="module")
def als(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LineageSession:
    session = LineageSession(spark, store=str(tmp_path_factory.mktemp("confidence") / "store"))
    for name, (cols, rows) in TABLES.items():
        probs = PROBS.get(name)
        if probs is None:
            schema = ", ".join(f"{c} bigint" for c in cols)
            session.register_table(name, spark.createDataFrame(rows, schema), key=cols[0])
            continue
        schema = ", ".join(f"{c} bigint" for c in cols) + ", p double"
        data = spark.createDataFrame([(*r, probs[r[0]]) for r in rows], schema)
        session.register_table(name, data, key=cols[0], confidence="p", alternatives=ALTERNATIVES.get(name))
    return session


# --- the possible-worlds oracle ----------------------------------------------------------------


def _funcs(tree: Node) -> list[Func]:
    return [n for n in tree.walk() if isinstance(n, Func)]


def _evaluate(node: Node, present: frozenset, as_run: dict[int, dict] | None = None) -> Bag:
    """The task on one world: source rows and model decisions not in ``present`` are absent.

    With ``as_run`` (filled per aggregation on first use), an aggregation row carries the
    values it has in the run (every fact holding): it is one fact whose probability is that
    of its group existing, the semantics the confidence backend defines for α (and so for a
    window aggregate, whose value is its partition's in the run)."""
    if isinstance(node, Leaf):
        return [r for r in DB[node.table] if node.table not in PROBS or (node.table, r[0]) in present]
    if as_run is not None and isinstance(node, Agg) and node.rollup:  # one aggregation per level:
        # a subtotal's NULL key and a group's NULL key are different rows with their own values
        return _evaluate(node.as_union, present, as_run) if _evaluate(node.child, present) else []
    bag = node.apply([_evaluate(c, present, as_run) for c in node.children])
    if as_run is not None and isinstance(node, Agg) and node.aggs:
        if id(node) not in as_run:
            everything = _evaluate(node, frozenset(_everything(node)))
            as_run[id(node)] = {r[: len(node.group)]: r for r in everything}
        bag = [as_run[id(node)].get(r[: len(node.group)], r) for r in bag]
    if as_run is not None and isinstance(node, WindowAgg):  # the value of its partition in the run
        if id(node) not in as_run:
            everything = _evaluate(node.per_partition, frozenset(_everything(node)))
            as_run[id(node)] = {r[:-1]: r[-1] for r in everything}
        bag = [r[:-1] + (as_run[id(node)][node.per_partition.key(r)],) for r in bag]
    if isinstance(node, Func):
        i = node.child.idx(node.arg)
        bag = [r for r in bag if r[-1] is None or ("parity", r[i]) in present]
    return bag


def _facts(tree: Node) -> tuple[list[Any], Facts]:
    """The uncertain facts a tree can touch: rows of its uncertain tables, and the parity
    decisions of every value its φ could see in some world (found by running it with all
    source rows present and every decision kept, which is the largest input φ gets)."""
    names: list[Any] = []
    probs: dict[int, float] = {}
    groups: dict[int, Any] = {}
    tables = {n.table for n in tree.walk() if isinstance(n, Leaf)}
    for table in sorted(tables & set(PROBS)):
        for row in DB[table]:
            names.append((table, row[0]))
            probs[len(names) - 1] = PROBS[table][row[0]]
            alt = ALTERNATIVES.get(table)
            if alt is not None and row[TABLES[table][0].index(alt)] is not None:
                groups[len(names) - 1] = (table, row[TABLES[table][0].index(alt)])
    everything = frozenset(names) | {("parity", x) for x in range(-64, 64)}
    seen = set()
    for fn in _funcs(tree):
        i = fn.child.idx(fn.arg)
        seen |= {r[i] for r in _evaluate(fn.child, everything) if r[i] is not None}
    for x in sorted(seen):
        names.append(("parity", x))
        probs[len(names) - 1] = PARITY_CONFIDENCE[parity.main(x)]
    return names, Facts(probs, groups)


def possible_worlds(tree: Node) -> dict[tuple, float]:
    """P(row in result) for every row of some world's result, by enumerating the worlds."""
    names, facts = _facts(tree)
    assert len(names) <= MAX_FACTS, f"{len(names)} facts: too many worlds to enumerate"
    out: dict[tuple, float] = {}
    as_run: dict[int, dict] = {}
    for world, p in worlds(facts):
        for row in distinct(_evaluate(tree, frozenset(names[i] for i in world), as_run)):
            out[row] = out.get(row, 0.0) + p
    return out


def check(als: LineageSession, tree: Node, algorithm: str = "indep") -> None:
    expected = possible_worlds(tree)
    run = als.run(to_dataframe(tree, _Tables(als)), backend="confidence")
    answer = run.confidence(algorithm=algorithm, method="exact", explain=0)
    got = {tuple(r.row.values()): r.probability for r in answer}
    where = f"\n{to_code(tree)}\n{run.segments()}\n{answer}"
    assert set(got) == set(distinct(_evaluate(tree, frozenset(_everything(tree))))), where
    for row, p in got.items():
        want = expected.get(row, 0.0)
        assert p == pytest.approx(want, abs=1e-9), f"row {row}: {p} vs {want}{where}"


def _everything(tree: Node) -> Iterator[Any]:
    names, _ = _facts(tree)
    return iter(names)


# --- the paper's running example ----------------------------------------------------------------


@pytest.fixture(scope="module")
def conference(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LineageSession:
    session = LineageSession(spark, store=str(tmp_path_factory.mktemp("conference") / "store"))
    attends = [(11, "Garcia-Molina", "Monday", 0.8), (12, "Garcia-Molina", "Wednesday", 0.7),
               (13, "Ullman", "Wednesday", 0.6)]
    events = [(21, "Monday", "Reception", 0.8), (22, "Tuesday", "Museum", 1.0),
              (23, "Wednesday", "Banquet", 0.9)]
    session.register_table("attends", pd.DataFrame(attends, columns=["id", "person", "day", "p"]),
                           key="id", confidence="p")
    session.register_table("events", pd.DataFrame(events, columns=["id", "day", "event", "p"]),
                           key="id", confidence="p")
    return session


ROSTER = "SELECT DISTINCT a.person, e.event FROM attends a JOIN events e ON a.day = e.day"


@pytest.fixture(scope="module")
def roster(conference: LineageSession) -> Run:
    """EventRoster with boolean lineage, run once for the tests that only read it."""
    return conference.run(conference.sql(ROSTER), backend="confidence")


@pytest.fixture(scope="module")
def roster_fm(conference: LineageSession) -> Run:
    """EventRoster run lazily (fm): no probabilities to ask for."""
    return conference.run(conference.sql(ROSTER), strategy="fm")


def _probabilities(als: LineageSession, sql: str, **options: Any) -> dict[tuple, float]:
    run = als.run(als.sql(sql), backend="confidence")
    return {tuple(r.row.values()): r.probability for r in run.confidence(**options)}


def test_event_roster_and_attendees_as_in_the_paper(conference: LineageSession) -> None:
    assert _probabilities(conference, ROSTER) == pytest.approx(
        {("Garcia-Molina", "Reception"): 0.64, ("Garcia-Molina", "Banquet"): 0.63,
         ("Ullman", "Banquet"): 0.54}
    )
    attendees = _probabilities(conference, f"SELECT DISTINCT person FROM ({ROSTER})")
    assert attendees == pytest.approx({("Garcia-Molina",): 0.8668, ("Ullman",): 0.54})


@pytest.mark.parametrize(
    "plan",
    [
        "SELECT DISTINCT e.event FROM attends a JOIN events e ON a.day = e.day",  # plan 2 (unsafe)
        "SELECT DISTINCT e.event FROM (SELECT DISTINCT day FROM attends) a JOIN events e ON a.day = e.day",
    ],
    ids=["unsafe-plan", "safe-plan"],
)
@pytest.mark.parametrize("algorithm", ["indep", "basic"])
def test_event_likelihood_is_0_792_under_either_plan(
    conference: LineageSession, plan: str, algorithm: str
) -> None:
    """Operator-by-operator propagation gives 0.8298 for the unsafe plan; lineage gives 0.792."""
    got = _probabilities(conference, plan, algorithm=algorithm)
    assert got[("Banquet",)] == pytest.approx(0.792)
    assert got[("Reception",)] == pytest.approx(0.64)


def test_answer_explains_the_number(conference: LineageSession) -> None:
    sql = "SELECT DISTINCT e.event FROM attends a JOIN events e ON a.day = e.day"
    run = conference.run(conference.sql(sql), backend="confidence")
    answer = run.confidence(where="event = 'Banquet'")
    (row,) = answer.rows
    assert row.estimate.method == "exact" and row.facts == 3
    assert row.formula == '(attends{"id":12} ∧ events{"id":23}) ∨ (attends{"id":13} ∧ events{"id":23})'
    # the weather decides the banquet most: P(row | 23) − P(row | ¬23) = 0.88
    assert row.weights[0].fact == 'events{"id":23}' and row.weights[0].effect == pytest.approx(0.88)
    assert "0.7920" in str(answer) and "0.7920" in answer._repr_html_()
    assert answer.to_pandas().loc[0, "probability"] == pytest.approx(0.792)
    assert '"probability": 0.792' in answer.to_json()


def test_alternatives_are_mutually_exclusive(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Section 6: Ullman attends on Monday (0.6) or Tuesday (0.3), never both."""
    als = LineageSession(spark, store=str(tmp_path_factory.mktemp("alternatives") / "store"))
    rows = [(1, "Ullman", "Monday", 0.6), (2, "Ullman", "Tuesday", 0.3), (3, "Widom", "Monday", 0.5)]
    als.register_table("attends", pd.DataFrame(rows, columns=["id", "person", "day", "p"]),
                       key="id", confidence="p", alternatives="person")
    assert _probabilities(als, "SELECT DISTINCT person FROM attends") == pytest.approx(
        {("Ullman",): 0.9, ("Widom",): 0.5}
    )
    both = als.run(
        als.sql("SELECT a.person FROM attends a JOIN attends b ON a.person = b.person "
                "WHERE a.day = 'Monday' AND b.day = 'Tuesday'"),
        backend="confidence",
    )
    assert [r.probability for r in both.confidence()] == [0.0]
    assert both.extraneous() == [{"person": "Ullman"}]


def test_coexistence_checks(conference: LineageSession, roster: Run) -> None:
    banquet = {"person": "Garcia-Molina", "event": "Banquet"}
    assert roster.coexist(banquet, ("Ullman", "Banquet"))
    assert not roster.always_together(banquet, ("Ullman", "Banquet"))
    assert roster.always_together(banquet, banquet)
    assert roster.extraneous() == []
    days = conference.run(conference.sql("SELECT a.person, e.day FROM attends a CROSS JOIN events e "
                                         "WHERE a.id = 13 AND e.day = 'Tuesday'"), backend="confidence")
    assert days.always_together(("Ullman", "Tuesday"), ("Ullman", "Tuesday"))


# --- possible worlds: hand-written shapes and random trees --------------------------------------

R, S, T, U = (leaf(n) for n in "rstu")


def _cases() -> dict[str, Node]:
    r_a = Project(R, ("ra",))
    return {
        "join then duplicate elimination": Project(Join(R, S, "ra", "=", "sa"), ("rb",)),
        "union": Union(Project(R, ("ra",)), Project(U, ("ua",))),
        "difference of uncertain tables": Minus(r_a, Project(U, ("ua",)), "distinct"),
        "difference nested as a subtrahend": Minus(
            r_a, Minus(Project(U, ("ua",)), Project(S, ("sa",)), "distinct"), "distinct"
        ),
        "semi join": Join(R, U, "ra", "=", "ua", "left_semi"),
        "anti join": Join(R, U, "ra", "=", "ua", "left_anti"),
        "model decision under a filter": Select(Func(U, "ua", "par"), "par", "=", "odd"),
        "model decision feeding a difference": Minus(
            r_a, Project(Select(Func(U, "ua", "par"), "par", "=", "odd"), ("ua",)), "distinct"
        ),
        "alternatives through a join": Project(Join(S, T, "sa", "=", "ta"), ("tb",)),
    }


@pytest.mark.parametrize("case", list(_cases()))
def test_hand_written_tasks_match_possible_worlds(als: LineageSession, case: str) -> None:
    check(als, _cases()[case])


def test_except_all_is_refused_before_it_runs(als: LineageSession) -> None:
    """EXCEPT ALL keeps a row where T1 has more copies than T2: with r's rows uncertain on
    both sides and each left row doubled by explode, (ra=2) survives whenever r5 does (two
    copies against at most one), which r5 ∧ ¬r2, the difference's formula, denies. No
    formula of rows counts copies, so the task is refused in one line and leaves no run."""
    doubled = Project(Explode(leaf("r"), "ra", "ra", "e"), ("ra",))
    tree = Minus(doubled, Project(leaf("r", 1), ("rk_1",)), "all")
    before = als.runs()
    with pytest.raises(UnsupportedTaskError, match=r"EXCEPT ALL.*confidence.*subtract"):
        als.run(to_dataframe(tree, _Tables(als)), backend="confidence")
    assert als.runs() == before
    assert possible_worlds(tree)[(2,)] == pytest.approx(0.8)  # P(r5): what a formula would miss


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[
        HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much
    ],
)
@given(data=st.data())
@pytest.mark.parametrize("root", UNARY + BINARY)
def test_random_tasks_match_possible_worlds(als: LineageSession, root: str, data: st.DataObject) -> None:
    """Random trees of every operator (as the lineage oracle draws them), two algorithms."""
    tree, _ = TreeBuilder(data.draw, minus_kinds=("distinct",)).build(depth=3, leaves=2, kind=root)
    assume(distinct(_evaluate(tree, frozenset(_everything(tree)))))
    assume(len(_facts(tree)[0]) <= MAX_FACTS)
    check(als, tree, data.draw(st.sampled_from(["indep", "basic"]), label="algorithm"))


# --- methods, loading, errors ----------------------------------------------------------------


def test_sampling_methods_state_their_guarantee_and_hold_it(conference: LineageSession) -> None:
    run = conference.run(conference.sql(f"SELECT DISTINCT person FROM ({ROSTER})"), backend="confidence")
    exact = run.confidence(where="person = 'Garcia-Molina'", method="exact")[0].probability
    for method, bound in (("karp-luby", "relative"), ("monte-carlo", "absolute")):
        options = {"where": "person = 'Garcia-Molina'", "method": method, "epsilon": 0.05, "delta": 0.05}
        composed = run.confidence(**options)  # sampled break points: no guarantee is claimed
        assert composed[0].estimate.bound is None and "do not compose" in str(composed)
        est = run.confidence(**options, algorithm="basic")[0].estimate
        assert est.method == method and est.bound == bound and est.samples
        tolerance = 0.05 * exact if bound == "relative" else 0.05
        assert abs(est.value - exact) <= tolerance


def test_a_loaded_run_answers_the_same(conference: LineageSession, roster: Run) -> None:
    again = LineageSession(conference.spark, store=conference.store.uri).load_run(roster.id)
    assert again.confidence().probabilities() == roster.confidence().probabilities()
    assert roster.lineage(rows=[("Ullman", "Banquet")]).source_ids("events") == {(23,)}
    # a sample's places, read by Spark for the probabilities and in process for the lineage
    def by_row(answer: Any) -> dict[tuple[Any, ...], float]:
        return {tuple(row.values()): p for row, p in answer.probabilities()}

    drawn = by_row(roster.confidence(sample=2, seed=1))
    assert len(drawn) == 2 and drawn == by_row(again.confidence(sample=2, seed=1))
    traced = roster.lineage(sample=2, seed=1)
    assert {tuple(t.values()) for t in traced.to_dict()["targets"]} == set(drawn)
    assert by_row(traced.confidence) == drawn


class WildGuess(ReasoningUDF):
    name = "wild_guess"
    value_type = "string"
    reason_type = "struct<note: string>"

    def main(self, x: Any) -> str:
        return "yes"

    def main_with_reason(self, x: Any) -> tuple[str, dict[str, str]]:
        return "yes", {"note": "always"}

    def probability(self, value: str, reason: dict[str, str]) -> float:
        return 1.5


wild_guess = WildGuess()


def test_bad_declarations_fail_in_one_line(
    conference: LineageSession, spark: SparkSession, roster: Run, roster_fm: Run
) -> None:
    frame = pd.DataFrame([(1, 0.5), (2, 1.2)], columns=["k", "p"])
    with pytest.raises(LineageError, match=r"confidence must be in \[0, 1\], got 1.2"):
        conference.register_table("bad", frame, key="k", confidence="p")
    alternatives = pd.DataFrame([(1, "a", 0.6), (2, "a", 0.5)], columns=["k", "g", "p"])
    with pytest.raises(LineageError, match=r"adding up to 1\.1 > 1"):
        conference.register_table("bad", alternatives, key="k", confidence="p", alternatives="g")
    with pytest.raises(LineageError, match="confidence column 'q' not in"):
        conference.register_table("bad", frame, key="k", confidence="q")
    with pytest.raises(ValueError, match="alternatives= needs confidence="):
        conference.register_table("bad", frame, key="k", alternatives="k")
    assert "bad" not in conference.store.source_names()
    task = conference.sql(ROSTER)
    with pytest.raises(ValueError, match="leave strategy out"):
        conference.run(task, backend="confidence", strategy="rerun")
    with pytest.raises(NotCapturedError, match="backend='confidence'"):
        roster_fm.confidence()
    runs = set(conference.runs())
    with pytest.raises(LineageError, match=r"UDF \[wild_guess\] declared probability 1.5"):
        conference.run(conference.table("events").withColumn("g", wild_guess("event")), backend="confidence")
    assert set(conference.runs()) == runs
    with pytest.raises(ValueError, match="algorithm must be one of"):
        roster.confidence(algorithm="fast")
    with pytest.raises(ValueError, match="unknown method"):
        roster.confidence(method="guess")


def test_batch_job_gives_every_row_the_tuple_level_probability(conference: LineageSession) -> None:
    run = conference.run(conference.sql("SELECT e.event FROM attends a JOIN events e ON a.day = e.day"),
                         backend="confidence")
    tuple_level = {tuple(r.row.values()): r.probability for r in run.confidence(explain=0)}
    for algorithm in ("indep", "basic"):
        table = run.confidence_table(algorithm=algorithm, partitions=2).collect()
        assert {(r["event"],): r["probability"] for r in table} == pytest.approx(tuple_level)
        assert {r["method"] for r in table} == {"exact"}
    assert tuple_level[("Banquet",)] == pytest.approx(0.792)


def test_person_detector_confidence_becomes_the_row_probability(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The real YOLO model: a part photo 'shows a person' with the detector's best box
    confidence; a row needing two photos to show people has the product (independent calls)."""
    from reasoning_udfs.person_detection import person_detection
    from tests.test_udf_vision import WITH_PERSON, WITHOUT_PERSON

    als = LineageSession(spark, store=str(tmp_path_factory.mktemp("photos") / "store"))
    parts = pd.DataFrame([(1, WITH_PERSON), (2, WITHOUT_PERSON)], columns=["part", "photo"])
    als.register_table("parts", parts, key="part")
    person_detection.register(spark)
    run = als.run(als.sql("SELECT part, person_detection(photo) AS person FROM parts"), backend="confidence")
    answer = run.confidence()
    (reason,) = [r["reason"] for r in run.lineage(rows=[(1, True)]).reasoning_rows()]
    best = max(b["confidence"] for b in reason["boxes"])
    assert {tuple(r.row.values()): r.probability for r in answer} == pytest.approx(
        {(1, True): best, (2, False): 1 - 0.25}
    )
    assert answer[0].weights[0].kind == "model" and "person_detection" in answer[0].weights[0].fact


def test_lineage_of_a_confidence_run_carries_the_rows_confidence(
    conference: LineageSession, roster_fm: Run
) -> None:
    """The same answer in the lineage, the notebook HTML, the audit report and its JSON."""
    from tracing.present.report import audit_report, report_dict

    run = conference.run(conference.sql(f"SELECT DISTINCT person FROM ({ROSTER})"), backend="confidence")
    lineage = run.lineage(where="person = 'Garcia-Molina'")
    assert lineage.confidence is not None and lineage.confidence[0].probability == pytest.approx(0.8668)
    assert lineage.source_ids("attends") == {(11,), (12,)}
    html = audit_report(run, [lineage])
    assert "<h4>Confidence</h4>" in html and "0.8668" in html and 'attends{&quot;id&quot;:12}' in html
    exported = report_dict(run, [lineage])["answers"][0]["confidence"]
    assert exported["rows"][0]["probability"] == pytest.approx(0.8668)
    assert "0.8668" in lineage._repr_html_() and "segment" in run._repr_html_()
    plain = roster_fm.lineage(rows=[("Ullman", "Banquet")])
    assert plain.confidence is None and "<h4>Confidence</h4>" not in audit_report(run, [plain])


def test_deep_lineage_across_a_sequence_of_tasks(
    conference: LineageSession, roster: Run, roster_fm: Run
) -> None:
    """Example 4.2 as three tasks: EventRoster is a run, registered as a derived relation;
    EventAttendees and the banquet's likelihood are later runs over it. Its rows share base
    facts (32 and 33 both rest on event 23), so treating them as independent facts would give
    0.8298 for the banquet; expanding into the first run's lineage gives 0.792."""
    conference.register_result("roster", roster)
    attendees = conference.run(conference.sql("SELECT DISTINCT person FROM roster"), backend="confidence")
    assert {tuple(r.row.values()): r.probability for r in attendees.confidence()} == pytest.approx(
        {("Garcia-Molina",): 0.8668, ("Ullman",): 0.54}
    )
    likelihood = conference.run(conference.sql("SELECT DISTINCT event FROM roster"), backend="confidence")
    for algorithm in ("indep", "basic"):
        got = {tuple(r.row.values()): r.probability for r in likelihood.confidence(algorithm=algorithm)}
        assert got == pytest.approx({("Banquet",): 0.792, ("Reception",): 0.64})
    table = {r["event"]: r["probability"] for r in likelihood.confidence_table().collect()}
    assert table == pytest.approx({"Banquet": 0.792, "Reception": 0.64})
    (banquet,) = likelihood.confidence(where="event = 'Banquet'")
    assert banquet.formula == '(attends{"id":12} ∧ events{"id":23}) ∨ (attends{"id":13} ∧ events{"id":23})'
    assert likelihood.record["confidence"]["upstream"] == [roster.dir]
    # a third task in the chain follows both links
    conference.register_result("banquets", likelihood)
    chained = conference.run(conference.sql("SELECT event FROM banquets WHERE event = 'Banquet'"),
                             backend="confidence")
    assert [r.probability for r in chained.confidence()] == pytest.approx([0.792])
    with pytest.raises(NotCapturedError):
        conference.register_result("nothing", roster_fm)


def test_command_line_of_a_confidence_run(
    conference: LineageSession, roster_fm: Run, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`al run --backend confidence`, `al lineage --json` with the rows' probabilities, and
    `al report --most-uncertain N`: the rows closest to ½ (Ullman at the banquet, 0.54), each
    with its confidence in the report's JSON; a lazy run says why it cannot."""
    from cda_workload.command_line.cli import main

    store = conference.store.uri
    task = tmp_path / "roster.sql"
    task.write_text(ROSTER)
    assert main(["run", str(task), "--store", store, "--backend", "confidence"]) == 0
    run = conference.load_run(capsys.readouterr().out.split("run ")[1].split()[0].strip(":,"))
    assert run.backend == "confidence"
    assert main(["lineage", run.id, "--store", store, "--where", "person = 'Ullman'", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["confidence"]["rows"][0]["probability"] == pytest.approx(0.54)
    assert [r.row for r in run.confidence().most_uncertain(1)] == [{"person": "Ullman", "event": "Banquet"}]
    out = tmp_path / "report.json"
    argv = ["report", run.id, "--store", store, "--most-uncertain", "2", "-o", str(tmp_path / "r.html")]
    assert main([*argv, "--json-out", str(out)]) == 0
    answers = json.loads(out.read_text())["answers"]
    probabilities = sorted(a["confidence"]["rows"][0]["probability"] for a in answers)
    assert probabilities == pytest.approx([0.54, 0.63])
    assert main(["lineage", roster_fm.id, "--store", store, "--most-uncertain", "1"]) == 2
