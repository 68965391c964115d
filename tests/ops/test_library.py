"""The ``featgraph::`` operators: ``torch.library.opcheck`` (schema, autograd registration, fake tensors, AOT
dispatch with dynamic shapes) on each, their values and gradients against the eager ops (themselves tested
against dense references), and the graph arguments resolved back to the right ``Graph``."""

import pytest
import torch
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from featgraph.graph.graph import GraphRef
from featgraph.ops import library
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
    args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
    result = torch.library.opcheck(op, args)
    assert set(result.values()) == {"SUCCESS"}, result


def args_of(g, loops=False):
    edge_index, num_src, num_dst, _ = library.graph_args(g)
    return edge_index, num_src, num_dst, loops


@pytest.mark.parametrize(
    "op,reduce,shapes",
    [("mul", "sum", ((N, 4), (E, 4))), ("copy_lhs", "mean", ((N, 4), None)), ("add", "max", ((N, 2, 3), (E, 2, 1))),
     ("copy_rhs", "min", (None, (E,)))],
)  # fmt: skip
def test_gspmm_operator(graph, op, reduce, shapes):
    lhs, rhs = (None if s is None else rand(*s) for s in shapes)
    forward = torch.ops.featgraph.gspmm.default
    opcheck(forward, (*args_of(graph), op, reduce, lhs, rhs, "gar"))
    out, arg = forward(*args_of(graph), op, reduce, lhs, rhs, "gar")
    expected = ops.gspmm(graph, op, reduce, lhs, rhs)
    torch.testing.assert_close(out.view_as(expected), expected)
    grad = torch.randn_like(out)
    wants = (lhs is not None, rhs is not None)
    opcheck_gradient_op(
        torch.ops.featgraph.gspmm_backward.default, (*args_of(graph), op, reduce, lhs, rhs, "gar", arg, grad, *wants)
    )
    inputs = [x for x in (lhs, rhs) if x is not None]

    def through_operator(*xs):
        it = iter(xs)
        a, b = (None if x is None else next(it) for x in (lhs, rhs))
        return forward(*args_of(graph), op, reduce, a, b, "gar")[0]

    assert gradcheck(through_operator, inputs)


def test_gspmm_operator_on_a_block_and_a_looped_graph(graph, block):
    x = rand(9, 3)
    opcheck(torch.ops.featgraph.gspmm.default, (*args_of(block), "copy_lhs", "sum", x, None, "gar"))
    out = torch.ops.featgraph.gspmm(*args_of(block), "copy_lhs", "sum", x, None, "gar")[0]
    torch.testing.assert_close(out, ops.gspmm(block, "copy_lhs", "sum", x, None))
    x = rand(N, 3)
    looped = torch.ops.featgraph.gspmm(*args_of(graph, loops=True), "copy_lhs", "sum", x, None, "gar")[0]
    torch.testing.assert_close(looped, ops.gspmm(graph.with_self_loops(), "copy_lhs", "sum", x, None))


@pytest.mark.parametrize(
    "op,targets,shapes", [("dot", ("u", "v"), ((N, 2, 3), (N, 2, 3))), ("mul", ("u", "e"), ((N, 3), (E, 1)))]
)
def test_gsddmm_operator(graph, op, targets, shapes):
    lhs, rhs = (rand(*s) for s in shapes)
    forward = torch.ops.featgraph.gsddmm.default
    opcheck(forward, (*args_of(graph), op, lhs, rhs, *targets))
    out = forward(*args_of(graph), op, lhs, rhs, *targets)
    torch.testing.assert_close(out, ops.gsddmm(graph, op, lhs, rhs, *targets))
    opcheck_gradient_op(torch.ops.featgraph.gsddmm_backward.default,
            (*args_of(graph), op, lhs, rhs, *targets, torch.randn_like(out), True, True))  # fmt: skip
    assert gradcheck(lambda a, b: forward(*args_of(graph), op, a, b, *targets), (lhs, rhs))


def test_edge_softmax_operator(graph):
    scores = rand(E, HEADS)
    forward = torch.ops.featgraph.edge_softmax.default
    opcheck(forward, (*args_of(graph), scores))
    out = forward(*args_of(graph), scores)
    torch.testing.assert_close(out, ops.edge_softmax(graph, scores))
    opcheck_gradient_op(
        torch.ops.featgraph.edge_softmax_backward.default, (*args_of(graph), out, torch.randn_like(out))
    )
    assert gradcheck(lambda s: forward(*args_of(graph), s), (scores,))


@pytest.mark.parametrize("relu", [False, True], ids=["dropout", "relu-dropout"])
def test_dropout_operator(relu):
    x, seed = rand(6, 5) - 0.5, torch.tensor([12345])
    opcheck(torch.ops.featgraph.dropout.default, (x, 0.4, seed, relu))
    out = torch.ops.featgraph.dropout(x, 0.4, seed, relu)
    torch.testing.assert_close(out, dropout_with_seed(x, 0.4, 12345, relu))
    assert gradcheck(lambda t: torch.ops.featgraph.dropout(t, 0.4, seed, relu), (x,))
    if relu:
        opcheck_gradient_op(torch.ops.featgraph.relu_dropout_backward.default, (torch.randn_like(out), out, 0.4))


@pytest.mark.parametrize("weighted,loops,fill", [(False, True, 1.0), (True, True, 2.0), (True, False, 1.0)])
def test_gcn_aggregate_operator(graph, weighted, loops, fill):
    x = rand(N, 4)
    weight = (torch.rand(E, dtype=torch.float64) + 0.5).requires_grad_() if weighted else None
    forward = torch.ops.featgraph.gcn_aggregate.default
    opcheck(forward, (*args_of(graph), x, weight, loops, fill))
    out = forward(*args_of(graph), x, weight, loops, fill)
    torch.testing.assert_close(out, ops.gcn_aggregate(graph, x, weight, loops, True, fill))
    opcheck_gradient_op(
        torch.ops.featgraph.gcn_aggregate_backward.default,
        (*args_of(graph), x, weight, loops, fill, torch.randn_like(out), True, weighted),
    )
    inputs = (x, weight) if weighted else (x,)
    assert gradcheck(lambda t, w=None: forward(*args_of(graph), t, w, loops, fill), inputs)


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_gat_attention_operator(graph, p):
    feat, logit_src, logit_dst = rand(N, HEADS, D), rand(N, HEADS), rand(N, HEADS)
    seed = torch.tensor([777])
    forward = torch.ops.featgraph.gat_attention.default
    opcheck(forward, (*args_of(graph, True), logit_src, logit_dst, feat, 0.2, p, seed))
    out, log_total = forward(*args_of(graph, True), logit_src, logit_dst, feat, 0.2, p, seed)
    expected, _ = ops.fused.fused_attention(graph.with_self_loops(), logit_src, logit_dst, feat, 0.2, p, 777)
    torch.testing.assert_close(out, expected)
    opcheck_gradient_op(torch.ops.featgraph.gat_attention_backward.default,
            (*args_of(graph), logit_src, logit_dst, feat, 0.2, p, seed, log_total, torch.randn_like(out)))  # fmt: skip

    def through_operator(a, b, f):
        return forward(*args_of(graph, True), a, b, f, 0.2, p, seed)[0]

    assert gradcheck(through_operator, (logit_src, logit_dst, feat))


def test_resolve_finds_the_graph_that_owns_the_edges(graph, block):
    for g in (graph, block):
        assert library.resolve(*args_of(g)) is g
    assert library.resolve(*args_of(graph, loops=True)) is graph.with_self_loops()
    assert graph.reverse().edge_index.shape == (2, E)  # a derived graph makes its own on first use
    assert library.resolve(*library.graph_args(graph.reverse())) is graph.reverse()


def test_resolve_remembers_a_user_edge_index_and_checks_its_contents():
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    g = library.resolve(edge_index, 3, 3, False)
    assert g is not None and g.edge_index is not edge_index  # the graph keeps its own copy
    assert library.resolve(edge_index, 3, 3, False) is g
    edge_index[1, 0] = 2  # written in place: the contents no longer match, so a new graph is built
    rebuilt = library.resolve(edge_index, 3, 3, False)
    assert rebuilt is not g and rebuilt.coo()[1].tolist() == [2, 2, 0]
    edge_index[0, 0] = 5
    with pytest.raises(ValueError, match="edge_index: node id 5 out of range"):
        library.resolve(edge_index, 3, 3, False)


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
    opcheck_gradient_op(backward.default, (*args_of(g), *args, torch.randn_like(out), [True] * len(tensors)))
    assert gradcheck(lambda *xs: forward(*args_of(g), *xs, *constants), tensors)
