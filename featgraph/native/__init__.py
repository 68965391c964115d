"""The C++ toolchain and the compile-and-load cache, the base that every compiled part of featgraph stands on:
the CPU backend's generated kernels, and the hand-written sampler, graph-format and benchmark loops."""

from .compiler import launch
from .compiler import load as compile_source

__all__ = ["compile_source", "launch"]
