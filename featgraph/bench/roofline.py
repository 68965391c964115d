"""Memory-bandwidth bounds for SpMM/SDDMM rows: this machine's triad bandwidth and two traffic models.

A STREAM-like triad (``a = b + s * c`` over arrays far larger than the caches, 12 bytes per element)
measures the bandwidth a streaming kernel can reach with 1 and 2 threads. Each benchmark row is then
placed between two times: the perfect-reuse bound (every feature row read once, the output written
once, the adjacency read once) and the no-reuse bound (one feature row gathered from memory per edge
endpoint). A kernel slower than the no-reuse bound wastes bandwidth; one near the perfect-reuse bound
has nothing left to gain from better locality.

Features often fit a cache level the triad does not measure (the L3 here), so a third time places a row
against the machine itself: the gather bound, the per-edge row reads alone at the rate this machine
gathers uniformly random rows of that width from an array of that size (a minimal loop with software
prefetch, every other byte free). A kernel at the gather bound reads its rows as fast as the machine
gathers them; going faster takes reads served by a smaller, faster cache. ``reuse_needed`` says what share
of the row reads a time target needs served that way, and ``reuse_possible`` what a thread's private
cache can serve when endpoints are uniformly random, as in both benchmark graphs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import torch

from ..backends.cpu.codegen import PRELUDE, stored_type
from ..graph import Graph
from ..kernel_spec import TORCH_DTYPES
from ..native import compile_source, launch
from ..native.sources import cpp_source
from ..templates.params import cache_sizes
from ..timing import best_ms

TRIAD_ELEMENTS = 1 << 25  # three 128 MiB arrays: far beyond any cache slice
GATHER_BYTES = 1 << 28  # each timed gather reads at least this much (and 65536 rows)
FLOAT_BYTES = INDEX_BYTES = 4
MLP_INPUT_WIDTH = 8  # the kernel benchmark's d1


@cache
def triad_gbps(threads: int, elements: int = TRIAD_ELEMENTS, repeat: int = 5) -> float:
    """Best triad bandwidth in GB/s with ``threads`` OpenMP threads (three arrays of 4-byte floats)."""
    a, b, c = torch.empty(elements), torch.rand(elements), torch.rand(elements)
    run = compile_source(cpp_source("triad.cpp"))
    ms = best_ms(lambda: launch(run, [a, b, c], [elements, threads]), repeat)
    return 3 * FLOAT_BYTES * elements / ms / 1e6


def gather_source(width: int, dtype: str = "float32") -> str:
    """The gather loop (``native/cpp/gather.cpp``) for rows of ``width`` elements of ``dtype`` (float32, or
    float16/bfloat16 widened in registers as the kernels widen them), summed in float32 chunks of up to 64 that
    divide the row."""
    chunk = next(c for c in (64, 32, 16, 8, 4, 2, 1) if width % c == 0)
    sizes = f"constexpr int64_t WIDTH = {width}, CHUNK = {chunk};"
    definitions = ["typedef float T;", PRELUDE, *stored_type(dtype), sizes]
    return "\n".join([*definitions, cpp_source("gather.cpp")])


@cache
def gather_gbps(threads: int, array_bytes: int, row_bytes: int, repeat: int = 10, dtype: str = "float32") -> float:
    """Best GB/s at which ``threads`` threads read uniformly random rows of ``row_bytes`` (elements of
    ``dtype``) from an array of ``array_bytes``. Best of many runs: a shared machine's neighbours halve it
    at times."""
    size = TORCH_DTYPES[dtype].itemsize
    width = max(1, row_bytes // size)
    num_rows = max(1, array_bytes // (width * size))
    count = max(1 << 16, GATHER_BYTES // (width * size))
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(num_rows, width).to(TORCH_DTYPES[dtype])
    rows = torch.randint(0, num_rows, (count,), generator=gen, dtype=torch.int32)
    sums = torch.empty(threads)
    run = compile_source(gather_source(width, dtype))
    ms = best_ms(lambda: launch(run, [a, rows, sums], [count, threads]), repeat)
    return count * width * size / ms / 1e6


@dataclass(frozen=True)
class Traffic:
    """Bytes an op must move under perfect reuse and under no reuse; ``gathered`` is the part of the
    no-reuse traffic that reads feature rows of ``row`` bytes per edge, from an array of ``array`` bytes."""

    perfect: int
    no_reuse: int
    gathered: int
    array: int
    row: int


def traffic(op: str, g: Graph, d: int) -> Traffic:
    """The traffic models for a forward kernel row (``gcn``, ``max``, ``mlp``, ``attention``) and for
    ``gcn-train`` (GCN's forward and backward aggregation, two SpMMs over the graph with self loops)."""
    if op == "gcn-train":
        once = traffic("gcn", g.with_self_loops(), d)
        return Traffic(2 * once.perfect, 2 * once.no_reuse, 2 * once.gathered, once.array, once.row)
    n, e = g.num_nodes, g.num_edges
    csr = (n + 1) * INDEX_BYTES + e * INDEX_BYTES
    out = n * d * FLOAT_BYTES
    features, row = n * d * FLOAT_BYTES, d * FLOAT_BYTES
    if op in ("gcn", "max"):
        gathered = e * row
        return Traffic(features + out + csr, gathered + out + csr, gathered, features, row)
    if op == "mlp":  # both endpoints' d1-wide rows per edge, the d1 x d weight once
        inputs, weight = n * MLP_INPUT_WIDTH * FLOAT_BYTES, MLP_INPUT_WIDTH * d * FLOAT_BYTES
        gathered = 2 * e * MLP_INPUT_WIDTH * FLOAT_BYTES
        return Traffic(
            inputs + weight + out + csr, gathered + weight + out + csr, gathered, inputs, MLP_INPUT_WIDTH * FLOAT_BYTES
        )
    if op == "attention":  # one score per edge, edges as (src, dst) pairs
        edge_data = e * FLOAT_BYTES + 2 * e * INDEX_BYTES
        gathered = 2 * e * row
        return Traffic(features + edge_data, gathered + edge_data, gathered, features, row)
    raise ValueError(f"no traffic model for op {op!r}")


def gather_ms(bytes_moved: Traffic, gbps: float) -> float:
    """The per-edge row reads alone at gather rate ``gbps``: no kernel without reuse finishes sooner."""
    return bytes_moved.gathered / gbps / 1e6


def reuse_needed(bytes_moved: Traffic, target_ms: float, gbps: float) -> float:
    """Share of the per-edge row reads a kernel must get from a faster cache, for free, to finish within
    ``target_ms`` when the other reads gather at ``gbps`` and every other byte is free (0: gathering
    suffices)."""
    if not bytes_moved.gathered:
        return 0.0
    return max(0.0, 1.0 - target_ms * 1e6 * gbps / bytes_moved.gathered)


BLOCK_ROWS_PER_EDGE = (1 + math.sqrt(2)) ** 2  # see reuse_possible


def reuse_possible(g: Graph, bytes_moved: Traffic) -> float:
    """Share of an aggregation's row reads one thread's private cache (the L2 here) can serve when the
    graph's endpoints are uniformly random, as in both benchmark graphs, under the better of two schedules:

    - any order: a row read hits the cache with probability cache / array;
    - 2D blocks: a slice of ``a`` source rows and ``b`` destination rows filling the cache, with its
      ``a b E / n^2`` edges, each destination row read and written back once per block. That moves
      ``(a + 2b) / (a b E / n^2)`` rows per edge, least at ``a = sqrt(2) b``: ``(1 + sqrt 2)^2 n^2 / (R E)``
      for ``R`` rows in cache. What falls short of one row per edge is reuse.

    Revisiting output rows more often than that (source partitions, feature tiles) gives less: see the
    heat map."""
    if not bytes_moved.array:
        return 1.0
    private = cache_sizes().get(2, 0)
    chance = min(1.0, private / bytes_moved.array)
    edges_per_cached_row = private / bytes_moved.row * g.num_edges / max(1, g.num_nodes) ** 2
    blocked = 1.0 - BLOCK_ROWS_PER_EDGE / edges_per_cached_row if edges_per_cached_row else 0.0
    return max(chance, blocked)


@dataclass(frozen=True)
class Placement:
    """One measured row against its bounds: ``x_perfect`` is measured / perfect-reuse time (>= 1),
    ``vs_no_reuse`` is no-reuse time / measured (above 1: faster than gathering a row per edge from
    memory), ``x_gather`` measured / gather bound (near 1: rows read as fast as the machine gathers them)."""

    perfect_ms: float
    no_reuse_ms: float
    gather_ms: float
    x_perfect: float
    vs_no_reuse: float
    x_gather: float


def place(bytes_moved: Traffic, ms: float, gbps: float, gather_rate: float) -> Placement:
    """Where a row that moves ``bytes_moved`` (``traffic``) and was measured at ``ms`` lies between the
    bounds at triad bandwidth ``gbps``, and against its row reads at the machine's gather rate
    ``gather_rate`` (GB/s)."""
    perfect, no_reuse = bytes_moved.perfect / gbps / 1e6, bytes_moved.no_reuse / gbps / 1e6
    gathered = gather_ms(bytes_moved, gather_rate)
    return Placement(perfect, no_reuse, gathered, ms / perfect, no_reuse / ms, ms / gathered)
