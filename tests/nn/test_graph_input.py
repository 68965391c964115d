import pytest
import torch

import featgraph as fg
import featgraph.graph.graph as graph_module
from featgraph.nn import as_graph
from featgraph.nn.graph_input import split_input
from tests.nn.reference import N, edges


def test_split_input_reads_pyg_bipartite_forms_and_blocks():
    edge_index = torch.stack([torch.tensor([0, 4, 6, 6]), torch.tensor([0, 1, 2, 0])])
    x_src, x_dst = torch.randn(7, 3), torch.randn(3, 2)
    got_src, got_dst, g = split_input((x_src, x_dst), edge_index)
    assert got_src is x_src and got_dst is x_dst and (g.num_src_nodes, g.num_dst_nodes) == (7, 3)
    _, none, g = split_input((x_src, None), edge_index, size=(7, 3))
    assert none is None and g.is_bipartite
    _, prefix, g = split_input(x_src, edge_index, size=(7, 3))  # one tensor: the destinations lead the sources
    assert torch.equal(prefix, x_src[:3]) and (g.num_src_nodes, g.num_dst_nodes) == (7, 3)
    block = fg.Graph.from_edge_index(edge_index, size=(7, 3))
    _, prefix, g = split_input(x_src, block)
    assert g is block and torch.equal(prefix, x_src[:3])
    _, same, g = split_input(x_src, torch.stack([edge_index[0], edge_index[0]]))
    assert same.shape == x_src.shape and not g.is_bipartite


@pytest.mark.parametrize("uses", ["both", "sources only", "destinations only"])
def test_one_tensor_split_into_sources_and_destinations_is_differentiable(uses):
    """The destinations' rows are the sources' first rows: their gradients meet in x's, as the slice's do."""
    edge_index = torch.stack([torch.tensor([0, 4, 6, 6]), torch.tensor([0, 1, 2, 0])])
    block = fg.Graph.from_edge_index(edge_index, size=(7, 3))
    weight_src, weight_dst = torch.randn(7, 2, dtype=torch.float64), torch.randn(3, 2, dtype=torch.float64)

    def loss(x, split):
        x_src, x_dst = split(x)
        terms = {"sources only": [x_src * weight_src], "destinations only": [x_dst * weight_dst]}
        return sum(t.square().sum() for t in terms.get(uses, [x_src * weight_src, x_dst * weight_dst]))

    x = torch.randn(7, 2, dtype=torch.float64, requires_grad=True)
    got = torch.autograd.grad(loss(x, lambda t: split_input(t, block)[:2]), x)[0]
    want = torch.autograd.grad(loss(x, lambda t: (t, t[:3])), x)[0]
    torch.testing.assert_close(got, want)
    assert torch.autograd.gradcheck(lambda t: loss(t, lambda u: split_input(u, block)[:2]), (x,))


@pytest.mark.parametrize(
    ("x", "size", "message"),
    [
        ((torch.randn(7, 3), torch.randn(5, 2)), None, "x_dst: expected 3 rows"),
        ((torch.randn(7, 3), torch.randn(3, 2), torch.randn(1)), None, "a pair"),
        (torch.randn(6, 3), (7, 3), "size=\\(7, 3\\)"),
        ((torch.randn(6, 3), torch.randn(3, 2)), None, "source id 6 out of range"),
    ],
)
def test_split_input_names_what_does_not_fit(x, size, message):
    edge_index = torch.stack([torch.tensor([0, 4, 6, 6]), torch.tensor([0, 1, 2, 0])])
    graph = fg.Graph.from_edge_index(edge_index, size=(7, 3)) if message.startswith("x_dst") else edge_index
    with pytest.raises(ValueError, match=message):
        split_input(x, graph, size)


def test_pyg_edge_index_passed_again_is_compared_by_content():
    """PyG's ``EdgeIndex`` reports data pointer 0; passing the same one twice (every epoch of a training loop) is
    checked by content instead of by memcmp on that pointer, which crashed the process."""
    from torch_geometric import EdgeIndex

    from featgraph.nn import GCNConv

    edge_index = EdgeIndex(edges(), sparse_size=(N, N))
    conv = GCNConv(5, 3)
    x = torch.randn(N, 5)
    first = conv(x, edge_index)
    torch.testing.assert_close(conv(x, edge_index), first)
    torch.testing.assert_close(first, conv(x, edge_index.as_tensor().clone()))


def _pyg_forms(edge_index: torch.Tensor, form: str) -> torch.Tensor:
    """``edge_index`` as PyG gives it: an ``EdgeIndex`` sorted by row or column, unsorted, or undirected and
    sorted by column (its transpose cached), or a torch sparse ``adj_t`` (destinations x sources) in CSR, CSC or
    coalesced COO, without self loops or duplicates (on those PyG's sparse path differs from its edge_index
    path, and featgraph's layers follow the edge_index path)."""
    from torch_geometric import EdgeIndex
    from torch_geometric.utils import to_undirected

    if form == "undirected":
        index = EdgeIndex(to_undirected(edge_index, num_nodes=N), sparse_size=(N, N), is_undirected=True)
        return index.sort_by("col").values.fill_cache_()
    if form in ("row", "col", "unsorted"):
        index = EdgeIndex(edge_index, sparse_size=(N, N))
        return index if form == "unsorted" else index.sort_by(form).values.fill_cache_()
    simple = torch.unique(edge_index[:, edge_index[0] != edge_index[1]], dim=1)
    ones = torch.ones(simple.shape[1], dtype=torch.float64)
    adj_t = torch.sparse_coo_tensor(simple.flip(0), ones, (N, N)).coalesce()
    return {"coo": adj_t, "csr": adj_t.to_sparse_csr(), "csc": adj_t.to_sparse_csc()}[form]


def _layer_pair(name: str) -> tuple[torch.nn.Module, torch.nn.Module, dict]:
    """featgraph's layer ``name`` and PyG's with the same constructor arguments (5 features in), and the
    extra forward arguments."""
    import torch_geometric.nn as pyg_nn

    import featgraph.nn as fgnn

    args, kwargs, extra = (5, 3), {}, {}
    if name in ("GATConv", "GATv2Conv", "TransformerConv"):
        kwargs = {"heads": 2}
    elif name == "SGConv":
        kwargs = {"K": 2}
    elif name in ("APPNP", "AGNNConv"):
        args, kwargs = (), {"K": 3, "alpha": 0.1} if name == "APPNP" else {}
    elif name in ("GINConv", "GINEConv", "EdgeConv"):
        width = 10 if name == "EdgeConv" else 5
        args, kwargs = (), {"edge_dim": 4} if name == "GINEConv" else {}
        layers = [cls(torch.nn.Linear(width, 3), **kwargs) for cls in (getattr(fgnn, name), getattr(pyg_nn, name))]
        return *layers, {"edge_attr": None} if name == "GINEConv" else {}
    return getattr(fgnn, name)(*args, **kwargs), getattr(pyg_nn, name)(*args, **kwargs), extra


LAYERS = (
    "GCNConv", "SAGEConv", "GATConv", "GINConv", "AGNNConv", "EdgeConv",
    "GraphConv", "SGConv", "APPNP", "GINEConv", "GATv2Conv", "TransformerConv",
)  # fmt: skip


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta", "ignore:Sparse invariant checks")
@pytest.mark.parametrize("form", ["row", "col", "unsorted", "undirected", "csr", "csc"])
@pytest.mark.parametrize("name", LAYERS)
def test_pyg_graph_forms_run_fused_and_match_pyg(monkeypatch, name, form):
    """Every layer given PyG's ``EdgeIndex`` (any sort order, undirected) or a sparse ``adj_t`` (PyG's
    transposed convention, on a graph that is not symmetric) runs its fused kernels and agrees with PyG's layer
    given the same object (a CSC adj_t as the CSR of the same matrix, and GraphConv's sorted EdgeIndex as a
    plain edge_index: PyG takes neither in float64), and with itself given the plain edge_index in the same
    edge order."""
    from featgraph.nn.pyg_layer import FusedLayer

    if name == "GINEConv" and form in ("csr", "csc"):
        pytest.skip("edge features with a sparse adj_t run PyG's path")
    monkeypatch.setattr(FusedLayer, "fallback", lambda self, reason, *args, **kwargs: pytest.fail(reason))
    graph = _pyg_forms(edges(), form)
    ours, theirs, extra = _layer_pair(name)
    if "edge_attr" in extra:  # in the graph's own edge order
        extra["edge_attr"] = torch.randn(graph.shape[1], 4, dtype=torch.float64)
    pyg_graph = graph.to_sparse_csr() if form == "csc" else graph
    if name == "GraphConv" and form in ("col", "row", "undirected"):
        pyg_graph = graph.as_tensor()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    ours.double(), theirs.double()
    x = torch.randn(N, 5, dtype=torch.float64)
    results = []
    for module, given in ((ours, graph), (theirs, pyg_graph)):
        inp = x.clone().requires_grad_()
        out = module(inp, given, **extra)
        out.backward(torch.ones_like(out))
        results.append((out.detach(), inp.grad, [p.grad for p in module.parameters()]))
    torch.testing.assert_close(results[0], results[1])
    if graph.layout == torch.strided:
        torch.testing.assert_close(ours(x, graph, **extra), ours(x, graph.as_tensor().clone(), **extra))


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta", "ignore:Sparse invariant checks")
@pytest.mark.parametrize(
    ("form", "formats"),
    [("row", ("csr", "csc")), ("col", ("csr", "csc")), ("csr", ("csr",)), ("csc", ("csc",)), ("coo", ("csr",))],
)
def test_sorted_pyg_forms_give_their_formats_without_a_sort(monkeypatch, form, formats):
    """A sorted ``EdgeIndex`` (its transpose cached) or a compressed ``adj_t`` becomes the graph's CSR and CSC
    without grouping the edges again (no sort, no featgraph ``compress``), equal to the formats featgraph builds
    from the same edges."""
    graph = _pyg_forms(edges(), form)
    sorts = []
    for owner, name in ((torch, "sort"), (torch, "argsort"), (graph_module, "compress")):
        original = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *args, _f=original, **kwargs: sorts.append(1) or _f(*args, **kwargs))
    g = as_graph(graph, N)
    built = {name: getattr(g, name)() for name in formats}
    monkeypatch.undo()
    assert not sorts
    src, dst = g.coo()
    reference = fg.Graph(src, dst, N)
    for name, (indptr, indices, edge_ids) in built.items():
        group, other = (dst, src) if name == "csr" else (src, dst)
        assert torch.equal(indptr, getattr(reference, name)().indptr), name
        assert torch.equal(group[edge_ids], torch.repeat_interleave(torch.arange(N), indptr.diff())), name
        assert torch.equal(indices, other[edge_ids]) and torch.equal(
            edge_ids.sort().values, torch.arange(g.num_edges)
        ), name


def test_unsorted_edge_index_is_sorted_by_featgraph(monkeypatch):
    """The control: an unsorted ``EdgeIndex`` has no format to give, so featgraph groups its edges itself."""
    sorts = []
    original = graph_module.compress
    monkeypatch.setattr(graph_module, "compress", lambda *args, **kwargs: sorts.append(1) or original(*args, **kwargs))
    as_graph(_pyg_forms(edges(), "unsorted"), N).csr()
    assert sorts


def test_pyg_edge_index_that_does_not_fit_is_named():
    from torch_geometric import EdgeIndex

    with pytest.raises(ValueError, match=r"edge_index: its sparse_size \(21, 21\) does not match"):
        as_graph(EdgeIndex(edges(), sparse_size=(N + 1, N + 1)), N)
    with pytest.raises(ValueError, match="sort_order='col' that is not sorted"):
        as_graph(EdgeIndex(edges(seed=3), sparse_size=(N, N), sort_order="col"), N)
    for conv in (fg.nn.GCNConv(5, 3), fg.nn.SAGEConv(5, 3)):
        with pytest.raises(ValueError, match=r"edge_index: its sparse_size \(21, 21\) does not match"):
            conv(torch.randn(N, 5), EdgeIndex(edges(), sparse_size=(N + 1, N + 1)))
