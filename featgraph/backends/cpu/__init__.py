"""CPU backend: UDF + FDS + template lowered to C++ with OpenMP, compiled once and cached on disk."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence

import torch

from ...templates.spec import KernelSpec
from ..source import template_source
from . import templates
from .compiler import load as compile_source

__all__ = ["compile_source", "launch", "source"]


def source(spec: KernelSpec) -> str:
    """The kernel's C++ source (``backends.source.template_source``)."""
    return template_source(spec, templates)


def launch(run: Callable, pointers: Sequence[torch.Tensor | None], scalars: Sequence[int]) -> None:
    """Call a compiled ``run`` entry point with tensor data pointers (None for null) and int64 scalars."""
    ptrs = (ctypes.c_void_p * len(pointers))(*[None if t is None else t.data_ptr() for t in pointers])
    ints = (ctypes.c_int64 * len(scalars))(*scalars)
    run(ptrs, ints)
