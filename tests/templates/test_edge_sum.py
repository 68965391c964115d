import pytest
import torch

import featgraph as fg
from featgraph import te
from featgraph.templates import edge_sum
from tests.conftest import random_edges


@pytest.mark.parametrize(("n", "e"), [(0, 0), (5, 0), (30, 250)])
@pytest.mark.parametrize("threads", [1, 2])
def test_outer_products_summed_over_edges(n, e, threads):
    d1, d2 = 3, 5
    src, dst = random_edges(n, e, seed=71)
    g = fg.Graph(src, dst, n)
    X = te.placeholder((n, d1), dtype="float64", name="X")
    Y = te.placeholder((n, d2), dtype="float64", name="Y")
    kernel = edge_sum(g, lambda s, t, i: te.compute((d1, d2), lambda a, b: X[s, a] * Y[t, b]), num_threads=threads)
    x, y = torch.randn(n, d1, dtype=torch.float64), torch.randn(n, d2, dtype=torch.float64)
    torch.testing.assert_close(kernel(X=x, Y=y), x[src].t() @ y[dst])
    assert torch.equal(kernel(X=x, Y=y), kernel(X=x, Y=y))  # deterministic


def test_int64_ids_compare_exactly():
    n = 12
    src, dst = random_edges(n, 40, seed=72)
    g = fg.Graph(src, dst, n)
    ARG = te.placeholder((n,), dtype="int64", name="ARG")
    kernel = edge_sum(g, lambda s, t, e: te.compute((1,), lambda i: te.where(te.equal(ARG[t], e), 1.0, 0.0)))
    arg = torch.full((n,), -1, dtype=torch.int64)
    arg[dst[:5]] = torch.arange(5)  # some vertices name one of their in-edges
    expected = sum(int(arg[int(dst[e])] == e) for e in range(40))
    assert kernel(ARG=arg).item() == expected
