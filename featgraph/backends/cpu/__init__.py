"""CPU backend: UDF + FDS + template lowered to C++ with OpenMP, compiled once and cached on disk."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import torch

from ...templates.spec import KernelSpec
from ..expression import number_reduce_variables
from .compiler import load as compile_source
from .templates import edge_sum_source, gas_source, sddmm_source, spmm_source, winner_source

__all__ = ["compile_source", "launch", "source"]


def source(spec: KernelSpec) -> str:
    """The kernel's C++ source, identical for identical UDFs (``number_reduce_variables``)."""
    if spec.kind == "sddmm":
        text = sddmm_source(spec)
    elif spec.kind == "edge_sum":
        text = edge_sum_source(spec)
    elif spec.kind == "winner":
        text = winner_source(spec)
    else:
        text = gas_source(spec) if spec.params.strategy == "gas" else spmm_source(spec)
    return number_reduce_variables(text, spec.op)


def launch(run: Callable, pointers: Sequence[torch.Tensor | None], scalars: Sequence[int]) -> None:
    """Call a compiled ``run`` entry point with tensor data pointers (None for null) and int64 scalars."""
    ptrs = (ctypes.c_void_p * len(pointers))(*[None if t is None else t.data_ptr() for t in pointers])
    ints = (ctypes.c_int64 * len(scalars))(*scalars)
    run(ptrs, ints)
