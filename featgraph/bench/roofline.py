"""Memory-bandwidth bounds for SpMM/SDDMM rows: this machine's triad bandwidth and two traffic models.

A STREAM-like triad (``a = b + s * c`` over arrays far larger than the caches, 12 bytes per element)
measures the bandwidth a streaming kernel can reach with 1 and 2 threads. Each benchmark row is then
placed between two times: the perfect-reuse bound (every feature row read once, the output written
once, the adjacency read once) and the no-reuse bound (one feature row gathered from memory per edge
endpoint). A kernel slower than the no-reuse bound wastes bandwidth; one near the perfect-reuse bound
has nothing left to gain from better locality.

Features often fit a cache level the triad does not measure (the L3 here), so a third time places a row
against the machine itself: the streamed bound, the no-reuse traffic at the speed this machine reads an
array of the features' size sequentially, every thread the whole array. A kernel at the streamed bound
gathers its rows as fast as the machine streams them; going faster takes rows served by a smaller, faster
cache. ``reuse_needed`` says what share of the row reads a time target needs served that way, and
``reuse_by_chance`` what a thread's private cache serves when sources are uniformly random.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

from ..backends import cpu
from ..graph import Graph
from ..templates.params import cache_sizes
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
READ_SOURCE = """
#include <cstdint>
#include <omp.h>
static void add_blocks(const float* __restrict__ a, int64_t lo, int64_t hi, float* __restrict__ acc) {
  for (int64_t b = lo; b < hi; ++b) {
    #pragma omp simd
    for (int k = 0; k < 64; ++k) acc[k] += a[b * 64 + k];
  }
}
extern "C" void run(void** ptr, const int64_t* arg) {
  const float* __restrict__ a = (const float*)ptr[0];
  float* __restrict__ sums = (float*)ptr[1];
  const int64_t blocks = arg[0] / 64, passes = arg[2];
  #pragma omp parallel num_threads((int)arg[1])
  {
    const int t = omp_get_thread_num();
    const int64_t start = blocks * t / omp_get_num_threads();
    float acc[64] = {};
    for (int64_t p = 0; p < passes; ++p) {
      add_blocks(a, start, blocks, acc);
      add_blocks(a, 0, start, acc);
    }
    float total = 0;
    for (int k = 0; k < 64; ++k) total += acc[k];
    sums[t] = total;
  }
}
"""
TRIAD_ELEMENTS = 1 << 25  # three 128 MiB arrays: far beyond any cache slice
READ_BYTES_PER_THREAD = 1 << 28  # each timed read moves at least this much per thread
FLOAT_BYTES = INDEX_BYTES = 4
MLP_INPUT_WIDTH = 8  # the kernel benchmark's d1


@cache
def triad_gbps(threads: int, elements: int = TRIAD_ELEMENTS, repeat: int = 5) -> float:
    """Best triad bandwidth in GB/s with ``threads`` OpenMP threads (three arrays of 4-byte floats)."""
    a, b, c = torch.empty(elements), torch.rand(elements), torch.rand(elements)
    run = cpu.compile_source(TRIAD_SOURCE)
    ms = best_ms(lambda: cpu.launch(run, [a, b, c], [elements, threads]), repeat)
    return 3 * FLOAT_BYTES * elements / ms / 1e6


@cache
def read_gbps(threads: int, array_bytes: int, repeat: int = 10) -> float:
    """Best GB/s at which ``threads`` threads each read a whole float array of ``array_bytes`` in order
    (from whichever cache level or memory holds it), each starting at its own offset. Best of many runs:
    a shared machine's neighbours halve it at times (seen here: 23-63 GB/s for 25.6 MB, 2 threads)."""
    elements = max(64, array_bytes // FLOAT_BYTES // 64 * 64)
    passes = max(1, READ_BYTES_PER_THREAD // (elements * FLOAT_BYTES))
    a, sums = torch.rand(elements), torch.empty(threads)
    run = cpu.compile_source(READ_SOURCE)
    ms = best_ms(lambda: cpu.launch(run, [a, sums], [elements, threads, passes]), repeat)
    return threads * passes * elements * FLOAT_BYTES / ms / 1e6


@dataclass(frozen=True)
class Traffic:
    """Bytes an op must move under perfect reuse and under no reuse; ``gathered`` is the part of the
    no-reuse traffic that reads feature rows per edge, from an array of ``array`` bytes."""

    perfect: int
    no_reuse: int
    gathered: int
    array: int


def traffic(op: str, g: Graph, d: int) -> Traffic:
    """The traffic models for a forward kernel row (``gcn``, ``max``, ``mlp``, ``attention``) and for
    ``gcn-train`` (GCN's forward and backward aggregation, two SpMMs over the graph with self loops)."""
    if op == "gcn-train":
        once = traffic("gcn", g.with_self_loops(), d)
        return Traffic(2 * once.perfect, 2 * once.no_reuse, 2 * once.gathered, once.array)
    n, e = g.num_nodes, g.num_edges
    csr = (n + 1) * INDEX_BYTES + e * INDEX_BYTES
    out = n * d * FLOAT_BYTES
    features = n * d * FLOAT_BYTES
    if op in ("gcn", "max"):
        gathered = e * d * FLOAT_BYTES
        return Traffic(features + out + csr, gathered + out + csr, gathered, features)
    if op == "mlp":  # both endpoints' d1-wide rows per edge, the d1 x d weight once
        inputs, weight = n * MLP_INPUT_WIDTH * FLOAT_BYTES, MLP_INPUT_WIDTH * d * FLOAT_BYTES
        gathered = 2 * e * MLP_INPUT_WIDTH * FLOAT_BYTES
        return Traffic(inputs + weight + out + csr, gathered + weight + out + csr, gathered, inputs)
    if op == "attention":  # one score per edge, edges as (src, dst) pairs
        edge_data = e * FLOAT_BYTES + 2 * e * INDEX_BYTES
        gathered = 2 * e * d * FLOAT_BYTES
        return Traffic(features + edge_data, gathered + edge_data, gathered, features)
    raise ValueError(f"no traffic model for op {op!r}")


def streamed_ms(bytes_moved: Traffic, stream_gbps: float) -> float:
    """The no-reuse traffic at the speed the machine streams the features' array."""
    return bytes_moved.no_reuse / stream_gbps / 1e6


def reuse_needed(bytes_moved: Traffic, target_ms: float, stream_gbps: float) -> float:
    """Share of the per-edge row reads a kernel must get from a faster cache, for free, to finish within
    ``target_ms`` when everything else streams at ``stream_gbps`` (0: streaming suffices; above 1: not
    even free row reads would do)."""
    budget = target_ms * 1e6 * stream_gbps - (bytes_moved.no_reuse - bytes_moved.gathered)
    return max(0.0, 1.0 - budget / bytes_moved.gathered) if bytes_moved.gathered else 0.0


def reuse_by_chance(bytes_moved: Traffic) -> float:
    """Share of uniformly random row reads one thread's private cache (the L2 here) holds: its size over
    the array's. Sources of both benchmark graphs are uniformly random, so no order of the edges can make
    a row's reads cluster beyond this without revisiting output rows (see the heat map)."""
    private = cache_sizes().get(2, 0)
    return min(1.0, private / bytes_moved.array) if bytes_moved.array else 1.0


@dataclass(frozen=True)
class Placement:
    """One measured row against its bounds: ``x_perfect`` is measured / perfect-reuse time (>= 1),
    ``vs_no_reuse`` is no-reuse time / measured (above 1: faster than gathering a row per edge from
    memory), ``x_streamed`` measured / streamed time (near 1: rows gathered as fast as they stream)."""

    perfect_ms: float
    no_reuse_ms: float
    streamed_ms: float
    x_perfect: float
    vs_no_reuse: float
    x_streamed: float


def place(op: str, g: Graph, d: int, ms: float, gbps: float, stream_gbps: float) -> Placement:
    """Where a row measured at ``ms`` lies between the bounds at triad bandwidth ``gbps``, and against
    the features streamed at ``stream_gbps``."""
    bytes_moved = traffic(op, g, d)
    perfect, no_reuse = bytes_moved.perfect / gbps / 1e6, bytes_moved.no_reuse / gbps / 1e6
    streamed = streamed_ms(bytes_moved, stream_gbps)
    return Placement(perfect, no_reuse, streamed, ms / perfect, no_reuse / ms, ms / streamed)
