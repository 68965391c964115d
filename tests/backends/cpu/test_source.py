import torch

from featgraph import Graph, sddmm, te
from featgraph.backends import cpu


def _dot_kernel(g: Graph, d: int):
    XV = te.placeholder((g.num_nodes, d), name="XV")

    def edgefunc(s, t, e):
        k, j = te.reduce_axis((0, d), name="k"), te.reduce_axis((0, d), name="k")
        return te.compute((1,), lambda i: te.sum(XV[s, k] * XV[t, k], axis=k) + te.sum(XV[s, j], axis=j))

    return sddmm(g, edgefunc)


def test_a_udf_traced_again_gives_the_same_source_and_distinct_reduce_variables():
    g = Graph(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]), 3)
    first, second = _dot_kernel(g, 5), _dot_kernel(g, 5)
    assert first.source == second.source == cpu.source(first.spec)
    assert "rk_k_0" in first.source and "rk_k_1" in first.source  # two axes named k stay apart
    x = torch.randn(3, 5)
    src, dst = g.coo()
    expected = ((x[src] * x[dst]).sum(1) + x[src].sum(1)).unsqueeze(1)
    torch.testing.assert_close(second(XV=x), expected)
