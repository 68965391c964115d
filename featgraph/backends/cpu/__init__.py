"""CPU backend: UDF + FDS + template lowered to C++ with OpenMP, compiled once and cached on disk."""

from __future__ import annotations

import ctypes
import re
from collections.abc import Callable, Sequence

import torch

from ...templates.spec import KernelSpec
from .compiler import load as compile_source
from .templates import edge_sum_source, gas_source, sddmm_source, spmm_source, winner_source

__all__ = ["compile_source", "launch", "source"]


REDUCE_VARIABLE = re.compile(r"\brk_(\w+?)_(\d+)\b")


def source(spec: KernelSpec) -> str:
    """The kernel's C++ source, identical for identical UDFs: reduce variables are numbered by first use
    in the source, not by the process-wide counter that keeps them apart in expressions (so the disk
    cache and the tuner's store are hit by a UDF traced again, or in another process)."""
    if spec.kind == "sddmm":
        text = sddmm_source(spec)
    elif spec.kind == "edge_sum":
        text = edge_sum_source(spec)
    elif spec.kind == "winner":
        text = winner_source(spec)
    else:
        text = gas_source(spec) if spec.params.strategy == "gas" else spmm_source(spec)
    numbers: dict[str, int] = {}

    def renumber(match: re.Match) -> str:
        return f"rk_{match.group(1)}_{numbers.setdefault(match.group(0), len(numbers))}"

    return REDUCE_VARIABLE.sub(renumber, text)


def launch(run: Callable, pointers: Sequence[torch.Tensor | None], scalars: Sequence[int]) -> None:
    """Call a compiled ``run`` entry point with tensor data pointers (None for null) and int64 scalars."""
    ptrs = (ctypes.c_void_p * len(pointers))(*[None if t is None else t.data_ptr() for t in pointers])
    ints = (ctypes.c_int64 * len(scalars))(*scalars)
    run(ptrs, ints)
