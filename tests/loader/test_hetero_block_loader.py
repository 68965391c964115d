"""HeteroBlockLoader against the full data: DGL's ``(input_nodes, output_nodes, blocks)`` batches whose blocks
map back to input edges, features and labels sliced by the batch's ids, epochs covering every seed of every
given type once, and bad input named."""

from __future__ import annotations

import pytest
import torch

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
