"""CPU backend: UDF + FDS + template lowered to C++ with OpenMP, compiled once and cached on disk."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import torch

from ...templates.spec import KernelSpec
from .compiler import load as compile_source
from .templates import edge_sum_source, gas_source, sddmm_source, spmm_source

__all__ = ["compile_source", "launch", "source"]


def source(spec: KernelSpec) -> str:
    if spec.kind == "sddmm":
        return sddmm_source(spec)
    if spec.kind == "edge_sum":
        return edge_sum_source(spec)
    return gas_source(spec) if spec.params.strategy == "gas" else spmm_source(spec)


def launch(run: Callable, pointers: Sequence[torch.Tensor | None], scalars: Sequence[int]) -> None:
    """Call a compiled ``run`` entry point with tensor data pointers (None for null) and int64 scalars."""
    ptrs = (ctypes.c_void_p * len(pointers))(*[None if t is None else t.data_ptr() for t in pointers])
    ints = (ctypes.c_int64 * len(scalars))(*scalars)
    run(ptrs, ints)
