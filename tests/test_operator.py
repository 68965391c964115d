"""The ``featgraph::`` operators: ``torch.library.opcheck`` (schema, autograd registration, fake tensors, AOT
dispatch with dynamic shapes) on each operator and its gradient operator, its gradients checked numerically
through the operator called directly, and the mechanism's own parts (lists of tensors, inputs kept as their
shape alone, outputs kept for the gradient)."""

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from featgraph.graph.graph import GraphRef
from featgraph.operator import graph_args, operator
from featgraph.ops.dropout import dropout_with_seed
from tests.conftest import random_edges

N, E, HEADS, D = 12, 50, 2, 3


@pytest.fixture(scope="module")
def graph():
    return fg.Graph(*random_edges(N, E, seed=20), N)  # a self loop, duplicates, isolated vertices


@pytest.fixture(scope="module")
def block():
    """A bipartite graph: 9 sources, 5 destinations."""
    gen = torch.Generator().manual_seed(3)
    return fg.Graph(torch.randint(0, 9, (30,), generator=gen), torch.randint(0, 5, (30,), generator=gen), (9, 5))


def rand(*shape, grad=True):
    return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)


def opcheck(op, args):
    result = torch.library.opcheck(op, args)
    assert set(result.values()) == {"SUCCESS"}, result


def opcheck_gradient_op(op, args):
    """A gradient operator is differentiated no further: checked on inputs that do not require grad."""
    args = tuple(
        a.detach() if isinstance(a, torch.Tensor) else [x.detach() for x in a] if isinstance(a, list) and a and
        isinstance(a[0], torch.Tensor) else a for a in args
    )  # fmt: skip
    result = torch.library.opcheck(op, args)
    assert set(result.values()) == {"SUCCESS"}, result


def args_of(g, loops=False):
    edge_index, num_src, num_dst, _ = graph_args(g)
    return edge_index, num_src, num_dst, loops


@pytest.mark.parametrize(
    "op,reduce,shapes",
    [("mul", "sum", ((N, 4), (E, 4))), ("copy_lhs", "mean", ((N, 4), None)), ("add", "max", ((N, 2, 3), (E, 2, 1))),
     ("copy_rhs", "min", (None, (E,)))],
)  # fmt: skip
def test_gspmm_operator(graph, op, reduce, shapes):
    lhs, rhs = (None if s is None else rand(*s) for s in shapes)
    forward = torch.ops.featgraph.gspmm.default
    opcheck(forward, (*args_of(graph), op, reduce, lhs, rhs, "gar", False))
    out, arg = forward(*args_of(graph), op, reduce, lhs, rhs, "gar", False)
    expected = ops.gspmm(graph, op, reduce, lhs, rhs)
    torch.testing.assert_close(out, expected)
    wants = [lhs is not None, rhs is not None]
    opcheck_gradient_op(
        torch.ops.featgraph.gspmm_backward.default,
        (*args_of(graph), op, reduce, lhs, rhs, "gar", False, [out, arg], [torch.randn_like(out)], wants),
    )
    inputs = [x for x in (lhs, rhs) if x is not None]

    def through_operator(*xs):
        it = iter(xs)
        a, b = (None if x is None else next(it) for x in (lhs, rhs))
        return forward(*args_of(graph), op, reduce, a, b, "gar", False)[0]

    assert gradcheck(through_operator, inputs)


def test_gspmm_operator_on_a_block_and_a_looped_graph(graph, block):
    x = rand(9, 3)
    opcheck(torch.ops.featgraph.gspmm.default, (*args_of(block), "copy_lhs", "sum", x, None, "gar", False))
    out = torch.ops.featgraph.gspmm(*args_of(block), "copy_lhs", "sum", x, None, "gar", False)[0]
    torch.testing.assert_close(out, ops.gspmm(block, "copy_lhs", "sum", x, None))
    x = rand(N, 3)
    looped = torch.ops.featgraph.gspmm(*args_of(graph, loops=True), "copy_lhs", "sum", x, None, "gar", False)[0]
    torch.testing.assert_close(looped, ops.gspmm(graph.with_self_loops(), "copy_lhs", "sum", x, None))


@pytest.mark.parametrize(
    "op,targets,shapes", [("dot", ("u", "v"), ((N, 2, 3), (N, 2, 3))), ("mul", ("u", "e"), ((N, 3), (E, 1)))]
)
def test_gsddmm_operator(graph, op, targets, shapes):
    lhs, rhs = (rand(*s) for s in shapes)
    forward = torch.ops.featgraph.gsddmm.default
    opcheck(forward, (*args_of(graph), op, lhs, rhs, *targets, False))
    out = forward(*args_of(graph), op, lhs, rhs, *targets, False)
    torch.testing.assert_close(out, ops.gsddmm(graph, op, lhs, rhs, *targets))
    opcheck_gradient_op(torch.ops.featgraph.gsddmm_backward.default,
            (*args_of(graph), op, lhs, rhs, *targets, False, [out], [torch.randn_like(out)], [True, True]))  # fmt: skip
    assert gradcheck(lambda a, b: forward(*args_of(graph), op, a, b, *targets, False), (lhs, rhs))


def test_edge_softmax_operator(graph):
    scores = rand(E, HEADS)
    forward = torch.ops.featgraph.edge_softmax.default
    opcheck(forward, (*args_of(graph), scores))
    out = forward(*args_of(graph), scores)
    torch.testing.assert_close(out, ops.edge_softmax(graph, scores))
    opcheck_gradient_op(
        torch.ops.featgraph.edge_softmax_backward.default,
        (*args_of(graph), scores, [out], [torch.randn_like(out)], [True]),
    )
    assert gradcheck(lambda s: forward(*args_of(graph), s), (scores,))


@pytest.mark.parametrize("relu", [False, True], ids=["dropout", "relu-dropout"])
def test_dropout_operator(relu):
    x, seed = rand(6, 5) - 0.5, torch.tensor([12345])
    opcheck(torch.ops.featgraph.dropout.default, (x, 0.4, seed, relu))
    out = torch.ops.featgraph.dropout(x, 0.4, seed, relu)
    torch.testing.assert_close(out, dropout_with_seed(x, 0.4, 12345, relu))
    assert gradcheck(lambda t: torch.ops.featgraph.dropout(t, 0.4, seed, relu), (x,))
    backward_args = (x, 0.4, seed, relu, [out], [torch.randn_like(out)], [True, False])
    opcheck_gradient_op(torch.ops.featgraph.dropout_backward.default, backward_args)


@pytest.mark.parametrize("weighted,loops,fill", [(False, True, 1.0), (True, True, 2.0), (True, False, 1.0)])
def test_gcn_aggregate_operator(graph, weighted, loops, fill):
    x = rand(N, 4)
    weight = (torch.rand(E, dtype=torch.float64) + 0.5).requires_grad_() if weighted else None
    forward = torch.ops.featgraph.gcn_aggregate.default
    opcheck(forward, (*args_of(graph), x, weight, loops, fill, False))
    out = forward(*args_of(graph), x, weight, loops, fill, False)
    torch.testing.assert_close(out, ops.gcn_aggregate(graph, x, weight, loops, True, fill))
    opcheck_gradient_op(
        torch.ops.featgraph.gcn_aggregate_backward.default,
        (*args_of(graph), x, weight, loops, fill, False, [out], [torch.randn_like(out)], [True, weighted]),
    )
    inputs = (x, weight) if weighted else (x,)
    assert gradcheck(lambda t, w=None: forward(*args_of(graph), t, w, loops, fill, False), inputs)


@pytest.mark.parametrize("p", [0.0, 0.3])
@pytest.mark.parametrize("on", ["graph", "block"])
def test_gat_attention_operator(graph, block, p, on):
    g = graph if on == "graph" else block
    feat, attn_src, attn_dst = rand(g.num_src_nodes, HEADS, D), rand(HEADS, D), rand(HEADS, D)
    feat_dst = rand(g.num_dst_nodes, HEADS, D) if on == "block" else None
    seed = torch.tensor([777])
    forward = torch.ops.featgraph.gat_attention.default
    args = (feat, feat_dst, attn_src, attn_dst, 0.2, p, seed)
    opcheck(forward, (*args_of(g, True), *args))
    out, log_total = forward(*args_of(g, True), *args)
    torch.manual_seed(0)
    expected = ops.gat_attention(g.with_self_loops(), feat, attn_src, attn_dst, 0.2, p, p > 0, feat_dst=feat_dst)
    if p == 0:
        torch.testing.assert_close(out, expected)
    wants = [True, on == "block", True, True, False]
    backward_args = (*args_of(g, True), *args, [out, log_total], [torch.randn_like(out)], wants)
    opcheck_gradient_op(torch.ops.featgraph.gat_attention_backward.default, backward_args)

    def through_operator(*tensors):
        f, a_src, a_dst, *rest = tensors
        return forward(*args_of(g, True), f, rest[0] if rest else None, a_src, a_dst, 0.2, p, seed)[0]

    tensors = (feat, attn_src, attn_dst) + ((feat_dst,) if feat_dst is not None else ())
    assert gradcheck(through_operator, tensors)


def test_graph_ref_carries_counts_and_loops(graph, block):
    ref = block.ref()
    assert isinstance(ref, GraphRef) and ref.num_edges == 30 and ref.is_bipartite
    assert (ref.num_src_nodes, ref.num_dst_nodes) == (9, 5)
    looped = graph.ref().with_self_loops()
    assert looped.self_loops and looped.num_nodes == N
    assert looped.num_edges is None  # known when an operator adds the loops
    with pytest.raises(ValueError, match="fill_weight"):
        graph.ref().with_self_loops(2.0)


def test_in_degrees_operator(graph, block):
    for g, loops in ((graph, False), (graph, True), (block, False)):
        opcheck(torch.ops.featgraph.in_degrees.default, args_of(g, loops))
        expected = (graph.with_self_loops() if loops else g).in_degrees()
        assert torch.equal(torch.ops.featgraph.in_degrees(*args_of(g, loops)), expected)


K = 4  # edge features


def attention_cases(g):
    """Per fused attention operator: its arguments after the graph's on ``g`` (float64, requiring grad) and
    the public function giving the same value from them."""
    from featgraph.ops import attention

    src, dst, edges = g.num_src_nodes, g.num_dst_nodes, g.num_edges
    return {
        "gatv2_scores": (
            (rand(src, HEADS, D), rand(dst, HEADS, D), rand(HEADS, D), rand(edges, HEADS, D), 0.2),
            lambda a, b, att, ef, slope: attention.gatv2_scores(g, a, b, att, slope, ef),
        ),
        "dot_scores": (
            (rand(dst, HEADS, D), rand(src, HEADS, D), rand(dst, HEADS, K), rand(edges, K), 0.5),
            lambda q, k, qe, ea, scale: attention.dot_scores(g, q, k, scale, qe, ea),
        ),
        "weighted_edge_sum": (
            (rand(edges, HEADS), rand(edges, K)),
            lambda w, ea: attention.weighted_edge_sum(g, w, ea),
        ),
        "relu_edge_sum": ((rand(src, D), rand(edges, D)), lambda x, ea: attention.relu_edge_sum(g, x, ea)),
        "projected_relu_edge_sum": (
            (rand(src, D), rand(edges, K), rand(D, K), rand(D)),
            lambda x, ea, w, b: attention.relu_edge_sum(g, x, ea, w, b),
        ),
    }


@pytest.mark.parametrize("name", list(attention_cases(fg.Graph([0], [0], 1))))
@pytest.mark.parametrize("on", ["graph", "block"])
def test_attention_operators(graph, block, name, on):
    """Each fused attention op of ``ops.attention`` is a registered operator: opcheck on it and its gradient
    operator, its value that of the eager function, its gradients checked numerically through it."""
    g = graph if on == "graph" else block
    args, eager = attention_cases(g)[name]
    forward, backward = getattr(torch.ops.featgraph, name).default, getattr(torch.ops.featgraph, name + "_backward")
    opcheck(forward, (*args_of(g), *args))
    out = forward(*args_of(g), *args)
    torch.testing.assert_close(out, eager(*args))
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    constants = args[len(tensors) :]
    wants = [True] * len(tensors)
    opcheck_gradient_op(backward.default, (*args_of(g), *args, [out], [torch.randn_like(out)], wants))
    assert gradcheck(lambda *xs: forward(*args_of(g), *xs, *constants), tensors)


def _scaled_sum_gradient(xs, scale, *, outputs, grads, wants):
    assert all(x.stride() == (0, 0) for x in xs)  # kept as their shape alone: the gradient reads no input
    assert outputs == [None]
    return [grads[0] * scale if want else None for want in wants]


@operator(
    "test_scaled_sum", lambda xs, scale: xs[0].new_empty(xs[0].shape), _scaled_sum_gradient,
    saves=lambda args, wants: [False] * len(args[0]),
)  # fmt: skip
def _scaled_sum(xs: list[torch.Tensor], scale: float) -> torch.Tensor:
    """A toy operator on a list of tensors."""
    return torch.stack(xs).sum(0) * scale


def test_an_operator_on_a_list_of_tensors_differentiates_each_and_keeps_only_shapes():
    xs = [rand(3, 2), rand(3, 2, grad=False), rand(3, 2)]
    opcheck(_scaled_sum.default, (xs, 1.5))
    torch.testing.assert_close(_scaled_sum(xs, 1.5), (xs[0] + xs[1] + xs[2]) * 1.5)
    assert gradcheck(lambda a, b: _scaled_sum([a, xs[1], b], 1.5), (xs[0], xs[2]))
    grads = torch.autograd.grad(_scaled_sum(xs, 2.0).sum(), [xs[0], xs[2]])
    assert all(torch.equal(g, torch.full((3, 2), 2.0, dtype=torch.float64)) for g in grads)


def test_an_operator_without_inputs_needing_grad_runs_below_autograd(graph):
    x = rand(N, 3, grad=False)
    out = ops.gspmm(graph, "copy_lhs", "sum", x, None)
    assert out.grad_fn is None and not out.requires_grad
