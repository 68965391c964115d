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


def test_gathered_arrays_that_stay_cached_are_not_prefetched():
    """Rows of an array beyond ``CACHED_ARRAY_BYTES`` are prefetched ahead of use, a smaller array's not; the
    staged writes of an SDDMM are not prefetched, direct ones are."""
    from featgraph.backends.cpu.templates import CACHED_ARRAY_BYTES

    big = CACHED_ARRAY_BYTES // 4 // 8 + 1  # rows of 8 floats just past the limit
    g = Graph(torch.tensor([0, 1, big - 1]), torch.tensor([1, big - 1, 0]), big)
    XV, S = te.placeholder((big, 8), name="XV"), te.placeholder((big, 1), name="S")

    def edgefunc(s, t, e):
        return te.compute((8,), lambda i: XV[s, i] * S[s, 0] + XV[t, i])

    direct, staged = sddmm(g, edgefunc, write_buckets=0), sddmm(g, edgefunc, write_buckets=2)
    for kernel in (direct, staged):
        assert "__builtin_prefetch(P_XV + (int64_t)srcs[j + 8]" in kernel.source
        assert "__builtin_prefetch(P_XV + (int64_t)dsts[j + 8]" in kernel.source
        assert "__builtin_prefetch(P_S" not in kernel.source  # big / 8 floats: under the limit
    assert "__builtin_prefetch(out + (int64_t)FG_EID(j + 8)" in direct.source
    assert "__builtin_prefetch(out" not in staged.source
    x, s = torch.randn(big, 8), torch.randn(big, 1)
    src, dst = g.coo()
    for kernel in (direct, staged):
        torch.testing.assert_close(kernel(XV=x, S=s), x[src] * s[src] + x[dst])
