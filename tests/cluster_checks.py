"""Checks that must run on a real multi-process Spark cluster (master ``local-cluster[...]``).

Not collected by a plain ``pytest`` run (the file name does not start with ``test_``):
tests/test_cluster.py runs it in a child process with ``AL_TEST_MASTER=local-cluster[2,1,1024]``,
because one Python process can hold only one SparkContext and the rest of the suite uses
local[2]. Run by hand:

    AL_TEST_MASTER='local-cluster[2,1,1024]' PYTHONPATH=. python -m pytest tests/cluster_checks.py
"""

from __future__ import annotations

import os
import time

import pytest
from pyspark.sql import SparkSession

from cda_workload.workloads.loan_example import loan_task
from tests.golden import LOAN_OUTPUT, assert_reject_lineage
from tests.tasks_suite import TASKS_BY_ID, register_suite_tables
from tests.test_differential import (
    STRATEGIES,
    Suite,
    check_lineage_identical,
    check_lineage_sane,
    check_loaded_run,
    check_outputs,
    check_storage,
)
from tracing import LineageSession

pytestmark = pytest.mark.cluster

# UDF-bearing tasks first: their Python workers run in the executor JVMs' own processes and
# must import tests.tasks_suite there. Two shapes (a UDF under an aggregate, a difference with
# its control lineage); the others are checked in local mode, as the suite's time is bounded.
CLUSTER_TASKS = (
    "udf_projection_under_agg",
    "subtract_positive_orders",
)
CLUSTER_TABLES = ("customer", "orders", "lineitem")
EXECUTOR_WAIT_S = 120


@pytest.fixture(scope="module")
def cluster(spark: SparkSession) -> SparkSession:
    master = spark.sparkContext.master
    if not master.startswith("local-cluster"):
        pytest.skip(f"needs AL_TEST_MASTER=local-cluster[...], the session runs on {master}")
    record = os.environ.get("AL_CLUSTER_APP_ID_FILE")
    if record:  # so tests/test_cluster.py can remove this application's executor logs
        with open(record, "w") as f:
            f.write(spark.sparkContext.applicationId)
    deadline = time.monotonic() + EXECUTOR_WAIT_S
    while executors(spark) < 2 and time.monotonic() < deadline:  # executor JVMs start late
        time.sleep(1)
    return spark


def executors(spark: SparkSession) -> int:
    """Executors registered now (block managers other than the driver's)."""
    return spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1


@pytest.fixture(scope="module")
def suite(cluster: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Suite:
    als = LineageSession(cluster, store=str(tmp_path_factory.mktemp("cluster") / "store"))
    register_suite_tables(als, tables=CLUSTER_TABLES)
    return Suite(als)


def test_session_is_a_multi_process_cluster(cluster: SparkSession) -> None:
    sc = cluster.sparkContext
    assert sc.master == "local-cluster[2,1,1024]"
    assert executors(cluster) == 2

    def executor_jvm(_: object) -> list[tuple[int, str]]:
        """The JVM process above this Python worker (worker <- daemon <- executor JVM)."""
        pid = os.getpid()
        for _step in range(8):
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])  # the parent's pid
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode()
            if "java" in cmd.split(" ", 1)[0]:
                kind = "executor" if "CoarseGrainedExecutorBackend" in cmd else "other"
                return [(pid, kind)]
        return [(-1, "none")]

    jvms = set(sc.parallelize(range(16), 16).mapPartitions(executor_jvm).collect())
    driver = cluster._jvm.java.lang.ProcessHandle.current().pid()
    assert {kind for _, kind in jvms} == {"executor"}, jvms
    assert len({pid for pid, _ in jvms}) == 2, jvms
    assert driver not in {pid for pid, _ in jvms}


def test_golden_loan_example(suite: Suite) -> None:
    """Fig. 4: the augmented lineage of ⟨Reject, 1⟩ recomputed on the executors (rerun; what
    fm and full store is read back, and the eager capture on the executors answers, in the
    differential checks below, both of whose tasks call a model)."""
    run = suite.als.run(loan_task(suite.als), strategy="rerun")
    assert sorted(tuple(r) for r in run.output.collect()) == LOAN_OUTPUT
    assert_reject_lineage(run.lineage(rows=[("Reject", 1)]))


@pytest.mark.parametrize("task_id", CLUSTER_TASKS)
def test_differential_on_cluster(suite: Suite, task_id: str) -> None:
    assert TASKS_BY_ID[task_id].bug is None
    r = suite.runs(task_id)
    check_outputs(r)
    for target in ("pair", "all"):
        check_lineage_identical(r, target)
    check_storage(r)
    check_lineage_sane(suite, r)
    check_loaded_run(suite, r, STRATEGIES[CLUSTER_TASKS.index(task_id) % len(STRATEGIES)])
