"""featgraph.dgl.DataLoader against DGL's own DataLoader on the same graphs, seeds and samplers: the same seeds
batch by batch, every block edge a real edge of the graph (with every neighbour kept, the very edges DGL's
blocks hold), DGL's id type kept, excluded edges absent, DGL's options featgraph does not serve refused by name."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import featgraph.dgl as fdgl
from featgraph.graph.interop import import_dgl
from featgraph.loader import BlockBatch, HeteroBlockBatch, HeteroLinkBlockBatch, LinkBlockBatch

dgl = import_dgl()
pytestmark = pytest.mark.skipif(dgl is None, reason="DGL is not installed")
ID = "_ID"  # dgl.NID, dgl.EID


def random_graph(data: st.DataObject, idtype: torch.dtype) -> object:
    num_nodes = data.draw(st.integers(1, 12), label="num_nodes")
    edges = data.draw(st.lists(st.tuples(st.integers(0, num_nodes - 1), st.integers(0, num_nodes - 1)), max_size=40))
    src = torch.tensor([u for u, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v for _, v in edges], dtype=torch.int64)
    return dgl.graph((src, dst), num_nodes=num_nodes).astype(idtype)


def block_edges(block: object, etype: tuple[str, str, str] | None = None) -> set[tuple[int, int, int]]:
    """A block's edges (of ``etype`` on a typed block) as (global source, global destination, edge id)."""
    if etype is None:
        (u, v), src_ids, dst_ids, eids = block.edges(), block.srcdata[ID], block.dstdata[ID], block.edata[ID]
    else:
        u, v = block.edges(etype=etype)
        src_ids, dst_ids = block.srcnodes[etype[0]].data[ID], block.dstnodes[etype[2]].data[ID]
        eids = block.edata[ID][etype]
    return set(zip(src_ids[u.long()].tolist(), dst_ids[v.long()].tolist(), eids.tolist(), strict=True))


def pairs(u: torch.Tensor, v: torch.Tensor) -> set[tuple[int, int]]:
    return set(zip(u.tolist(), v.tolist(), strict=True))


def graph_edges(g: object, etype: object = None) -> set[tuple[int, int, int]]:
    u, v, e = g.edges(form="all", etype=etype)
    return set(zip(u.tolist(), v.tolist(), e.tolist(), strict=True))


@settings(max_examples=15, deadline=None)
@given(data=st.data(), idtype=st.sampled_from([torch.int32, torch.int64]), batch_size=st.integers(1, 5))
def test_node_batches_are_dgls_seeds_with_dgls_blocks_when_every_neighbour_is_kept(data, idtype, batch_size):
    g = random_graph(data, idtype)
    seeds = torch.tensor(data.draw(st.lists(st.integers(0, g.num_nodes() - 1), min_size=1, unique=True)), dtype=idtype)
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(2)
    ours = list(fdgl.DataLoader(g, seeds, sampler, batch_size=batch_size))
    # DGL's int64 path is the reference: DGL 2.1's fused int32 sampler can give a batch a block of an earlier one
    theirs = list(dgl.dataloading.DataLoader(g.long(), seeds.long(), sampler, batch_size=batch_size))
    assert len(ours) == len(theirs) and all(isinstance(batch, BlockBatch) for batch in ours)
    for (input_nodes, output_nodes, blocks), (their_input, their_output, their_blocks) in zip(
        ours, theirs, strict=True
    ):
        assert torch.equal(output_nodes.long(), their_output) and set(input_nodes.tolist()) == set(their_input.tolist())
        assert input_nodes.dtype == output_nodes.dtype == idtype and all(b.idtype == idtype for b in blocks)
        for block, their_block in zip(blocks, their_blocks, strict=True):
            assert block_edges(block) == block_edges(their_block)


@settings(max_examples=15, deadline=None)
@given(data=st.data(), fanout=st.integers(1, 3), replace=st.booleans())
def test_masked_and_weighted_draws_take_only_edges_dgl_could_take(data, fanout, replace):
    g = random_graph(data, torch.int64)
    mask = torch.tensor(
        data.draw(st.lists(st.booleans(), min_size=g.num_edges(), max_size=g.num_edges())), dtype=torch.bool
    )
    g.edata["mask"], g.edata["p"] = mask, mask.double() * 2.5
    allowed = {edge for edge in graph_edges(g) if mask[edge[2]]}
    for options in ({"mask": "mask"}, {"prob": "p"}):
        sampler = dgl.dataloading.NeighborSampler([fanout], replace=replace, **options)
        for _, output_nodes, [block] in fdgl.DataLoader(g, torch.arange(g.num_nodes()), sampler, batch_size=4):
            drawn = block_edges(block)
            assert drawn <= allowed
            in_degrees = torch.bincount(block.edges()[1], minlength=output_nodes.numel())
            allowed_degrees = torch.tensor([sum(1 for _, v, _ in allowed if v == n) for n in output_nodes.tolist()])
            limit = fanout if replace else torch.clamp(allowed_degrees, max=fanout)
            assert torch.equal(in_degrees, torch.where(allowed_degrees > 0, limit, 0))


@settings(max_examples=10, deadline=None)
@given(data=st.data(), exclude=st.sampled_from([None, "self", "reverse_id"]), batch_size=st.integers(1, 6))
def test_edge_batches_pair_the_seed_edges_and_leave_out_what_exclude_names(data, exclude, batch_size):
    g = random_graph(data, torch.int64)
    if g.num_edges() == 0:
        return
    reverse_eids = torch.arange(g.num_edges()).flip(0)
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.MultiLayerFullNeighborSampler(1),
        exclude=exclude,
        reverse_eids=reverse_eids if exclude == "reverse_id" else None,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(2),
    )
    loader = fdgl.DataLoader(g, torch.arange(g.num_edges()), sampler, batch_size=batch_size)
    theirs = dgl.dataloading.DataLoader(g, torch.arange(g.num_edges()), sampler, batch_size=batch_size)
    src, dst = g.edges()
    for batch, (_, their_pairs, _, _) in zip(loader, theirs, strict=True):
        input_nodes, pair_graph, neg_pair_graph, [block] = batch
        assert isinstance(batch, LinkBlockBatch)
        eids = pair_graph.edata[ID]
        assert torch.equal(eids, their_pairs.edata[ID])
        u, v = pair_graph.edges()
        seeds = pair_graph.ndata[ID]
        assert torch.equal(seeds[u], src[eids]) and torch.equal(seeds[v], dst[eids])
        assert neg_pair_graph.num_edges() == 2 * eids.numel() and torch.equal(neg_pair_graph.ndata[ID], seeds)
        excluded = {
            None: set(),
            "self": set(eids.tolist()),
            "reverse_id": set(eids.tolist() + reverse_eids[eids].tolist()),
        }
        expected = {
            edge for edge in graph_edges(g) if edge[1] in set(seeds.tolist()) and edge[2] not in excluded[exclude]
        }
        assert block_edges(block) == expected


@settings(max_examples=10, deadline=None)
@given(data=st.data(), idtype=st.sampled_from([torch.int32, torch.int64]))
def test_typed_batches_are_dgls_seeds_with_dgls_blocks_per_edge_type(data, idtype):
    counts = {"user": data.draw(st.integers(1, 6)), "game": data.draw(st.integers(1, 6))}
    edges = {}
    for etype in [("user", "follows", "user"), ("user", "plays", "game"), ("game", "played-by", "user")]:
        pairs = data.draw(
            st.lists(st.tuples(st.integers(0, counts[etype[0]] - 1), st.integers(0, counts[etype[2]] - 1)), max_size=15)
        )
        edges[etype] = (
            torch.tensor([u for u, _ in pairs], dtype=torch.int64),
            torch.tensor([v for _, v in pairs], dtype=torch.int64),
        )
    g = dgl.heterograph(edges, num_nodes_dict=counts).astype(idtype)
    seeds = {t: torch.arange(n, dtype=idtype) for t, n in counts.items()}
    sampler = dgl.dataloading.MultiLayerFullNeighborSampler(2)
    ours = list(fdgl.DataLoader(g, seeds, sampler, batch_size=3))
    theirs = list(
        dgl.dataloading.DataLoader(g.long(), {t: ids.long() for t, ids in seeds.items()}, sampler, batch_size=3)
    )
    assert len(ours) == len(theirs) and all(isinstance(batch, HeteroBlockBatch) for batch in ours)
    for (input_nodes, output_nodes, blocks), (_, their_output, their_blocks) in zip(ours, theirs, strict=True):
        for ntype, ids in their_output.items():
            assert torch.equal(output_nodes[ntype].long(), ids) and output_nodes[ntype].dtype == idtype
        assert all(ids.dtype == idtype for ids in input_nodes.values())
        for block, their_block in zip(blocks, their_blocks, strict=True):
            assert block.idtype == idtype and block.canonical_etypes == tuple(g.canonical_etypes)
            for etype in g.canonical_etypes:
                assert block_edges(block, etype) == block_edges(their_block, etype)


def test_typed_edge_batches_exclude_the_reverse_types_and_pair_by_relation_name():
    g = dgl.heterograph(
        {("A", "AB", "B"): ([0, 1, 2, 2], [0, 1, 1, 2]), ("B", "BA", "A"): ([0, 1, 1, 2], [0, 1, 2, 2])}
    )
    sampler = dgl.dataloading.as_edge_prediction_sampler(
        dgl.dataloading.NeighborSampler([2, 2]),
        exclude="reverse_types",
        reverse_etypes={"AB": "BA", "BA": "AB"},
        negative_sampler=dgl.dataloading.negative_sampler.GlobalUniform(2),
    )
    seeds = {"AB": torch.arange(4), "BA": torch.arange(4)}
    for batch in fdgl.DataLoader(g, seeds, sampler, batch_size=3, shuffle=True):
        _, pos_graph, neg_graph, blocks = batch
        assert isinstance(batch, HeteroLinkBlockBatch)
        for rel in ("AB", "BA"):
            assert not pairs(*pos_graph[rel].edges()) & pairs(*blocks[-1][rel].edges())
            excluded = set(pos_graph.edata[ID].get(g.to_canonical_etype(rel), torch.zeros(0)).tolist())
            other = "BA" if rel == "AB" else "AB"
            excluded |= set(pos_graph.edata[ID].get(g.to_canonical_etype(other), torch.zeros(0)).tolist())
            assert not excluded & set(blocks[0].edata[ID][g.to_canonical_etype(rel)].tolist())
            src_type, _, dst_type = g.to_canonical_etype(rel)
            u, v = neg_graph[rel].edges()
            negatives = pairs(neg_graph.ndata[ID][src_type][u], neg_graph.ndata[ID][dst_type][v])
            assert not negatives & pairs(*g.edges(etype=rel))


def homogeneous() -> object:
    return dgl.graph(([0, 1, 2], [1, 2, 0]))


def bad_fanouts() -> object:
    return dgl.dataloading.NeighborSampler([{"follows": 2}])


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"use_uva": True}, ValueError, "use_uva=True"),
        ({"use_alternate_streams": True}, ValueError, "use_alternate_streams=True"),
        ({"pin_prefetcher": True}, ValueError, "pin_prefetcher=True"),
        ({"gpu_cache": {"node": {}}}, ValueError, "gpu_cache"),
        ({"worker_init_fn": print}, TypeError, r"\['worker_init_fn'\] are not supported"),
        ({"graph": "g"}, TypeError, "graph must be a DGL graph"),
        ({"graph_sampler": "labor"}, TypeError, "DGL's LaborSampler is not supported"),
        ({"graph_sampler": "out"}, ValueError, "edge_dir='out'"),
        ({"graph_sampler": "prefetch"}, ValueError, "prefetch_node_feats"),
        ({"graph_sampler": "output_device"}, ValueError, "output_device"),
        ({"graph_sampler": "negative"}, TypeError, "DGL's function is not supported"),
        ({"graph_sampler": "reverse_etypes"}, ValueError, "reverse_etypes is read on a graph of several edge types"),
        ({"batch_size": 0}, ValueError, "batch_size must be an int >= 1"),
        ({"use_ddp": "yes"}, TypeError, "use_ddp must be a bool"),
        ({"use_ddp": True}, ValueError, "use_ddp=True needs torch.distributed's process group"),
        ({"indices": {"_N": torch.arange(2), "x": torch.arange(2)}}, ValueError, "indices: a graph of one node and"),
    ],
)
def test_what_featgraph_does_not_serve_is_refused_by_name(arguments, error, message):
    samplers = {
        "labor": lambda: dgl.dataloading.LaborSampler([2]),
        "out": lambda: dgl.dataloading.NeighborSampler([2], edge_dir="out"),
        "prefetch": lambda: dgl.dataloading.NeighborSampler([2], prefetch_node_feats=["x"]),
        "output_device": lambda: dgl.dataloading.NeighborSampler([2], output_device="cpu"),
        "negative": lambda: dgl.dataloading.as_edge_prediction_sampler(
            dgl.dataloading.NeighborSampler([2]), negative_sampler=lambda g, eids: (eids, eids)
        ),
        "reverse_etypes": lambda: dgl.dataloading.as_edge_prediction_sampler(
            dgl.dataloading.NeighborSampler([2]), exclude="self", reverse_etypes={"a": "b"}
        ),
    }
    given = {"graph": homogeneous(), "indices": torch.arange(3), "graph_sampler": dgl.dataloading.NeighborSampler([2])}
    given.update(arguments)
    if given["graph_sampler"] in samplers:
        given["graph_sampler"] = samplers[given["graph_sampler"]]()
    with pytest.raises(error, match=message):
        fdgl.DataLoader(**given)


def test_a_typed_hop_without_a_fanout_for_an_edge_type_is_refused_by_name():
    g = dgl.heterograph({("u", "follows", "u"): ([0], [1]), ("u", "likes", "u"): ([1], [0])})
    with pytest.raises(ValueError, match=r"no fan-out for edge type \('u', 'likes', 'u'\)"):
        fdgl.DataLoader(g, {"u": torch.arange(2)}, bad_fanouts())


def test_batches_go_to_the_device_asked_for_and_the_loader_has_dgls_length():
    loader = fdgl.DataLoader(
        homogeneous(), torch.arange(3), dgl.dataloading.NeighborSampler([2]), batch_size=2, device="cpu"
    )
    assert len(loader) == 2 and loader.device == torch.device("cpu")
    as_dict = fdgl.DataLoader(
        homogeneous(), {"_N": torch.arange(3)}, dgl.dataloading.NeighborSampler([2]), batch_size=3
    )
    assert torch.equal(next(iter(as_dict)).seeds, torch.arange(3))
    assert all(block.device == torch.device("cpu") for _, _, blocks in loader for block in blocks)
