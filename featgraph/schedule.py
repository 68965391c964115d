"""Feature dimension schedules (FDS): how a UDF's feature axes are split, ordered and parallelised.

A schedule is plain data recorded by a user function ``fds(s, out)``; the graph traversal is not its
business (that belongs to the template parameters). CPU honours ``split``, ``reorder``, ``vectorize``,
``unroll`` and ``parallel``; ``bind`` and ``tree_reduce`` are recorded for the GPU backend.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .te.expr import ComputeOp, Var

GPU_TAGS = ("block.x", "block.y", "thread.x", "thread.y")


@dataclass
class AxisPlan:
    """What the schedule says about one output or reduce axis."""

    factor: int | None = None  # split into (outer, inner) with inner extent ``factor``
    vectorize: bool = False  # the inner loop (or the whole axis when unsplit) is SIMD
    unroll: bool = False
    parallel: bool = False
    bind: str | None = None  # GPU: "block.x" / "thread.x"
    tree_reduce: str | None = None  # GPU: reduce this axis across "thread.x"


@dataclass
class Schedule:
    """The FDS of one compute: a plan per axis and an optional loop order."""

    op: ComputeOp
    plans: dict[str, AxisPlan] = field(default_factory=dict)
    order: list[Var] | None = None

    def _axis(self, axis: Var) -> Var:
        if not isinstance(axis, Var) or axis.kind not in ("axis", "reduce"):
            raise TypeError(f"schedule primitives take out.axis[...] or reduce axes, got {axis!r}")
        known = (*self.op.axis, *self.op.reduce_axis)
        if not any(axis is a for a in known):
            raise ValueError(f"axis {axis.name} does not belong to this compute")
        return axis

    def plan(self, axis: Var) -> AxisPlan:
        """The plan recorded for ``axis`` (an empty one on first use)."""
        return self.plans.setdefault(self._axis(axis).name, AxisPlan())

    def split(self, axis: Var, factor: int) -> Schedule:
        """Split ``axis`` into an outer and an inner loop whose extent is ``factor``."""
        if int(factor) < 1:
            raise ValueError(f"split factor must be >= 1, got {factor}")
        self.plan(axis).factor = int(factor)
        return self

    def reorder(self, *axes: Var) -> Schedule:
        """Loop order, outermost first; may interleave reduce axes with output axes (e.g. k before i
        makes the MLP weight loop vectorise over i)."""
        self.order = [self._axis(a) for a in axes]
        return self

    def vectorize(self, axis: Var) -> Schedule:
        """Make the inner loop of ``axis`` (the whole axis when unsplit) a SIMD loop."""
        self.plan(axis).vectorize = True
        return self

    def unroll(self, axis: Var) -> Schedule:
        """Unroll the (inner) loop; on CPU a loop that is also vectorised is left to the vectoriser, as g++
        takes no unroll pragma beside ``omp simd``."""
        self.plan(axis).unroll = True
        return self

    def parallel(self, axis: Var) -> Schedule:
        """Share ``axis``'s tiles among threads instead of rows."""
        self.plan(axis).parallel = True
        return self

    def bind(self, axis: Var, tag: str) -> Schedule:
        """GPU: map ``axis`` to a block or thread index (``"block.x"``, ``"thread.x"``, ...)."""
        if tag not in GPU_TAGS:
            raise ValueError(f"bind tag must be one of {GPU_TAGS}, got {tag!r}")
        self.plan(axis).bind = tag
        return self

    def tree_reduce(self, axis: Var, tag: str = "thread.x") -> Schedule:
        """GPU: reduce the reduce axis ``axis`` across the lanes of ``tag`` by a tree."""
        if axis.kind != "reduce":
            raise ValueError("tree_reduce applies to a reduce axis")
        if tag not in GPU_TAGS:
            raise ValueError(f"tree_reduce tag must be one of {GPU_TAGS}, got {tag!r}")
        self.plan(axis).tree_reduce = tag
        return self


def default_schedule(op: ComputeOp) -> Schedule:
    """Without an FDS: vectorise the innermost output axis. When the message reduces over an axis and the
    innermost output axis is wide enough to vectorise, put reduce axes outside the output axes, so the inner
    loop streams contiguous weight rows (the MLP aggregation case); otherwise the reduction itself is the
    inner loop and is vectorised (the dot-product case)."""
    s = Schedule(op)
    inner = op.axis[-1]
    if op.reduce_axis and inner.extent < 8:
        for axis in op.reduce_axis:
            s.vectorize(axis)
        return s
    s.vectorize(inner)
    if op.reduce_axis:
        s.reorder(*op.axis[:-1], *op.reduce_axis, inner)
    return s


def build_schedule(op: ComputeOp, fds: Callable[[Schedule, ComputeOp], None] | Schedule | None) -> Schedule:
    """Run the user's ``fds(s, out)`` on a fresh schedule, or take the default."""
    if fds is None:
        return default_schedule(op)
    if isinstance(fds, Schedule):
        if fds.op is not op:
            raise ValueError("this Schedule was made for a different compute")
        return fds
    s = Schedule(op)
    fds(s, op)
    return s
