"""The golden loan example and the differential checks on a REAL multi-process Spark cluster.

``local-cluster[2,1,1024]`` starts two executor JVMs (separate processes, each with its own
Python workers) beside the driver. One Python process holds one SparkContext and the rest of
the suite uses local[2], so the checks (tests/cluster_checks.py) run in a child pytest process;
its JUnit report shows every check ran and passed (none skipped).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark
import pytest

from tests.child_process import spark_child_env

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[1]
MASTER = "local-cluster[2,1,1024]"
CHECKS = "tests/cluster_checks.py"


def test_cluster_checks_pass_on_local_cluster(tmp_path: Path) -> None:
    env = spark_child_env(
        AL_TEST_MASTER=MASTER,
        SPARK_LOCAL_IP="127.0.0.1",
        # lineage traced by Spark's executors, not in this process
        AL_TRACING_ENGINE="spark",
        # executors run in their own processes: they import tests.tasks_suite from here
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    report = tmp_path / "junit.xml"
    command = [
        sys.executable, "-m", "pytest", CHECKS, "-q", "-n", "0", "-p", "no:cacheprovider",
        f"--junitxml={report}", f"--basetemp={tmp_path / 'basetemp'}", "--durations=5",
    ]  # fmt: skip
    # local-cluster workers keep executor logs under $SPARK_HOME/work/<application id> (the
    # pyspark package folder here) whatever SPARK_WORKER_DIR says: remove this run's folder
    work = Path(env.get("SPARK_HOME") or Path(pyspark.__file__).parent) / "work"
    existed = work.exists()
    env["AL_CLUSTER_APP_ID_FILE"] = str(tmp_path / "app_id")
    try:
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=840)
    finally:
        app_id = tmp_path / "app_id"
        if app_id.exists() and app_id.read_text().strip():
            shutil.rmtree(work / app_id.read_text().strip(), ignore_errors=True)
        if not existed and work.exists() and not any(work.iterdir()):
            work.rmdir()
    output = proc.stdout[-8000:] + "\n" + proc.stderr[-4000:]
    print(proc.stdout[-3000:])  # the child's summary and slowest checks (shown with -s / -rP)
    assert proc.returncode == 0, output

    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None, output
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    not_passed = {n: [e.tag for e in c] for n, c in cases.items() if len(c.findall("./*")) > 0}
    not_passed = {n: tags for n, tags in not_passed.items() if set(tags) - {"system-out", "system-err"}}
    assert not not_passed, f"checks skipped or failed: {not_passed}\n{output}"
    assert "test_session_is_a_multi_process_cluster" in cases
    assert "test_golden_loan_example" in cases
    assert sum(n.startswith("test_differential_on_cluster[") for n in cases) == 2  # CLUSTER_TASKS
