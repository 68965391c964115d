import pickle

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.graph import HeteroGraph
from featgraph.graph.interop import import_dgl
from featgraph.sampling import HeteroBlock, HeteroNeighborSampler, HeteroPairGraph, NeighborSampler, PairGraph

NID = EID = "_ID"  # dgl.NID, dgl.EID


def sampled_blocks(num_nodes: int, edges: list[tuple[int, int]], fanouts: list[int], seeds: list[int]):
    src = torch.tensor([u for u, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v for _, v in edges], dtype=torch.int64)
    graph = Graph(src, dst, num_nodes)
    return graph, NeighborSampler(graph, fanouts).sample(torch.tensor(seeds), seed=0).blocks


@settings(max_examples=40, deadline=None)
@given(
    num_nodes=st.integers(1, 30),
    edges=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29)), max_size=120),
    fanouts=st.lists(st.sampled_from([-1, 1, 2, 5]), min_size=1, max_size=3),
    data=st.data(),
)
def test_a_blocks_dgl_view_names_real_edges_by_their_global_ids(num_nodes, edges, fanouts, data):
    edges = [(u % num_nodes, v % num_nodes) for u, v in edges]  # duplicates, self loops, isolated vertices
    seeds = data.draw(st.lists(st.integers(0, num_nodes - 1), min_size=1, max_size=5, unique=True))
    graph, blocks = sampled_blocks(num_nodes, edges, fanouts, seeds)
    g_src, g_dst = graph.coo()
    for block in blocks:
        u, v = block.edges()
        assert block.num_edges() == block.number_of_edges() == u.numel()
        assert block.num_src_nodes() == block.number_of_src_nodes() == block.srcdata[NID].numel()
        assert block.num_dst_nodes() == block.number_of_dst_nodes() == block.dstdata[NID].numel()
        assert torch.equal(block.srcdata[NID][: block.num_dst_nodes()], block.dstdata[NID])  # DGL's block layout
        global_src, global_dst = block.srcdata[NID][u], block.dstdata[NID][v]
        eid = block.edata[EID]
        assert torch.equal(g_src[eid], global_src) and torch.equal(g_dst[eid], global_dst)  # each a real edge
        assert torch.equal(block.in_degrees(), torch.bincount(v, minlength=block.num_dst_nodes()))
        assert block.is_block and block.device == torch.device("cpu") and block.idtype == torch.int64
    assert torch.equal(blocks[-1].dstdata[NID], torch.tensor(seeds))


def test_local_scope_forgets_what_was_assigned_inside_it():
    _, [block] = sampled_blocks(4, [(0, 1), (2, 1), (3, 0)], [-1], [1, 0])
    block.srcdata["h"] = torch.ones(block.num_src_nodes(), 2)
    with block.local_scope():
        block.srcdata["h"] = torch.zeros(block.num_src_nodes(), 2)
        block.dstdata["out"] = torch.ones(block.num_dst_nodes())
        block.edata[EID] = torch.zeros(block.num_edges(), dtype=torch.int64)
    assert torch.equal(block.srcdata["h"], torch.ones(block.num_src_nodes(), 2))
    assert "out" not in block.dstdata and torch.equal(block.edata[EID], block.e_id)
    graph, n_id, e_id = block  # unpacks as before
    assert graph is block.graph and n_id is block.n_id and e_id is block.e_id


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: b.num_src_nodes("paper"), "ntype='paper'"),
        (lambda b: b.num_edges("cites"), "etype='cites'"),
        (lambda b: b.edges(form="eid"), "form must be"),
        (lambda b: b.edges(order="srcdst"), "order 'srcdst' is not supported"),
    ],
)
def test_what_a_homogeneous_block_cannot_answer_is_refused_by_name(call, message):
    _, [block] = sampled_blocks(3, [(0, 1), (2, 1)], [-1], [1])
    with pytest.raises(ValueError, match=message):
        call(block)


def test_the_view_agrees_with_dgls_own_block_of_the_same_neighbourhood():
    dgl = import_dgl()
    if dgl is None:
        pytest.skip("DGL does not import here")
    edges = [(0, 1), (2, 1), (3, 1), (1, 0), (4, 0), (2, 2)]
    graph, [block] = sampled_blocks(5, edges, [-1], [1, 0])
    theirs = dgl.to_block(dgl.in_subgraph(dgl.graph(graph.coo(), num_nodes=5), [1, 0]), dst_nodes=torch.tensor([1, 0]))
    assert torch.equal(block.dstdata[NID], theirs.dstdata[dgl.NID])
    assert block.num_src_nodes() == theirs.num_src_nodes() and block.num_edges() == theirs.num_edges()

    def named_edges(b) -> set[tuple[int, int, int]]:
        u, v = b.edges()
        return set(zip(b.srcdata[NID][u].tolist(), b.dstdata[NID][v].tolist(), b.edata[EID].tolist(), strict=True))

    assert named_edges(block) == named_edges(theirs)


TYPES = [("user", "follows", "user"), ("user", "buys", "item"), ("item", "bought-by", "user")]


def typed_block(counts: dict[str, int], edges: dict, seeds: dict[str, list[int]]) -> tuple[HeteroGraph, HeteroBlock]:
    """A typed graph and the block of every in-edge of ``seeds``."""
    graph = HeteroGraph(
        {
            et: (
                torch.tensor([u for u, _ in pairs], dtype=torch.int64),
                torch.tensor([v for _, v in pairs], dtype=torch.int64),
            )
            for et, pairs in edges.items()
        },
        counts,
    )
    [block] = (
        HeteroNeighborSampler(graph, [-1]).sample_blocks({t: torch.tensor(ids) for t, ids in seeds.items()}, 0).blocks
    )
    return graph, block


def typed_edges(block, etype) -> set[tuple[int, int, int]]:
    u, v = block.edges(etype=etype)
    src, dst = block.srcnodes[etype[0]].data[NID], block.dstnodes[etype[2]].data[NID]
    return set(zip(src[u].tolist(), dst[v].tolist(), block.edata[EID][etype].tolist(), strict=True))


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_a_typed_blocks_dgl_view_is_dgls_block_of_the_same_neighbourhood(data):
    """Against DGL's own ``to_block`` of the seeds' in-edges (where DGL imports) and the graph itself: per type the
    same sources, destinations and edges, read the way DGL code reads them."""
    counts = {"user": data.draw(st.integers(1, 6)), "item": data.draw(st.integers(1, 6))}
    ends = {t: st.integers(0, n - 1) for t, n in counts.items()}
    edges = {et: data.draw(st.lists(st.tuples(ends[et[0]], ends[et[2]]), max_size=12)) for et in TYPES}
    seeds = {t: data.draw(st.lists(ends[t], min_size=1, max_size=3, unique=True)) for t in counts}
    graph, block = typed_block(counts, edges, seeds)
    assert block.ntypes == block.srctypes == block.dsttypes == ["user", "item"] and block.etypes == [
        et[1] for et in TYPES
    ]
    assert block.idtype == torch.int64 and block.device == torch.device("cpu") and block.is_block
    for etype in TYPES:
        assert typed_edges(block, etype) == {(u, v, e) for e, (u, v) in enumerate(edges[etype]) if v in seeds[etype[2]]}
        assert block.num_edges(etype) == block.num_edges(etype[1]) == len(typed_edges(block, etype))
    assert block.num_edges() == sum(block.num_edges(et) for et in TYPES)
    for ntype, ids in seeds.items():
        assert block.dstdata[NID][ntype].tolist() == ids and block.num_dst_nodes(ntype) == len(ids)
        assert torch.equal(block.srcdata[NID][ntype][: len(ids)], block.dstdata[NID][ntype])
    dgl = import_dgl()
    if dgl is None:
        return
    theirs_graph = dgl.heterograph({et: tuple(graph.relation(et).coo()) for et in TYPES}, counts)
    dst_nodes = {t: torch.tensor(ids) for t, ids in seeds.items()}
    frontier = dgl.in_subgraph(theirs_graph, dst_nodes)
    theirs = dgl.to_block(frontier, dst_nodes=dst_nodes)
    for etype in TYPES:  # DGL's block names the frontier's edges, which name the graph's
        frontier_ids = frontier.edges[etype].data[dgl.EID]
        named = {(u, v, int(frontier_ids[e])) for u, v, e in typed_edges(theirs, etype)}
        assert typed_edges(block, etype) == named
    for ntype in counts:
        assert set(block.srcdata[NID][ntype].tolist()) == set(theirs.srcdata[dgl.NID][ntype].tolist())


def test_a_typed_blocks_frames_relations_and_scope():
    _, block = typed_block(
        {"user": 3, "item": 2},
        {TYPES[0]: [(0, 1)], TYPES[1]: [(1, 0)], TYPES[2]: [(0, 2), (1, 1)]},
        {"user": [1, 2], "item": [0]},
    )
    block.srcdata["h"] = {"user": torch.ones(block.num_src_nodes("user"))}
    with block.local_scope():
        block.srcdata["h"] = {"user": torch.zeros(block.num_src_nodes("user"))}
        block.dstnodes["item"].data["out"] = torch.ones(1)
        assert "out" in block.dstdata and set(block.dstdata["out"]) == {"item"}
    assert torch.equal(block.srcdata["h"]["user"], torch.ones(3)) and "out" not in block.dstdata
    del block.srcdata["h"]
    assert "h" not in block.srcdata and len(block.srcdata) == 1
    buys = block["buys"]  # one relation: DGL's block[etype]
    assert buys.canonical_etypes == (TYPES[1],) and buys.num_edges() == 1 and buys.edges()[0].tolist() == [0]
    follows = block[TYPES[0]]
    assert torch.equal(follows.srcdata[NID], block.srcdata[NID]["user"]) and follows.num_src_nodes() == 3
    assert block.astype(torch.int32).idtype == torch.int32 and block.astype(torch.int64) is block


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda b: b.num_src_nodes(), ValueError, r"ntype: the block has node types \['user', 'item'\]; name one"),
        (lambda b: b.num_dst_nodes("nope"), KeyError, "unknown node type 'nope'"),
        (lambda b: b.edges(), ValueError, "etype: the block has edge types"),
        (lambda b: b["nope"], KeyError, "no edge type with the relation 'nope'"),
        (lambda b: b.srcnodes["nope"], KeyError, "unknown node type 'nope'"),
        (lambda b: b.srcdata.__setitem__("h", torch.ones(2)), TypeError, "several types take a dict type -> value"),
        (lambda b: b.srcdata.__setitem__("h", {"nope": torch.ones(2)}), KeyError, "unknown type 'nope'"),
        (lambda b: b.srcdata["missing"], KeyError, "missing"),
        (lambda b: b.edges(etype="buys", order="srcdst"), ValueError, "order 'srcdst' is not supported"),
    ],
)
def test_what_a_typed_block_cannot_answer_is_refused_by_name(call, error, message):
    _, block = typed_block({"user": 2, "item": 2}, {et: [(0, 1)] for et in TYPES}, {"user": [1], "item": [1]})
    with pytest.raises(error, match=message):
        call(block)


@settings(max_examples=20, deadline=None)
@given(
    num_nodes=st.integers(1, 8),
    edges=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=20),
    idtype=st.sampled_from([torch.int32, torch.int64]),
)
def test_a_pair_graph_is_a_featgraph_graph_with_dgls_methods(num_nodes, edges, idtype):
    """Against the edges it was built from: DGL's methods give them (and the ids), featgraph's properties stay
    ints, a move keeps the ids, a derived graph is a plain ``Graph``, and a pickled copy (a worker's) is whole."""
    src = torch.tensor([u % num_nodes for u, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v % num_nodes for _, v in edges], dtype=torch.int64)
    node_ids, edge_ids = (torch.arange(num_nodes) * 3).to(idtype), torch.arange(len(edges)).to(idtype)
    pair = PairGraph(src, dst, num_nodes, node_ids, edge_ids)
    assert pair.num_nodes() == pair.num_nodes == pair.number_of_nodes() == num_nodes and isinstance(pair, Graph)
    assert pair.num_edges() == pair.num_edges == len(edges) and pair.num_src_nodes() == pair.num_dst_nodes == num_nodes
    u, v = pair.edges()
    assert (
        torch.equal(u, src) and torch.equal(v, dst) and torch.equal(pair.edges(form="all")[2], torch.arange(len(edges)))
    )
    assert pair.ndata[NID] is node_ids and pair.edata[EID] is edge_ids and pair.idtype == idtype
    moved = pickle.loads(pickle.dumps(pair.to("cpu", non_blocking=False)._mapped(torch.clone)))
    assert isinstance(moved, PairGraph) and torch.equal(moved.ndata[NID], node_ids) and torch.equal(moved.coo()[0], src)
    assert type(pair.reverse()) is Graph
    typed = HeteroPairGraph(
        {TYPES[1]: PairGraph(src, dst, num_nodes, {"user": node_ids, "item": node_ids}, edge_ids)},
        {"user": node_ids, "item": node_ids},
    )
    assert (
        typed["buys"] is typed[TYPES[1]]
        and torch.equal(typed.edata[EID], edge_ids)
        and typed.canonical_etypes == [TYPES[1]]
    )
    assert (
        typed.num_nodes() == 2 * num_nodes
        and typed.num_nodes("item") == num_nodes
        and typed.num_edges("buys") == len(edges)
    )
    assert torch.equal(typed.edges()[0], src) and typed.ndata[NID]["item"] is node_ids and typed.idtype == idtype
    assert (
        typed["buys"].ndata[NID]["item"] is node_ids and typed.ntypes == ["user", "item"] and typed.etypes == ["buys"]
    )
    copied = pickle.loads(pickle.dumps(typed.to("cpu")))
    assert isinstance(copied, HeteroPairGraph) and torch.equal(copied["buys"].edata[EID], edge_ids)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda p: p["nope"], KeyError, "no edge type with the relation 'nope'"),
        (lambda p: p.edges(), ValueError, "etype: the pair graph has edge types"),
        (lambda p: p.num_nodes("nope"), KeyError, "unknown node type 'nope'"),
        (lambda p: p["buys"].edges(form="eid"), ValueError, "form must be 'uv' or 'all'"),
    ],
)
def test_what_a_typed_pair_graph_cannot_answer_is_refused_by_name(call, error, message):
    ids = torch.arange(2)
    typed = HeteroPairGraph({et: PairGraph([0], [1], 2, ids, ids[:1]) for et in TYPES[:2]}, {"user": ids, "item": ids})
    with pytest.raises(error, match=message):
        call(typed)
