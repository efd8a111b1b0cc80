"""Array workflows: register arrays, run numpy operations with lineage capture, query through them."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from materialization.provrc.capture import OPS
from materialization.provrc.encode import compress
from materialization.provrc.query import Boxes, backward, forward
from materialization.provrc.reuse import Lineage, ReuseIndex, args_key, same_lineage
from materialization.provrc.table import Table


@dataclass
class ReuseStats:
    captured: int = 0
    reused: int = 0
    verified: int = 0
    mispredicted: int = 0


@dataclass
class Workflow:
    """Named arrays and the ProvRC tables between each operation's output and its inputs.

    ``orientations`` says which tables to keep ("backward" answers backward queries, "forward"
    forward ones; the representation is asymmetric). With ``reuse``, a repeated operation's
    lineage comes from a confirmed dim_sig/gen_sig mapping instead of capture, re-captured and
    checked every ``verify_every``-th time.
    """

    orientations: tuple[str, ...] = ("backward", "forward")
    reuse: bool = False
    verify_every: int = 10
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    edges: dict[tuple[str, str], dict[str, Table]] = field(default_factory=dict)
    stats: ReuseStats = field(default_factory=ReuseStats)
    index: ReuseIndex = field(default_factory=ReuseIndex)

    def array(self, name: str, value: np.ndarray) -> str:
        if name in self.arrays:
            raise ValueError(f"array {name!r} exists")
        self.arrays[name] = np.atleast_1d(np.asarray(value))
        return name

    def run(self, op: str, *inputs: str, out: str | None = None, **args) -> str:
        """Runs ``OPS[op]`` on the named arrays, stores its result as ``out`` and its lineage."""
        arrays = [self.arrays[name] for name in inputs]
        result = np.atleast_1d(OPS[op].compute(*arrays, **args))
        lineage = self._lineage(op, result, arrays, args)
        out = out or f"{op}_{len(self.arrays)}"
        self.array(out, result)
        for name, tables in zip(inputs, lineage):
            self.edges[(out, name)] = tables
        return out

    def _lineage(self, op: str, result: np.ndarray, arrays: list[np.ndarray], args: dict) -> Lineage:
        key, shapes = args_key(args), [a.shape for a in arrays]
        predicted = self.index.predict(op, key, shapes, result.shape) if self.reuse else None
        if predicted is not None:
            self.stats.reused += 1
            if self.stats.reused % self.verify_every:
                return predicted
            self.stats.verified += 1
        captured = [{o: compress(r, o) for o in self.orientations}
                    for r in OPS[op].lineage(result, *arrays, **args)]
        self.stats.captured += 1
        if predicted is not None and not same_lineage(predicted, captured):
            self.stats.mispredicted += 1
            self.index.reject(op, key, shapes)
        if self.reuse:
            self.index.observe(op, key, shapes, result.shape, captured)
        return captured

    def tables(self, path: Sequence[str]) -> tuple[str, list[Table]]:
        """The direction of a path of array names and the tables along it."""
        if len(path) < 2:
            raise ValueError("a path names at least two arrays")
        steps = list(itertools.pairwise(path))
        if all(step in self.edges for step in steps):
            return "backward", [self.edges[step]["backward"] for step in steps]
        if all((b, a) in self.edges for a, b in steps):
            return "forward", [self.edges[(b, a)]["forward"] for a, b in steps]
        raise ValueError(f"no chain of operations links {' -> '.join(path)} in one direction")

    def prov_query(self, path: Sequence[str], query: Boxes | np.ndarray, rows: bool = False):
        """Cells of ``path[-1]`` linked to the ``query`` cells of ``path[0]`` (paper §III-A).

        A path from an output back to an input is a backward query, the reverse a forward one.
        """
        direction, tables = self.tables(path)
        return (backward if direction == "backward" else forward)(tables, query, rows=rows)
