"""Array workflows over ProvRC: path queries and lineage reuse (dim_sig / gen_sig, safeguard)."""

from __future__ import annotations

import numpy as np
import pytest

from materialization.provrc.capture import OPS, Op, gather
from materialization.provrc.reuse import same_lineage
from materialization.provrc.workflow import Workflow


def test_path_direction_and_answers() -> None:
    wf = Workflow()
    x = wf.array("x", np.arange(12.0).reshape(3, 4))
    y = wf.run("transpose", x, out="y")
    z = wf.run("sum", y, out="z", axis=1)
    assert np.array_equal(wf.prov_query([z, y, x], np.array([[1]]), rows=True), [[0, 1], [1, 1], [2, 1]])
    assert np.array_equal(wf.prov_query([x, y, z], np.array([[2, 3]]), rows=True), [[3]])
    with pytest.raises(ValueError, match="no chain"):
        wf.prov_query([x, z], np.array([[0, 0]]))


def test_orientation_pruning_refuses_the_missing_direction() -> None:
    wf = Workflow(orientations=("backward",))
    x = wf.array("x", np.ones(5))
    y = wf.run("negative", x)
    assert wf.prov_query([y, x], np.array([[2]]), rows=True).tolist() == [[2]]
    with pytest.raises(KeyError):
        wf.prov_query([x, y], np.array([[2]]))


def test_shape_generalized_reuse_skips_capture() -> None:
    """After two agreeing captures at different shapes, new shapes get lineage without capture."""
    wf = Workflow(reuse=True, verify_every=1000)
    rng = np.random.default_rng(0)
    for rows in (5, 6, 7, 8, 9, 10):
        a = wf.array(f"a{rows}", rng.random((rows, 4)))
        s = wf.run("sum", a, axis=1)
    assert wf.stats.captured == 3 and wf.stats.reused == 3
    fresh = Workflow()
    a = fresh.array("a", wf.arrays["a10"])
    assert same_lineage([wf.edges[(s, "a10")]], [fresh.edges[(fresh.run("sum", a, axis=1), a)]])


def test_same_shape_reuse_and_value_dependent_operations() -> None:
    wf = Workflow(reuse=True, verify_every=1000)
    rng = np.random.default_rng(1)
    for i in range(5):
        a = wf.array(f"a{i}", rng.random((6, 6)))
        wf.run("negative", a)
        wf.run("sort", a, axis=1)  # value-dependent: its mapping is rejected at the first disagreement
    assert wf.stats.captured == 3 + 5
    assert wf.stats.reused == 2
    assert all(m.rejected for k, m in wf.index.dim.items() if k[0] == "sort")


def test_misprediction_is_caught_and_captured_lineage_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """An operation whose lineage changes after its mapping was confirmed: the verified reuse
    notices, keeps the captured lineage and stops reusing."""
    flipped = {"on": False}

    def lineage(result: np.ndarray, x: np.ndarray):
        ids = np.arange(x.size).reshape(x.shape)
        return [gather(ids[::-1] if flipped["on"] else ids, x.shape)]

    monkeypatch.setitem(OPS, "shifty", Op(lambda x: x.copy(), lineage))
    wf = Workflow(reuse=True, verify_every=1)
    for i in range(3):
        wf.run("shifty", wf.array(f"a{i}", np.zeros(4)))
    flipped["on"] = True
    y = wf.run("shifty", wf.array("b", np.zeros(4)))
    assert wf.stats.mispredicted == 1
    assert wf.prov_query([y, "b"], np.array([[0]]), rows=True).tolist() == [[3]]
    wf.run("shifty", wf.array("c", np.zeros(4)))
    assert wf.stats.reused == 1  # rejected: captured again
