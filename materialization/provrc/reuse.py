"""Lineage reuse (paper §VI): answer a repeated operation's lineage from stored tables, no capture.

Two signatures: ``dim_sig`` (operation, arguments, input shapes) reuses the tables as they are;
``gen_sig`` (operation, arguments) reuses a generalized form where every range spanning a whole
axis is symbolic, re-instantiated for new shapes ("index reshaping"). A mapping becomes
permanent after ``confirmations`` captures agree with it (gen_sig: at differing shapes) and is
dropped at the first disagreement; the caller still re-captures every ``verify_every``-th
reuse as a safeguard against mispredictions.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from materialization.provrc.relation import Shape
from materialization.provrc.table import ABSOLUTE, Table

Lineage = list[dict[str, Table]]  # per input: orientation -> table


def args_key(args: dict) -> str:
    """A stable text key of an operation's arguments (arrays by content hash)."""

    def enc(v: object) -> str:
        if isinstance(v, np.ndarray):
            return f"array{v.shape}{v.dtype}:{hashlib.sha1(np.ascontiguousarray(v).tobytes()).hexdigest()}"
        return repr(v)

    return ";".join(f"{k}={enc(v)}" for k, v in sorted(args.items()))


def same_tables(a: Table, b: Table) -> bool:
    fields = ("key_lo", "key_hi", "val_lo", "val_hi", "val_ref")
    return (a.orientation == b.orientation and a.key_shape == b.key_shape and a.val_shape == b.val_shape
            and all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields))


def same_lineage(a: Lineage, b: Lineage) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(same_tables(x[o], y[o]) for o in x) for x, y in zip(a, b))


@dataclass(frozen=True)
class General:
    """A table whose whole-axis ranges are symbolic: masks of ranges equal to [0, extent - 1]."""

    table: Table
    key_full: np.ndarray
    val_full: np.ndarray

    @classmethod
    def of(cls, t: Table) -> General:
        key_full = (t.key_lo == 0) & (t.key_hi == np.array(t.key_shape) - 1)
        val_full = (t.val_ref == ABSOLUTE) & (t.val_lo == 0) & (t.val_hi == np.array(t.val_shape) - 1)
        return cls(t, key_full, val_full)

    def instantiate(self, key_shape: Shape, val_shape: Shape) -> Table:
        t = self.table
        if len(key_shape) != len(t.key_shape) or len(val_shape) != len(t.val_shape):
            raise ValueError("a generalized table keeps the number of axes")
        key_hi = np.where(self.key_full, np.array(key_shape) - 1, t.key_hi)
        val_hi = np.where(self.val_full, np.array(val_shape) - 1, t.val_hi)
        return Table(t.orientation, t.key_lo, key_hi, t.val_lo, val_hi, t.val_ref, key_shape, val_shape)


@dataclass
class _Mapping:
    lineage: object  # Lineage for dim_sig, list[dict[str, General]] for gen_sig
    shapes: set = field(default_factory=set)
    matches: int = 0
    rejected: bool = False


def _shapes(t: Table, in_shape: Shape, out_shape: Shape) -> tuple[Shape, Shape]:
    return (out_shape, in_shape) if t.orientation == "backward" else (in_shape, out_shape)


class ReuseIndex:
    """The dim_sig and gen_sig mappings of a workflow, with their confirmation state."""

    def __init__(self, confirmations: int = 2) -> None:
        self.confirmations = confirmations
        self.dim: dict[tuple, _Mapping] = {}
        self.gen: dict[tuple, _Mapping] = {}

    def predict(self, op: str, key: str, in_shapes: list[Shape], out_shape: Shape) -> Lineage | None:
        """The lineage a confirmed mapping gives for this call, or None (capture needed)."""
        dim = self.dim.get((op, key, tuple(in_shapes)))
        if dim and not dim.rejected and dim.matches >= self.confirmations:
            return dim.lineage
        gen = self.gen.get((op, key))
        if gen and not gen.rejected and gen.matches >= self.confirmations:
            return self._instantiate(gen.lineage, in_shapes, out_shape)
        return None

    def observe(self, op: str, key: str, in_shapes: list[Shape], out_shape: Shape, lineage: Lineage) -> None:
        """Records a captured lineage: confirms or rejects the mappings it can be checked against."""
        shapes = tuple(in_shapes)
        dim = self.dim.setdefault((op, key, shapes), _Mapping(lineage, {shapes}))
        if dim.lineage is not lineage:
            _confirm(dim, same_lineage(dim.lineage, lineage), shapes, new_shape_required=False)
        general = [{o: General.of(t) for o, t in per_input.items()} for per_input in lineage]
        gen = self.gen.setdefault((op, key), _Mapping(general, {shapes}))
        if gen.lineage is not general and not gen.rejected:
            try:
                predicted = self._instantiate(gen.lineage, in_shapes, out_shape)
            except ValueError:
                predicted = None
            ok = predicted is not None and same_lineage(predicted, lineage)
            _confirm(gen, ok, shapes, new_shape_required=True)

    def reject(self, op: str, key: str, in_shapes: list[Shape]) -> None:
        """A verified reuse disagreed with capture: stop trusting both signatures."""
        for mapping in (self.dim.get((op, key, tuple(in_shapes))), self.gen.get((op, key))):
            if mapping is not None:
                mapping.rejected = True

    @staticmethod
    def _instantiate(general: list[dict[str, General]], in_shapes: list[Shape], out_shape: Shape) -> Lineage:
        if len(general) != len(in_shapes):
            raise ValueError("different number of inputs")
        return [{o: g.instantiate(*_shapes(g.table, in_shape, out_shape)) for o, g in per_input.items()}
                for per_input, in_shape in zip(general, in_shapes)]


def _confirm(mapping: _Mapping, ok: bool, shapes: tuple, new_shape_required: bool) -> None:
    if not ok:
        mapping.rejected = True
    elif not new_shape_required or shapes not in mapping.shapes:
        mapping.matches += 1
        mapping.shapes.add(shapes)
