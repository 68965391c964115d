"""Template parameters: how the graph is traversed (the FDS owns the feature axes, these own the rest),
and the default heuristic that picks them from the graph, the feature size and the machine's caches."""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..native.toolchain import checked_threads

ROW_ORDERS = ("natural", "degree")
STRATEGIES = ("gar", "gas")
EDGE_ORDERS = ("hilbert", "user", "csr")


DEFAULT_L2_BYTES = 1024**2
EDGES_PER_SEGMENT_VISIT = 12  # a row's visit per source segment must amortise over about this many edges
SEGMENT_MAX_BYTES = 16 * 1024**2  # source features per SpMM segment, where the last-level cache holds twice that
WRITE_WINDOW_BYTES = 32 * 1024  # one write bucket's slice of an SDDMM output: about an L1
MAX_WRITE_BUCKETS = 1024  # write streams one traversal keeps open at once
STAGED_MAX_ROW_BYTES = 8  # output rows staged at most this large: a line fill per direct write dominates them
SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")


@cache
def cache_sizes(root: Path = SYSFS_CACHES) -> dict[int, int]:
    """Bytes of each data (or unified) cache level of CPU 0, from Linux's sysfs; empty where not exposed."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    sizes: dict[int, int] = {}
    for index in root.glob("index*"):
        try:
            level, kind = int((index / "level").read_text()), (index / "type").read_text().strip()
            text = (index / "size").read_text().strip()
            size = int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)
        except (OSError, ValueError):
            continue
        if kind != "Instruction" and size > 0:
            sizes[level] = size
    return sizes


@cache
def l2_cache_bytes() -> int:
    """The private cache of one core: ``$FEATGRAPH_L2_BYTES``, else Linux's figure, else 1 MiB. An override
    that is no positive number of bytes is reported with a warning and ignored."""
    measured = cache_sizes().get(2, DEFAULT_L2_BYTES)
    override = os.environ.get("FEATGRAPH_L2_BYTES")
    if override:
        try:
            value = int(override)
        except ValueError:
            value = 0
        if value > 0:
            return value
        warnings.warn(
            f"FEATGRAPH_L2_BYTES={override!r} is not a positive number of bytes: using {measured}", stacklevel=2
        )
    return measured


@dataclass(frozen=True)
class SpMMParams:
    """``num_partitions`` 1D source segments walked one after the other (threads share each segment);
    ``num_feature_tiles`` passes over the graph, each for a slice of the last output axis; ``row_order``
    "degree" visits high in-degree rows first (better dynamic load balance on skewed graphs);
    ``strategy`` "gar" is vertex-centric over the CSR (deterministic), "gas" edge-centric over the COO with
    atomic adds (needs no CSR; sum and mean only; not deterministic in the last bits);
    ``rows_per_program`` (GPU) destination rows whose in-edges one program packs into its edge lanes (None:
    the backend's default from the average degree); ``hub_threshold`` (GPU, FeatGraph's hybrid
    partitioning) stages the feature rows of source vertices with at least this out-degree on chip, once
    per program, and reads only the others from global memory (0: off)."""

    num_partitions: int = 1
    num_feature_tiles: int = 1
    row_order: str = "natural"
    num_threads: int | None = None
    strategy: str = "gar"
    rows_per_program: int | None = None
    hub_threshold: int = 0

    def __post_init__(self) -> None:
        if self.num_partitions < 1 or self.num_feature_tiles < 1:
            raise ValueError("num_partitions and num_feature_tiles must be >= 1")
        if self.num_threads is not None:
            checked_threads(self.num_threads, "num_threads")
        if self.rows_per_program is not None and self.rows_per_program < 1:
            raise ValueError(f"rows_per_program must be >= 1, got {self.rows_per_program}")
        if self.hub_threshold < 0:
            raise ValueError(f"hub_threshold must be >= 0, got {self.hub_threshold}")
        if self.row_order not in ROW_ORDERS:
            raise ValueError(f"row_order must be one of {ROW_ORDERS}, got {self.row_order!r}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")


@dataclass(frozen=True)
class SDDMMParams:
    """``edge_order`` the order edges are visited in (Hilbert keeps both endpoint rows in cache; the default
    is the device's, ``cpu_edge_order`` / ``gpu_edge_order``);
    ``num_feature_tiles`` passes, each over a slice of the last output axis; ``write_buckets`` (CPU) > 0
    stages each edge's result in a buffer grouped into that many slices of user edge ids, then moves the
    slices into place one at a time (0: written straight at its user edge id); ``num_partitions`` (CPU,
    ``edge_order="csr"``): the source segments the kernels' CSR is walked in, one after the other, as the SpMM
    walks them (a segment's source rows stay in cache while its destinations stream past)."""

    edge_order: str = "hilbert"
    num_feature_tiles: int = 1
    num_threads: int | None = None
    write_buckets: int = 0
    num_partitions: int = 1

    def __post_init__(self) -> None:
        if self.num_feature_tiles < 1:
            raise ValueError("num_feature_tiles must be >= 1")
        if self.num_threads is not None:
            checked_threads(self.num_threads, "num_threads")
        if self.write_buckets < 0:
            raise ValueError(f"write_buckets must be >= 0, got {self.write_buckets}")
        if self.edge_order not in EDGE_ORDERS:
            raise ValueError(f"edge_order must be one of {EDGE_ORDERS}, got {self.edge_order!r}")
        if type(self.num_partitions) is not int or self.num_partitions < 1:
            raise ValueError(f"num_partitions must be a whole number >= 1, got {self.num_partitions!r}")
        if self.num_partitions > 1 and self.edge_order != "csr":
            raise ValueError(
                f"num_partitions cuts the CSR walk into source segments: it needs edge_order='csr', "
                f"got {self.edge_order!r}"
            )
        if self.num_partitions > 1 and self.write_buckets:
            raise ValueError("write_buckets stages the writes of a walk in one segment; num_partitions > 1 takes 0")


GATHER_PER_STREAM = 8  # CPU edge templates visit in the user's order up to this many gathered bytes per streamed
ORDERED_MIN_GATHER_BYTES = 512  # and only where an edge gathers this much (two rows of 64 float32 values)


def cpu_edge_order(gathered_bytes: int, streamed_bytes: int) -> str:
    """The CPU's edge order for an edge template that gathers ``gathered_bytes`` per edge from its endpoints'
    rows and streams ``streamed_bytes`` (its output row and edge-data rows). Visited in the user's order, the
    output is written and the edge data read front to back, with no staging pass and no edge list kept; the
    kernels' CSR walked one source segment at a time ("csr", ``default_num_partitions`` segments) keeps a
    segment's source rows in cache and re-reads each destination's row within its run, but scatters the
    edge-data reads and the writes, which pays only where the gathered rows dominate the traffic and are long
    enough that their cache misses outweigh the visit's own per-edge cost, as in dot-product attention from
    d = 64 (``featgraph bench kernels --ops attention --ablation --ablation-dims 16 32 64 128``: the
    ``attention-order``, ``heads-order`` and ``edge-add-order`` rows). The walk keeps no list beside the CSR,
    where the Hilbert order keeps one of three indices an edge, and ran 0.95x-1.37x the Hilbert order's speed
    there (docs/design.md, "Findings behind the defaults")."""
    dominant = gathered_bytes > GATHER_PER_STREAM * streamed_bytes
    return "csr" if dominant and gathered_bytes >= ORDERED_MIN_GATHER_BYTES else "user"


def gpu_edge_order(input_bytes: int, l2_bytes: int) -> str:
    """Edge templates on the GPU visit edges in the user's order while their inputs fit the L2: the gathered
    rows then come from the cache whatever the order, and consecutive lanes write consecutive outputs.
    Larger inputs go in Hilbert order, which keeps both endpoints' rows in cache; CSR order re-reads only the
    destination row, and its scattered writes cost more than that saves (on an H100, dot attention at d = 64
    and 256 on rand100k and a reddit-sized graph: ``featgraph bench gpu --ops attention --tune 10``)."""
    return "user" if input_bytes <= l2_bytes else "hilbert"


def default_write_buckets(output_bytes: int, median_jump_bytes: int, row_bytes: int) -> int:
    """Write buckets for an SDDMM writing rows of ``row_bytes`` whose visit order jumps ``median_jump_bytes``
    through its output of ``output_bytes`` from one edge to the next: none where the output fits an L2, the
    writes already stay near each other (edges given in a sorted order, as PyG's ``coalesce`` leaves them) or
    the rows are larger than ``STAGED_MAX_ROW_BYTES``, else buckets of about ``WRITE_WINDOW_BYTES``.

    Written directly at their user edge ids, edges in random order cost one random cache-line fill each;
    staged, the writes stay inside a bucket's window, for a second pass over the output, its index arrays
    (8 bytes an edge, kept with the graph) and a staging buffer the output's size. That paid for one score an
    edge on a Xeon (1.68x-1.75x at d = 32) and cost time for GAT's four (staged 0.49x-0.88x as fast on an
    EPYC; ``featgraph bench kernels --ops attention --ablation``: the ``attention-writes`` and
    ``heads-writes`` rows, docs/design.md)."""
    if output_bytes <= l2_cache_bytes() or median_jump_bytes <= WRITE_WINDOW_BYTES or row_bytes > STAGED_MAX_ROW_BYTES:
        return 0
    return staging_buckets(output_bytes)


def staging_buckets(output_bytes: int) -> int:
    """Write buckets of about ``WRITE_WINDOW_BYTES`` of an output of ``output_bytes``, at most
    ``MAX_WRITE_BUCKETS``: the count staged writes use."""
    return min(MAX_WRITE_BUCKETS, math.ceil(output_bytes / WRITE_WINDOW_BYTES))


def segment_bytes() -> int:
    """Source features per SpMM segment: half the last-level cache (the rows gathered share it with the
    indices and the output), at most ``SEGMENT_MAX_BYTES``; that where Linux reports no cache sizes."""
    sizes = cache_sizes()
    return min(SEGMENT_MAX_BYTES, sizes[max(sizes)] // 2) if sizes else SEGMENT_MAX_BYTES


def default_num_partitions(source_feature_bytes: int, avg_degree: float | None = None) -> int:
    """Source segments of ``segment_bytes``, at most 16, none where the features fit one segment; for an SpMM
    (``avg_degree`` given) at most one per ``EDGES_PER_SEGMENT_VISIT`` edges of an average row, since every row
    is visited once per segment, its accumulators loaded and stored again. An SDDMM's visit of a row only reads
    the destination's row once more.

    One segment is best while the features fit half the last-level cache and more pay off beyond it; 16-bit
    features lose most from a split, because the output is kept in float32 between segments (``featgraph
    bench sensitivity``; the sweep is in docs/design.md, "Findings behind the defaults"). The SDDMM's walk in
    segments against the Hilbert order: ``featgraph bench kernels --ops attention --ablation``, the
    ``heads-order`` rows."""
    segment = segment_bytes()
    if source_feature_bytes <= segment:
        return 1
    parts = min(16, math.ceil(source_feature_bytes / segment))
    return parts if avg_degree is None else max(1, min(parts, int(avg_degree // EDGES_PER_SEGMENT_VISIT)))
