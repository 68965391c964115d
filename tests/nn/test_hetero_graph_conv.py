"""HeteroGraphConv against DGL's semantics written out: each relation's module on its own graph and the
destination's inputs, the outputs per node type combined by every aggregate, forward and gradients, float64
gradcheck, pair inputs, extra arguments, skipped relations and named errors."""

import copy

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from featgraph import ops
from featgraph.graph import HeteroGraph
from featgraph.nn import HeteroGraphConv
from tests.conftest import typed_edges

SIZES = {"user": 9, "item": 7, "tag": 4}
WIDTH = 5


class MeanConv(nn.Module):
    """A DGL-style module on featgraph's ops: the mean of in-neighbours and the destination, each projected."""

    def __init__(self, out: int = 3) -> None:
        super().__init__()
        self.neighbour, self.own = nn.Linear(WIDTH, out), nn.Linear(WIDTH, out, bias=False)
        self.allowed = False

    def set_allow_zero_in_degree(self, allow: bool) -> None:
        self.allowed = allow

    def forward(self, g, feat, scale: float = 1.0):
        x_src, x_dst = feat
        return scale * (self.neighbour(ops.copy_u_mean(g, x_src)) + self.own(x_dst))


def dense_mean(src, dst, x_src, num_dst):
    out = torch.zeros(num_dst, x_src.shape[1], dtype=x_src.dtype).index_add(0, dst, x_src[src])
    return out / torch.bincount(dst, minlength=num_dst).clamp(min=1).unsqueeze(1).to(x_src.dtype)


def typed(dtype=torch.float32):
    gen = torch.Generator().manual_seed(0)

    def rel(s, d, e):
        return torch.randint(0, SIZES[s], (e,), generator=gen), torch.randint(0, SIZES[d] - 1, (e,), generator=gen)

    edges = {
        ("user", "follows", "user"): rel("user", "user", 20),
        ("user", "buys", "item"): rel("user", "item", 25),
        ("tag", "marks", "item"): rel("tag", "item", 6),
        ("item", "bought-by", "user"): rel("item", "user", 25),
        ("tag", "empty", "user"): (torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long)),
    }
    x = {t: torch.randn(n, WIDTH, generator=gen, dtype=dtype) for t, n in SIZES.items()}
    return HeteroGraph(edges, SIZES), edges, x


def reference(conv, edges, x_src, x_dst, aggregate, scale=1.0):
    outputs = {}
    for (s, rel, d), (src, dst) in edges.items():
        if s not in x_src:
            continue
        m = conv.module_of((s, rel, d))
        out = scale * (m.neighbour(dense_mean(src, dst, x_src[s], SIZES[d])) + m.own(x_dst[d]))
        outputs.setdefault(d, []).append(out)
    if aggregate == "stack":
        return {d: torch.stack(v, 1) for d, v in outputs.items()}
    fns = {"sum": lambda t: t.sum(0), "max": lambda t: t.max(0).values, "min": lambda t: t.min(0).values,
           "mean": lambda t: t.mean(0)}  # fmt: skip
    return {d: fns[aggregate](torch.stack(v)) for d, v in outputs.items()}


@pytest.mark.parametrize("aggregate", ["sum", "max", "min", "mean", "stack"])
def test_matches_the_relations_written_out(aggregate):
    g, edges, x = typed()
    torch.manual_seed(0)
    mods = {"follows": MeanConv(), ("user", "buys", "item"): MeanConv(), "marks": MeanConv(),
            "bought-by": MeanConv(), "empty": MeanConv()}  # fmt: skip
    conv = HeteroGraphConv(mods, aggregate)
    assert all(m.allowed for m in mods.values()) and set(conv.state_dict()) >= {"mods.follows.own.weight"}
    xs = {t: v.clone().requires_grad_() for t, v in x.items()}
    got, want = conv(g, xs), reference(conv, edges, x, x, aggregate)
    assert got.keys() == want.keys() == {"user", "item"}  # tag receives nothing
    for t in want:
        torch.testing.assert_close(got[t], want[t])
    loss = sum(v.square().sum() for v in got.values())
    grads = torch.autograd.grad(loss, [xs[t] for t in SIZES] + list(conv.parameters()))
    xr = {t: v.clone().requires_grad_() for t, v in x.items()}
    ref = reference(conv, edges, xr, xr, aggregate)
    ref_grads = torch.autograd.grad(
        sum(v.square().sum() for v in ref.values()), [xr[t] for t in SIZES] + list(conv.parameters())
    )
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b)


def test_gradcheck_pair_inputs_extra_arguments_and_a_callable_aggregate():
    g, edges, x = typed(torch.float64)
    torch.manual_seed(0)
    conv = HeteroGraphConv({rel: MeanConv().double() for _, rel, _ in edges}, lambda outs, dst: sum(outs) * 2)
    src_only = {"user": x["user"], "tag": x["tag"]}  # items send nothing: 'bought-by' is skipped

    def run(user, tag, item):
        out = conv(g, ({"user": user, "tag": tag}, {"user": user, "item": item}), mod_args={"follows": (0.5,)})
        return out["user"], out["item"]

    assert torch.autograd.gradcheck(run, tuple(v.requires_grad_() for v in (x["user"], x["tag"], x["item"])))
    out = conv(g, (src_only, x), mod_kwargs={"buys": {"scale": 3.0}})
    kept = {et: e for et, e in edges.items() if et[1] != "bought-by"}
    want_user = reference(conv, {et: e for et, e in kept.items() if et[2] == "user"}, src_only, x, "sum")["user"]
    torch.testing.assert_close(out["user"], 2 * want_user)
    buys = conv.module_of(("user", "buys", "item"))
    item = 3.0 * (
        buys.neighbour(dense_mean(*edges[("user", "buys", "item")], x["user"], SIZES["item"])) + buys.own(x["item"])
    )
    marks = conv.module_of(("tag", "marks", "item"))
    item = (
        item
        + marks.neighbour(dense_mean(*edges[("tag", "marks", "item")], x["tag"], SIZES["item"]))
        + marks.own(x["item"])
    )
    torch.testing.assert_close(out["item"], 2 * item)


def test_bad_modules_and_aggregates_are_named():
    g, _, x = typed()
    with pytest.raises(ValueError, match="mods: expected a non-empty dict"):
        HeteroGraphConv({})
    with pytest.raises(TypeError, match=r"mods\['follows'\]: expected a torch.nn.Module"):
        HeteroGraphConv({"follows": 3})
    with pytest.raises(ValueError, match="aggregate must be one of"):
        HeteroGraphConv({"follows": MeanConv()}, "median")
    with pytest.raises(KeyError, match="no module for edge type"):
        HeteroGraphConv({"follows": MeanConv()})(g, x)
    with pytest.raises(KeyError, match="no features of node type 'item'"):
        HeteroGraphConv({rel: MeanConv() for rel in ("follows", "buys", "marks", "bought-by", "empty")})(
            g, {"user": x["user"], "tag": x["tag"]}
        )


def test_on_a_typed_block_destinations_are_each_types_first_rows():
    """On a sampled ``HeteroBlock`` (DGL's typed block) a plain dict of source rows gives each destination type
    its first rows, as DGL's HeteroGraphConv does; every relation matches the dense reference on the block's
    own edges, forward and gradients, and a two-layer stack ends on the seeds."""
    from featgraph.sampling import HeteroNeighborSampler

    g, edges, x = typed()
    torch.manual_seed(0)
    sampler = HeteroNeighborSampler(g, [3, -1])
    blocks = sampler.sample_blocks({"item": torch.tensor([4, 0]), "user": torch.tensor([2])}, seed=1).blocks
    block = blocks[0]
    conv = HeteroGraphConv({rel: MeanConv(WIDTH) for _, rel, _ in edges})
    h = {t: x[t][ids].clone().requires_grad_() for t, ids in block.n_id.items()}
    got = conv(block, h)
    want: dict = {}
    for edge_type in edges:
        src_type, _, dst_type = edge_type
        src, dst = block.relation(edge_type).coo()
        n_dst = block.num_dst_nodes(dst_type)
        m = conv.module_of(edge_type)
        out = m.neighbour(dense_mean(src, dst, h[src_type], n_dst)) + m.own(h[dst_type][:n_dst])
        want[dst_type] = want.get(dst_type, 0) + out
    assert got.keys() == want.keys()
    for t in want:
        assert got[t].shape[0] == block.num_dst_nodes(t)
        torch.testing.assert_close(got[t], want[t])
    grads = torch.autograd.grad(sum(v.sum() for v in got.values()), list(h.values()))
    ref = torch.autograd.grad(sum(v.sum() for v in want.values()), list(h.values()))
    for a, b in zip(grads, ref, strict=True):
        torch.testing.assert_close(a, b)
    top = conv(blocks[1], got)
    assert top["item"].shape[0] == 2 and top["user"].shape[0] == 1


def test_on_a_typed_block_through_the_gpu_target(gpu):
    """A sampled typed block moved to the device (CUDA, or Triton's interpreter): the GPU target's outputs equal
    the CPU target's."""
    import featgraph as fg
    from featgraph.sampling import HeteroNeighborSampler

    g, edges, x = typed()
    torch.manual_seed(0)
    block = HeteroNeighborSampler(g, [3]).sample_blocks({"item": torch.tensor([4, 0, 2])}, seed=1).blocks[0]
    conv = HeteroGraphConv({rel: MeanConv(WIDTH) for _, rel, _ in edges})
    h = {t: x[t][ids] for t, ids in block.n_id.items()}
    want = conv(block, h)
    moved = copy.deepcopy(conv).to(gpu)
    with fg.default_target("gpu"):
        got = moved(block.to(gpu), {t: v.to(gpu) for t, v in h.items()})
    assert got.keys() == want.keys()
    for t in want:
        torch.testing.assert_close(got[t].cpu(), want[t].detach(), rtol=1e-4, atol=1e-5)


# ---- DGL's modules on DGL's graphs and blocks, against DGL's own HeteroGraphConv -------------------------------
def _dgl():
    from featgraph.graph.interop import import_dgl

    module = import_dgl()
    if module is None:
        pytest.skip("DGL is not installed")
    return module


DGL_RELATIONS = [
    ("user", "follows", "user"),
    ("user", "buys", "item"),
    ("tag", "marks", "item"),
    ("item", "bought-by", "user"),
    ("tag", "empty", "user"),
]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    graph=typed_edges(DGL_RELATIONS, max_vertices=5, max_edges=8, min_vertices=1),
    aggregate=st.sampled_from(["sum", "max", "min", "mean", "stack"]),
    canonical=st.booleans(),
    int32=st.booleans(),
    as_block=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_dgl_modules_on_dgl_graphs_as_dgls_hetero_graph_conv(graph, aggregate, canonical, int32, as_block, seed):
    """DGL's GraphConv and SAGEConv per relation (odd widths), on a DGL heterograph or a block of it: the outputs
    and every gradient equal DGL's own HeteroGraphConv's over the same modules."""
    dgl = _dgl()
    import dgl.nn.pytorch as dglnn

    edges, counts = graph
    idtype = torch.int32 if int32 else torch.int64
    g = dgl.heterograph(
        {et: (torch.tensor(s, dtype=idtype), torch.tensor(d, dtype=idtype)) for et, (s, d) in edges.items()},
        num_nodes_dict=counts,
        idtype=idtype,
    )
    if as_block:
        seeds = {t: torch.arange(counts[t] - 1, dtype=idtype) for t in g.ntypes}  # the last of each type dropped
        g = dgl.to_block(dgl.in_subgraph(g, seeds), seeds)
    torch.manual_seed(seed)
    layers = (lambda: dglnn.SAGEConv(WIDTH, 3, "mean"), lambda: dglnn.GraphConv(WIDTH, 3, norm="both"))
    mods = {(et if canonical else et[1]): layers[i % 2]() for i, et in enumerate(edges)}
    ours, theirs = HeteroGraphConv(mods, aggregate), dglnn.HeteroGraphConv(mods, aggregate)
    gen = torch.Generator().manual_seed(seed)
    types, rows = (g.srctypes, g.num_src_nodes) if g.is_block else (g.ntypes, g.num_nodes)
    x = {t: torch.randn(rows(t), WIDTH, generator=gen, dtype=torch.float64) for t in types}
    for module in mods.values():
        module.double()

    def run(conv):
        leaves = {t: v.clone().requires_grad_() for t, v in x.items()}
        out = conv(g, leaves)
        grads = torch.autograd.grad(
            sum(v.square().sum() for v in out.values()), [*leaves.values(), *conv.parameters()], allow_unused=True
        )
        return out, grads

    (got, got_grads), (want, want_grads) = run(ours), run(theirs)
    assert got.keys() == want.keys()
    for t in want:
        torch.testing.assert_close(got[t], want[t])
    for a, b in zip(got_grads, want_grads, strict=True):
        assert (a is None) == (b is None) or not (a if b is None else b).any()
        if a is not None and b is not None:
            torch.testing.assert_close(a, b)


def test_dgl_graph_pair_inputs_extra_arguments_and_named_errors():
    """On a DGL graph: a pair of dicts skips the relations whose destination type has no input, extra arguments
    reach the modules by relation name (DGL's GraphConv's ``edge_weight``), and a missing destination input is
    named."""
    dgl = _dgl()
    import dgl.nn.pytorch as dglnn

    g = dgl.heterograph(
        {et: (torch.tensor([0, 1, 1]), torch.tensor([1, 0, 2])) for et in DGL_RELATIONS[:4]},
        num_nodes_dict={"user": 3, "item": 3, "tag": 2},
    )
    torch.manual_seed(0)
    mods = {rel: dglnn.GraphConv(WIDTH, 3, norm="none") for _, rel, _ in DGL_RELATIONS[:4]}
    x = {t: torch.randn(g.num_nodes(t), WIDTH) for t in g.ntypes}
    weight = {"buys": {"edge_weight": torch.rand(3)}}
    for conv in (HeteroGraphConv(mods), dglnn.HeteroGraphConv(mods)):
        out = conv(g, (x, {"item": x["item"]}), mod_kwargs=weight)
        assert out.keys() == {"item"}
    ours = HeteroGraphConv(mods)(g, (x, {"item": x["item"]}), mod_kwargs=weight)["item"]
    torch.testing.assert_close(
        ours, dglnn.HeteroGraphConv(mods)(g, (x, {"item": x["item"]}), mod_kwargs=weight)["item"]
    )
    with pytest.raises(KeyError, match="no features of node type 'item'"):
        HeteroGraphConv(mods)(g, {"user": x["user"], "tag": x["tag"]})
