"""featgraph's ops as ``torch.library`` operators (namespace ``featgraph``), which ``torch.compile`` and
``torch.export`` keep whole in the graphs they trace.

Each operator takes the graph as tensors and plain values: its own (2, E) ``edge_index``, the source and
destination vertex counts and whether to add one self loop per vertex (``GraphRef``). When it runs, it
finds the ``Graph`` again (the one owning that tensor, else the remembered graph of a user's edge_index,
checked by content as eager layers check it) and works on that graph's cached formats and kernels, so traced
code never builds a format, compiles a kernel or reads a tensor's values. Each has a fake implementation
that derives its output shapes from its inputs' shapes, and autograd through a gradient operator of its own.

The op functions (``ops.gspmm``, ...) call these operators only in code being compiled: eager calls run the
same kernels directly, without the operator dispatch (about 35 us a call on the 2-core VM, a few percent of
a small graph's epoch).
"""

from __future__ import annotations

import inspect

import torch

from ..graph import Graph
from ..graph.graph import GraphRef
from . import precision

GRAPH = "featgraph::"  # operator names below are this namespace's


def graph_args(g: Graph | GraphRef) -> tuple[torch.Tensor, int, int, bool]:
    """(edge_index, num_src, num_dst, self_loops): how an operator takes a graph."""
    ref = g if isinstance(g, GraphRef) else g.ref()
    return ref.edge_index, ref.num_src_nodes, ref.num_dst_nodes, ref.self_loops


def resolve(edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool) -> Graph:
    """The ``Graph`` an operator's graph arguments stand for, looped where ``self_loops``."""
    graph = Graph.owning(edge_index, num_src, num_dst)
    if graph is None:
        from ..nn.graph_input import as_graph  # nn builds on ops

        graph = as_graph(edge_index, num_src if num_src == num_dst else (num_src, num_dst))
    return graph.with_self_loops() if self_loops else graph


def _optional(grad: torch.Tensor | None, like: torch.Tensor | None) -> torch.Tensor:
    """A gradient operator's output for an input: the gradient, or an empty tensor where there is none."""
    if grad is not None:
        return grad
    return torch.empty(0) if like is None else like.new_empty(0)


def _given(grad: torch.Tensor, wanted: bool) -> torch.Tensor | None:
    return grad if wanted else None


def _features(x: torch.Tensor) -> tuple[int, ...]:
    return tuple(x.shape[1:]) or (1,)


# ---- in_degrees ------------------------------------------------------------------------------------------


@torch.library.custom_op(GRAPH + "in_degrees", mutates_args=())
def _in_degrees(edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool) -> torch.Tensor:
    """Each destination's in-degree (a copy of the graph's cached one)."""
    return resolve(edge_index, num_src, num_dst, self_loops).in_degrees().clone()


@_in_degrees.register_fake
def _(edge_index, num_src, num_dst, self_loops):
    return edge_index.new_empty(num_dst)


# ---- gspmm ------------------------------------------------------------------------------------------------


@torch.library.custom_op(GRAPH + "gspmm", mutates_args=())
def _gspmm(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, op: str, reduce: str,
    lhs: torch.Tensor | None, rhs: torch.Tensor | None, strategy: str,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``ops.gspmm`` with 1-D operands read as one feature: (output, max/min's winners or an empty tensor)."""
    from .gspmm import _aggregate

    g = resolve(edge_index, num_src, num_dst, self_loops)
    if reduce in ("max", "min"):
        return _aggregate(g, op, reduce, lhs, rhs, strategy, False, return_arg=True)
    out = _aggregate(g, op, reduce, lhs, rhs, strategy, False)
    return out, out.new_empty(0, dtype=torch.int64)


@_gspmm.register_fake
def _(edge_index, num_src, num_dst, self_loops, op, reduce, lhs, rhs, strategy):
    given = [x for x in (lhs, rhs) if x is not None]
    shape = (num_dst, *torch.broadcast_shapes(*[_features(x) for x in given]))
    arg_shape = shape if reduce in ("max", "min") else (0,)
    return given[0].new_empty(shape), given[0].new_empty(arg_shape, dtype=torch.int64)


@torch.library.custom_op(GRAPH + "gspmm_backward", mutates_args=())
def _gspmm_backward(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, op: str, reduce: str,
    lhs: torch.Tensor | None, rhs: torch.Tensor | None, strategy: str, arg: torch.Tensor, grad: torch.Tensor,
    want_lhs: bool, want_rhs: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The gradients of ``gspmm``'s (lhs, rhs), empty where not wanted."""
    from .gspmm import gradients, winner_gradients

    g = resolve(edge_index, num_src, num_dst, self_loops)
    wants = (want_lhs and lhs is not None, want_rhs and rhs is not None)
    if reduce in ("max", "min"):
        grads = winner_gradients(g, op, reduce, lhs, rhs, arg, grad, wants, strategy)
    else:
        grads = gradients(g, op, reduce, lhs, rhs, grad, wants, strategy)
    return _optional(grads[0], grad), _optional(grads[1], grad)


@_gspmm_backward.register_fake
def _(edge_index, num_src, num_dst, self_loops, op, reduce, lhs, rhs, strategy, arg, grad, want_lhs, want_rhs):
    return tuple(
        x.new_empty(x.shape) if want and x is not None else grad.new_empty(0)
        for x, want in ((lhs, want_lhs), (rhs, want_rhs))
    )


def _gspmm_setup(ctx, inputs, output):
    ctx.graph, ctx.options = inputs[:4], inputs[4:6]
    ctx.strategy = inputs[8]
    ctx.save_for_backward(inputs[6], inputs[7], output[1])


def _gspmm_grad(ctx, grad, _grad_arg):
    lhs, rhs, arg = ctx.saved_tensors
    want_lhs, want_rhs = ctx.needs_input_grad[6], ctx.needs_input_grad[7]
    grads = torch.ops.featgraph.gspmm_backward(
        *ctx.graph, *ctx.options, lhs, rhs, ctx.strategy, arg, grad.contiguous(), want_lhs, want_rhs
    )
    return None, None, None, None, None, None, _given(grads[0], want_lhs), _given(grads[1], want_rhs), None


_gspmm.register_autograd(_gspmm_grad, setup_context=_gspmm_setup)


def gspmm(g: Graph | GraphRef, op: str, reduce: str, lhs, rhs, strategy: str) -> torch.Tensor:
    """The ``featgraph::gspmm`` operator for ``ops.gspmm`` (operands already checked)."""
    return torch.ops.featgraph.gspmm(*graph_args(g), op, reduce, lhs, rhs, strategy)[0]


# ---- gsddmm -----------------------------------------------------------------------------------------------


@torch.library.custom_op(GRAPH + "gsddmm", mutates_args=())
def _gsddmm(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, op: str,
    lhs: torch.Tensor | None, rhs: torch.Tensor | None, lhs_target: str, rhs_target: str,
) -> torch.Tensor:  # fmt: skip
    """``ops.gsddmm`` with 1-D operands read as one feature."""
    from .gsddmm import forward

    return forward(resolve(edge_index, num_src, num_dst, self_loops), op, lhs, rhs, lhs_target, rhs_target)


@_gsddmm.register_fake
def _(edge_index, num_src, num_dst, self_loops, op, lhs, rhs, lhs_target, rhs_target):
    # a looped graph's edge count depends on how many loops the edges hold: a size known when it runs
    edges = torch.library.get_ctx().new_dynamic_size() if self_loops else edge_index.shape[1]
    given = [x for x in (lhs, rhs) if x is not None]
    features = torch.broadcast_shapes(*[_features(x) for x in given])
    shape = (edges, *features[:-1], 1) if op == "dot" else (edges, *features)
    return given[0].new_empty(shape)


@torch.library.custom_op(GRAPH + "gsddmm_backward", mutates_args=())
def _gsddmm_backward(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, op: str,
    lhs: torch.Tensor | None, rhs: torch.Tensor | None, lhs_target: str, rhs_target: str, grad: torch.Tensor,
    want_lhs: bool, want_rhs: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The gradients of ``gsddmm``'s (lhs, rhs), empty where not wanted."""
    from .gsddmm import gradients

    g = resolve(edge_index, num_src, num_dst, self_loops)
    wants = (want_lhs and lhs is not None, want_rhs and rhs is not None)
    grads = gradients(g, op, lhs, rhs, lhs_target, rhs_target, grad, wants)
    return _optional(grads[0], grad), _optional(grads[1], grad)


@_gsddmm_backward.register_fake
def _(edge_index, num_src, num_dst, self_loops, op, lhs, rhs, lhs_target, rhs_target, grad, want_lhs, want_rhs):
    return tuple(
        x.new_empty(x.shape) if want and x is not None else grad.new_empty(0)
        for x, want in ((lhs, want_lhs), (rhs, want_rhs))
    )


def _gsddmm_setup(ctx, inputs, output):
    ctx.graph, ctx.op, ctx.targets = inputs[:4], inputs[4], inputs[7:9]
    ctx.save_for_backward(inputs[5], inputs[6])


def _gsddmm_grad(ctx, grad):
    lhs, rhs = ctx.saved_tensors
    want_lhs, want_rhs = ctx.needs_input_grad[5], ctx.needs_input_grad[6]
    grads = torch.ops.featgraph.gsddmm_backward(
        *ctx.graph, ctx.op, lhs, rhs, *ctx.targets, grad.contiguous(), want_lhs, want_rhs
    )
    return None, None, None, None, None, _given(grads[0], want_lhs), _given(grads[1], want_rhs), None, None


_gsddmm.register_autograd(_gsddmm_grad, setup_context=_gsddmm_setup)


def gsddmm(g: Graph | GraphRef, op: str, lhs, rhs, lhs_target: str, rhs_target: str) -> torch.Tensor:
    """The ``featgraph::gsddmm`` operator for ``ops.gsddmm`` (operands already checked)."""
    return torch.ops.featgraph.gsddmm(*graph_args(g), op, lhs, rhs, lhs_target, rhs_target)


# ---- edge_softmax -----------------------------------------------------------------------------------------


@torch.library.custom_op(GRAPH + "edge_softmax", mutates_args=())
def _edge_softmax(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, scores: torch.Tensor
) -> torch.Tensor:
    """``ops.edge_softmax``."""
    from .edge_softmax import forward

    return forward(resolve(edge_index, num_src, num_dst, self_loops), scores)


@_edge_softmax.register_fake
def _(edge_index, num_src, num_dst, self_loops, scores):
    return torch.empty_like(scores)


@torch.library.custom_op(GRAPH + "edge_softmax_backward", mutates_args=())
def _edge_softmax_backward(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, out: torch.Tensor, grad: torch.Tensor
) -> torch.Tensor:
    """The scores' gradient from ``edge_softmax``'s output and the output's gradient."""
    from .edge_softmax import gradient

    return gradient(resolve(edge_index, num_src, num_dst, self_loops), out, grad)


@_edge_softmax_backward.register_fake
def _(edge_index, num_src, num_dst, self_loops, out, grad):
    return torch.empty_like(out)


def _edge_softmax_setup(ctx, inputs, output):
    ctx.graph = inputs[:4]
    ctx.save_for_backward(output)


def _edge_softmax_grad(ctx, grad):
    (out,) = ctx.saved_tensors
    return None, None, None, None, torch.ops.featgraph.edge_softmax_backward(*ctx.graph, out, grad.contiguous())


_edge_softmax.register_autograd(_edge_softmax_grad, setup_context=_edge_softmax_setup)


def edge_softmax(g: Graph | GraphRef, scores: torch.Tensor) -> torch.Tensor:
    """The ``featgraph::edge_softmax`` operator for ``ops.edge_softmax``."""
    return torch.ops.featgraph.edge_softmax(*graph_args(g), scores)


# ---- dropout ----------------------------------------------------------------------------------------------


@torch.library.custom_op(GRAPH + "dropout", mutates_args=())
def _dropout(x: torch.Tensor, p: float, seed: torch.Tensor, relu: bool) -> torch.Tensor:
    """``ops.dropout`` in training with the mask of ``seed`` (a one-element int64 tensor), of ``relu(x)`` where
    ``relu``."""
    from .dropout import masked

    return masked(x, p, int(seed), "relu" if relu else "dropout")


@_dropout.register_fake
def _(x, p, seed, relu):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op(GRAPH + "relu_dropout_backward", mutates_args=())
def _relu_dropout_backward(grad: torch.Tensor, out: torch.Tensor, p: float) -> torch.Tensor:
    """The gradient of ``dropout(x, p, relu=True)`` from its output ``out``."""
    from .dropout import relu_dropout_grad

    return relu_dropout_grad(grad, out, p)


@_relu_dropout_backward.register_fake
def _(grad, out, p):
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


def _dropout_setup(ctx, inputs, output):
    ctx.p, ctx.relu = inputs[1], inputs[3]
    ctx.save_for_backward(output if ctx.relu else inputs[2])


def _dropout_grad(ctx, grad):
    (saved,) = ctx.saved_tensors
    if ctx.relu:  # saved: the output
        return torch.ops.featgraph.relu_dropout_backward(grad, saved, ctx.p), None, None, None
    return torch.ops.featgraph.dropout(grad, ctx.p, saved, False), None, None, None


_dropout.register_autograd(_dropout_grad, setup_context=_dropout_setup)


def dropout(x: torch.Tensor, p: float, seed: torch.Tensor, relu: bool = False) -> torch.Tensor:
    """The ``featgraph::dropout`` operator for ``ops.dropout``."""
    return torch.ops.featgraph.dropout(x, p, seed, relu)


# ---- gcn_aggregate ----------------------------------------------------------------------------------------


@torch.library.custom_op(GRAPH + "gcn_aggregate", mutates_args=())
def _gcn_aggregate(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, x: torch.Tensor,
    edge_weight: torch.Tensor | None, add_self_loops: bool, fill_value: float,
) -> torch.Tensor:  # fmt: skip
    """``ops.gcn_aggregate`` with ``normalize``."""
    from .fused import gcn_aggregate

    g = resolve(edge_index, num_src, num_dst, self_loops)
    return gcn_aggregate(g, x, edge_weight, add_self_loops, True, fill_value)


@_gcn_aggregate.register_fake
def _(edge_index, num_src, num_dst, self_loops, x, edge_weight, add_self_loops, fill_value):
    return x.new_empty(x.shape)


@torch.library.custom_op(GRAPH + "gcn_aggregate_backward", mutates_args=())
def _gcn_aggregate_backward(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, x: torch.Tensor,
    edge_weight: torch.Tensor | None, add_self_loops: bool, fill_value: float, grad: torch.Tensor,
    want_x: bool, want_weight: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """The gradients of ``gcn_aggregate`` in (x, edge_weight), empty where not wanted."""
    from .fused import gcn_gradients

    g = resolve(edge_index, num_src, num_dst, self_loops)
    wants = (want_x, want_weight and edge_weight is not None)
    grads = gcn_gradients(g, x, edge_weight, add_self_loops, fill_value, grad, wants)
    return _optional(grads[0], grad), _optional(grads[1], grad)


@_gcn_aggregate_backward.register_fake
def _(edge_index, num_src, num_dst, self_loops, x, edge_weight, add_self_loops, fill_value, grad, want_x, want_weight):
    dx = x.new_empty(x.shape) if want_x else grad.new_empty(0)
    return dx, edge_weight.new_empty(edge_weight.shape) if want_weight and edge_weight is not None else grad.new_empty(
        0
    )


def _gcn_setup(ctx, inputs, output):
    ctx.graph, ctx.options = inputs[:4], inputs[6:8]
    ctx.save_for_backward(inputs[4], inputs[5])


def _gcn_grad(ctx, grad):
    x, edge_weight = ctx.saved_tensors
    want_x, want_weight = ctx.needs_input_grad[4], ctx.needs_input_grad[5]
    grads = torch.ops.featgraph.gcn_aggregate_backward(
        *ctx.graph, x, edge_weight, *ctx.options, grad.contiguous(), want_x, want_weight
    )
    return None, None, None, None, _given(grads[0], want_x), _given(grads[1], want_weight), None, None


_gcn_aggregate.register_autograd(_gcn_grad, setup_context=_gcn_setup)


def gcn_aggregate(
    g: Graph | GraphRef, x: torch.Tensor, edge_weight: torch.Tensor | None, add_self_loops: bool, fill_value: float
) -> torch.Tensor:
    """The ``featgraph::gcn_aggregate`` operator for ``ops.gcn_aggregate`` (normalised)."""
    return torch.ops.featgraph.gcn_aggregate(*graph_args(g), x, edge_weight, add_self_loops, fill_value)


# ---- gat_attention ----------------------------------------------------------------------------------------


@torch.library.custom_op(GRAPH + "gat_attention", mutates_args=())
def _gat_attention(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, logit_src: torch.Tensor,
    logit_dst: torch.Tensor, feat: torch.Tensor, negative_slope: float, p: float, seed: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """``ops.gat_attention``'s fused passes from the per-vertex logits: (output, per-destination log-sum-exp)."""
    from .fused import fused_attention

    g = resolve(edge_index, num_src, num_dst, self_loops)
    return fused_attention(g, logit_src, logit_dst, feat, negative_slope, p, int(seed))


@_gat_attention.register_fake
def _(edge_index, num_src, num_dst, self_loops, logit_src, logit_dst, feat, negative_slope, p, seed):
    _, heads, d = feat.shape
    return feat.new_empty((num_dst, heads, d)), feat.new_empty((num_dst, heads))


@torch.library.custom_op(GRAPH + "gat_attention_backward", mutates_args=())
def _gat_attention_backward(
    edge_index: torch.Tensor, num_src: int, num_dst: int, self_loops: bool, logit_src: torch.Tensor,
    logit_dst: torch.Tensor, feat: torch.Tensor, negative_slope: float, p: float, seed: torch.Tensor,
    log_total: torch.Tensor, grad: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """The gradients of ``gat_attention`` in (logit_src, logit_dst, feat)."""
    from .fused import attention_gradients

    g = resolve(edge_index, num_src, num_dst, self_loops)
    return attention_gradients(g, logit_src, logit_dst, feat, log_total, grad, negative_slope, p, int(seed))


@_gat_attention_backward.register_fake
def _(edge_index, num_src, num_dst, self_loops, logit_src, logit_dst, feat, negative_slope, p, seed, log_total, grad):
    return logit_src.new_empty(logit_src.shape), logit_dst.new_empty(logit_dst.shape), feat.new_empty(feat.shape)


def _gat_setup(ctx, inputs, output):
    ctx.graph, ctx.options = inputs[:4], inputs[7:9]
    ctx.save_for_backward(*inputs[4:7], inputs[9], output[1])


def _gat_grad(ctx, grad, _grad_log_total):
    logit_src, logit_dst, feat, seed, log_total = ctx.saved_tensors
    grads = torch.ops.featgraph.gat_attention_backward(
        *ctx.graph, logit_src, logit_dst, feat, *ctx.options, seed, log_total, grad.contiguous()
    )
    return None, None, None, None, *grads, None, None, None


_gat_attention.register_autograd(_gat_grad, setup_context=_gat_setup)


def gat_attention(
    g: Graph | GraphRef, logit_src, logit_dst, feat, negative_slope: float, p: float, seed: torch.Tensor
) -> torch.Tensor:
    """The ``featgraph::gat_attention`` operator for ``ops.gat_attention``."""
    return torch.ops.featgraph.gat_attention(*graph_args(g), logit_src, logit_dst, feat, negative_slope, p, seed)[0]


for _name in ("gspmm", "gsddmm", "edge_softmax", "gcn_aggregate", "gat_attention"):
    precision.register_operator("featgraph", _name)  # direct calls under autocast: the rule table's casts


# ---- graph functions --------------------------------------------------------------------------------------
# One mechanism for the ops written as a Python function of a graph, tensors and constants (the fused
# attention ops): ``graph_operator`` registers such a function, its fake rule and its gradients as the
# operator ``featgraph::<name>`` and its gradient operator ``featgraph::<name>_backward``; ``kernel_operator``
# does so for a function that is one UDF kernel, whose gradients are that kernel's own.

_SCHEMA_TYPES = {
    "torch.Tensor": "Tensor",
    "torch.Tensor | None": "Tensor?",
    "float": "float",
    "bool": "bool",
    "str": "str",
}
_GRAPH_SCHEMA = "Tensor edge_index, SymInt num_src, SymInt num_dst, bool self_loops"


def fake_edges(ref: GraphRef) -> int | torch.SymInt:
    """A fake implementation's edge count: the edge tensor's, or for a graph whose self loops the operator
    adds (the count depends on how many loops the edges hold) a size known when it runs."""
    return torch.library.get_ctx().new_dynamic_size() if ref.self_loops else ref.edge_index.shape[1]


class GraphFunction(torch.autograd.Function):
    """Eager autograd for a ``graph_operator`` function on a ``Graph``: its forward, its gradients."""

    @staticmethod
    def forward(ctx, spec: _GraphOperator, g: Graph, *args):  # noqa: D102
        ctx.spec, ctx.g, ctx.args = spec, g, args
        return spec.forward(g, *args)

    @staticmethod
    def backward(ctx, grad):  # noqa: D102
        spec = ctx.spec
        wants = [ctx.needs_input_grad[2 + i] for i in spec.tensor_positions]
        grads = spec.gradients(ctx.g, *ctx.args, grad=grad.contiguous(), wants=wants)
        by_position = dict(zip(spec.tensor_positions, grads, strict=True))
        return None, None, *[by_position.get(i) for i in range(len(ctx.args))]


class _GraphOperator:
    """A registered graph function: in code being compiled (or given a ``GraphRef``) the operator
    ``featgraph::<name>``, in eager code on a ``Graph`` the function itself (``GraphFunction``)."""

    def __init__(self, name: str, forward, fake, gradients) -> None:
        self.name, self.forward, self.fake, self.gradients = name, forward, fake, gradients
        params = list(inspect.signature(forward).parameters.values())[1:]  # after the graph
        types = [_SCHEMA_TYPES[p.annotation] for p in params]
        self.tensor_positions = [i for i, t in enumerate(types) if t.startswith("Tensor")]
        args = ", ".join(f"{t} {p.name}" for t, p in zip(types, params, strict=True))
        self.operator = torch.library.custom_op(
            GRAPH + name, self._run, mutates_args=(), schema=f"({_GRAPH_SCHEMA}, {args}) -> Tensor"
        )
        self.operator.register_fake(self._fake)
        self.operator.register_autograd(self._backward, setup_context=self._setup)
        self.backward_operator = torch.library.custom_op(
            GRAPH + name + "_backward", self._run_backward, mutates_args=(),
            schema=f"({_GRAPH_SCHEMA}, {args}, Tensor grad, bool[] wants) -> Tensor[]",
        )  # fmt: skip
        self.backward_operator.register_fake(self._fake_backward)
        precision.register_operator("featgraph", name)
        self.__doc__ = forward.__doc__

    def __call__(self, g: Graph | GraphRef, *args) -> torch.Tensor:
        args = precision.autocast_inputs(self.name, *args)
        if isinstance(g, GraphRef) or torch.compiler.is_compiling():
            return self.operator(*graph_args(g), *args)
        return GraphFunction.apply(self, g, *args)  # eager: skips the operator's dispatch

    def _tensors(self, args) -> list[torch.Tensor | None]:
        return [args[i] for i in self.tensor_positions]

    def _run(self, edge_index, num_src, num_dst, self_loops, *args):
        return self.forward(resolve(edge_index, num_src, num_dst, self_loops), *args)

    def _fake(self, edge_index, num_src, num_dst, self_loops, *args):
        return self.fake(GraphRef(edge_index, num_src, num_dst, None, self_loops), *args)

    def _run_backward(self, edge_index, num_src, num_dst, self_loops, *args):
        *args, grad, wants = args
        g = resolve(edge_index, num_src, num_dst, self_loops)
        grads = self.gradients(g, *args, grad=grad, wants=wants)
        return [_optional(d, grad) for d in grads]

    def _fake_backward(self, edge_index, num_src, num_dst, self_loops, *args):
        *args, grad, wants = args
        pairs = zip(self._tensors(args), wants, strict=True)
        return [x.new_empty(x.shape) if want and x is not None else grad.new_empty(0) for x, want in pairs]

    def _setup(self, ctx, inputs, output):
        ctx.graph, ctx.args = inputs[:4], list(inputs[4:])
        ctx.wants = [ctx.needs_input_grad[4 + i] for i in self.tensor_positions]
        for i in self.tensor_positions:
            ctx.args[i] = None  # kept by save_for_backward instead
        ctx.save_for_backward(*self._tensors(inputs[4:]))

    def _backward(self, ctx, grad):
        args = list(ctx.args)
        for i, x in zip(self.tensor_positions, ctx.saved_tensors, strict=True):
            args[i] = x
        grads = self.backward_operator(*ctx.graph, *args, grad.contiguous(), ctx.wants)
        by_position = {i: _given(d, w) for i, d, w in zip(self.tensor_positions, grads, ctx.wants, strict=True)}
        return None, None, None, None, *[by_position.get(i) for i in range(len(args))]


def graph_operator(name: str, fake, gradients):
    """Register ``forward(g: Graph, *args) -> Tensor`` (its arguments annotated as tensors, optional tensors,
    floats, bools or strings) with ``fake(ref: GraphRef, *args)``, its output's fake from the inputs' shapes, and
    ``gradients(g, *args, grad, wants)``, one gradient (or None) per tensor argument where ``wants``."""
    return lambda forward: _GraphOperator(name, forward, fake, gradients)


def kernel_operator(name: str, fake):
    """``graph_operator`` for ``plan(g, *args) -> (kernel, placeholders)``: the function is one UDF kernel
    on ``placeholders`` (a dict in the order of the tensor arguments, absent ones left out), its gradients
    the kernel's gradient kernels."""

    def register(plan) -> _GraphOperator:
        from ..templates.gradients import placeholder_gradients

        def forward(g: Graph, *args) -> torch.Tensor:
            kernel, inputs = plan(g, *args)
            return kernel.evaluate(inputs, want_arg=False)[0]

        def gradients(g: Graph, *args, grad: torch.Tensor, wants: list[bool]) -> list[torch.Tensor | None]:
            kernel, inputs = plan(g, *args)
            tensors = [args[i] for i in operator.tensor_positions]
            names = iter(inputs)
            named = [None if x is None else next(names) for x in tensors]  # each given tensor's placeholder
            wanted = [n for n, w in zip(named, wants, strict=True) if w and n is not None]
            grads = placeholder_gradients(kernel, inputs, grad, None, None, wanted)
            return [grads.get(n) if n else None for n in named]

        forward.__signature__ = inspect.signature(plan)
        forward.__doc__ = plan.__doc__
        operator = _GraphOperator(name, forward, fake, gradients)
        return operator

    return register
