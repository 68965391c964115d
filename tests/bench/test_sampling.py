import json

import pytest
import torch

from featgraph import datasets
from featgraph.bench import sampling
from featgraph.cli import main


def test_torch_sampler_draws_distinct_in_edges_up_to_each_fanout():
    graph = datasets.rmat(7, 8)
    src, dst = graph.coo()
    degree = graph.in_degrees()
    fanouts = [4, 2]
    blocks = sampling.TorchSampler(graph, fanouts).sample(torch.arange(16), seed=0)
    assert blocks[-1].graph.num_dst_nodes == 16  # hop 0, input layer last
    for block, fanout in zip(blocks[::-1], fanouts, strict=True):
        block_src, block_dst = block.graph.coo()
        assert torch.equal(src[block.e_id], block.n_id[block_src])  # each edge joins the vertices it names
        assert torch.equal(dst[block.e_id], block.n_id[block_dst])
        assert block.e_id.unique().numel() == block.e_id.numel()
        frontier = block.n_id[: block.graph.num_dst_nodes]
        assert torch.equal(block.graph.in_degrees(), degree[frontier].clamp(max=fanout))


def test_bench_sampling_rows_time_every_sampler_against_featgraphs(tmp_path):
    out = tmp_path / "sampling.json"
    main([
        "bench", "sampling", "--scale", "8", "--fanouts", "4", "2", "--batch", "16", "--batches", "2", "--repeat", "1",
        "--json", str(out),
    ])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert rows[0]["sampler"].startswith("featgraph (") and rows[0]["time_over_featgraph"] == 1.0
    assert any(r["sampler"].startswith("torch, vectorised") for r in rows)
    for r in rows:
        assert r["ms_per_batch"] > 0
        assert r["seeds_per_s"] == pytest.approx(16 / r["ms_per_batch"] * 1e3)
        assert r["time_over_featgraph"] == pytest.approx(r["ms_per_batch"] / rows[0]["ms_per_batch"])
