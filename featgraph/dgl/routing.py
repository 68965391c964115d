"""Route DGL's kernel entry points to featgraph: ``use``, ``unuse``, ``routed``.

DGL's message passing (``update_all``/``apply_edges`` with builtins), ``dgl.ops`` and every ``dgl.nn`` layer
reach DGL's kernels through a handful of functions: ``dgl.backend.gspmm``/``gsddmm``/``edge_softmax`` (which
``dgl.ops.spmm``/``sddmm``/``edge_softmax`` bind at import time under the names ``gspmm_internal``,
``gsddmm_internal``, ``edge_softmax_internal``), their heterograph variants ``gspmm_hetero``/``gsddmm_hetero``/
``edge_softmax_hetero`` (bound likewise, ``*_internal_hetero``/``edge_softmax_hetero_internal``; served by
``hetero``), and ``segment_reduce``/``gather_mm``/``segment_mm`` (looked up on ``dgl.backend`` at call time by
``dgl.ops.segment``/``gather_mm``, the readouts and ``TypedLinear``).
DGL's degree queries (``HeteroGraphIndex.in_degrees``/``out_degrees``), for which DGL's core builds a whole
int64 CSC or CSR, are counted from DGL's COO instead (``kernels.in_degrees``).
``use`` replaces each of them where it is bound, keeping the originals, and ``unuse`` puts the originals back;
``use`` also wraps ``HeteroGraphIndex.get_relation_graph`` so that a relation slice is served its parent's
graph (``graphs.recording_slices``).
"""

from __future__ import annotations

import importlib
import inspect
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ..graph.interop import import_dgl
from . import graphs, hetero, kernels


@dataclass(frozen=True)
class EntryPoint:
    """A DGL kernel entry point: where DGL binds it (module, attribute) and, if featgraph serves it, when not."""

    name: str
    locations: tuple[tuple[str, str], ...]
    featgraph_op: str | None
    note: str


ENTRY_POINTS: tuple[EntryPoint, ...] = (
    EntryPoint(
        "gspmm",
        (("dgl.backend", "gspmm"), ("dgl.ops.spmm", "gspmm_internal")),
        "featgraph.ops.gspmm",
        "DGL's own for dtypes other than float16/bfloat16/float32/float64, mixed dtypes or devices, shapes DGL "
        "rejects; mean is DGL's sum divided by the in-degrees",
    ),
    EntryPoint(
        "gsddmm",
        (("dgl.backend", "gsddmm"), ("dgl.ops.sddmm", "gsddmm_internal")),
        "featgraph.ops.gsddmm",
        "DGL's own for other dtypes, mixed dtypes or devices, shapes DGL rejects",
    ),
    EntryPoint(
        "edge_softmax",
        (("dgl.backend", "edge_softmax"), ("dgl.ops.edge_softmax", "edge_softmax_internal")),
        "featgraph.ops.edge_softmax",
        "norm_by='src' over the reversed graph; DGL's own for an eids subset and other dtypes",
    ),
    EntryPoint(
        "segment_reduce",
        (("dgl.backend", "segment_reduce"),),
        "featgraph.ops.segment_reduce",
        "dgl.ops.segment_reduce and the readouts (sum/max/min; mean divides a sum); DGL's own for other dtypes",
    ),
    EntryPoint(
        "gather_mm",
        (("dgl.backend", "gather_mm"),),
        "featgraph.ops.gather_mm",
        "dgl.ops.gather_mm, TypedLinear, RelGraphConv; DGL's own without idx_b (one weight per row)",
    ),
    EntryPoint(
        "segment_mm",
        (("dgl.backend", "segment_mm"),),
        "featgraph.ops.segment_mm",
        "dgl.ops.segment_mm, TypedLinear with presorted types, large gather_mm",
    ),
    EntryPoint(
        "gspmm_hetero",
        (("dgl.backend", "gspmm_hetero"), ("dgl.ops.spmm", "gspmm_internal_hetero")),
        "featgraph.ops.gspmm per relation",
        "several edge types (update_all, dgl.ops on a heterograph): each relation's gspmm, reduced across the "
        "relations into a node type as DGL's kernel (sum; max/min keep the first winning relation); DGL's own "
        "for other dtypes, mixed dtypes or devices, shapes DGL rejects or relations giving one node type "
        "different shapes",
    ),
    EntryPoint(
        "gsddmm_hetero",
        (("dgl.backend", "gsddmm_hetero"), ("dgl.ops.sddmm", "gsddmm_internal_hetero")),
        "featgraph.ops.gsddmm per relation",
        "several edge types (apply_edges, dgl.ops on a heterograph): each relation's gsddmm; DGL's own for "
        "other dtypes, mixed dtypes or devices, shapes DGL rejects",
    ),
    EntryPoint(
        "edge_softmax_hetero",
        (("dgl.backend", "edge_softmax_hetero"), ("dgl.ops.edge_softmax", "edge_softmax_hetero_internal")),
        "featgraph.ops.edge_softmax over every edge",
        "several edge types: one softmax over all the relations' edges, so a vertex's spans every relation into "
        "it (out of it for norm_by='src'); DGL's own for an eids subset, other dtypes, or logits of different "
        "shapes or dtypes",
    ),
    EntryPoint(
        "in_degrees",
        (("dgl.heterograph_index.HeteroGraphIndex", "in_degrees"),),
        "featgraph.dgl.graphs.degrees",
        "DGLGraph.in_degrees and every layer that normalises by it: counted once from DGL's COO instead of DGL "
        "building an int64 CSC for the count; DGL's own where its CSC is built already or there is no COO; ids "
        "out of range a DGLError naming them (DGL's COO path reads past its arrays there)",
    ),
    EntryPoint(
        "out_degrees",
        (("dgl.heterograph_index.HeteroGraphIndex", "out_degrees"),),
        "featgraph.dgl.graphs.degrees",
        "DGLGraph.out_degrees (GraphConv's norm): counted once from DGL's COO instead of DGL building an int64 "
        "CSR; DGL's own where its CSR is built already or there is no COO; ids out of range a DGLError",
    ),
    EntryPoint(
        "scatter_add",
        (("dgl.backend", "scatter_add"),),
        None,
        "a plain scatter over rows (dgl.to_simple merging edge data), no graph kernel",
    ),
    EntryPoint(
        "csrmm",
        (("dgl.backend", "csrmm"),),
        None,
        "sparse x sparse product (dgl.adj_product_graph): featgraph has no such op",
    ),
    EntryPoint(
        "csrsum",
        (("dgl.backend", "csrsum"),),
        None,
        "sparse + sparse sum (dgl.adj_sum_graph): featgraph has no such op",
    ),
    EntryPoint(
        "csrmask",
        (("dgl.backend", "csrmask"),),
        None,
        "sparse mask (the gradients of csrmm/csrsum): featgraph has no such op",
    ),
)


SERVERS: dict[str, Any] = {**kernels.SERVERS, **hetero.SERVERS}  # entry point name -> featgraph's version


@dataclass(frozen=True)
class Route:
    """One entry point's state: ``routed`` is True while featgraph serves it; ``reason`` says when DGL's
    original still runs (for a routed one) or why it stays DGL's."""

    name: str
    routed: bool
    featgraph_op: str | None
    locations: tuple[str, ...]
    reason: str


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.patches: list[tuple[Any, str, Any, Any]] = []  # (module or class, attribute, original, replacement)
        self.active = False


_STATE = _State()


class Routing:
    """What ``use`` returns: a context manager that ends the routing on exit, if this ``use`` began it (a
    ``with`` inside an active routing leaves it on)."""

    def __init__(self, began: bool) -> None:
        self.began = began

    def close(self) -> None:
        """End the routing if this handle began it."""
        if self.began:
            self.began = False
            unuse()

    def __enter__(self) -> Routing:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Routing(active={is_active()})"


def _require_dgl() -> Any:
    dgl = import_dgl()
    if dgl is None:
        raise ImportError(
            "featgraph.dgl routes DGL's kernels and needs DGL (the `dgl` package), which is not installed or "
            "does not import; install DGL (e.g. `pip install dgl`) to use it"
        )
    return dgl


def owner_of(path: str) -> Any:
    """The module or class a location names: ``"dgl.backend"``, ``"dgl.heterograph_index.HeteroGraphIndex"``."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


def _path(owner: Any) -> str:
    """The location ``owner_of`` resolves to ``owner``."""
    return owner.__name__ if inspect.ismodule(owner) else f"{owner.__module__}.{owner.__qualname__}"


def bound_entry_points() -> list[tuple[EntryPoint, Any, str, Any]]:
    """(entry point, module or class, attribute, function) for every place DGL binds one of ``ENTRY_POINTS``
    now (DGL imported)."""
    bound = []
    for entry in ENTRY_POINTS:
        for path, attribute in entry.locations:
            owner = owner_of(path)
            function = getattr(owner, attribute, None)
            if function is not None:
                bound.append((entry, owner, attribute, function))
    return bound


def use() -> Routing:
    """Serve DGL's kernel entry points with featgraph's ops (see ``routed``); DGL's original runs for any
    call featgraph does not serve. Idempotent: a second call while routing changes nothing. Returns a
    handle; ``with featgraph.dgl.use(): ...`` routes for the block only."""
    index_class = _require_dgl().heterograph_index.HeteroGraphIndex
    with _STATE.lock:
        if _STATE.active:
            return Routing(began=False)
        patches = [
            (module, attribute, original, kernels.routing(entry.name, SERVERS[entry.name], original))
            for entry, module, attribute, original in bound_entry_points()
            if entry.featgraph_op is not None
        ]
        slicing = index_class.get_relation_graph
        patches.append((index_class, "get_relation_graph", slicing, graphs.recording_slices(slicing)))
        for module, attribute, _, replacement in patches:
            setattr(module, attribute, replacement)
        _STATE.patches, _STATE.active = patches, True
        return Routing(began=True)


def unuse() -> bool:
    """Put DGL's original entry points back, the very objects ``use`` replaced. Harmless without ``use``:
    returns whether a routing was ended."""
    with _STATE.lock:
        if not _STATE.active:
            return False
        for module, attribute, original, _ in reversed(_STATE.patches):
            setattr(module, attribute, original)
        _STATE.patches, _STATE.active = [], False
        return True


def backend() -> Routing:
    """``use()``, named for ``with featgraph.dgl.backend(): ...``."""
    return use()


def is_active() -> bool:
    """Whether ``use`` is in effect."""
    return _STATE.active


def routed() -> list[Route]:
    """Every DGL kernel entry point featgraph knows: which are routed to featgraph now (and when DGL's
    original still runs) and which stay DGL's own (and why). Needs no DGL."""
    with _STATE.lock:
        patched = {(_path(owner), attribute) for owner, attribute, _, _ in _STATE.patches}
        active = _STATE.active
    out = []
    for entry in ENTRY_POINTS:
        where = tuple(f"{module}.{attribute}" for module, attribute in entry.locations)
        if entry.featgraph_op is None:
            out.append(Route(entry.name, False, None, where, f"DGL's own: {entry.note}"))
        elif not active:
            out.append(Route(entry.name, False, entry.featgraph_op, where, "featgraph.dgl.use() is not in effect"))
        else:
            here = tuple(w for (m, a), w in zip(entry.locations, where, strict=True) if (m, a) in patched)
            out.append(Route(entry.name, bool(here), entry.featgraph_op, here, entry.note))
    return out
