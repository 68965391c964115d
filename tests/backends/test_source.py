"""Remembered kernel sources: a UDF traced again on another graph is lowered once, and every source served
is the text that lowering its spec afresh gives (so the memo never serves a kernel of another UDF,
schedule, parameter set or array-size class)."""

from __future__ import annotations

import pytest
import torch

from featgraph import Graph, ops, spmm, te
from featgraph.backends import gpu, source
from featgraph.backends.cpu import templates as cpu_templates
from featgraph.backends.gpu import templates as gpu_templates
from featgraph.kernel_spec import spec_key
from tests.conftest import random_edges

LOWER = source.lower  # the reference: lowering without the memo


@pytest.fixture
def served(monkeypatch):
    """Every (spec, templates, text) ``template_source`` serves from an empty memo, and each fresh lowering."""
    monkeypatch.setattr(source, "_sources", type(source._sources)(source._sources.size))
    record: dict[str, list] = {"served": [], "lowered": []}
    remembered = source.template_source

    def counting_lower(spec, templates):
        record["lowered"].append(spec)
        return LOWER(spec, templates)

    def recording(spec, templates):
        text = remembered(spec, templates)
        record["served"].append((spec, templates, text))
        return text

    monkeypatch.setattr(source, "lower", counting_lower)
    for module in ("cpu", "gpu"):
        monkeypatch.setattr(f"featgraph.backends.{module}.template_source", recording)
    return record


def block(num_src: int, num_dst: int, seed: int) -> Graph:
    """A sampled-block-like bipartite graph: duplicate edges, destinations without in-edges."""
    src, dst = random_edges(num_src, 5 * num_dst, seed=seed)
    return Graph.from_edge_index(torch.stack([src, dst % num_dst]), size=(num_src, num_dst))


def reference_gat(g: Graph, feat: torch.Tensor, a_src: torch.Tensor, a_dst: torch.Tensor) -> torch.Tensor:
    src, dst = g.coo()
    score = (feat[src] * a_src).sum(-1) + (feat[: g.num_dst_nodes][dst] * a_dst).sum(-1)
    score = torch.nn.functional.leaky_relu(score, 0.2)
    out = torch.zeros(g.num_dst_nodes, *feat.shape[1:], dtype=feat.dtype)
    for v in dst.unique().tolist():
        edges = dst == v
        out[v] = (torch.softmax(score[edges], dim=0).unsqueeze(-1) * feat[src[edges]]).sum(0)
    return out


def gat_step(g: Graph, heads: int = 2, d: int = 64) -> None:
    """GAT attention plus a mean aggregation, forward against a dense reference, and backward."""
    feat = torch.randn(g.num_src_nodes, heads, d, dtype=torch.float64, requires_grad=True)
    a_src, a_dst = (torch.randn(heads, d, dtype=torch.float64, requires_grad=True) for _ in range(2))
    attention = ops.gat_attention(g, feat, a_src, a_dst)
    mean = ops.copy_u_mean(g, feat)
    (attention.square().sum() + mean.sum()).backward()
    torch.testing.assert_close(attention.detach(), reference_gat(g, feat.detach(), a_src.detach(), a_dst.detach()))
    assert feat.grad is not None and torch.isfinite(feat.grad).all()


def test_blocks_of_one_size_class_lower_their_kernels_once(served):
    gat_step(block(40, 12, seed=1))
    lowered, kernels = len(served["lowered"]), len(served["served"])
    assert lowered > 0
    gat_step(block(47, 15, seed=2))  # another mini-batch's block: every source is remembered
    assert len(served["lowered"]) == lowered
    assert len(served["served"]) == 2 * kernels


def test_every_source_served_is_the_fresh_lowering(served):
    """Blocks on both sides of the CPU's cached-array threshold (larger arrays get their rows prefetched),
    the same specs lowered for the GPU, and UDFs differing only in their schedule or in a constant."""
    for num_src, num_dst, seed in [(40, 12, 1), (3000, 900, 2), (41, 13, 3), (3100, 950, 4)]:
        gat_step(block(num_src, num_dst, seed))
    g = block(30, 30, seed=5)
    x = te.placeholder((30, 8), name="X")
    for fds in (None, lambda s, out: s.split(out.axis[0], 4)):
        for scale in (2, 2.0):
            kernel = spmm(g, lambda s, d, e, scale=scale: te.compute((8,), lambda i: x[s, i] * scale), "sum", fds=fds)
            torch.testing.assert_close(kernel(X=torch.ones(30, 8)), ops.copy_u_sum(g, torch.ones(30, 8)) * 2)
    cpu_specs = [spec for spec, templates, _ in served["served"] if templates is cpu_templates]
    for spec in cpu_specs:
        gpu.source(spec)
        gpu.source(spec)
    assert len({text for _, _, text in served["served"]}) >= 8
    for spec, templates, text in served["served"]:
        assert text == LOWER(spec, templates)
    by_key: dict[tuple, set[str]] = {}
    for spec, templates, text in served["served"]:
        if templates is cpu_templates:
            by_key.setdefault(spec_key(spec), set()).add(text)
    # one UDF, prefetching its rows on the large blocks only: two sources under one spec key
    assert any(len(texts) == 2 and sum("__builtin_prefetch(P_" in t for t in texts) == 1 for texts in by_key.values())
    assert any(templates is gpu_templates for _, templates, _ in served["served"])
