"""Winner scatter: the gradient of a max/min aggregation visited through its winning edges only.

A max/min SpMM's output element ``(v, o)`` takes its value from one in-edge, ``arg[v, o]``; only that edge
receives its gradient. Where ``v`` has in-edges that edge is always defined: the first one with a NaN
message (the value is NaN, as torch.amax's), else the first with the best value, which is the first
in-edge when all messages are -inf for max (the value is -inf). So, as with torch.max along a dimension
and unlike torch.amax, the gradient goes whole to one edge: never split among ties, never NaN. Masking
every edge with ``arg[v, o] == e`` (the generic gradient) costs E x output elements; this template walks
the n x output elements instead and evaluates the gradient term once per element at its winner ``e``
(source ``s = src[e]``, destination ``v``), adding it into the gradient tensor at the row its role names:
``s`` (a source feature), ``v`` (a destination feature), ``e`` (an edge feature) or none (a dense weight).

The UDF is a ``te.compute`` over the gradient's *free* axes (those not pinned to an output axis); the
forward's output axes appear in it as ``outer`` variables, fixed for the element being visited, and the
write index says, per axis of the gradient tensor, which free or outer variable addresses it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..graph import Graph
from ..kernel_spec import KernelSpec
from ..schedule import build_schedule
from ..te.expr import ComputeOp, Var
from .kernel import Kernel, compute_dtype, edge_sources, graph_rows, in_dtype

ARG = "fg_arg"  # the forward pass's winners: (num_dst_nodes, *output shape) int64, -1 for vertices without in-edges
ROLES = ("src", "dst", "eid", "dense")
PRIVATE_COPY_BUDGET = 1 << 30  # bytes of private copies beyond which the masked gradient is used instead


@dataclass(frozen=True)
class WinnerParams:
    """``role`` the row the gradient lands in; ``outer`` the forward's output axes (the winners' layout);
    ``write_index`` per axis of the gradient tensor the free or outer variable addressing it;
    ``shape`` the gradient tensor's shape."""

    role: str
    outer: tuple[Var, ...]
    write_index: tuple[Var, ...]
    shape: tuple[int, ...]
    num_threads: int | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")

    @property
    def shared(self) -> bool:
        """Whether several destinations write the same rows (sources, a dense weight)."""
        return self.role in ("src", "dense")

    @property
    def private_copies(self) -> bool:
        """Whether the CPU template keeps a copy of the gradient per extra thread: shared rows whose columns
        several output elements write."""
        return self.shared and not self.owns_columns

    @property
    def owns_columns(self) -> bool:
        """Whether each output element writes its own columns: the write index is the output axes, each
        once (a copy's gradient). Threads can then split the output elements instead of keeping private
        copies of shared rows."""
        names = [v.name for v in self.write_index]
        return sorted(names) == sorted(a.name for a in self.outer) and len(set(names)) == len(names)

    def write_position(self, variable: Callable[[Var], str], row: Callable[[str], str]) -> str:
        """Where in the gradient tensor (flat) an output element's term lands, as backend source: ``variable``
        spells a free or outer variable, ``row`` the role's row variable (``s``, ``v`` or ``e``)."""
        dims = self.shape if self.role == "dense" else self.shape[1:]
        flat = "0"
        for var, dim in zip(self.write_index, dims, strict=True):
            flat = f"({flat}) * {dim} + {variable(var)}"
        if self.role == "dense":
            return flat
        return f"{row({'src': 's', 'dst': 'v', 'eid': 'e'}[self.role])} * {math.prod(dims)} + {flat}"


def private_copy_bytes(params: WinnerParams, dtype: str, target: str, num_threads: int) -> int:
    """Memory of the per-thread copies a shared role needs on CPU (0 for rows owned by one destination or
    columns owned by one output element, and on the GPU, which adds atomically)."""
    if not params.private_copies or target != "cpu":
        return 0
    return (num_threads - 1) * math.prod(params.shape) * (8 if dtype == "float64" else 4)


class WinnerKernel(Kernel):
    """``kernel(fg_arg=winners, **tensors)`` -> the gradient tensor (``params.shape``). On CPU
    deterministic for a fixed thread count (rows or owned columns split statically, private copies added
    in thread order); on the GPU shared rows take atomic adds, whose order (and so the last bits) varies."""

    def __init__(self, graph: Graph, spec: KernelSpec, target: str, *args: Any) -> None:
        super().__init__(graph, spec, target, *args)
        index = torch.int32 if spec.index_dtype == "int32" else torch.int64
        self._sources = edge_sources(graph, index)

    @property
    def placeholder_names(self) -> tuple[str, ...]:
        return (*super().placeholder_names, ARG)

    def evaluate(self, tensors: dict[str, Any], want_arg: bool) -> tuple[torch.Tensor, None]:
        params: WinnerParams = self.spec.params
        winners = tensors.get(ARG)
        expected = (self.graph.num_dst_nodes, *(a.extent for a in params.outer))
        if not isinstance(winners, torch.Tensor) or winners.dtype != torch.int64 or tuple(winners.shape) != expected:
            raise TypeError(f"{ARG}: expected an int64 tensor of shape {expected} (the forward's winning edges)")
        inputs = self._bind({k: t for k, t in tensors.items() if k != ARG})
        out = self._new_output(params.shape, self._compute, zero=True)
        pointers = [self._sources, winners.contiguous(), out, *inputs]
        self._launch(pointers, [self.graph.num_dst_nodes, self._threads(), out.numel()])
        return in_dtype(out, self._out_dtype), None


def winner_scatter(graph: Graph, op: ComputeOp, params: WinnerParams, target: str) -> WinnerKernel:
    """Compile the winner scatter of ``op`` for ``target`` (built by the gradient derivation, not by
    users)."""
    spec = KernelSpec(
        kind="winner",
        op=op,
        schedule=build_schedule(op, None),
        reducer=None,
        params=params,
        dtype=compute_dtype(op),
        index_dtype="int32" if graph.index_dtype == torch.int32 else "int64",
        rows=graph_rows(graph),
    )
    return WinnerKernel(graph, spec, target)
