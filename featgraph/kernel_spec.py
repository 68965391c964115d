"""The kernel description: what the templates build and both backends lower from (template kind, UDF, schedule,
parameters, dtypes), with the placeholders' roles and dtypes it implies. It sits below the backends and the
templates, which both read it."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields

import torch

from .recent import Recent
from .schedule import Schedule
from .te.expr import GRAPH_KINDS, ComputeOp, Load, Placeholder, Var, per_op, structure

REDUCERS = ("sum", "mean", "max", "min", "logsumexp")
TORCH_DTYPES = {
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}
HALF_DTYPES = ("float16", "bfloat16")  # read as they are stored, converted to float32 in registers


@dataclass(frozen=True)
class Roles:
    """How each placeholder is indexed: by a vertex (``src``/``dst``), by an edge (``eid``) or densely."""

    vertex: tuple[Placeholder, ...]
    edge: tuple[Placeholder, ...]
    dense: tuple[Placeholder, ...]


@per_op
def placeholder_roles(op: ComputeOp) -> Roles:
    """Classify placeholders by their first index; graph variables may only appear there, and a placeholder
    without a row count (``None``) must be indexed by one there."""
    role: dict[str, str] = {}
    for node in op.nodes:
        if not isinstance(node, Load):
            continue
        first = node.indices[0]
        kind = first.kind if isinstance(first, Var) and first.kind in GRAPH_KINDS else "dense"
        for later in node.indices[1:]:
            if any(isinstance(n, Var) and n.kind in GRAPH_KINDS for n in later.walk()):
                raise ValueError(f"{node.tensor.name}: src/dst/eid may only index the first dimension")
        kind = {"src": "vertex", "dst": "vertex", "eid": "edge"}.get(kind, "dense")
        if role.setdefault(node.tensor.name, kind) != kind:
            raise ValueError(
                f"placeholder {node.tensor.name!r} is indexed both as {role[node.tensor.name]} and {kind} data"
            )
    by = {k: tuple(p for p in op.placeholders if role[p.name] == k) for k in ("vertex", "edge", "dense")}
    for p in by["dense"]:
        if p.shape[0] is None:
            raise ValueError(
                f"placeholder {p.name!r} has no row count (None), so its first index must be src, dst or eid "
                "(one row per vertex or edge of the graph); give a dense placeholder its shape"
            )
    return Roles(**by)


# (source vertices, destination vertices, edges) of the graph a kernel binds: the rows of placeholders whose
# first dimension is None
GraphRows = tuple[int, int, int]


def placeholder_shape(op: ComputeOp, p: Placeholder, rows: GraphRows) -> tuple[int, ...]:
    """``p``'s shape on a graph of ``rows``: its own where it has a row count, else the count of the graph
    variable indexing its first dimension (a ValueError where src and dst both do on a bipartite graph)."""
    if p.shape[0] is not None:
        return p.shape  # type: ignore[return-value]
    counts = {rows[k] for k in row_variables(op)[p.name]}
    if not counts:
        raise ValueError(f"placeholder {p.name!r} has no row count (None) and no src, dst or eid indexes its rows")
    if len(counts) > 1:
        raise ValueError(
            f"placeholder {p.name!r} (no row count) is indexed by both src and dst, which number "
            f"{rows[0]} and {rows[1]} on this bipartite graph: give it its rows"
        )
    return (counts.pop(), *p.shape[1:])  # type: ignore[misc]


@per_op
def row_variables(op: ComputeOp) -> dict[str, tuple[int, ...]]:
    """Per placeholder, the positions in ``GRAPH_KINDS`` of the graph variables indexing its rows."""
    return {
        p.name: tuple(k for k, kind in enumerate(GRAPH_KINDS) if p in indexed_by(op, kind)) for p in op.placeholders
    }


@per_op
def indexed_by(op: ComputeOp, kind: str) -> tuple[Placeholder, ...]:
    """Placeholders whose first index is the graph variable ``kind`` (``src``, ``dst`` or ``eid``)."""
    found: dict[str, Placeholder] = {}
    for node in op.nodes:
        if isinstance(node, Load) and isinstance(node.indices[0], Var) and node.indices[0].kind == kind:
            found[node.tensor.name] = node.tensor
    return tuple(found[name] for name in sorted(found))


@dataclass(frozen=True)
class KernelSpec:
    kind: str  # "spmm" or "sddmm"
    op: ComputeOp
    schedule: Schedule
    reducer: str | None  # spmm only
    params: object  # SpMMParams or SDDMMParams
    dtype: str  # compute type: "float32" or "float64"
    index_dtype: str  # "int32" or "int64"
    rows: GraphRows  # the bound graph's, which placeholders without a row count take

    def placeholder_shape(self, p: Placeholder) -> tuple[int, ...]:
        """``p``'s shape on the bound graph (``placeholder_shape``)."""
        return placeholder_shape(self.op, p, self.rows)


def spec_key(spec: KernelSpec) -> tuple:
    """A hashable description of everything in ``spec`` that a backend's source depends on, except the
    placeholders' row counts (``te.expr.structure``): equal for one UDF traced again on another graph with
    the same parameters, so its source need not be generated again."""
    _, names = structure(spec.op)

    def canonical(value: object) -> object:
        if isinstance(value, Var):
            return ("V", value.kind, names.get(value.name, value.name), value.extent, value.start)
        if isinstance(value, tuple):
            return tuple(canonical(v) for v in value)
        return value

    params = tuple(canonical(getattr(spec.params, f.name)) for f in fields(spec.params))
    plans = tuple(sorted((names[name], tuple(vars(plan).values())) for name, plan in spec.schedule.plans.items()))
    order = None if spec.schedule.order is None else tuple(names[v.name] for v in spec.schedule.order)
    kind = (spec.kind, spec.reducer, type(spec.params).__name__, spec.dtype, spec.index_dtype)
    return (*kind, params, structure_number(spec.op), plans, order)


# the structures ``structure_number`` remembers; one seen again after eviction gets a new number
_structures: Recent[int] = Recent(4096)
_numbers = itertools.count()  # never reused, so an op holding an evicted structure's number meets no other


@per_op
def structure_number(op: ComputeOp) -> int:
    """A number standing for ``structure(op)``, equal for equal structures while remembered: a key holding it
    hashes at once, where the description itself is a tuple of the whole expression, hashed again on every
    lookup."""
    body, _ = structure(op)
    return _structures.get(body, lambda: next(_numbers))


@per_op
def output_dtype(op: ComputeOp) -> str:
    """The dtype of a kernel's result: the compute's own where it names one, else its floating placeholders'
    dtypes promoted as torch promotes them (bfloat16 with float32 gives float32, bfloat16 with float16 gives
    float32); float32 with none."""
    if op.dtype is not None:
        return op.dtype
    floats = [TORCH_DTYPES[p.dtype] for p in op.placeholders if p.dtype != "int64"] or [torch.float32]
    out = floats[0]
    for d in floats[1:]:
        out = torch.promote_types(out, d)
    return next(name for name, d in TORCH_DTYPES.items() if d == out)


def stored_dtype(spec: KernelSpec) -> str:
    """The dtype the kernel writes its output buffer in. A float16/bfloat16 result is stored in that dtype
    (rounded once from the float32 accumulator) where the template writes each output element once: SDDMM,
    and SpMM over one source partition. Templates that add into the output (GAS atomics, partial rows kept
    between source partitions, edge sums, winner scatters) keep it in the compute dtype, and the result is
    rounded once afterwards: rounding a partial sum each time would add an error per step."""
    out = output_dtype(spec.op)
    stores_once = spec.kind == "sddmm" or (
        spec.kind == "spmm" and spec.params.strategy == "gar" and spec.params.num_partitions == 1
    )
    return out if out in HALF_DTYPES and stores_once else spec.dtype
