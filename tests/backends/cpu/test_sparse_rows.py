"""Compressed rows of a dense matrix and the two products over them, against torch's CSR and dense products."""

from __future__ import annotations

import pytest
import torch

from featgraph.backends.cpu import sparse_rows


def bag_of_words(n: int, k: int, density: float, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, k, generator=gen, dtype=torch.float64)
    return torch.where(torch.rand(n, k, generator=gen, dtype=torch.float64) < density, x, 0.0).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("n", "k"), [(0, 5), (1, 1), (3, 17), (257, 1001)])
def test_compress_is_torchs_csr_of_the_nonzeros(dtype, n, k):
    """Row pointer, columns (in order) and values of every nonzero, NaN and infinities counted as nonzero, rows
    of zeros, widths that are not a multiple of the 16-element chunk."""
    x = bag_of_words(n, k, 0.05, dtype, seed=n + k)
    if x.numel() >= 6:
        x.view(-1)[[0, 2, 5]] = torch.tensor([float("nan"), float("inf"), -float("inf")], dtype=dtype)
        x[n // 2] = 0.0
    before = x.clone()
    rows = sparse_rows.compress(x)
    want = (x != 0).to_sparse_csr()  # NaN != 0: its mask, not its values, gives the pattern
    assert torch.equal(rows.row_ptr, want.crow_indices())
    assert torch.equal(rows.cols.long(), want.col_indices())
    torch.testing.assert_close(rows.vals, x[x != 0], rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(x, before, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compress_gives_up_past_its_density(dtype):
    """Where more than about ``max_density`` of the elements are nonzero the pass stops and says so."""
    x = bag_of_words(300, 200, 0.5, dtype)
    assert sparse_rows.compress(x, 0.1) is None
    assert sparse_rows.compress(x, 0.6) is not None
    assert sparse_rows.compress(torch.zeros(300, 200, dtype=dtype), 0.0).nnz == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("m", [1, 13, 64])
def test_products_equal_the_dense_ones(dtype, m):
    n, k = 257, 1001
    x = bag_of_words(n, k, 0.03, dtype, seed=m)
    gen = torch.Generator().manual_seed(m)
    wt = torch.randn(k, m, generator=gen, dtype=dtype)
    g = torch.randn(n, m, generator=gen, dtype=dtype)
    rows = sparse_rows.compress(x)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    torch.testing.assert_close(sparse_rows.product(rows, wt), x @ wt, **tolerance)
    torch.testing.assert_close(sparse_rows.weight_gradient(rows, g, k), x.t() @ g, **tolerance)
