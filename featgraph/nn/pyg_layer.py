"""The mechanism behind featgraph's layers built on PyG's: run featgraph's fused kernels where a call allows it,
PyG's own ``forward`` otherwise.

A layer is ``class GCNConv(FusedLayer, torch_geometric.nn.GCNConv)``: constructor, parameters, ``repr``,
``reset_parameters``, hooks, explain mode, decomposed layers and lazy initialisation are PyG's. Its
``forward`` asks ``fused_blocker`` (the checks every layer shares, plus its own) why the fused path cannot
take this call; with a reason it returns ``fallback(reason, ...)``, PyG's ``forward`` on the same arguments,
with a ``FallbackWarning`` the first time each layer class meets that reason. The fused path never guesses:
whatever it does not handle exactly as PyG does goes to PyG. Helpers for a layer's own checks:
``fused_reduce`` (featgraph's reducer for the layer's ``aggr``, or None), ``split`` (features and graph
from PyG's input forms) and ``weighted_sparse_adj``; ``pyg_base`` gives the PyG class under a layer class;
``linear_first`` says on which side of a linear aggregation a layer's weight is cheaper.

Requires ``torch_geometric`` (``featgraph.nn`` imports it; featgraph's core does not).
"""

from __future__ import annotations

import copy
import inspect
import warnings
from typing import Any

import torch
from torch_geometric import EdgeIndex
from torch_geometric.inspector import Inspector
from torch_geometric.nn import aggr as pyg_aggr
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.dense.linear import Linear as PygLinear

from ..graph import Graph
from ..ops import linear
from .graph_input import split_input

_HOOKS = (
    "_propagate_forward_pre_hooks", "_propagate_forward_hooks",
    "_message_forward_pre_hooks", "_message_forward_hooks",
    "_aggregate_forward_pre_hooks", "_aggregate_forward_hooks",
    "_message_and_aggregate_forward_pre_hooks", "_message_and_aggregate_forward_hooks",
    "_edge_update_forward_pre_hooks", "_edge_update_forward_hooks",
)  # fmt: skip
FUSED_DTYPES = (torch.float32, torch.float64, torch.bfloat16, torch.float16)  # half: float32 accumulation
# PyG's aggregation modules that featgraph's SpMM computes, by featgraph's reducer name
FUSED_AGGREGATIONS = {
    pyg_aggr.MeanAggregation: "mean",
    pyg_aggr.SumAggregation: "sum",
    pyg_aggr.MaxAggregation: "max",
    pyg_aggr.MinAggregation: "min",
}
_warned: set[tuple[str, str]] = set()
# MessagePassing's steps a fused forward computes itself: a user's subclass that overrides one runs PyG's path
_STEPS = ("propagate", "message", "aggregate", "message_and_aggregate", "update", "edge_updater", "edge_update")


def pyg_base(cls: type) -> type[MessagePassing]:
    """The PyG layer class a featgraph layer class is built on (the first PyG class in its MRO)."""
    return next(c for c in cls.__mro__ if c.__module__.startswith("torch_geometric."))


def _unusual_x(x: Any) -> str | None:
    """What makes ``x`` one that PyG's layers only sometimes take: a sparse, not 2-d or not floating-point
    tensor (else None)."""
    for part in x if isinstance(x, (tuple, list)) else (x,):
        if isinstance(part, torch.Tensor) and part.layout != torch.strided:
            return f"a sparse x ({part.layout})"
        if isinstance(part, torch.Tensor) and part.dim() != 2:
            return f"an x of shape {tuple(part.shape)} (a static graph's batched (B, N, F) features)"
        if isinstance(part, torch.Tensor) and not part.is_floating_point():
            return f"an x of dtype {part.dtype}"
    return None


def weighted_sparse_adj(edge_index: Any, graph: Graph) -> bool:
    """Whether ``edge_index`` is a torch sparse ``adj_t`` whose values are not all 1 (``graph`` is its
    ``as_graph``): PyG's sparse path multiplies messages by them where its edge_index path has no weights."""
    return isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided and graph.edge_weight is not None


def linear_first(graph: Graph, in_channels: int, out_channels: int) -> bool:
    """Whether ``aggregate(x) @ W`` (``W``: in_channels x out_channels) costs less as ``aggregate(x @ W)``: a
    linear aggregation commutes with the weight, and the two orders cost
    ``num_src * in * out + E * out`` and ``E * in + num_dst * in * out`` multiply-adds (backward in proportion).
    On a square graph that is ``out < in``; on a sampled block, whose sources outnumber its destinations many
    times, the weight usually belongs after the aggregation even where it narrows the features (GraphSAGE's
    output layer on products-like: 15k sources, 1k destinations)."""
    edges = graph.num_edges
    before = graph.num_src_nodes * in_channels * out_channels + edges * out_channels
    after = edges * in_channels + graph.num_dst_nodes * in_channels * out_channels
    return before < after


def project(lin: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``lin(x)`` through ``ops.linear``, which skips the zeros of a mostly-zero input (bag-of-words features),
    where ``lin`` is an initialised torch or PyG ``Linear`` without hooks; any other module is called."""
    weight = getattr(lin, "weight", None)
    plain = type(lin).forward in (torch.nn.Linear.forward, PygLinear.forward)
    if not plain or lin._forward_hooks or lin._forward_pre_hooks or not isinstance(weight, torch.Tensor):
        return lin(x)
    if isinstance(weight, torch.nn.parameter.UninitializedParameter):
        return lin(x)
    return linear(x, weight, lin.bias)


class FallbackWarning(UserWarning):
    """A featgraph layer ran PyG's own ``forward`` for a call its fused kernels do not cover (the result is
    PyG's; only the speed differs). Shown once per layer class and reason."""


class FusedLayer:
    """Mixin that goes before a PyG ``MessagePassing`` layer class in the bases; see the module docstring."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give the subclass its PyG base's ``propagate`` (and ``edge_updater``) argument types as class
        attributes: PyG reads them from the class's source, keyed by class name, so the subclass (same name,
        another source) would hide its base's."""
        super().__init_subclass__(**kwargs)
        base = pyg_base(cls)
        inspector = Inspector(base)
        for method in ("propagate", "edge_updater"):
            if method == "edge_updater" and not inspector.implements("edge_update"):
                continue
            params = inspector.get_params_from_method_call(method, exclude=[0, "edge_index", "size"])
            setattr(cls, f"{method}_type", {name: param.type for name, param in params.items()})
        layer = next(c for c in cls.__mro__ if c.__module__.startswith("featgraph."))
        cls._overridden_steps = tuple(name for name in _STEPS if getattr(cls, name) is not getattr(layer, name))

    def fused_blocker(self, x: Any, edge_index: Any) -> str | None:
        """Why the fused path cannot run ``forward(x, edge_index, ...)``, or None. Checked here: message-passing
        hooks, explain mode, decomposed layers, ``flow="target_to_source"``, lazy parameters not yet
        initialised, ``x`` (a tensor or pair) that is not dense 2-d float32/float64, a ``SparseTensor`` or
        other non-tensor graph, a sparse adjacency whose values require grad, and a subclass (a user's, of
        featgraph's layer) that overrides a message-passing step the fused kernels would skip."""
        assert isinstance(self, MessagePassing)
        if self._overridden_steps:
            return f"{type(self).__name__} overrides {', '.join(self._overridden_steps)}"
        if any(getattr(self, name) for name in _HOOKS):
            return "hooks registered on message passing"
        if self.explain:
            return "explain mode"
        if self.decomposed_layers > 1:
            return "decomposed_layers > 1"
        if self.flow != "source_to_target":
            return f"flow={self.flow!r}"
        if any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in self.parameters()):
            return "lazy parameters (in_channels=-1) are initialised on the first call"
        for part in x if isinstance(x, (tuple, list)) else (x,):
            if part is None:
                continue
            if not isinstance(part, torch.Tensor) or part.layout != torch.strided:
                return "x is not a dense tensor"
            if part.dim() != 2:
                return f"x of {part.dim()} dimensions (featgraph's kernels take (num_nodes, features))"
            if part.dtype not in FUSED_DTYPES:
                return f"x of dtype {part.dtype}"
        if isinstance(edge_index, Graph):
            return None
        if not isinstance(edge_index, torch.Tensor):
            return f"edge_index of type {type(edge_index).__name__}"
        if edge_index.layout != torch.strided and edge_index.requires_grad:
            return "the adjacency's values require grad"
        return None

    def fused_reduce(self) -> str | None:
        """featgraph's reducer for the layer's aggregation (``"sum"``, ``"mean"``, ``"max"``, ``"min"``), or
        None where featgraph has no kernel for it (``"lstm"``, a list, an MLP, ...)."""
        assert isinstance(self, MessagePassing)
        return FUSED_AGGREGATIONS.get(type(self.aggr_module))

    def aggregation_inputs(
        self, x: Any, edge_index: Any, size: tuple[int, int] | None
    ) -> tuple[str, None] | tuple[None, tuple[str, torch.Tensor, torch.Tensor | None, Graph]]:
        """For a layer whose messages go unweighted into its ``aggr`` (SAGE, GIN, EdgeConv): why the fused path
        cannot take the call (and None), else None and (featgraph's reducer, x_src, x_dst, the graph)."""
        reduce = self.fused_reduce()
        reason = self.fused_blocker(x, edge_index) or (None if reduce else f"aggr={self.aggr}")
        if reason is not None:
            return reason, None
        x_src, x_dst, g = self.split(x, edge_index, size)
        if weighted_sparse_adj(edge_index, g):
            return "a sparse adj_t with values (PyG weights the messages)", None
        return None, (reduce, x_src, x_dst, g)

    @staticmethod
    def split(x: Any, edge_index: Any, size: tuple[int, int] | None) -> tuple[torch.Tensor, torch.Tensor | None, Graph]:
        """``graph_input.split_input``, a torch sparse ``adj_t`` giving the sizes (sources = its columns,
        destinations = its rows) where ``size`` is None, as PyG reads them, and so does an ``EdgeIndex``
        that knows its sparse size."""
        if size is None and isinstance(edge_index, torch.Tensor) and edge_index.layout != torch.strided:
            size = (edge_index.shape[1], edge_index.shape[0])
        if size is None and isinstance(edge_index, EdgeIndex) and None not in edge_index.sparse_size():
            size = tuple(edge_index.sparse_size())
            rows = (x[0] if isinstance(x, (tuple, list)) else x).shape[0]
            if size[0] != rows:
                raise ValueError(f"edge_index: its sparse_size {size} does not match x's {rows} rows (the sources)")
        return split_input(x, edge_index, size)

    def fallback(self, reason: str, x: Any, edge_index: Any, *args: Any, **kwargs: Any) -> Any:
        """PyG's ``forward(x, edge_index, *args, **kwargs)``, warning once per layer class and ``reason``. A
        featgraph ``Graph`` goes to PyG as its ``edge_index`` (a bipartite one with ``size`` and, for a single
        tensor ``x`` of its sources, the pair ``(x, x[:num_dst])``); its edge weights are the layer's to pass."""
        key = (type(self).__name__, reason)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(
                f"{type(self).__name__}: {reason}; running PyG's implementation", FallbackWarning, stacklevel=5
            )
        pyg_forward = super().forward  # type: ignore[misc]
        if isinstance(edge_index, Graph):
            graph, edge_index = edge_index, torch.stack(edge_index.coo())
            if graph.is_bipartite:
                signature = inspect.signature(pyg_forward)
                bound = signature.bind(x, edge_index, *args, **kwargs)
                if "size" in signature.parameters:
                    bound.arguments["size"] = (graph.num_src_nodes, graph.num_dst_nodes)
                if isinstance(x, torch.Tensor):
                    bound.arguments["x"] = (x, x[: graph.num_dst_nodes])
                x, edge_index, *args = bound.args
                kwargs = bound.kwargs
        try:
            return pyg_forward(x, edge_index, *args, **kwargs)
        except (RuntimeError, NotImplementedError, AssertionError, AttributeError) as error:
            unusual = _unusual_x(x)
            if unusual is None:
                raise
            detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise ValueError(f"x: {type(self).__name__} cannot take {unusual} (PyG's layer: {detail})") from error

    def __prepare_scriptable__(self) -> MessagePassing:
        """``torch.jit.script`` compiles PyG's own layer: a shallow copy of this one, re-classed to its PyG base
        (same parameter objects)."""
        pyg_class = pyg_base(type(self))
        plain = copy.copy(self)
        for name in ("propagate", "collect", "edge_updater", "edge_collect"):
            plain.__dict__.pop(name, None)  # bound to this layer by PyG's decomposed/explain setters
        plain.__class__ = pyg_class
        plain._set_jittable_templates()
        return plain
