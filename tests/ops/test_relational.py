import itertools

import pytest
import torch

import featgraph as fg
from featgraph.ops import relational_aggregate
from featgraph.ops.relational import STRATEGIES, choose, costs, plan

WAYS = [s for s in STRATEGIES if s != "auto"]


def dense_reference(src, dst, etype, x, weight, num_dst, reduce="sum", edge_weight=None):
    """Per relation a dense adjacency (duplicates counted, weights summed), mean rows divided by their edge
    count, then ``A_r @ x @ W_r``: the definition, relation by relation."""
    out = torch.zeros(num_dst, weight.shape[2], dtype=x.dtype)
    values = torch.ones(src.numel(), dtype=x.dtype) if edge_weight is None else edge_weight
    for r in range(weight.shape[0]):
        mask = etype == r
        adjacency = torch.zeros(num_dst, x.shape[0], dtype=x.dtype)
        adjacency.index_put_((dst[mask], src[mask]), values[mask], accumulate=True)
        if reduce == "mean":
            counts = torch.bincount(dst[mask], minlength=num_dst).to(x.dtype).clamp(min=1)
            adjacency = adjacency / counts[:, None]
        out = out + adjacency @ x @ weight[r]
    return out


def typed_graph():
    """Two bipartite relations, a self-looped relation with duplicates, an empty relation, isolated nodes."""
    edges = {
        ("user", "rates", "item"): torch.tensor([[0, 0, 1, 4, 4, 4], [0, 2, 2, 1, 1, 3]]),
        ("item", "rated_by", "user"): torch.tensor([[0, 2, 2, 1], [0, 0, 1, 4]]),
        ("user", "follows", "user"): torch.tensor([[0, 1, 1, 1, 3], [0, 1, 2, 2, 0]]),
        ("item", "similar", "item"): torch.zeros(2, 0, dtype=torch.int64),
    }
    return fg.HeteroGraph(edges, {"user": 6, "item": 5})  # user 5 and item 4 isolated


@pytest.mark.parametrize(("strategy", "reduce"), list(itertools.product(WAYS, ["sum", "mean"])))
def test_every_way_matches_the_per_relation_definition_with_gradients(strategy, reduce):
    hg = typed_graph()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(hg.num_nodes, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(hg.num_relations, 7, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    src, dst = hg.graph.coo()
    got = relational_aggregate(hg, x, weight, reduce=reduce, strategy=strategy)
    want = dense_reference(src, dst, hg.etype, x, weight, hg.num_nodes, reduce)
    torch.testing.assert_close(got, want)
    grad = torch.randn(got.shape, generator=gen, dtype=torch.float64)
    got_grads = torch.autograd.grad(got, (x, weight), grad)
    want_grads = torch.autograd.grad(want, (x, weight), grad)
    for a, b in zip(got_grads, want_grads, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(
        lambda x, w: relational_aggregate(hg, x, w, reduce=reduce, strategy=strategy), (x, weight)
    )


@pytest.mark.parametrize("strategy", WAYS)
def test_bipartite_graph_with_edge_weights_in_float32(strategy):
    gen = torch.Generator().manual_seed(2)
    num_src, num_dst, edges, relations = 40, 17, 300, 5
    src, dst = torch.randint(0, num_src, (edges,), generator=gen), torch.randint(0, num_dst, (edges,), generator=gen)
    etype = torch.randint(0, relations - 1, (edges,), generator=gen)  # the last relation has no edge
    g = fg.Graph(src, dst, (num_src, num_dst))
    x = torch.randn(num_src, 33, generator=gen)
    weight = torch.randn(relations, 33, 9, generator=gen)
    edge_weight = torch.rand(edges, generator=gen)
    for reduce in ("sum", "mean"):
        got = relational_aggregate(g, x, weight, etype, reduce, edge_weight, strategy)
        want = dense_reference(src, dst, etype, x, weight, num_dst, reduce, edge_weight)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_auto_takes_the_cheaper_way_and_the_plan_is_kept():
    gen = torch.Generator().manual_seed(3)
    src, dst = torch.randint(0, 50, (400,), generator=gen), torch.randint(0, 50, (400,), generator=gen)
    etype = torch.randint(0, 3, (400,), generator=gen)
    g = fg.Graph(src, dst, 50)
    pairs = plan(g, etype, 3)
    assert plan(g, etype, 3) is pairs
    assert plan(g, etype.flip(0), 3) is not pairs
    pairs = plan(g, etype, 3)
    weight = torch.zeros(3, 64, 16)
    cost = costs(g, pairs, weight)
    assert choose(g, pairs, weight, "auto") == min(("transform_first", "aggregate_first"), key=cost.__getitem__)
    assert pairs.sources.count == torch.unique(etype * 50 + src).numel()
    assert sum(pairs.sources.lengths) == pairs.sources.count
    assert choose(g, pairs, weight, "fused") == "fused"
    assert costs(g, pairs, torch.zeros(3, 4, 16, 4))["transform_first"] == pairs.sources.count * 256 + 400 * 16


def test_no_edges_gives_zeros():
    g = fg.Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), 4)
    x = torch.randn(4, 3, requires_grad=True)
    weight = torch.randn(2, 3, 2, requires_grad=True)
    for strategy in WAYS:
        out = relational_aggregate(g, x, weight, torch.zeros(0, dtype=torch.int64), "mean", strategy=strategy)
        assert torch.equal(out, torch.zeros(4, 2))
        out.sum().backward()
        assert torch.equal(x.grad, torch.zeros(4, 3)) and torch.equal(weight.grad, torch.zeros(2, 3, 2))
        x.grad = weight.grad = None


def test_the_callers_tensors_are_left_alone():
    hg = typed_graph()
    x = torch.randn(hg.num_nodes, 4)
    weight = torch.randn(4, 4, 3)
    etype = hg.etype.clone()
    copies = (x.clone(), weight.clone())
    for strategy in WAYS:
        relational_aggregate(hg.graph, x, weight, etype, "mean", strategy=strategy)
    assert torch.equal(x, copies[0]) and torch.equal(weight, copies[1]) and torch.equal(etype, hg.etype)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"etype": None}, ValueError, "etype: a Graph needs"),
        ({"etype": torch.zeros(3, dtype=torch.int64)}, ValueError, "etype: expected 15 entries"),
        ({"etype": torch.full((15,), 4)}, IndexError, r"etype: relation ids must lie in \[0, 4\)"),
        ({"etype": torch.zeros(15)}, TypeError, "etype: expected a 1-D integer"),
        ({"reduce": "max"}, ValueError, "reduce must be one of"),
        ({"strategy": "fast"}, ValueError, "strategy must be one of"),
        ({"x": torch.randn(5, 4)}, ValueError, "x: expected 11 rows"),
        ({"weight": torch.randn(4, 5, 3)}, ValueError, "weight: x has 4 columns"),
        ({"weight": torch.randn(4, 4, 3, dtype=torch.float64)}, TypeError, "weight: expected torch.float32"),
        ({"edge_weight": torch.rand(15, requires_grad=True)}, ValueError, "edge_weight: .* requires grad"),
        ({"edge_weight": torch.rand(14)}, ValueError, "edge_weight: expected 15 rows"),
    ],
)  # fmt: skip
def test_bad_arguments_are_named(kwargs, error, match):
    hg = typed_graph()
    args = {"x": torch.randn(hg.num_nodes, 4), "weight": torch.randn(4, 4, 3), "etype": hg.etype, **kwargs}
    with pytest.raises(error, match=match):
        relational_aggregate(hg.graph, **args)


def test_a_typed_graph_brings_its_own_edge_types():
    hg = typed_graph()
    with pytest.raises(ValueError, match="etype: a HeteroGraph carries its own"):
        relational_aggregate(hg, torch.randn(hg.num_nodes, 4), torch.randn(4, 4, 3), hg.etype)


@pytest.mark.parametrize("strategy", WAYS)
def test_the_operator_passes_opcheck(strategy):
    from featgraph.operator import graph_args

    hg = typed_graph()
    x = torch.randn(hg.num_nodes, 3, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(4, 3, 2, dtype=torch.float64, requires_grad=True)
    args = (*graph_args(hg.graph), x, weight, hg.etype, None, 4, "mean", strategy)
    result = torch.library.opcheck(torch.ops.featgraph.relational_aggregate.default, args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_compiled_graphs_call_the_operator_whole():
    hg = typed_graph()
    x = torch.randn(hg.num_nodes, 3, requires_grad=True)
    weight = torch.randn(4, 3, 2, requires_grad=True)
    etype = hg.etype
    compiled = torch.compile(lambda x, w: relational_aggregate(hg.graph, x, w, etype, "mean"), fullgraph=True,
                             backend="eager")  # fmt: skip
    torch.testing.assert_close(compiled(x, weight), relational_aggregate(hg.graph, x, weight, etype, "mean"))


@pytest.mark.parametrize(("strategy", "reduce"), list(itertools.product(WAYS, ["sum", "mean"])))
def test_block_diagonal_weights_are_their_full_matrices(strategy, reduce):
    hg = typed_graph()
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(hg.num_nodes, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    blocks = torch.randn(hg.num_relations, 3, 2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    full = torch.zeros(hg.num_relations, 6, 9, dtype=torch.float64)
    for b in range(3):
        full[:, 2 * b : 2 * b + 2, 3 * b : 3 * b + 3] = blocks[:, b]
    got = relational_aggregate(hg, x, blocks, reduce=reduce, strategy=strategy)
    src, dst = hg.graph.coo()
    want = dense_reference(src, dst, hg.etype, x, full, hg.num_nodes, reduce)
    torch.testing.assert_close(got, want)
    grad = torch.randn(got.shape, generator=gen, dtype=torch.float64)
    for a, b in zip(torch.autograd.grad(got, (x, blocks), grad), torch.autograd.grad(want, (x, blocks), grad),
                    strict=True):  # fmt: skip
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(
        lambda x, w: relational_aggregate(hg, x, w, reduce=reduce, strategy=strategy), (x, blocks)
    )
    with pytest.raises(ValueError, match="weight: x has 6 columns"):
        relational_aggregate(hg, x, blocks[:, :, :1], reduce=reduce, strategy=strategy)


@pytest.mark.parametrize("reduce", ["sum", "mean"])
@pytest.mark.parametrize("shape", [(0, 4, 6), (0, 2, 2, 3)])
def test_a_typed_graph_with_no_edge_types_gives_the_sum_over_no_relations(reduce, shape):
    """No relations (a weight of 0 relations, so no edges): zeros of (destinations, out) by every way, the
    definition's empty sum, with zero gradients of x's and weight's shapes."""
    hg = fg.HeteroGraph({}, {"user": 3, "item": 2})
    g = fg.Graph(torch.zeros(0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64), (5, 4))
    none = torch.zeros(0, dtype=torch.int64)
    for graph, etype, num_dst in ((hg, None, 5), (g, none, 4)):
        for strategy in STRATEGIES:
            x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
            weight = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
            out = relational_aggregate(graph, x, weight, etype, reduce, strategy=strategy)
            expected = dense_reference(none, none, none, x, weight.reshape(0, 4, 6), num_dst, reduce)
            assert out.shape == (num_dst, 6) and torch.equal(out, expected)
            (out * torch.randn_like(out)).sum().backward()
            assert torch.equal(x.grad, torch.zeros_like(x)) and torch.equal(weight.grad, torch.zeros_like(weight))
            f = lambda a, w: relational_aggregate(graph, a, w, etype, reduce, strategy=strategy)  # noqa: B023, E731
            assert torch.autograd.gradcheck(f, (x, weight))
