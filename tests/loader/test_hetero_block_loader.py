"""HeteroBlockLoader against the full data: DGL's ``(input_nodes, output_nodes, blocks)`` batches whose blocks
map back to input edges, features and labels sliced by the batch's ids, epochs covering every seed of every
given type once, and bad input named."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph.graph import HeteroGraph
from featgraph.loader import HeteroBlockLoader

from .test_hetero_loader import AUTHORS, PAPERS, hetero_data

pytest.importorskip("torch_geometric")


def test_batches_are_dgl_blocks_with_the_datas_rows() -> None:
    data = hetero_data()
    papers, authors = torch.arange(1, PAPERS, 4), torch.tensor([0, 7, 39])
    loader = HeteroBlockLoader(data, [3, 2], 5, input_nodes={"paper": papers, "author": authors}, seed=3)
    seen = {"paper": [], "author": []}
    positions = []
    for batch in loader:
        input_nodes, output_nodes, blocks = batch
        assert len(blocks) == 2 and output_nodes.keys() == {"paper", "author"}
        for node_type, ids in output_nodes.items():
            seen[node_type] += ids.tolist()
            assert torch.equal(blocks[-1].n_id[node_type][: blocks[-1].num_dst_nodes(node_type)], ids)
        assert torch.equal(batch.x["paper"], data["paper"].x[input_nodes["paper"]])
        assert torch.equal(batch.x["author"], data["author"].x[input_nodes["author"]])
        assert "venue" not in batch.x and batch.y.keys() == {"paper"}
        assert torch.equal(batch.y["paper"], data["paper"].y[output_nodes["paper"]])
        for block in blocks:
            for edge_type in data.edge_types:
                src, dst = block.relation(edge_type).coo()
                original = data[edge_type].edge_index[:, block.e_id[edge_type]]
                assert torch.equal(block.n_id[edge_type[0]][src], original[0])
                assert torch.equal(block.n_id[edge_type[2]][dst], original[1])
        inputs = torch.cat([papers, authors])
        chosen = inputs[batch.input_id]
        assert torch.equal(chosen, torch.cat([output_nodes["paper"], output_nodes["author"]]))
        positions += batch.input_id.tolist()
    assert sorted(seen["paper"]) == papers.tolist() and sorted(seen["author"]) == authors.tolist()
    assert sorted(positions) == list(range(papers.numel() + authors.numel()))


def test_pyg_style_inputs_masks_weights_and_a_featgraph_graph() -> None:
    data = hetero_data()
    mask = data["paper"].train_mask
    loader = HeteroBlockLoader(data, [2], 1000, input_nodes=("paper", mask), shuffle=False, weight_attr="weight")
    (batch,) = list(loader)
    assert torch.equal(batch.seeds["paper"], mask.nonzero().flatten())
    graph = HeteroGraph({et: data[et].edge_index for et in data.edge_types}, {"paper": PAPERS, "author": AUTHORS,
                        "venue": 6, "lonely": 4})  # fmt: skip
    plain = HeteroBlockLoader(graph, {et: [1, 1] for et in data.edge_types}, 16, input_nodes="author", seed=0)
    batches = list(plain)
    assert len(batches) == len(plain) == -(-AUTHORS // 16)
    assert all(b.x == {} and b.y == {} and len(b.blocks) == 2 for b in batches)


def test_bad_input_is_named() -> None:
    data = hetero_data()
    with pytest.raises(ValueError, match="input_nodes: unknown node type 'nope'"):
        HeteroBlockLoader(data, [1], input_nodes={"nope": torch.tensor([0])})
    with pytest.raises(ValueError, match="input_nodes: expected at least one node type"):
        HeteroBlockLoader(data, [1], input_nodes={})
    with pytest.raises(ValueError, match="weight_attr 'nope'"):
        HeteroBlockLoader(data, [1], input_nodes="paper", weight_attr="nope")
    with pytest.raises(TypeError, match="data: expected a PyG HeteroData, a typed store pair or a featgraph"):
        HeteroBlockLoader(torch.zeros(2, 3), [1], input_nodes="paper")


def typed_graph(data: st.DataObject) -> HeteroGraph:
    counts = {"user": data.draw(st.integers(1, 6)), "item": data.draw(st.integers(1, 6))}
    edges = {}
    for edge_type in [("user", "follows", "user"), ("user", "buys", "item"), ("item", "bought-by", "user")]:
        ends = st.tuples(st.integers(0, counts[edge_type[0]] - 1), st.integers(0, counts[edge_type[2]] - 1))
        pairs = data.draw(st.lists(ends, max_size=15))
        edges[edge_type] = (
            torch.tensor([u for u, _ in pairs], dtype=torch.int64),
            torch.tensor([v for _, v in pairs], dtype=torch.int64),
        )
    return HeteroGraph(edges, counts)


@settings(max_examples=20, deadline=None)
@given(data=st.data(), idtype=st.sampled_from([torch.int32, torch.int64]))
def test_property_typed_masks_keep_only_marked_edges_and_ids_keep_the_idtype(data, idtype) -> None:
    """Per edge type a bool edge attribute is a sampling mask: with every neighbour kept, each relation's input
    block holds exactly the marked in-edges of its destinations (the reference: the relation's edges filtered by
    the mask); every id, the batch's and the blocks', is of ``idtype``."""
    graph = typed_graph(data)
    masks = {
        et: torch.tensor(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=torch.bool)
        for et in graph.edge_types
        for n in [graph.num_edges_of(et)]
    }
    seeds = {"user": torch.arange(graph.num_nodes_dict["user"])}
    edge_attrs = {et: {"keep": mask} for et, mask in masks.items()}
    loader = HeteroBlockLoader(
        graph, [-1], 4, input_nodes=seeds, weight_attr="keep", edge_attrs=edge_attrs, idtype=idtype
    )
    for input_nodes, output_nodes, [block] in loader:
        assert (
            all(ids.dtype == idtype for ids in [*input_nodes.values(), *output_nodes.values()])
            and block.idtype == idtype
        )
        for edge_type in graph.edge_types:
            dst = graph.relation(edge_type).coo()[1]
            destinations = block.n_id[edge_type[2]][: block.num_dst_nodes(edge_type[2])].long()
            marked = masks[edge_type] & torch.isin(dst, destinations)
            assert sorted(block.e_id[edge_type].tolist()) == marked.nonzero().flatten().tolist()


@pytest.mark.parametrize(
    ("edge_attrs", "error", "message"),
    [
        ([1], TypeError, "edge_attrs must be a dict edge type"),
        ({"nope": {"w": torch.ones(1)}}, KeyError, "no edge type with the relation 'nope'"),
        ({"buys": [1]}, TypeError, r"edge_attrs\['buys'\] must be a dict name -> per-edge tensor"),
        (
            {"buys": {"w": torch.ones(9)}},
            ValueError,
            r"edge_attrs\['buys'\]\['w'\] must have one row per edge of the type \(1\)",
        ),
    ],
)
def test_bad_typed_edge_attrs_are_named(edge_attrs, error, message) -> None:
    graph = HeteroGraph(
        {("user", "buys", "item"): ([0], [1]), ("item", "bought-by", "user"): ([1], [0])}, {"user": 1, "item": 2}
    )
    with pytest.raises(error, match=message):
        HeteroBlockLoader(graph, [1], input_nodes="user", edge_attrs=edge_attrs)
    with pytest.raises(TypeError, match="edge_attrs are passed only with a featgraph HeteroGraph"):
        HeteroBlockLoader(hetero_data(), [1], input_nodes="paper", edge_attrs={})
