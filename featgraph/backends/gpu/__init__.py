"""GPU backend: UDF + FDS + template lowered to Triton, written to a module in the disk cache and imported.

Real GPUs run the kernels compiled by Triton; without one, ``TRITON_INTERPRET=1`` (set before the first
kernel is built) runs the same kernels on CPU tensors through Triton's interpreter, which is how CI checks
them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ...kernel_spec import KernelSpec
from ..source import template_source
from . import templates
from .loader import interpreting
from .loader import load as compile_source

__all__ = ["check_device", "compile_source", "interpreting", "l2_cache_bytes", "launch", "source"]

INTERPRETED_L2_BYTES = 50 * 2**20  # under the interpreter, decisions follow the H100 the kernels are built for


def source(spec: KernelSpec) -> str:
    """The kernel's Triton module source (``backends.source.template_source``)."""
    return template_source(spec, templates)


def check_device(device: torch.device) -> None:
    """GPU kernels take CUDA tensors, or CPU tensors under Triton's interpreter."""
    if device.type == "cuda" or (device.type == "cpu" and interpreting()):
        return
    if device.type == "cpu":
        raise ValueError(
            "target='gpu' needs a graph and tensors on a CUDA device (move them with .to('cuda')); "
            "on a machine without a GPU, set TRITON_INTERPRET=1 to run the GPU kernels in Triton's interpreter"
        )
    raise ValueError(f"target='gpu' needs CUDA tensors, got {device}")


def l2_cache_bytes(device: torch.device) -> int:
    """The L2 cache of the GPU that ``device`` names (the H100's under Triton's interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).L2_cache_size
    return INTERPRETED_L2_BYTES


def launch(run: Callable, tensors: Sequence[torch.Tensor | None], scalars: Sequence[int]) -> None:
    """Call a generated module's ``run`` with tensors (None where absent) and integers."""
    run(list(tensors), list(scalars))
