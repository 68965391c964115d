"""A dense matrix's nonzeros as compressed rows, and the two products a linear layer needs over them
(``native/cpp/sparse_rows.cpp``): bag-of-words features such as Planetoid's are 1-2% nonzero, and a product
that skips their zeros does a fiftieth of a dense one's multiply-adds. float32 and float64; OpenMP parallel."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ...native import compile_source, launch, toolchain
from ...native.sources import cpp_source
from .codegen import PRELUDE

FORMS = {"compress": "FG_COMPRESS", "product": "FG_PRODUCT", "weight_gradient": "FG_WEIGHT_GRADIENT"}
CTYPES = {torch.float32: "float", torch.float64: "double"}


class Rows(NamedTuple):
    """The nonzeros of an n x k matrix: row r's columns and values at ``row_ptr[r]:row_ptr[r + 1]``."""

    row_ptr: torch.Tensor  # int64, n + 1
    cols: torch.Tensor  # int32
    vals: torch.Tensor  # the matrix's dtype

    @property
    def nnz(self) -> int:
        return self.cols.numel()


def sparse_rows_source(dtype: torch.dtype, form: str) -> str:
    """The pass ``form`` for matrices of ``dtype``."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {tuple(FORMS)}, got {form!r}")
    definitions = [f"typedef {CTYPES[dtype]} T;", PRELUDE, f"#define FG_FORM {FORMS[form]}"]
    return "\n".join([*definitions, cpp_source("sparse_rows.cpp")])


def _run(dtype: torch.dtype, form: str, tensors: list[torch.Tensor], scalars: list[int]) -> None:
    launch(
        compile_source(sparse_rows_source(dtype, form)), tensors, [*scalars[:2], toolchain.num_threads(), *scalars[2:]]
    )


def compress(x: torch.Tensor, max_density: float = 1.0) -> Rows | None:
    """The nonzeros (NaN included) of contiguous 2-D ``x`` as ``Rows``, in one pass; None where more than about
    ``max_density`` of them are nonzero (the pass stops early then: each thread has room for its share)."""
    n, k = x.shape
    threads = toolchain.num_threads()
    capacity = math.ceil(max_density * n * k / threads) + 16  # a thread's room; 16: one chunk's slack
    row_nnz = torch.zeros(n, dtype=torch.int64)
    cols = torch.empty(threads * capacity, dtype=torch.int32)
    vals = torch.empty(threads * capacity, dtype=x.dtype)
    used = torch.zeros(threads, dtype=torch.int64)
    _run(x.dtype, "compress", [x, row_nnz, cols, vals, used], [n, k, capacity])
    counts = used.tolist()
    if min(counts) < 0:
        return None
    row_ptr = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(row_nnz, 0, out=row_ptr[1:])
    segments = [slice(t * capacity, t * capacity + count) for t, count in enumerate(counts)]
    return Rows(row_ptr, torch.cat([cols[s] for s in segments]), torch.cat([vals[s] for s in segments]))


def product(rows: Rows, wt: torch.Tensor) -> torch.Tensor:
    """``x @ wt`` (n x m) for ``x`` given by its ``rows`` and contiguous ``wt`` (k x m)."""
    n = rows.row_ptr.numel() - 1
    out = torch.empty(n, wt.shape[1], dtype=wt.dtype)
    _run(wt.dtype, "product", [rows.row_ptr, rows.cols, rows.vals, wt, out], [n, wt.shape[1]])
    return out


def weight_gradient(rows: Rows, g: torch.Tensor, k: int) -> torch.Tensor:
    """``x^T @ g`` (k x m) for ``x`` (n x k) given by its ``rows`` and contiguous ``g`` (n x m)."""
    out = torch.zeros(k, g.shape[1], dtype=g.dtype)
    scratch = torch.zeros(max(0, toolchain.num_threads() - 1), k, g.shape[1], dtype=g.dtype)  # the other threads'
    _run(g.dtype, "weight_gradient", [rows.row_ptr, rows.cols, rows.vals, g, out, scratch], [g.shape[0], g.shape[1], k])
    return out
