import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.graph.interop import import_dgl
from featgraph.sampling import NeighborSampler

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
