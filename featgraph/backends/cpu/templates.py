"""C++ sources of the two sparse templates with the UDF inlined.

SpMM: vertex-parallel over destination rows of a CSR (dynamic scheduling for skewed degrees), with 1D
source partitions walked one at a time (all threads on one partition, partial results kept in the output)
and feature tiles (one pass per slice of the last output axis). SDDMM: edge-parallel over an edge list
(the user's order, or the Hilbert order: static contiguous chunks, so each thread keeps its curve segment's
locality), or over the CSR walked in source segments as the SpMM walks them (the CPU's default where wide
gathered rows dominate).

Entry point of every kernel: ``extern "C" void run(void** ptr, const int64_t* arg)``.
SpMM ptr: indptr (row v's run of source segment p is indptr[v * P + p] : indptr[v * P + p + 1], P
segments; ``graph.partition``), indices, edge_ids, rows (or null), degree, out, argidx (or null),
placeholders...; arg: num_rows, num_partitions, num_threads. SDDMM ptr: srcs, dsts, eids (null: the j-th edge
is user edge j, as in the user's order), out, placeholders...; arg: num_edges, num_threads; in CSR order the
CSR walked in source segments instead (ptr: indptr, indices, eids as the SpMM's; arg: num_edges, num_threads,
num_rows, num_partitions, rows_ahead). Winner scatter ptr: sources (per user edge id), winners, out,
placeholders...; arg: num_rows, num_threads, out_size.
"""

from __future__ import annotations

import math

from ...kernel_spec import HALF_DTYPES, TORCH_DTYPES, KernelSpec, indexed_by, stored_dtype
from ...te.expr import Placeholder
from .codegen import (
    PRELUDE,
    Tile,
    message_block,
    pointer_name,
    row_stride,
    storage_type,
    stored_type,
    tile_size,
)

PREFETCH_DISTANCE = 8
CACHED_ARRAY_BYTES = 256 * 1024  # gathered arrays this small are not prefetched: they stay in any L2
CACHE_LINE_BYTES = 64
HALF_PREFETCH_LINES = 4  # lines prefetched per gathered 16-bit row (256 bytes: d = 128)
ROW_CHUNK_BYTES = 512  # accumulator chunk per pass over a row's edges: 8 cache lines, 8 AVX-512 registers
TRACKED_CHUNK_BYTES = 256  # the same beside max/min's winners (int64, twice the accumulators' bytes)
MAX_UNROLLED_PASSES = 8  # chunk passes written out one by one (float32 d <= 1024); more run as a loop
IDENTITY = {
    "sum": "T(0)",
    "mean": "T(0)",
    "max": "-std::numeric_limits<T>::infinity()",
    "min": "std::numeric_limits<T>::infinity()",
    "logsumexp": "-std::numeric_limits<T>::infinity()",
}
BETTER = {"max": ">", "min": "<"}
ACCUMULATE = {
    "sum": "acc[{f}] += {x};",
    "mean": "acc[{f}] += {x};",
    # logsumexp streams (running max ``acc``, sum ``zs`` of exp(x - acc)), one exp per element; equal values
    # (both -inf, or both +inf) add exactly 1, so no inf - inf is ever taken
    "logsumexp": "{{ const T x_ = {x}; const bool up = x_ > acc[{f}]; const T ex = x_ == acc[{f}] ? T(1) : "
    "fg_exp(up ? acc[{f}] - x_ : x_ - acc[{f}]); zs[{f}] = up ? zs[{f}] * ex + T(1) : zs[{f}] + ex; "
    "acc[{f}] = up ? x_ : acc[{f}]; }}",
}
FINALIZE = {
    "mean": "if (last) { const T d = T(degree[v] > 0 ? degree[v] : 1); for (int64_t q = 0; q < SIZE; ++q) acc[q] /= d; }",  # noqa: E501
    # a vertex without in-edges gets 0; in-edges whose messages are all the identity give the identity
    # (-inf for max), as torch.amax does
    **{r: "if (last && degree[v] == 0) for (int64_t q = 0; q < SIZE; ++q) acc[q] = T(0);" for r in BETTER},
    # between source partitions the row holds the log-sum so far (-inf: no edge yet); a NaN sum stays NaN
    "logsumexp": "for (int64_t q = 0; q < SIZE; ++q) acc[q] = !(zs[q] <= T(0)) ? acc[q] + std::log(zs[q])"
    " : (last ? T(0) : -std::numeric_limits<T>::infinity());",
}


# after a tracked pass over a row's run in one segment: elements no message beat go to its first edge
FIRST_EDGE_WINS = (
    "      if (begin < end) { const int64_t e0 = eids[begin];"
    " for (int64_t q = 0; q < SIZE; ++q) am[q] = am[q] < 0 ? e0 : am[q]; }"
)


def _accumulate(reducer: str, track: bool) -> str:
    """The statement folding element ``{x}`` into ``acc[{f}]``; max/min with ``track`` also keep the
    winning edge in ``am``. NaN propagates as in torch.amax: a NaN message makes the element NaN, and its
    first NaN edge the winner (torch.max's index); otherwise the first edge with the best value wins, first
    in the CSR's order, which for max and min is the edges' id order (``SpMMKernel``).

    Branch-free: ``win`` is two compares (``std::max``, one, keeps the accumulator where the message is
    NaN), and the value and the arg are both selected by it, which g++ makes two blends. Beside
    ``acc = std::max(acc, x_)``, ``am = win ? e : am`` becomes masked stores behind an "any lane won" branch
    that mispredicts on every other edge (``featgraph bench kernels --ops max`` times the tracked loop). A
    tie broken by edge id in the loop instead (an equality test and a compare of ids an element) made the
    max kernel 2x-3x slower, tracked or not (rand100k, d = 32: 16.8 ms against 6.4)."""
    if reducer not in BETTER:
        return ACCUMULATE[reducer]
    # x_ wins where it is better, or NaN against a number; nothing wins against NaN, so the first stays
    win = f"const bool win = !(acc[{{f}}] {BETTER[reducer]}= x_) && acc[{{f}}] == acc[{{f}}];"
    pick = "acc[{f}] = win ? x_ : acc[{f}];"
    if not track:
        return f"{{{{ const T x_ = {{x}}; {win} {pick} }}}}"
    return f"{{{{ const T x_ = {{x}}; {win} {pick} am[{{f}}] = win ? e : am[{{f}}]; }}}}"


def feature_tiles(extent: int, num_tiles: int) -> list[Tile]:
    """Cut the last output axis into at most ``num_tiles`` near-equal slices."""
    size = -(-extent // min(num_tiles, extent))
    return [Tile(lo, min(size, extent - lo)) for lo in range(0, extent, size)]


def _header(spec: KernelSpec) -> list[str]:
    """Includes, the compute type ``T``, the output's element type ``O`` (``stored_dtype``) with its
    conversions ``fg_store`` (T -> O) and ``fg_load`` (O -> T), and the prelude."""
    ctype = "float" if spec.dtype == "float32" else "double"
    itype = "int32_t" if spec.index_dtype == "int32" else "int64_t"
    stored = stored_dtype(spec)
    return [
        "#include <cstdint>",
        f"typedef {ctype} T;",
        f"typedef {itype} IDX;",
        PRELUDE,
        *stored_type(stored),
        "#include <omp.h>",
    ]


EDGE_ID = "#define FG_EID(j) (eids ? (int64_t)eids[j] : (int64_t)(j))  // null eids: edges in the user's order"


def _placeholder_decls(spec: KernelSpec, first: int) -> list[str]:
    types = {p.name: storage_type(p.dtype) for p in spec.op.placeholders}
    return [
        f"  const {types[p.name]}* __restrict__ {pointer_name(p)} = (const {types[p.name]}*)ptr[{first + n}];"
        for n, p in enumerate(spec.op.placeholders)
    ]


def _dispatch(tiles: list[Tile], parallel_tiles: bool, call_args: str, fn: str) -> list[str]:
    """Run every tile pass: serially with threads inside each pass, or (FDS ``parallel`` on a feature
    axis) with the tiles themselves shared among threads."""
    calls = [f"    case {n}: {fn}_{t.lo}({call_args}); break;" for n, t in enumerate(tiles)]
    outer = "  #pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)" if parallel_tiles else ""
    return [
        outer,
        f"  for (int64_t t = 0; t < {len(tiles)}; ++t) {{",
        "    switch (t) {",
        *calls,
        "    }",
        "  }",
    ]


def _parallel_tiles(spec: KernelSpec) -> bool:
    return any(spec.schedule.plans.get(a.name) and spec.schedule.plans[a.name].parallel for a in spec.op.axis)


def spmm_source(spec: KernelSpec) -> str:
    if spec.params.rows_per_program not in (None, 1) or spec.params.hub_threshold:
        raise ValueError(
            "rows_per_program and hub_threshold are GPU template parameters; target='cpu' walks one row at a "
            "time and leaves hub rows to the caches"
        )
    op, reducer = spec.op, spec.reducer
    tiles = feature_tiles(op.axis[-1].extent, spec.params.num_feature_tiles)
    argreduce = reducer in BETTER
    lines = _header(spec)
    for tile in tiles:
        if argreduce:  # tracking the winning edge costs time: only where the arg is asked for
            row_loop_body = [
                "      if (argidx) {",
                *_row_passes(spec, tile, track=True),
                "      } else {",
                *_row_passes(spec, tile, track=False),
                "      }",
            ]
        else:
            row_loop_body = _row_passes(spec, tile, track=False)
        lines += [
            f"static void spmm_tile_{tile.lo}(void** ptr, const int64_t* arg, bool par) {{",
            "  const IDX* __restrict__ indptr = (const IDX*)ptr[0];",
            "  const IDX* __restrict__ indices = (const IDX*)ptr[1];",
            "  const IDX* __restrict__ eids = (const IDX*)ptr[2];",
            "  const IDX* __restrict__ rows = (const IDX*)ptr[3];",
            "  const int64_t* __restrict__ degree = (const int64_t*)ptr[4];",
            "  O* __restrict__ out = (O*)ptr[5];",
            "  int64_t* __restrict__ argidx = (int64_t*)ptr[6];",
            *_placeholder_decls(spec, 7),
            "  const int64_t num_rows = arg[0], num_parts = arg[1]; const int nthreads = (int)arg[2];",
            f"  constexpr int64_t PF = {PREFETCH_DISTANCE};",
            "  (void)degree; (void)argidx;",
            "  for (int64_t p = 0; p < num_parts; ++p) {",
            "    const bool first = p == 0, last = p == num_parts - 1;",
            "    const int64_t edges_end = indptr[num_rows * num_parts]; (void)edges_end;  // every edge ends here",
            "    #pragma omp parallel for schedule(dynamic, 16) num_threads(nthreads) if(par)",
            "    for (int64_t r = 0; r < num_rows; ++r) {",
            "      const int64_t v = rows ? (int64_t)rows[r] : r;",
            "      const int64_t begin = indptr[v * num_parts + p], end = indptr[v * num_parts + p + 1];",
            *_next_run_prefetch(spec),
            *row_loop_body,
            "    }",
            "  }",
            "}",
        ]
    lines += [
        'extern "C" void run(void** ptr, const int64_t* arg) {',
        "  const int nthreads = (int)arg[2];",
        f"  const bool par = {'false' if _parallel_tiles(spec) else 'true'};",
        "  (void)nthreads;",
        *_dispatch(tiles, _parallel_tiles(spec), "ptr, arg, par", "spmm_tile"),
        "}",
    ]
    return "\n".join(lines) + "\n"


def _row_passes(spec: KernelSpec, tile: Tile, track: bool) -> list[str]:
    """The row's passes over register-sized chunks of the tile, each a pass over the row's edges, so the
    accumulators stay in registers; the chunk sizes are the fastest tried (docs/design.md, "Findings behind
    the defaults"). Up to ``MAX_UNROLLED_PASSES`` chunks each pass is written out with
    constant bounds; more run as a loop over equal chunks and a remainder, so the source, and g++'s time and
    memory, do not grow with the feature size."""
    chunk_bytes = TRACKED_CHUNK_BYTES if track else ROW_CHUNK_BYTES
    count = max(1, tile.extent * _element_bytes(spec) // chunk_bytes)
    if count == 1:
        across_rows = spec.params.row_order == "natural" and spec.params.num_partitions == 1
        return _row_pass(spec, tile, track, across_rows)
    if count <= MAX_UNROLLED_PASSES:
        chunks = [Tile(tile.lo + c.lo, c.extent) for c in feature_tiles(tile.extent, count)]
        return [line for c in chunks for line in _row_pass(spec, c, track)]
    width = chunk_bytes // _element_bytes(spec)
    full, rest = divmod(tile.extent, width)
    lines = [
        f"      for (int64_t chunk = 0; chunk < {full}; ++chunk) {{",
        f"      const int64_t chunk_lo = {tile.lo} + chunk * {width};",
        *_row_pass(spec, Tile("chunk_lo", width), track),
        "      }",
    ]
    return lines + (_row_pass(spec, Tile(tile.lo + full * width, rest), track) if rest else [])


def _next_run_prefetch(spec: KernelSpec) -> list[str]:
    """With several source segments, the first ``PREFETCH_DISTANCE`` source rows of the next row's run in this
    segment, prefetched before row ``v``'s passes: a run is a few edges (rows of 30 cut in two), and the
    edges after it in the CSR belong to other segments."""
    lines = _prefetch_rows(spec, indexed_by(spec.op, "src"), "indices[q]", 0, True)
    if spec.params.num_partitions == 1 or not lines:
        return []
    return [
        "      if (r + 1 < num_rows) {",
        "        const int64_t w = rows ? (int64_t)rows[r + 1] : r + 1;",
        "        const int64_t start = indptr[w * num_parts + p], stop = indptr[w * num_parts + p + 1];",
        f"        for (int64_t q = start; q < stop && q < start + PF; ++q) {{ {' '.join(lines)} }}",
        "      }",
    ]


def _row_pass(spec: KernelSpec, chunk: Tile, track: bool, across_rows: bool = False) -> list[str]:
    """One pass over row ``v``'s edges in one source segment for one chunk of its output: accumulators in
    registers, loaded from the output after the first source segment, finished and stored after the last.
    ``track`` keeps the winning edge of max/min (``am``); where no message beat the identity (all -inf for
    max) the run's first edge wins, so only a vertex without in-edges is left with arg -1 (and value 0).

    With ``across_rows`` (a row's only pass, rows in natural order, one segment) the prefetch runs on into the
    next rows' edges, which the thread visits next: stopping at the row's end would leave each row's first
    ``PREFETCH_DISTANCE`` source rows to arrive unprefetched (the SpMM against the bare gather loop:
    ``featgraph bench feasibility``). In several segments the edges after a row's run belong to other
    segments, so the next row's run is prefetched once per row instead (``_next_run_prefetch``)."""
    op, reducer, row = spec.op, spec.reducer, _row_size(spec)
    argreduce, streaming = reducer in BETTER and track, reducer == "logsumexp"
    state = " int64_t am[SIZE];" if argreduce else " T zs[SIZE];" if streaming else ""
    init_extra = " am[q] = -1;" if argreduce else " zs[q] = T(0);" if streaming else ""
    init = f"if (first) {{ for (int64_t q = 0; q < SIZE; ++q) {{ acc[q] = {IDENTITY[reducer]};{init_extra} }} }}"
    store = f"out[v * {row} + g] = fg_store(acc[q]);" + (f" argidx[v * {row} + g] = am[q];" if argreduce else "")
    load_extra = (
        f" am[q] = argidx[v * {row} + g];"
        if argreduce
        else " zs[q] = acc[q] == -std::numeric_limits<T>::infinity() ? T(0) : T(1);"
        if streaming
        else ""
    )
    load = f"acc[q] = fg_load(out[v * {row} + g]);{load_extra}"
    accumulate = _accumulate(reducer, track)
    prefetch = " ".join(_prefetch_rows(spec, indexed_by(op, "src"), "indices[j + PF]", chunk.lo, True))
    return [
        "      {",
        f"      constexpr int64_t SIZE = {tile_size(op, chunk)};",
        f"      T acc[SIZE];{state}",
        f"      {init}",
        "      else {",
        *_tile_rows(op, chunk, load, "        "),
        "      }",
        "      for (int64_t j = begin; j < end; ++j) {",
        "        const int64_t s = indices[j]; const int64_t e = eids[j]; (void)s; (void)e;",
        f"        if (j + PF < {'edges_end' if across_rows else 'end'}) {{ {prefetch} }}",
        *message_block(op, spec.schedule, chunk, lambda f, g, x: accumulate.format(f=f, x=x)),
        "      }",
        *([FIRST_EDGE_WINS] if argreduce else []),
        f"      {FINALIZE.get(reducer, '')}",
        *_tile_rows(op, chunk, store, "      "),
        "      }",
    ]


def _tile_rows(op, tile: Tile, statement: str, indent: str) -> list[str]:
    """Loop over the tile's elements with ``q`` (tile position) and ``g`` (row position)."""
    outer = 1
    for a in op.axis[:-1]:
        outer *= a.extent
    last = op.axis[-1].extent
    return [
        f"{indent}for (int64_t o = 0; o < {outer}; ++o) for (int64_t i = 0; i < {tile.extent}; ++i) {{",
        f"{indent}  const int64_t q = o * {tile.extent} + i, g = o * {last} + {tile.lo} + i; {statement}",
        f"{indent}}}",
    ]


STAGED_POINTERS = 7  # srcs, dsts, eids, staging buffer, slots, sources, output; then the placeholders


def sddmm_source(spec: KernelSpec) -> str:
    """Edge-parallel: each edge's result stored at its user edge id, or, with ``write_buckets``, at its
    slot of a staging buffer whose rows are grouped by bucket of user edge ids; a last pass then fills
    each output row from its staging row (``sources``), one bucket's window of the buffer at a time.
    Writes at user edge ids visited in Hilbert order land on random cache lines, one line fill each."""
    row = _row_size(spec)
    if not spec.params.write_buckets:
        return edge_parallel_source(spec, lambda f, g, x: f"out[e * {row} + {g}] = fg_store({x});", "eids")
    finish = [
        "  const O* __restrict__ stage = (const O*)ptr[3];",
        "  const IDX* __restrict__ sources = (const IDX*)ptr[5];",
        "  O* __restrict__ final_out = (O*)ptr[6];",
        "  const int64_t num_edges = arg[0];",
        "  #pragma omp parallel for schedule(static) num_threads(nthreads)",
        "  for (int64_t e = 0; e < num_edges; ++e) {",
        f"    const O* __restrict__ from = stage + (int64_t)sources[e] * {row};",
        "    #pragma omp simd",
        f"    for (int64_t i = 0; i < {row}; ++i) final_out[e * {row} + i] = from[i];",
        "  }",
    ]
    return edge_parallel_source(
        spec, lambda f, g, x: f"out[(int64_t)slots[j] * {row} + {g}] = fg_store({x});", "slots", STAGED_POINTERS, finish
    )


def gas_source(spec: KernelSpec) -> str:
    """Edge-centric SpMM (GAS): edges in COO order, each message added atomically into its destination
    row. Needs no CSR; the summation order, and so the rounding, varies from run to run."""
    row = _row_size(spec)
    return edge_parallel_source(
        spec, lambda f, g, x: f"{{\n#pragma omp atomic\nout[v * {row} + {g}] += {x};\n}}", "dsts"
    )


def _row_size(spec: KernelSpec) -> int:
    row = 1
    for a in spec.op.axis:
        row *= a.extent
    return row


def _edge_prefetch(spec: KernelSpec, tile: Tile, out_rows: str) -> str:
    """Software prefetch of the rows the edge ``PREFETCH_DISTANCE`` ahead reads (endpoint and edge data)
    and of the output row it writes (indexed by ``out_rows``): out of CSR order they are random rows, which
    the hardware prefetchers cannot guess. Staged writes ("slots") fill each bucket's lines one after the
    other, so their prefetch would only cost instructions (``featgraph bench kernels --ops attention``)."""
    ahead = f"j + {PREFETCH_DISTANCE}"
    row_at = {"srcs": f"srcs[{ahead}]", "dsts": f"dsts[{ahead}]", "eids": f"FG_EID({ahead})"}
    arrays = {"src": "srcs", "dst": "dsts", "eid": "eids"}
    reads = [
        line
        for kind, array in arrays.items()
        for line in _prefetch_rows(spec, indexed_by(spec.op, kind), row_at[array], tile.lo, True)
    ]
    if out_rows == "slots":
        return " ".join(reads)
    write = f"__builtin_prefetch(out + (int64_t){row_at[out_rows]} * {_row_size(spec)} + {tile.lo}, 1);"
    return " ".join([*reads, write])


def _prefetch_rows(
    spec: KernelSpec, placeholders: tuple[Placeholder, ...], row: str, lo: int | str, whole_16bit_rows: bool = False
) -> list[str]:
    """Prefetch of each placeholder's row ``row`` at feature offset ``lo`` (the row start where ``lo`` lies
    beyond a narrower placeholder), except for arrays of at most ``CACHED_ARRAY_BYTES``: those stay in the
    L2, and the prefetch would cost an index load per edge. One cache line per row, which the hardware's
    adjacent-line and streaming prefetchers extend; with ``whole_16bit_rows`` a float16/bfloat16 row read from
    its start gets each of its first ``HALF_PREFETCH_LINES`` lines, which speeds up 16-bit rows and would slow
    float32 ones (``featgraph bench kernels --ops gcn-bf16 attention-bf16``)."""
    lines = []
    for p in placeholders:
        stored = _stored_bytes(spec, p.dtype)
        if stays_cached(spec, p):
            continue
        base = f"{pointer_name(p)} + (int64_t){row} * {row_stride(p)}"
        if whole_16bit_rows and p.dtype in HALF_DTYPES and lo == 0:
            per_line = CACHE_LINE_BYTES // stored
            count = min(HALF_PREFETCH_LINES, -(-row_stride(p) // per_line))
            lines.extend(f"__builtin_prefetch({base} + {k * per_line});" for k in range(count))
        else:
            lines.append(f"__builtin_prefetch({base} + {_row_offset(lo, row_stride(p))});")
    return lines


def stays_cached(spec: KernelSpec, p: Placeholder) -> bool:
    """Whether ``p`` is small enough (``CACHED_ARRAY_BYTES``) to stay in the L2, so is not prefetched."""
    return spec.placeholder_shape(p)[0] * row_stride(p) * _stored_bytes(spec, p.dtype) <= CACHED_ARRAY_BYTES


def size_key(spec: KernelSpec) -> tuple[bool, ...]:
    """What the source reads of the placeholders' row counts: which of them stay cached."""
    return tuple(stays_cached(spec, p) for p in spec.op.placeholders)


def _row_offset(lo: int | str, stride: int) -> str:
    """Feature offset ``lo`` (a constant or a chunk loop's variable) within a row of ``stride`` elements;
    the row start where ``lo`` lies beyond it."""
    if isinstance(lo, int):
        return str(lo if lo < stride else 0)
    return f"({lo} < {stride} ? {lo} : 0)"


def _element_bytes(spec: KernelSpec) -> int:
    """Bytes per accumulator element: the compute type ``T`` (float32 or float64)."""
    return 8 if spec.dtype == "float64" else 4


def _stored_bytes(spec: KernelSpec, dtype: str) -> int:
    """Bytes per element of a placeholder of ``dtype`` as the kernel reads it (``storage_type``)."""
    return TORCH_DTYPES[dtype].itemsize if dtype == "int64" or dtype in HALF_DTYPES else _element_bytes(spec)


def edge_parallel_source(
    spec: KernelSpec, sink, out_rows: str, first_placeholder: int = 4, finish: list[str] | None = None
) -> str:
    """One pass per feature tile over the edges, and ``finish`` after every pass; ``sink`` writes the output row
    named by ``out_rows`` ("eids", "dsts", or "slots": pointer 4). Edges come as a list (srcs, dsts, eids),
    static contiguous chunks per thread, or, for an SDDMM in CSR order, from the kernels' CSR walked one
    source segment at a time (``csr_walk``)."""
    op = spec.op
    walk = spec.kind == "sddmm" and spec.params.edge_order == "csr"
    tiles = feature_tiles(op.axis[-1].extent, spec.params.num_feature_tiles)
    lines = [*_header(spec), EDGE_ID]
    for tile in tiles:
        lines += [
            f"static void edge_tile_{tile.lo}(void** ptr, const int64_t* arg, bool par) {{",
            *(["  const IDX* __restrict__ slots = (const IDX*)ptr[4];"] if out_rows == "slots" else []),
            "  O* __restrict__ out = (O*)ptr[3];",
            *_placeholder_decls(spec, first_placeholder),
            *(csr_walk(spec, tile, sink, out_rows) if walk else _edge_list_loop(spec, tile, sink, out_rows)),
            "}",
        ]
    lines += [
        'extern "C" void run(void** ptr, const int64_t* arg) {',
        "  const int nthreads = (int)arg[1];",
        f"  const bool par = {'false' if _parallel_tiles(spec) else 'true'};",
        "  (void)nthreads;",
        *_dispatch(tiles, _parallel_tiles(spec), "ptr, arg, par", "edge_tile"),
        *(finish or []),
        "}",
    ]
    return "\n".join(lines) + "\n"


def _edge_list_loop(spec: KernelSpec, tile: Tile, sink, out_rows: str) -> list[str]:
    """The loop over an edge list (ptr: srcs, dsts, eids; arg: num_edges, num_threads)."""
    return [
        "  const IDX* __restrict__ srcs = (const IDX*)ptr[0];",
        "  const IDX* __restrict__ dsts = (const IDX*)ptr[1];",
        "  const IDX* __restrict__ eids = (const IDX*)ptr[2];",
        "  const int64_t num_edges = arg[0]; const int nthreads = (int)arg[1];",
        "  #pragma omp parallel for schedule(static) num_threads(nthreads) if(par)",
        "  for (int64_t j = 0; j < num_edges; ++j) {",
        "    const int64_t s = srcs[j], v = dsts[j], e = FG_EID(j); (void)s; (void)v; (void)e;",
        f"    if (j + {PREFETCH_DISTANCE} < num_edges) {{ {_edge_prefetch(spec, tile, out_rows)} }}",
        *message_block(spec.op, spec.schedule, tile, sink),
        "  }",
    ]


def csr_walk(spec: KernelSpec, tile: Tile, sink, out_rows: str) -> list[str]:
    """The loop over the kernels' CSR (ptr: pointers, indices, eids, as ``SourcePartitions``; arg: num_edges,
    num_threads, num_rows, num_parts, rows_ahead), one source segment at a time, each segment's rows shared
    among the threads: a segment's source rows stay in cache while its destinations stream past, and no edge
    list is kept beside the CSR. A row's run in a segment is short (a few edges where rows of 30 are cut in
    eight), so the prefetch for a run's first ``PREFETCH_DISTANCE`` edges is issued ``rows_ahead`` rows before it
    (about as many edges on), their writes with them, and longer runs prefetch within themselves."""
    early = [
        line
        for kind, row in (("src", "indices[q]"), ("eid", "eids[q]"))
        for line in _prefetch_rows(spec, indexed_by(spec.op, kind), row, tile.lo, True)
    ]
    if out_rows == "eids":
        early.append(f"__builtin_prefetch(out + (int64_t)eids[q] * {_row_size(spec)} + {tile.lo}, 1);")
    within = " ".join(line.replace("[q]", f"[j + {PREFETCH_DISTANCE}]") for line in early)
    destination = " ".join(_prefetch_rows(spec, indexed_by(spec.op, "dst"), "w", tile.lo, True))
    return [
        "  const IDX* __restrict__ indptr = (const IDX*)ptr[0];",
        "  const IDX* __restrict__ indices = (const IDX*)ptr[1];",
        "  const IDX* __restrict__ eids = (const IDX*)ptr[2];",
        "  const int nthreads = (int)arg[1];",
        "  const int64_t num_rows = arg[2], num_parts = arg[3], rows_ahead = arg[4];",
        "  for (int64_t p = 0; p < num_parts; ++p) {",
        "    #pragma omp parallel for schedule(dynamic, 64) num_threads(nthreads) if(par)",
        "    for (int64_t v = 0; v < num_rows; ++v) {",
        "      const int64_t w = v + rows_ahead;",
        "      if (w < num_rows) {",
        f"        {destination}",
        "        const int64_t start = indptr[w * num_parts + p], stop = indptr[w * num_parts + p + 1];",
        f"        for (int64_t q = start; q < stop && q < start + {PREFETCH_DISTANCE}; ++q) {{ {' '.join(early)} }}",
        "      }",
        "      const int64_t end = indptr[v * num_parts + p + 1];",
        "      for (int64_t j = indptr[v * num_parts + p]; j < end; ++j) {",
        "        const int64_t s = indices[j], e = eids[j]; (void)s; (void)e;",
        f"        if (j + {PREFETCH_DISTANCE} < end) {{ {within} }}",
        *message_block(spec.op, spec.schedule, tile, sink),
        "      }",
        "    }",
        "  }",
    ]


def edge_sum_source(spec: KernelSpec) -> str:
    """Sum of the UDF over all edges into one dense output (a gradient of a dense parameter). Each thread
    accumulates a private copy; the copies are added in thread order, so results are deterministic."""
    op = spec.op
    size = _row_size(spec)
    tile = Tile(0, op.axis[-1].extent)
    lines = _header(spec) + [
        EDGE_ID,
        'extern "C" void run(void** ptr, const int64_t* arg) {',
        "  const IDX* __restrict__ srcs = (const IDX*)ptr[0];",
        "  const IDX* __restrict__ dsts = (const IDX*)ptr[1];",
        "  const IDX* __restrict__ eids = (const IDX*)ptr[2];",
        "  T* __restrict__ out = (T*)ptr[3];",
        *_placeholder_decls(spec, 4),
        "  const int64_t num_edges = arg[0]; const int nthreads = (int)arg[1];",
        f"  constexpr int64_t SIZE = {size};",
        "  T* partial = new T[(size_t)nthreads * SIZE]();",
        "  #pragma omp parallel num_threads(nthreads)",
        "  {",
        "    T* __restrict__ local = partial + (int64_t)omp_get_thread_num() * SIZE;",
        "    #pragma omp for schedule(static)",
        "    for (int64_t j = 0; j < num_edges; ++j) {",
        "      const int64_t s = srcs[j], v = dsts[j], e = FG_EID(j); (void)s; (void)v; (void)e;",
        *message_block(op, spec.schedule, tile, lambda f, g, x: f"local[{g}] += {x};"),
        "    }",
        "  }",
        "  for (int64_t t = 0; t < nthreads; ++t) for (int64_t q = 0; q < SIZE; ++q) out[q] += partial[t * SIZE + q];",
        "  delete[] partial;",
        "}",
    ]
    return "\n".join(lines) + "\n"


def winner_source(spec: KernelSpec) -> str:
    """Per output element of the forward, its winning edge ``e`` (if any) evaluates the UDF over the free
    axes and adds it at the write index. Threads split the destination rows statically (every row has the
    same number of output elements), or, where each output element writes its own columns of the gradient
    (a copy's), all rows and split the output elements: no two threads then write one element. Otherwise
    rows shared between destinations (sources, a dense weight) go to a private copy per extra thread,
    added in thread order afterwards. Deterministic for a fixed thread count; no atomics."""
    params = spec.params
    op = spec.op
    outer = math.prod(a.extent for a in params.outer)
    position = params.write_position(lambda var: var.name, lambda row: row)
    stride, unflatten = outer, []
    for a in params.outer:  # the output element's coordinates from its flat index ``o``
        stride //= a.extent
        unflatten.append(f"const int64_t {a.name} = (o / {stride}) % {a.extent};")
    lines = _header(spec) + [
        'extern "C" void run(void** ptr, const int64_t* arg) {',
        "  const IDX* __restrict__ sources = (const IDX*)ptr[0];",
        "  const int64_t* __restrict__ winners = (const int64_t*)ptr[1];",
        "  T* __restrict__ out = (T*)ptr[2];",
        *_placeholder_decls(spec, 3),
        "  const int64_t num_rows = arg[0], out_size = arg[2]; const int nthreads = (int)arg[1];",
        f"  T* partial = {'true' if params.private_copies else 'false'} && nthreads > 1"
        " ? new T[(size_t)(nthreads - 1) * out_size]() : nullptr;",
        "  #pragma omp parallel num_threads(nthreads)",
        "  {",
        "    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();",
        "    T* __restrict__ target = t == 0 || !partial ? out : partial + (t - 1) * out_size;",
        *(
            [f"    const int64_t o_lo = {outer} * t / nt, o_hi = {outer} * (t + 1) / nt, v_lo = 0, v_hi = num_rows;"]
            if params.owns_columns
            else [
                f"    const int64_t o_lo = 0, o_hi = {outer}, v_lo = num_rows * t / nt, v_hi = num_rows * (t + 1) / nt;"
            ]
        ),
        "    for (int64_t v = v_lo; v < v_hi; ++v) {",
        "      for (int64_t o = o_lo; o < o_hi; ++o) {",
        f"      const int64_t e = winners[v * {outer} + o];",
        "      if (e >= 0) {",
        "      const int64_t s = sources[e]; (void)s;",
        f"      {' '.join(unflatten)}",
        *message_block(op, spec.schedule, Tile(0, op.axis[-1].extent), lambda f, g, x: f"target[{position}] += {x};"),
        "      }",
        "      }",
        "    }",
        "  }",
        "  if (partial) {",
        "    #pragma omp parallel for schedule(static) num_threads(nthreads)",
        "    for (int64_t q = 0; q < out_size; ++q)",
        "      for (int64_t t = 1; t < nthreads; ++t) out[q] += partial[(t - 1) * out_size + q];",
        "    delete[] partial;",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"
