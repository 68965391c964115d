"""Memory-bandwidth bounds for SpMM/SDDMM rows: this machine's triad bandwidth and two traffic models.

A STREAM-like triad (``a = b + s * c`` over arrays far larger than the caches, 12 bytes per element)
measures the bandwidth a streaming kernel can reach with 1 and 2 threads. Each benchmark row is then
placed between two times: the perfect-reuse bound (every feature row read once, the output written
once, the adjacency read once) and the no-reuse bound (one feature row gathered from memory per edge
endpoint). A kernel slower than the no-reuse bound wastes bandwidth; one near the perfect-reuse bound
has nothing left to gain from better locality.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from ..backends import cpu
from ..graph import Graph
from .measure import best_ms

TRIAD_SOURCE = """
#include <cstdint>
extern "C" void run(void** ptr, const int64_t* arg) {
  float* __restrict__ a = (float*)ptr[0];
  const float* __restrict__ b = (const float*)ptr[1];
  const float* __restrict__ c = (const float*)ptr[2];
  const int64_t n = arg[0];
  #pragma omp parallel for simd schedule(static) num_threads((int)arg[1])
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}
"""
TRIAD_ELEMENTS = 1 << 25  # three 128 MiB arrays: far beyond any cache slice
FLOAT_BYTES = INDEX_BYTES = 4
MLP_INPUT_WIDTH = 8  # the kernel benchmark's d1


@cache
def triad_gbps(threads: int, elements: int = TRIAD_ELEMENTS, repeat: int = 5) -> float:
    """Best triad bandwidth in GB/s with ``threads`` OpenMP threads (three arrays of 4-byte floats)."""
    a, b, c = torch.empty(elements), torch.rand(elements), torch.rand(elements)
    run = cpu.compile_source(TRIAD_SOURCE)
    ms = best_ms(lambda: cpu.launch(run, [a, b, c], [elements, threads]), repeat)
    return 3 * FLOAT_BYTES * elements / ms / 1e6


@dataclass(frozen=True)
class Traffic:
    """Bytes an op must move under perfect reuse and under no reuse."""

    perfect: int
    no_reuse: int


def traffic(op: str, g: Graph, d: int) -> Traffic:
    """The two traffic models for a forward kernel row (``gcn``, ``max``, ``mlp``, ``attention``)."""
    n, e = g.num_nodes, g.num_edges
    csr = (n + 1) * INDEX_BYTES + e * INDEX_BYTES
    out = n * d * FLOAT_BYTES
    if op in ("gcn", "max"):
        return Traffic(n * d * FLOAT_BYTES + out + csr, e * d * FLOAT_BYTES + out + csr)
    if op == "mlp":  # both endpoints' d1-wide rows per edge, the d1 x d weight once
        inputs, weight = n * MLP_INPUT_WIDTH * FLOAT_BYTES, MLP_INPUT_WIDTH * d * FLOAT_BYTES
        return Traffic(inputs + weight + out + csr, 2 * e * MLP_INPUT_WIDTH * FLOAT_BYTES + weight + out + csr)
    if op == "attention":  # one score per edge, edges as (src, dst) pairs
        edge_data = e * FLOAT_BYTES + 2 * e * INDEX_BYTES
        return Traffic(n * d * FLOAT_BYTES + edge_data, 2 * e * d * FLOAT_BYTES + edge_data)
    raise ValueError(f"no traffic model for op {op!r}")


@dataclass(frozen=True)
class Placement:
    """One measured row against its bounds: ``x_perfect`` is measured / perfect-reuse time (>= 1),
    ``vs_no_reuse`` is no-reuse time / measured (above 1: faster than gathering a row per edge)."""

    perfect_ms: float
    no_reuse_ms: float
    x_perfect: float
    vs_no_reuse: float


def place(op: str, g: Graph, d: int, ms: float, gbps: float) -> Placement:
    """Where a row measured at ``ms`` lies between the two bounds at bandwidth ``gbps``."""
    bytes_moved = traffic(op, g, d)
    perfect, no_reuse = bytes_moved.perfect / gbps / 1e6, bytes_moved.no_reuse / gbps / 1e6
    return Placement(perfect, no_reuse, ms / perfect, no_reuse / ms)
