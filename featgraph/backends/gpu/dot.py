"""What the hand-written tensor-core kernels (``tensor_core``, ``grouped_mm``) share about ``tl.dot``: the
accumulator a dtype sums in and the power-of-two blocks it takes. Importing it under Triton's interpreter lets
those kernels' loops take loaded scalars as bounds (``loader.interpreter_scalar_index``)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .loader import interpreter_scalar_index, interpreting

if interpreting():
    interpreter_scalar_index()  # the kernels' loop bounds are loaded scalars

MIN_BLOCK = 16  # tl.dot's least K for 16-bit inputs; the feature and column blocks never go below it


def accumulator(dtype: torch.dtype) -> tl.dtype:
    """float64 products sum in float64, every other dtype in float32."""
    return tl.float64 if dtype == torch.float64 else tl.float32


def dot_block(width: int, largest: int = 128) -> int:
    """A power-of-two block covering ``width`` lanes, at least ``MIN_BLOCK`` and at most ``largest``."""
    return max(MIN_BLOCK, min(largest, triton.next_power_of_2(max(width, 1))))
