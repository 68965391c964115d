"""DGL's heterograph kernels routed to featgraph (``featgraph.dgl.hetero``): against a dense torch reference on
random heterographs (empty relations, isolated nodes, duplicate edges, int32 and int64 ids, 1-D and odd-width
features), against DGL's own heterograph kernels where those work (every relation with edges), gradients
included; what featgraph refuses, and the relation graphs built once per index."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import featgraph.dgl as fdgl
from featgraph.dgl import graphs, hetero
from featgraph.dgl.kernels import Refused
from featgraph.graph.interop import import_dgl
from tests.conftest import typed_edges
from tests.dgl.test_backend import _routing_off, compare, leaf, served  # noqa: F401 - the fixture is autouse

dgl = import_dgl()
pytestmark = pytest.mark.skipif(dgl is None, reason="DGL is not installed")
if dgl is not None:
    import dgl.function as fn
    from dgl.base import ALL

RELATIONS = [("a", "r0", "b"), ("a", "r1", "a"), ("c", "r2", "b"), ("b", "r3", "c"), ("a", "r4", "c")]
Edges = dict[tuple[str, str, str], tuple[list[int], list[int]]]
EDGES: Edges = {  # every relation has edges (DGL's own kernels need that); duplicates, isolated nodes
    ("a", "r0", "b"): ([0, 1, 1, 3, 0], [0, 0, 2, 2, 0]),
    ("a", "r1", "a"): ([0, 2, 4, 2], [1, 1, 1, 2]),
    ("c", "r2", "b"): ([1, 0, 2], [0, 2, 1]),
    ("b", "r3", "c"): ([0, 2, 2, 1], [1, 1, 0, 2]),
}
COUNTS = {"a": 5, "b": 4, "c": 3}
MESSAGES = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "dot": lambda x, y: (x * y).sum(-1, keepdim=True),
    "copy_lhs": lambda x, y: x,
    "copy_rhs": lambda x, y: y,
}


def heterograph(edges: Edges, counts: dict[str, int], idtype: torch.dtype = torch.int64) -> dgl.DGLGraph:
    data = {
        etype: (torch.tensor(src, dtype=idtype), torch.tensor(dst, dtype=idtype)) for etype, (src, dst) in edges.items()
    }
    return dgl.heterograph(data, num_nodes_dict=counts, idtype=idtype)


def node_leaves(g: dgl.DGLGraph, width: int | None, seed: int) -> list[torch.Tensor]:
    """One feature tensor per node type, in DGL's type order (1-D where ``width`` is None)."""
    return [leaf(g.num_nodes(t), *([width] if width else []), seed=seed + i) for i, t in enumerate(g.ntypes)]


def edge_leaves(g: dgl.DGLGraph, width: int | None, seed: int) -> list[torch.Tensor]:
    """One feature tensor per edge type, in DGL's type order, away from 0 (a divisor)."""
    return [
        leaf(g.num_edges(e), *([width] if width else []), seed=seed + i, positive=True)
        for i, e in enumerate(g.canonical_etypes)
    ]


def _edges(g: dgl.DGLGraph, etype: tuple[str, str, str]) -> tuple[torch.Tensor, torch.Tensor]:
    src, dst = g.edges(etype=etype, order="eid")
    return src.long(), dst.long()


def _operand(g: dgl.DGLGraph, etype: tuple[str, str, str], target: str, data: list[torch.Tensor]) -> torch.Tensor:
    """The per-edge rows of an operand on ``target`` (u, v: node features by type; e: edge features)."""
    if target == "e":
        return data[g.get_etype_id(etype)]
    src, dst = _edges(g, etype)
    ntype = etype[0] if target == "u" else etype[2]
    return data[g.get_ntype_id(ntype)][src if target == "u" else dst]


# ---- dense references -----------------------------------------------------------------------------------
def reference_gspmm(g: dgl.DGLGraph, op: str, reduce: str, xs: list, ws: list) -> list[torch.Tensor]:
    """Per destination type (DGL's order), every relation's messages reduced at once: max/min -inf/inf where a
    vertex gets none but its type gets some, 0 where the type gets none."""
    out = []
    for ntype in g.ntypes:
        into = [etype for etype in g.canonical_etypes if etype[2] == ntype]
        if not into:
            continue
        messages = torch.cat(
            [
                MESSAGES[op](
                    _operand(g, e, "u", xs) if op != "copy_rhs" else None,
                    _operand(g, e, "e", ws) if op != "copy_lhs" else None,
                )
                for e in into
            ]
        )
        index = torch.cat([_edges(g, e)[1] for e in into])
        rows = messages.new_zeros((g.num_nodes(ntype), *messages.shape[1:]))
        if reduce == "sum":
            out.append(rows.index_add(0, index, messages))
            continue
        spread = index.view(-1, *([1] * (messages.dim() - 1))).expand_as(messages)
        reduced = rows.scatter_reduce(0, spread, messages, "amax" if reduce == "max" else "amin", include_self=False)
        empty = torch.bincount(index, minlength=g.num_nodes(ntype)) == 0
        if index.numel():
            identity = float("-inf") if reduce == "max" else float("inf")
            reduced = reduced.masked_fill(empty.view(-1, *([1] * (messages.dim() - 1))), identity)
        out.append(reduced)
    return out


def reference_gsddmm(g: dgl.DGLGraph, op: str, lhs: list, rhs: list, targets: str) -> list[torch.Tensor]:
    return [MESSAGES[op](_operand(g, e, targets[0], lhs), _operand(g, e, targets[1], rhs)) for e in g.canonical_etypes]


def reference_edge_softmax(g: dgl.DGLGraph, logits: list, norm_by: str) -> list[torch.Tensor]:
    """The softmax over each vertex's edges of every relation (in-edges, or out-edges for ``norm_by="src"``)."""
    out = [torch.empty(0)] * len(logits)
    side, end = (1, 2) if norm_by == "dst" else (0, 0)
    for ntype in g.ntypes:
        etypes = [e for e in g.canonical_etypes if e[end] == ntype]
        if not etypes:
            continue
        scores = torch.cat([logits[g.get_etype_id(e)] for e in etypes])
        index = torch.cat([_edges(g, e)[side] for e in etypes])
        spread = index.view(-1, *([1] * (scores.dim() - 1))).expand_as(scores)
        top = scores.new_zeros((g.num_nodes(ntype), *scores.shape[1:]))
        top = top.scatter_reduce(0, spread, scores, "amax", include_self=False)
        exp = (scores - top[index]).exp()
        total = exp.new_zeros(top.shape).index_add(0, index, exp)
        parts = (exp / total[index]).split([g.num_edges(e) for e in etypes])
        for e, part in zip(etypes, parts, strict=True):
            out[g.get_etype_id(e)] = part
    return out


def destinations(g: dgl.DGLGraph, results: tuple) -> list[torch.Tensor]:
    """gspmm's results for the node types some relation ends at (the others are DGL's empty tensor)."""
    ends = {etype[2] for etype in g.canonical_etypes}
    for ntype, result in zip(g.ntypes, results, strict=True):
        if ntype not in ends:
            assert result.shape == (0,)
    return [result for ntype, result in zip(g.ntypes, results, strict=True) if ntype in ends]


# ---- the calls: (routed through dgl.ops, dense reference) --------------------------------------------------
Runs = tuple[Callable, Callable]


def gspmm_runs(g: dgl.DGLGraph, op: str, reduce: str, width: int | None, seed: int, edge_width: int | None) -> Runs:
    def leaves():
        return node_leaves(g, width, seed), edge_leaves(g, edge_width, seed + 10)

    def routed():
        xs, ws = leaves()
        out = dgl.ops.gspmm(g, op, reduce, None if op == "copy_rhs" else xs, None if op == "copy_lhs" else ws)
        return destinations(g, out), [*xs, *ws]

    def reference():
        xs, ws = leaves()
        return reference_gspmm(g, op, reduce, xs, ws), [*xs, *ws]

    return routed, reference


def gsddmm_runs(g: dgl.DGLGraph, op: str, targets: str, width: int | None, seed: int) -> Runs:
    def leaves():
        data = {"u": node_leaves(g, width, seed), "e": edge_leaves(g, width, seed + 10)}
        data["v"] = data["u"]
        return data[targets[0]], data[targets[1]]

    def routed():
        lhs, rhs = leaves()
        out = dgl.ops.gsddmm(g, op, None if op == "copy_rhs" else lhs, None if op == "copy_lhs" else rhs, *targets)
        return list(out), [*lhs, *rhs]

    def reference():
        lhs, rhs = leaves()
        return reference_gsddmm(g, op, lhs, rhs, targets), [*lhs, *rhs]

    return routed, reference


def edge_softmax_runs(g: dgl.DGLGraph, norm_by: str, width: int | None, seed: int) -> Runs:
    def routed():
        logits = edge_leaves(g, width, seed)
        out = dgl.ops.edge_softmax(g, dict(zip(g.canonical_etypes, logits, strict=True)), norm_by=norm_by)
        return [out[e] for e in g.canonical_etypes], logits

    def reference():
        logits = edge_leaves(g, width, seed)
        return reference_edge_softmax(g, logits, norm_by), logits

    return routed, reference


# ---- property test against the dense reference -------------------------------------------------------------
CALLS = [
    ("gspmm", "copy_lhs", "sum"),
    ("gspmm", "copy_lhs", "max"),
    ("gspmm", "mul", "min"),
    ("gspmm", "sub", "sum"),
    ("gspmm", "copy_rhs", "max"),
    ("gspmm", "div", "max"),
    ("gsddmm", "add", "uv"),
    ("gsddmm", "dot", "ue"),
    ("gsddmm", "copy_lhs", "vu"),
    ("gsddmm", "div", "ue"),
    ("edge_softmax", "dst", ""),
    ("edge_softmax", "src", ""),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    graph=typed_edges(RELATIONS, max_vertices=5, max_edges=7),
    call=st.sampled_from(CALLS),
    width=st.sampled_from([None, 1, 3, 5]),
    broadcast=st.booleans(),
    int32=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_heterographs_against_dense_torch(graph, call, width, broadcast, int32, seed):
    g = heterograph(*graph, torch.int32 if int32 else torch.int64)
    entry, op, how = call
    if entry == "gspmm":
        edge_width = 1 if broadcast and width and op != "copy_rhs" else width  # (E, 1) against (n, F)
        runs = gspmm_runs(g, op, how, width, seed, edge_width)
    elif entry == "gsddmm":
        runs = gsddmm_runs(g, op, how, width or (3 if op == "dot" else None), seed)
    else:
        runs = edge_softmax_runs(g, op, width, seed)
    counts = compare(runs[0], reference=runs[1])
    assert counts == {f"{entry}_hetero": {"featgraph": 1}}


# ---- against DGL's own heterograph kernels --------------------------------------------------------------------
@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
@pytest.mark.parametrize(
    ("op", "reduce"),
    [
        ("copy_lhs", "sum"),
        ("copy_lhs", "max"),
        ("copy_lhs", "min"),
        ("mul", "sum"),
        ("mul", "max"),
        ("sub", "min"),
        ("copy_rhs", "max"),
        ("div", "sum"),
    ],
)
def test_gspmm_against_dgl(idtype, op, reduce):
    g = heterograph(EDGES, COUNTS, idtype)
    # DGL's own backward of a binary op's max/min on a heterograph fails (the dense reference checks ours)
    gradients = reduce == "sum" or op.startswith("copy")
    assert served(compare(gspmm_runs(g, op, reduce, 3, 1, 3)[0], gradients), "gspmm_hetero") == 1


@pytest.mark.parametrize("idtype", [torch.int32, torch.int64])
@pytest.mark.parametrize(
    ("op", "targets"), [("add", "uv"), ("dot", "uv"), ("mul", "ev"), ("sub", "vu"), ("copy_lhs", "uv"), ("div", "ue")]
)
def test_gsddmm_against_dgl(idtype, op, targets):
    g = heterograph(EDGES, COUNTS, idtype)
    assert served(compare(gsddmm_runs(g, op, targets, 5, 2)[0]), "gsddmm_hetero") == 1


@pytest.mark.parametrize("width", [None, 1, 3])
@pytest.mark.parametrize("norm_by", ["dst", "src"])
def test_edge_softmax_against_dgl(width, norm_by):
    g = heterograph(EDGES, COUNTS)
    assert served(compare(edge_softmax_runs(g, norm_by, width, 3)[0]), "edge_softmax_hetero") == 1


@pytest.mark.parametrize("reduce", ["sum", "max", "min"])
def test_update_all_and_apply_edges_against_dgl(reduce):
    """DGL's message passing over every relation at once (``update_all`` without an edge type), float32."""
    g = heterograph(EDGES, COUNTS, torch.int32)

    def run():
        xs = node_leaves(g, 5, 4)
        ws = edge_leaves(g, 5, 5)
        for ntype, x in zip(g.ntypes, xs, strict=True):
            g.nodes[ntype].data["h"] = x.float()
        for etype, w in zip(g.canonical_etypes, ws, strict=True):
            g.edges[etype].data["w"] = w.float()
        message = fn.u_mul_e("h", "w", "m") if reduce == "sum" else fn.copy_u("h", "m")  # DGL's backward: above
        g.update_all(message, getattr(fn, reduce)("m", "out"))
        g.apply_edges(fn.u_dot_v("h", "h", "d"))
        outs = [g.nodes[t].data["out"] for t in ("a", "b", "c")] + [g.edges[e].data["d"] for e in g.canonical_etypes]
        return outs, [*xs, *ws]

    counts = compare(run, rtol=1e-5, atol=1e-5)
    assert served(counts, "gspmm_hetero") == served(counts, "gsddmm_hetero") == 1


def test_gradcheck():
    """Double-precision finite differences of the routed kernels (max's winners are unique here)."""
    g = heterograph(EDGES, COUNTS)
    xs, ws = node_leaves(g, 2, 6), edge_leaves(g, 2, 7)
    ntypes = len(xs)

    def spmm(*leaves):
        out = destinations(g, dgl.ops.gspmm(g, "mul", "max", list(leaves[:ntypes]), list(leaves[ntypes:])))
        return tuple(o.masked_fill(o.isinf(), 0) for o in out)  # as update_all: 0 where no edge arrives

    def sddmm_and_softmax(*leaves):
        scores = dgl.ops.gsddmm(g, "dot", list(leaves[:ntypes]), list(leaves[:ntypes]), "u", "v")
        out = dgl.ops.edge_softmax(g, dict(zip(g.canonical_etypes, scores, strict=True)))
        return tuple(out.values())

    with fdgl.use():
        assert torch.autograd.gradcheck(spmm, (*xs, *ws), fast_mode=True)
        assert torch.autograd.gradcheck(sddmm_and_softmax, tuple(xs), fast_mode=True)
    counts = fdgl.calls()
    assert set(counts) == {"gspmm_hetero", "gsddmm_hetero", "edge_softmax_hetero"}
    assert all(set(by) == {"featgraph"} for by in counts.values())


# ---- what featgraph does not serve ---------------------------------------------------------------------------
def _bad_inputs(g: dgl.DGLGraph) -> dict[str, tuple[Callable[[object], object], str]]:
    """name -> (a call of a hetero entry point on ``g``'s index, ``heterograph(EDGES, COUNTS)``, the refusal)."""
    x = [torch.randn(g.num_nodes(t), 3) for t in g.ntypes]
    w = [torch.randn(g.num_edges(e), 3) for e in g.canonical_etypes]
    logits = [torch.randn(g.num_edges(e), 2) for e in g.canonical_etypes]
    return {
        "integer features": (
            lambda g: hetero.gspmm_hetero(g, "copy_lhs", "sum", 3, *[t.long() for t in x], *[None] * 4),
            "dtype torch.int64",
        ),
        "mixed dtypes": (
            lambda g: hetero.gspmm_hetero(g, "mul", "sum", 3, *x, *[t.double() for t in w]),
            "mixed dtypes",
        ),
        "mean": (lambda g: hetero.gspmm_hetero(g, "copy_lhs", "mean", 3, *x, *[None] * 4), "reduce 'mean'"),
        "unknown op": (lambda g: hetero.gspmm_hetero(g, "pow", "sum", 3, *x, *w), "op 'pow'"),
        "operand count": (
            lambda g: hetero.gspmm_hetero(g, "copy_lhs", "sum", 2, *x[:2], *[None] * 4),
            "2 lhs operands, expected 3",
        ),
        "missing operand": (lambda g: hetero.gspmm_hetero(g, "mul", "sum", 3, *x, None, *w[1:]), "without its"),
        "shapes across relations": (
            lambda g: hetero.gspmm_hetero(g, "copy_lhs", "sum", 3, x[0], x[1], torch.randn(3, 4), *[None] * 4),
            "shapes",
        ),
        "rows": (lambda g: hetero.gsddmm_hetero(g, "add", 3, "u", "v", x[0][:2], *x[1:], *x), "has 2 rows"),
        "no broadcast": (
            lambda g: hetero.gsddmm_hetero(g, "add", 3, "u", "e", *x, *[t[:, :2] for t in w]),
            "do not broadcast",
        ),
        "target": (lambda g: hetero.gsddmm_hetero(g, "add", 3, "u", "w", *x, *x), "targets"),
        "eids subset": (lambda g: hetero.edge_softmax_hetero(g, torch.tensor([0]), "dst", *logits), "eids subset"),
        "norm_by": (lambda g: hetero.edge_softmax_hetero(g, ALL, "edge", *logits), "norm_by 'edge'"),
        "logits count": (lambda g: hetero.edge_softmax_hetero(g, ALL, "dst", *logits[:3]), "3 logits for 4"),
        "logit rows": (lambda g: hetero.edge_softmax_hetero(g, ALL, "dst", logits[0][:1], *logits[1:]), "1 rows"),
        "logits not tensors": (
            lambda g: hetero.edge_softmax_hetero(g, ALL, "dst", *[t.tolist() for t in logits]),
            "not a tensor",
        ),
        "logit widths": (
            lambda g: hetero.edge_softmax_hetero(g, ALL, "dst", *logits[:3], logits[3][:, :1]),
            "different shapes",
        ),
    }


BAD_INPUTS = [
    "integer features",
    "mixed dtypes",
    "mean",
    "unknown op",
    "operand count",
    "missing operand",
    "shapes across relations",
    "rows",
    "no broadcast",
    "target",
    "eids subset",
    "norm_by",
    "logits count",
    "logit rows",
    "logits not tensors",
    "logit widths",
]


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_inputs_are_refused_with_the_reason(name):
    g = heterograph(EDGES, COUNTS)
    call, reason = _bad_inputs(g)[name]
    with pytest.raises(Refused, match=reason):
        call(g._graph)


def test_refused_calls_get_dgls_answer_and_are_counted():
    g = heterograph(EDGES, COUNTS)
    logits = {e: torch.randn(g.num_edges(e), 2) for e in g.canonical_etypes}
    x = [torch.ones(g.num_nodes(t), 2, dtype=torch.int64) for t in g.ntypes]
    want = dgl.ops.edge_softmax(g, logits, norm_by="edge")  # DGL normalises by destination
    with pytest.raises(Exception) as dgl_error:
        dgl.ops.gspmm(g, "copy_lhs", "sum", x, None)
    with fdgl.use():
        got = dgl.ops.edge_softmax(g, logits, norm_by="edge")
        with pytest.raises(Exception) as routed_error:
            dgl.ops.gspmm(g, "copy_lhs", "sum", x, None)
    for etype in g.canonical_etypes:
        torch.testing.assert_close(got[etype], want[etype])
    assert type(routed_error.value) is type(dgl_error.value)
    dtypes = "torch.float16, torch.bfloat16, torch.float32, torch.float64"
    assert fdgl.calls() == {
        "edge_softmax_hetero": {"norm_by 'edge'": 1},
        "gspmm_hetero": {f"lhs dtype torch.int64 (featgraph serves {dtypes})": 1},
    }


# ---- relation graphs built once ---------------------------------------------------------------------------------
def test_relation_graphs_built_once_and_shared_with_relation_slices():
    g = heterograph(EDGES, COUNTS)
    relations = graphs.relation_graphs(g._graph)
    assert all(a is b for a, b in zip(graphs.relation_graphs(g._graph), relations, strict=True))
    for etype, graph in zip(g.canonical_etypes, relations, strict=True):
        src, dst = g.edges(etype=etype, order="eid")
        assert torch.equal(graph.coo()[0], src) and torch.equal(graph.coo()[1], dst)
        assert graph.is_bipartite == (etype[0] != etype[2])
        with fdgl.use():
            assert graphs.graph_of(g[etype]._graph) is graph  # update_all on one relation: the same graph
    merged = graphs.merged_graph(g._graph, "dst")
    assert graphs.merged_graph(g._graph, "dst") is merged
    homogeneous = torch.stack(dgl.to_homogeneous(g).edges(order="eid"))  # the same numbering and edge order
    assert torch.equal(torch.stack(merged.coo()), homogeneous)
    assert torch.equal(torch.stack(graphs.merged_graph(g._graph, "src").coo()), homogeneous.flip(0))
    with fdgl.use():
        dgl.ops.gspmm(g, "copy_lhs", "sum", node_leaves(g, 2, 0), None)
    assert all(a is b for a, b in zip(graphs.relation_graphs(g._graph), relations, strict=True))
    before = graphs.cached_count()
    del g
    gc.collect()
    assert graphs.cached_count() <= before - 1  # (other tests' graphs may go in the same collection)
    with pytest.raises(ValueError, match="by"):
        graphs.merged_graph(heterograph(EDGES, COUNTS)._graph, "edge")
