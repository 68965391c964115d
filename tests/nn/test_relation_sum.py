"""relation_sum against dense per-relation layers: both orders of weight and aggregation, merged and separate
root products, relations without a root, empty relations, float64 gradcheck, and named errors."""

import copy

import pytest
import torch

import featgraph as fg
from featgraph.nn.relation_sum import RelationTerm, relation_sum, sum_of_relation_parts, sum_of_relations

N_DST = 11


def relation(n_src, e, seed, n_dst=N_DST):
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n_src, (e,), generator=gen), torch.randint(0, n_dst - 1, (e,), generator=gen)
    return fg.Graph(src, dst, (n_src, n_dst))


def dense(g, x, reduce):
    """Dense reference of sum/mean/max over in-edges (0 where a vertex has none)."""
    src, dst = g.coo()
    out = torch.zeros(g.num_dst_nodes, x.shape[1], dtype=x.dtype)
    if reduce == "max":
        out = out.index_reduce(0, dst, x[src], "amax", include_self=False)
        return out
    out = out.index_add(0, dst, x[src])
    if reduce == "mean":
        out = out / torch.bincount(dst, minlength=g.num_dst_nodes).clamp(min=1).unsqueeze(1).to(x.dtype)
    return out


def linear(i, o, bias=True, dtype=torch.float64):
    return torch.nn.Linear(i, o, bias=bias, dtype=dtype)


def reference(terms):
    out = 0
    for t in terms:
        out = out + t.lin(dense(t.graph, t.x_src, t.reduce))
        if t.root is not None:
            out = out + t.root(t.x_dst)
    return out


def make_terms(dtype=torch.float64):
    torch.manual_seed(0)
    x = lambda n, d: torch.randn(n, d, dtype=dtype)  # noqa: E731
    x_dst = torch.randn(N_DST, 5, dtype=dtype)
    other_dst = torch.randn(N_DST, 3, dtype=dtype)
    return [
        # wide input, narrow output on a square-ish relation: the weight goes first
        RelationTerm("sum", x(9, 40), relation(9, 30, 1), linear(40, 4), x_dst, linear(5, 4, False)),
        # narrow input: aggregated first, then into the one product
        RelationTerm("mean", x(30, 3), relation(30, 60, 2), linear(3, 4), x_dst, linear(5, 4, False)),
        RelationTerm("max", x(7, 6), relation(7, 20, 3), linear(6, 4, False)),  # no root
        RelationTerm("sum", x(4, 2), relation(4, 0, 4), linear(2, 4)),  # empty relation
        RelationTerm("mean", x(6, 3), relation(6, 9, 5), linear(3, 4), other_dst, linear(3, 4)),
    ]  # fmt: skip


def test_matches_the_dense_layers_and_their_gradients():
    terms = make_terms()
    torch.testing.assert_close(relation_sum(terms), reference(terms))
    leaves = [t.x_src.requires_grad_() for t in terms] + [terms[0].x_dst.requires_grad_()]
    params = [p for t in terms for m in (t.lin, t.root) if m is not None for p in m.parameters()]
    ours = torch.autograd.grad(relation_sum(terms).square().sum(), leaves + params)
    theirs = torch.autograd.grad(reference(terms).square().sum(), leaves + params)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)


def test_gradcheck_in_float64():
    terms = make_terms()
    xs = [t.x_src.requires_grad_() for t in terms]

    def run(*inputs):
        for t, x in zip(terms, inputs, strict=True):
            t.x_src = x
        return relation_sum(terms)

    assert torch.autograd.gradcheck(run, tuple(xs))


def test_terms_of_one_order_only():
    terms = make_terms()
    first = [terms[0]]  # only a weight-first relation with its root
    torch.testing.assert_close(relation_sum(first), reference(first))
    no_root = [RelationTerm(t.reduce, t.x_src, t.graph, t.lin) for t in terms[:1]]  # the addend alone
    torch.testing.assert_close(relation_sum(no_root), reference(no_root))
    unbiased = [RelationTerm("max", terms[2].x_src, terms[2].graph, terms[2].lin)]  # one product, no bias
    torch.testing.assert_close(relation_sum(unbiased), reference(unbiased))


def test_sum_of_relations_runs_other_layers_forward():
    pyg_nn = pytest.importorskip("torch_geometric.nn")
    from featgraph.nn import GraphConv, SAGEConv

    torch.manual_seed(0)
    x_a, x_b = torch.randn(8, 3), torch.randn(N_DST, 4)
    g = relation(8, 25, 6)
    edge_index = torch.stack(g.coo())
    layers = [SAGEConv((3, 4), 5), GraphConv((3, 4), 5), pyg_nn.GATConv((3, 4), 5, add_self_loops=False)]
    calls = [((x_a, x_b), edge_index)] * 3
    want = sum(layer(*call) for layer, call in zip(layers, calls, strict=True))
    torch.testing.assert_close(sum_of_relations(layers, calls), want, atol=1e-5, rtol=1e-4)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="terms: expected at least one relation"):
        relation_sum([])
    with pytest.raises(ValueError, match="calls: expected one"):
        sum_of_relations([torch.nn.Identity()], [])
    with pytest.raises(ValueError, match="convs: expected at least one layer"):
        sum_of_relations([], [])
    with pytest.raises(ValueError, match="parts: expected at least one relation"):
        sum_of_relation_parts([])


@pytest.mark.parametrize("n_dst", [60, N_DST], ids=["sparse", "dense"])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
def test_sparse_relations_of_one_reducer_are_one_relational_aggregation(reduce, n_dst, monkeypatch):
    """Sum and mean relations of one source width (two reading the same source tensor, one empty, one with
    duplicate edges) are one ``relational_aggregate`` over their edges stacked where their (relation,
    destination) pairs are at most half of relations x destinations (its graph built once while their graphs
    live), else each aggregates into the one dense product, as max relations do; all match the dense layers,
    forward and backward."""
    from featgraph.nn import relation_sum as module

    torch.manual_seed(1)
    shared, other = torch.randn(9, 6, dtype=torch.float64), torch.randn(5, 6, dtype=torch.float64)
    dup = relation(5, 12, 8, n_dst)
    dup = fg.Graph(torch.cat([dup.coo()[0]] * 2), torch.cat([dup.coo()[1]] * 2), (5, n_dst))
    x_dst = torch.randn(n_dst, 3, dtype=torch.float64)
    terms = [
        RelationTerm(reduce, shared, relation(9, 30, 1, n_dst), linear(6, 4), x_dst, linear(3, 4, False)),
        RelationTerm(reduce, other, dup, linear(6, 4, False)),
        RelationTerm(reduce, shared, relation(9, 17, 2, n_dst), linear(6, 4), x_dst, linear(3, 4)),
        RelationTerm(reduce, other, relation(5, 0, 3, n_dst), linear(6, 4)),
    ]
    calls = []
    real = module.relational_aggregate
    monkeypatch.setattr(module, "relational_aggregate", lambda *a, **k: calls.append(a) or real(*a, **k))
    leaves = [shared.requires_grad_(), other.requires_grad_(), x_dst.requires_grad_()]
    params = [p for t in terms for m in (t.lin, t.root) if m is not None for p in m.parameters()]
    got = relation_sum(terms)
    want = reference(terms)
    torch.testing.assert_close(got, want)
    ours = torch.autograd.grad(got.square().sum(), leaves + params)
    theirs = torch.autograd.grad(want.square().sum(), leaves + params)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, b)
    if reduce == "max" or n_dst == N_DST:
        assert not calls
        return
    (graph, x, weight, etype, how) = calls[0]
    assert (graph.num_src_nodes, graph.num_dst_nodes, x.shape[0], how) == (14, n_dst, 14, reduce)
    assert weight.shape == (4, 6, 4) and torch.bincount(etype, minlength=4).tolist() == [30, 24, 17, 0]
    relation_sum(terms)
    assert calls[1][0] is graph  # the stacked graph is kept while the relation graphs live
    terms[0] = RelationTerm(reduce, shared, relation(9, 30, 1, n_dst), terms[0].lin)
    relation_sum(terms)
    assert calls[2][0] is not graph


def test_the_relational_path_on_the_gpu_target(gpu):
    """Sparse relations' one relational aggregation through the GPU target (CUDA, or Triton's interpreter):
    the dense layers' outputs and gradients."""
    torch.manual_seed(2)
    shared, other = torch.randn(9, 6), torch.randn(5, 6)
    x_dst = torch.randn(60, 3)
    terms = [
        RelationTerm("mean", shared, relation(9, 30, 1, 60), linear(6, 4, dtype=torch.float32), x_dst,
                     linear(3, 4, False, dtype=torch.float32)),
        RelationTerm("mean", other, relation(5, 12, 8, 60), linear(6, 4, dtype=torch.float32)),
        RelationTerm("mean", shared, relation(9, 17, 2, 60), linear(6, 4, dtype=torch.float32)),
    ]  # fmt: skip
    want = reference(terms)
    on_gpu = [
        RelationTerm(t.reduce, t.x_src.to(gpu).requires_grad_(), t.graph.to(gpu), copy.deepcopy(t.lin).to(gpu),
                     None if t.x_dst is None else t.x_dst.to(gpu),
                     None if t.root is None else copy.deepcopy(t.root).to(gpu))
        for t in terms
    ]  # fmt: skip
    on_gpu[2].x_src = on_gpu[0].x_src  # the same source tensor, as in a typed model
    with fg.default_target("gpu"):
        got = relation_sum(on_gpu)
    torch.testing.assert_close(got.cpu(), want.detach(), rtol=1e-4, atol=1e-5)
    leaves = [on_gpu[0].x_src, on_gpu[1].x_src]
    grads = torch.autograd.grad(got.square().sum(), leaves)
    ref_leaves = [shared.requires_grad_(), other.requires_grad_()]
    terms[2].x_src = shared
    expected = torch.autograd.grad(reference(terms).square().sum(), ref_leaves)
    for a, b in zip(grads, expected, strict=True):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-4, atol=1e-5)
