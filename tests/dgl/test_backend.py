"""DGL routed to featgraph (``featgraph.dgl.use``) against DGL's own kernels: the same graphs and tensors give the
same results and gradients, featgraph's kernels really run, and ``unuse`` restores DGL exactly."""

from __future__ import annotations

import copy
import gc
import weakref
from collections.abc import Callable, Sequence

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import featgraph
import featgraph.dgl as fdgl
from featgraph.dgl import graphs, routing
from featgraph.graph.interop import import_dgl
from tests.conftest import random_edges

dgl = import_dgl()
pytestmark = pytest.mark.skipif(dgl is None, reason="DGL is not installed")
if dgl is not None:
    import dgl.function as fn
    import dgl.nn.pytorch as dglnn

N, E = 12, 60
Run = Callable[[], tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]]]


@pytest.fixture(autouse=True)
def _routing_off():
    """Every test starts and ends with DGL's own kernels and zeroed counts."""
    fdgl.unuse()
    fdgl.reset_calls()
    yield
    fdgl.unuse()


def random_graph(num_nodes: int = N, num_edges: int = E, seed: int = 0) -> dgl.DGLGraph:
    """Isolated nodes, duplicate edges and a self loop (``random_edges``)."""
    src, dst = random_edges(num_nodes, num_edges, seed)
    return dgl.graph((src, dst), num_nodes=num_nodes)


def block() -> dgl.DGLGraph:
    """A bipartite block: 5 destinations, their in-neighbours as extra sources."""
    return to_block(random_graph(seed=1), torch.arange(5))


def to_block(g: dgl.DGLGraph, seeds: torch.Tensor) -> dgl.DGLGraph:
    """The block of ``seeds``' in-edges (as a sampler's frontier becomes one)."""
    return dgl.to_block(dgl.in_subgraph(g, seeds), seeds)


GRAPHS: dict[str, Callable[[], dgl.DGLGraph]] = {
    "random": random_graph,
    "int32": lambda: random_graph(seed=2).int(),
    "no-edges": lambda: dgl.graph(([], []), num_nodes=4),
    "block": block,
}


def _evaluate(run: Run, gradients: bool = True) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """The outputs and the leaves' gradients for a fixed cotangent (0 where DGL leaves +-inf)."""
    outs, leaves = run()
    if not gradients:
        return [o.detach() for o in outs], []
    gen = torch.Generator().manual_seed(7)
    cotangents = [torch.randn(o.shape, generator=gen, dtype=o.dtype).where(o.isfinite(), 0) for o in outs]
    grads = torch.autograd.grad(outs, leaves, cotangents, allow_unused=True)
    return [o.detach() for o in outs], list(grads)


def compare(
    run: Run, gradients: bool = True, reference: Run | None = None, **tolerance: float
) -> dict[str, dict[str, int]]:
    """``run`` on DGL's kernels (or ``reference``, the same leaves and outputs computed without them), then
    ``run`` routed to featgraph: outputs and (unless not ``gradients``) gradients agree. Returns who served."""
    want = _evaluate(reference or run, gradients)
    fdgl.reset_calls()
    with fdgl.use():
        got = _evaluate(run, gradients)
    for ours, theirs in zip([*got[0], *got[1]], [*want[0], *want[1]], strict=True):
        if theirs is None:
            assert ours is None or not ours.any()
        else:
            torch.testing.assert_close(ours, theirs, equal_nan=True, **tolerance)
    return fdgl.calls()


def served(counts: dict[str, dict[str, int]], entry: str) -> int:
    return counts.get(entry, {}).get("featgraph", 0)


def leaf(*shape: int, seed: int, dtype: torch.dtype = torch.float64, positive: bool = False) -> torch.Tensor:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)
    return (x.abs() + 0.5 if positive else x).requires_grad_()


def _message(name: str) -> object:
    """DGL's builtin message ``name`` reading ``h`` on the nodes and ``w`` on the edges into ``m``."""
    if name in ("copy_u", "copy_e"):
        return getattr(fn, name)("h" if name == "copy_u" else "w", "m")
    return getattr(fn, name)("h", "w", "m")


# ---- message passing with builtins -------------------------------------------------------------------------
SPMM_CASES = [
    ("copy_u", "sum"), ("copy_u", "max"), ("copy_u", "min"), ("copy_u", "mean"), ("u_mul_e", "sum"),
    ("u_mul_e", "max"), ("u_add_e", "min"), ("u_sub_e", "sum"), ("u_div_e", "mean"), ("copy_e", "sum"),
    ("copy_e", "max"),
]  # fmt: skip


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize(("message", "reduce"), SPMM_CASES, ids=lambda c: c)
def test_update_all_builtins(name, message, reduce):
    g = GRAPHS[name]()

    def run():
        h = leaf(g.num_src_nodes(), 3, seed=1)
        w = leaf(g.num_edges(), 1, seed=2, positive=True)
        g.srcdata["h"], g.edata["w"] = h, w
        msg = _message(message)
        g.update_all(msg, getattr(fn, reduce)("m", "out"))
        return [g.dstdata["out"]], [h, w]

    # DGL's max/min backward on a graph without edges sends every row's gradient to row 0 (its winners default
    # to 0) or fails: compared there are the values, and featgraph's gradient is 0
    no_winners = g.num_edges() == 0 and reduce in ("max", "min")
    counts = compare(run, gradients=not no_winners)
    assert served(counts, "gspmm") == 1
    if no_winners:
        with fdgl.use():
            grads = _evaluate(run)[1]
        assert all(grad is None or not grad.any() for grad in grads)


@pytest.mark.parametrize("name", ["random", "int32", "block"])
@pytest.mark.parametrize("message", ["u_add_v", "u_dot_v", "e_div_v", "u_mul_e", "v_sub_u", "e_sub_u", "copy_u"])
def test_apply_edges_builtins(name, message):
    g = GRAPHS[name]()

    def run():
        h = leaf(g.num_src_nodes(), 2, 3, seed=3)
        hv = leaf(g.num_dst_nodes(), 2, 3, seed=4, positive=True)
        w = leaf(g.num_edges(), 2, 1, seed=5, positive=True)
        g.srcdata["h"], g.dstdata["hv"], g.edata["w"] = h, hv, w
        names = {"u": "h", "v": "hv", "e": "w"}
        if message == "copy_u":
            g.apply_edges(fn.copy_u("h", "out"))
        else:
            lhs, _, rhs = message.split("_")
            g.apply_edges(getattr(fn, message)(names[lhs], names[rhs], "out"))
        return [g.edata["out"]], [h, hv, w]

    assert served(compare(run), "gsddmm") == 1


@pytest.mark.parametrize("name", ["copy_u_max", "u_mul_e_min", "copy_e_sum", "u_add_v", "v_dot_u", "e_sub_v"])
def test_dgl_ops(name):
    """``dgl.ops`` straight, where DGL leaves -inf/inf at vertices without in-edges."""
    g = random_graph(seed=4)
    x, w = leaf(N, 4, seed=6), leaf(E, 4, seed=7)
    args = {"copy_u_max": (x,), "copy_e_sum": (w,), "e_sub_v": (w, x), "u_mul_e_min": (x, w)}.get(name, (x, x))
    counts = compare(lambda: ([getattr(dgl.ops, name)(g, *args)], list(args)))
    assert sum(served(counts, entry) for entry in ("gspmm", "gsddmm")) == 1


def test_one_dimensional_features():
    g = random_graph(seed=5)
    x, w = leaf(N, seed=8), leaf(E, seed=9)
    counts = compare(lambda: ([dgl.ops.u_mul_e_sum(g, x, w), dgl.ops.u_add_v(g, x, x)], [x, w]))
    assert served(counts, "gspmm") == served(counts, "gsddmm") == 1


@pytest.mark.parametrize(("fmt", "entry"), [("csc", "gspmm"), ("csr", "gsddmm")])
def test_graph_restricted_to_one_sparse_format(fmt, entry):
    """A graph restricted to CSC or CSR (each the format DGL's kernel needs), which has no COO for DGL to give:
    served, its edge rows in DGL's order."""
    g = random_graph(seed=12).formats(fmt)
    x, w = leaf(N, 3, seed=1), leaf(E, 3, seed=2)
    call = dgl.ops.u_mul_e_max if entry == "gspmm" else dgl.ops.e_sub_v
    # values only: DGL's own backward needs the format the graph is restricted against
    counts = compare(lambda: ([call(g, x, w) if entry == "gspmm" else call(g, w, x)], [x, w]), gradients=False)
    assert counts == {entry: {"featgraph": 1}}


def test_graph_without_nodes():
    g = dgl.graph(([], []), num_nodes=0)
    x = leaf(0, 3, seed=1)
    assert served(compare(lambda: ([dgl.ops.copy_u_sum(g, x)], [x])), "gspmm") == 1


# ---- edge softmax, segments, grouped products ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["random", "int32", "block"])
@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_edge_softmax(name, norm_by):
    g = GRAPHS[name]()
    scores = leaf(g.num_edges(), 3, 1, seed=10)
    counts = compare(lambda: ([dgl.ops.edge_softmax(g, scores, norm_by=norm_by)], [scores]))
    assert served(counts, "edge_softmax") == 1


@pytest.mark.parametrize("reducer", ["sum", "max", "min", "mean"])
def test_segment_reduce_and_readout(reducer):
    seglen = torch.tensor([2, 0, 3, 1, 0])
    value = leaf(6, 3, seed=11)
    batch = dgl.batch([random_graph(5, 9, seed=1), dgl.graph(([], []), num_nodes=0), random_graph(4, 6, seed=2)])
    h = leaf(batch.num_nodes(), 2, seed=12)

    def run():
        batch.ndata["h"] = h
        readout = getattr(dgl, f"{reducer}_nodes")(batch, "h") if reducer != "min" else dgl.sum_nodes(batch, "h")
        return [dgl.ops.segment_reduce(seglen, value, reducer), readout], [value, h]

    assert served(compare(run), "segment_reduce") >= 1


def test_gather_mm_and_segment_mm():
    a, b = leaf(9, 4, seed=13), leaf(3, 4, 5, seed=14)
    idx = torch.tensor([2, 0, 1, 1, 0, 2, 2, 0, 1])
    seglen = torch.tensor([4, 0, 5])
    counts = compare(lambda: ([dgl.ops.gather_mm(a, b, idx_b=idx), dgl.ops.segment_mm(a, b, seglen)], [a, b]))
    assert served(counts, "gather_mm") == served(counts, "segment_mm") == 1


# ---- dgl.nn layers -------------------------------------------------------------------------------------------
def _layers() -> dict[str, Callable[[], torch.nn.Module]]:
    return {
        "GraphConv": lambda: dglnn.GraphConv(5, 4, norm="both"),
        "GraphConv-right": lambda: dglnn.GraphConv(5, 4, norm="right", allow_zero_in_degree=True),
        "SAGEConv-mean": lambda: dglnn.SAGEConv(5, 4, "mean"),
        "SAGEConv-pool": lambda: dglnn.SAGEConv(5, 4, "pool"),
        "SAGEConv-gcn": lambda: dglnn.SAGEConv(5, 4, "gcn"),
        "GATConv": lambda: dglnn.GATConv(5, 3, num_heads=2, allow_zero_in_degree=True),
        "GATv2Conv": lambda: dglnn.GATv2Conv(5, 3, num_heads=2, allow_zero_in_degree=True),
        "GINConv": lambda: dglnn.GINConv(torch.nn.Linear(5, 4), "sum"),
        "GINConv-max": lambda: dglnn.GINConv(torch.nn.Linear(5, 4), "max"),
        "EdgeConv": lambda: dglnn.EdgeConv(5, 4, allow_zero_in_degree=True),
        "DotGatConv": lambda: dglnn.DotGatConv(5, 4, num_heads=2, allow_zero_in_degree=True),
        "TAGConv": lambda: dglnn.TAGConv(5, 4, k=2),
    }


LAYERS = [
    "GraphConv", "GraphConv-right", "SAGEConv-mean", "SAGEConv-pool", "SAGEConv-gcn", "GATConv", "GATv2Conv",
    "GINConv", "GINConv-max", "EdgeConv", "DotGatConv", "TAGConv",
]  # fmt: skip


def _layer_run(layer: torch.nn.Module, g: dgl.DGLGraph, dtype: torch.dtype, edge_weight: bool = False) -> Run:
    def run():
        module = copy.deepcopy(layer).to(dtype)  # identical weights on both sides
        feat = leaf(g.num_src_nodes(), 5, seed=20, dtype=dtype)
        inputs = (feat, feat[: g.num_dst_nodes()]) if g.is_block else feat
        kwargs = {"edge_weight": leaf(g.num_edges(), seed=21, dtype=dtype, positive=True)} if edge_weight else {}
        out = module(g, inputs, **kwargs)
        return [out], [feat, *kwargs.values(), *module.parameters()]

    return run


@pytest.mark.parametrize("name", LAYERS)
def test_dgl_nn_layers(name):
    torch.manual_seed(0)
    layer = _layers()[name]()
    g = dgl.add_self_loop(random_graph(seed=6))
    counts = compare(_layer_run(layer, g, torch.float64))
    assert sum(served(counts, entry) for entry in ("gspmm", "gsddmm", "edge_softmax")) >= 1
    kernels = {name: entry for name, entry in counts.items() if name not in ("in_degrees", "out_degrees")}
    assert not {reason for entry in kernels.values() for reason in entry if reason != "featgraph"}  # degrees: DGL
    # answers from the formats its own run (``compare``'s reference) built on this graph


@pytest.mark.parametrize("name", ["GraphConv", "SAGEConv-mean", "GATConv", "GINConv"])
def test_dgl_nn_layers_on_blocks(name):
    torch.manual_seed(0)
    counts = compare(_layer_run(_layers()[name](), to_block(dgl.add_self_loop(random_graph()), torch.arange(6)),
                                torch.float64))  # fmt: skip
    assert served(counts, "gspmm") >= 1


@pytest.mark.parametrize("name", ["GraphConv", "GATConv", "SAGEConv-pool"])
def test_dgl_nn_layers_float32(name):
    torch.manual_seed(0)
    g = dgl.add_self_loop(random_graph(seed=7)).int()
    counts = compare(_layer_run(_layers()[name](), g, torch.float32), rtol=1e-5, atol=1e-5)
    assert served(counts, "gspmm") >= 1


def test_graph_conv_with_edge_weight():
    torch.manual_seed(0)
    counts = compare(_layer_run(dglnn.GraphConv(5, 4), dgl.add_self_loop(random_graph()), torch.float64, True))
    assert served(counts, "gspmm") >= 1


@pytest.mark.parametrize("regularizer", [None, "basis", "bdd"])
def test_rel_graph_conv(regularizer):
    """R-GCN: ``TypedLinear``'s grouped products (gather_mm/segment_mm) and the copy_e sum."""
    torch.manual_seed(0)
    g = random_graph(seed=8)
    etypes = torch.randint(0, 3, (g.num_edges(),), generator=torch.Generator().manual_seed(3))
    layer = dglnn.RelGraphConv(6, 6, 3, regularizer=regularizer, num_bases=2 if regularizer else None)

    def run():
        module = copy.deepcopy(layer).double()
        feat = leaf(N, 6, seed=22)
        return [module(g, feat, etypes)], [feat, *module.parameters()]

    counts = compare(run)
    assert served(counts, "gspmm") == 1
    if regularizer != "bdd":  # block-diagonal weights are DGL's own batched product, no gather_mm
        assert served(counts, "gather_mm") >= 1


# ---- featgraph really runs; DGL's own where featgraph does not serve ----------------------------------------
def test_featgraph_kernels_run(monkeypatch):
    """A spy on featgraph's ops sees GraphConv's and GATConv's calls: the routing is not a no-op."""
    seen: list[str] = []

    def spy(name: str) -> Callable[..., torch.Tensor]:
        real = getattr(featgraph.ops, name)
        return lambda *args, **kwargs: seen.append(name) or real(*args, **kwargs)

    for name in ("gspmm", "gsddmm", "edge_softmax"):
        monkeypatch.setattr(featgraph.ops, name, spy(name))
    g = dgl.add_self_loop(random_graph())
    feat = torch.randn(N, 5)
    with fdgl.use():
        dglnn.GraphConv(5, 4)(g, feat).sum().backward()
        dglnn.GATConv(5, 4, num_heads=2)(g, feat).sum().backward()
    assert {"gspmm", "gsddmm", "edge_softmax"} <= set(seen)
    count = len(seen)
    dglnn.GraphConv(5, 4)(g, feat)  # DGL's own again after the block
    assert len(seen) == count


def test_fallback_gives_dgls_answer():
    g = random_graph(seed=9)
    scores = torch.randn(E, 2, dtype=torch.float64)
    eids = torch.arange(0, E, 2)
    want = dgl.ops.edge_softmax(g, scores[eids], eids=eids)
    with fdgl.use():
        got = dgl.ops.edge_softmax(g, scores[eids], eids=eids)
        direct = dgl.backend.gather_mm(torch.randn(3, 2), torch.ones(3, 2, 4), torch.tensor([0, 1, 2]), None)
    torch.testing.assert_close(got, want)
    assert direct.shape == (3, 4)
    counts = fdgl.calls()
    assert counts["edge_softmax"] == {"an eids subset": 1}
    assert "featgraph" not in counts["gather_mm"]


def test_featgraph_error_falls_back_to_dgl(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(featgraph.ops, "gspmm", broken)
    g, x = random_graph(), torch.randn(N, 3)
    want = dgl.ops.copy_u_sum(g, x)
    with fdgl.use():
        got = dgl.ops.copy_u_sum(g, x)
    torch.testing.assert_close(got, want)
    assert fdgl.calls()["gspmm"] == {"featgraph raised RuntimeError: no compiler": 1}


def test_integer_features_stay_dgls():
    g = random_graph()
    x = torch.ones(N, 2, dtype=torch.int64)
    with fdgl.use(), pytest.raises(Exception) as routed_error:
        dgl.ops.copy_u_sum(g, x)
    with pytest.raises(Exception) as dgl_error:
        dgl.ops.copy_u_sum(g, x)
    assert type(routed_error.value) is type(dgl_error.value)
    assert "featgraph" not in fdgl.calls()["gspmm"]


# ---- the graph cache ----------------------------------------------------------------------------------------
def test_relation_slices_of_one_graph_share_its_featgraph_graph():
    """DGL's update_all and apply_edges pass ``g[etype]._graph``, a new index each call over the same arrays:
    under ``use()`` each is served the graph of the index it was cut from, and forgotten with that index."""
    g = random_graph(seed=11)
    etype = g.canonical_etypes[0]
    with fdgl.use():
        first = graphs.graph_of(g[etype]._graph)
        sliced = g[etype]
        assert graphs.graph_of(sliced._graph) is first and graphs.graph_of(g._graph) is first
        assert graphs.graph_of(sliced[etype]._graph) is first  # a slice of a slice
        other = dgl.graph((g.edges()[1], g.edges()[0]), num_nodes=g.num_nodes())  # the same sizes, other edges
        theirs = graphs.graph_of(other[other.canonical_etypes[0]]._graph)
    src, dst = g.edges(order="eid")
    assert torch.equal(first.coo()[0], src) and torch.equal(first.coo()[1], dst)
    assert theirs is not first and torch.equal(theirs.coo()[0], dst) and torch.equal(theirs.coo()[1], src)
    assert graphs.graph_of(g[etype]._graph) is not first  # without use(), a slice is a graph of its own
    kept = weakref.ref(first)
    del g, sliced, first
    gc.collect()
    assert kept() is None  # the slices' graph went with the graph they were cut from


def test_graph_converted_once_and_released():
    g = random_graph(seed=10)
    first = graphs.graph_of(g._graph)
    assert graphs.graph_of(g._graph) is first
    assert first.num_edges == g.num_edges()
    src, dst = g.edges(order="eid")
    assert torch.equal(first.coo()[0], src) and torch.equal(first.coo()[1], dst)
    b = to_block(g, torch.arange(3))
    assert graphs.graph_of(b._graph).is_bipartite
    before = graphs.cached_count()
    del g, b
    gc.collect()
    assert graphs.cached_count() <= before - 2


# ---- degree queries ------------------------------------------------------------------------------------------
def _typed_graph(int32: bool, seed: int) -> dgl.DGLGraph:
    """Two node types, three relations (one of them empty), isolated nodes and duplicate edges."""
    gen = torch.Generator().manual_seed(seed)
    data = {
        ("a", "x", "b"): (torch.randint(0, 5, (9,), generator=gen), torch.randint(0, 4, (9,), generator=gen)),
        ("b", "y", "b"): (torch.randint(0, 4, (6,), generator=gen), torch.randint(0, 4, (6,), generator=gen)),
        ("b", "z", "a"): (torch.tensor([], dtype=torch.int64), torch.tensor([], dtype=torch.int64)),
    }
    return dgl.heterograph(data, num_nodes_dict={"a": 6, "b": 5}, idtype=torch.int32 if int32 else torch.int64)


def _degree_queries(g: dgl.DGLGraph, ids: Sequence[int]) -> list[torch.Tensor]:
    """Every relation's in- and out-degrees, of all its vertices and of ``ids`` (clipped to each type's count)."""
    out = []
    for etype in g.canonical_etypes:
        num_src, num_dst = g.num_src_nodes(etype[0]), g.num_dst_nodes(etype[2])
        out += [g.in_degrees(etype=etype), g.out_degrees(etype=etype)]
        out.append(g.in_degrees(torch.tensor([i % num_dst for i in ids if num_dst], dtype=g.idtype), etype=etype))
        out.append(g.out_degrees(torch.tensor([i % num_src for i in ids if num_src], dtype=g.idtype), etype=etype))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["random", "block", "typed", "no-edges"]),
    seed=st.integers(0, 2**16),
    int32=st.booleans(),
    ids=st.lists(st.integers(0, 40), max_size=8),
)
def test_degree_queries_match_dgls_without_its_formats(kind, seed, int32, ids):
    """Under ``use()`` DGL's degree queries give DGL's answers (values and id type) from featgraph's count, for
    all vertices and for id lists with repeats, and DGL builds no CSC or CSR to answer them."""

    def graph() -> dgl.DGLGraph:
        g = {"random": lambda: random_graph(seed=seed), "typed": lambda: _typed_graph(int32, seed),
             "block": lambda: to_block(random_graph(seed=seed), torch.arange(5)),
             "no-edges": lambda: dgl.graph(([], []), num_nodes=4)}[kind]()  # fmt: skip
        return g.int() if int32 and kind != "typed" else g

    want = _degree_queries(graph(), ids)
    g = graph()
    fdgl.reset_calls()
    with fdgl.use():
        got = _degree_queries(g, ids)
    for ours, theirs in zip(got, want, strict=True):
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs)
    assert g.formats()["created"] == ["coo"]
    assert served(fdgl.calls(), "in_degrees") == served(fdgl.calls(), "out_degrees") == 2 * len(g.canonical_etypes)


def test_degree_queries_of_a_relation_slice_are_counted_once():
    g = _typed_graph(False, seed=3)
    with fdgl.use():
        first = g["y"].in_degrees()
        counts = graphs.degrees(g._graph, g.get_etype_id("y"), "in")
        assert graphs.degrees(g["y"]._graph, 0, "in") is counts  # a slice is served its parent's count
        first += 100  # the caller's copy: the count it came from is unchanged
        assert torch.equal(g["y"].in_degrees(), counts)


def test_degree_queries_dgl_serves_itself():
    """DGL answers where its format is built already or the graph has no COO. Ids out of range, for which DGL's
    own COO path reads past its arrays (a garbage count, no error), are DGL's error naming them."""
    g = random_graph(seed=5)
    built = random_graph(seed=5)
    built.create_formats_()
    csc_only = random_graph(seed=5).formats("csc")
    with fdgl.use():
        for h in (built, csc_only):
            assert torch.equal(h.in_degrees(), g.in_degrees())
        calls = fdgl.calls()["in_degrees"]
        assert calls == {"featgraph": 2, "DGL's CSC is built already": 2}
        for bad in (torch.tensor([0, N]), torch.tensor([-1])):
            with pytest.raises(dgl.DGLError, match=r"in_degrees: v holds node ids .* outside the 12 destination"):
                g.in_degrees(bad)
        with pytest.raises(dgl.DGLError, match=r"in_degrees: v holds node ids 5\.\.8, outside the 5 destination"):
            to_block(g, torch.arange(5)).in_degrees(torch.tensor([5, 8]))  # sources, not destinations
        with pytest.raises(dgl.DGLError, match="invalid node IDs"):  # DGL checks these itself
            g.out_degrees(torch.tensor([N]))
        assert fdgl.calls()["in_degrees"]["invalid"] == 3


# ---- use / unuse / routed -------------------------------------------------------------------------------------
def _bound() -> dict[tuple[str, str], object]:
    return {
        (path, attribute): getattr(routing.owner_of(path), attribute)
        for entry in fdgl.ENTRY_POINTS
        for path, attribute in entry.locations
    }


def test_unuse_restores_every_original():
    originals = _bound()
    slicing = dgl.heterograph_index.HeteroGraphIndex.get_relation_graph
    fdgl.use()
    during = _bound()
    assert dgl.heterograph_index.HeteroGraphIndex.get_relation_graph is not slicing  # slices noted (graphs.py)
    routed_names = {route.name for route in fdgl.routed() if route.routed}
    for entry in fdgl.ENTRY_POINTS:
        for location in entry.locations:
            if entry.name in routed_names:
                assert during[location] is not originals[location]
                assert during[location].__wrapped__ is originals[location]
            else:
                assert during[location] is originals[location]
    assert fdgl.unuse() is True
    after = _bound()
    assert all(after[location] is originals[location] for location in originals)
    assert dgl.heterograph_index.HeteroGraphIndex.get_relation_graph is slicing


def test_routed_lists_entry_points():
    names = {route.name: route for route in fdgl.routed()}
    assert set(names) >= {"gspmm", "gsddmm", "edge_softmax", "segment_reduce", "gather_mm", "segment_mm",
                          "gspmm_hetero", "gsddmm_hetero", "edge_softmax_hetero"}  # fmt: skip
    assert not any(route.routed for route in names.values())
    with fdgl.use():
        now = {route.name: route for route in fdgl.routed()}
    assert {name for name, route in now.items() if route.routed} == {
        "gspmm", "gsddmm", "edge_softmax", "segment_reduce", "gather_mm", "segment_mm", "gspmm_hetero",
        "gsddmm_hetero", "edge_softmax_hetero", "in_degrees", "out_degrees"
    }  # fmt: skip
    assert now["in_degrees"].locations == ("dgl.heterograph_index.HeteroGraphIndex.in_degrees",)
    assert now["gspmm"].locations == ("dgl.backend.gspmm", "dgl.ops.spmm.gspmm_internal")
    assert now["gspmm"].featgraph_op == "featgraph.ops.gspmm"
    assert all(route.reason for route in now.values())
    assert now["csrmm"].reason.startswith("DGL's own")


def test_use_twice_is_harmless():
    first = fdgl.use()
    bound = _bound()
    second = fdgl.use()
    assert _bound() == bound and first.began and not second.began
    second.close()  # did not begin the routing, so does not end it
    assert fdgl.is_active()
    assert fdgl.unuse() is True and not fdgl.is_active()


def test_unuse_without_use_is_harmless():
    originals = _bound()
    assert fdgl.unuse() is False
    assert _bound() == originals


def test_context_managers_nest():
    with fdgl.backend() as outer:
        assert fdgl.is_active() and outer.began
        with fdgl.use():
            pass
        assert fdgl.is_active()
    assert not fdgl.is_active()


def test_missing_dgl_is_a_clear_import_error(monkeypatch):
    monkeypatch.setattr(routing, "import_dgl", lambda: None)
    with pytest.raises(ImportError, match="DGL"):
        fdgl.use()
    assert not fdgl.is_active()


# ---- property test ------------------------------------------------------------------------------------------
BUILTINS = [("copy_u", "sum"), ("copy_u", "max"), ("u_mul_e", "min"), ("u_add_e", "mean"), ("copy_e", "sum"),
            ("u_sub_v", None), ("u_dot_v", None), ("e_div_u", None)]  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    num_nodes=st.integers(0, 9),
    num_edges=st.integers(0, 30),
    seed=st.integers(0, 2**16),
    builtin=st.sampled_from(BUILTINS),
    int32=st.booleans(),
)
@example(num_nodes=1, num_edges=0, seed=0, builtin=("u_mul_e", "min"), int32=False)
@example(num_nodes=1, num_edges=0, seed=0, builtin=("copy_u", "max"), int32=True)
def test_random_graphs_and_builtins(num_nodes, num_edges, seed, builtin, int32):
    num_edges = num_edges if num_nodes else 0
    g = random_graph(num_nodes, num_edges, seed)
    g = g.int() if int32 else g
    message, reduce = builtin

    def run():
        h, w = leaf(num_nodes, 3, seed=seed), leaf(num_edges, 3, seed=seed + 1, positive=True)
        g.ndata["h"], g.edata["w"] = h, w
        if reduce is None:
            lhs, _, rhs = message.split("_")
            g.apply_edges(getattr(fn, message)("w" if lhs == "e" else "h", "w" if rhs == "e" else "h", "out"))
            return [g.edata["out"]], [h, w]
        g.update_all(_message(message), getattr(fn, reduce)("m", "out"))
        return [g.ndata["out"]], [h, w]

    counts = compare(run, gradients=g.num_edges() > 0 or reduce not in ("max", "min"))  # as in update_all's test
    assert served(counts, "gsddmm" if reduce is None else "gspmm") == 1
