"""CPU backend: UDF + FDS + template lowered to C++ with OpenMP, compiled once and cached on disk."""

from __future__ import annotations

from ...kernel_spec import KernelSpec
from ...native import compile_source, launch
from ..source import template_source
from . import templates

__all__ = ["compile_source", "launch", "source"]


def source(spec: KernelSpec) -> str:
    """The kernel's C++ source (``backends.source.template_source``)."""
    return template_source(spec, templates)
