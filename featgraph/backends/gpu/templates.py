"""Triton sources of the sparse templates with the UDF inlined, each with a host-side ``run``.

SpMM (GAR, vertex-centric): a program per ``ROWS`` destination rows and a feature block (FeatGraph's rows
to blocks, feature axis across lanes; several short rows per program, fuseGNN's GAR); the rows' in-edges
are packed into ``BLOCK_E`` edge lanes at a time and reduced per row with a tree reduction (fuseGNN's
edge-parallel reduction), so no atomics and a deterministic result. SpMM (GAS, edge-centric): edge
blocks with atomic adds into the destination rows. SDDMM: edge blocks to programs, the feature axis (and
any reduction in the UDF) across lanes. Edge sum: a fixed number of programs stride over the edges, each
writing a partial sum that the host adds up in program order (deterministic).

``run(ptrs, args)`` takes the tensors and integers in the same order as the CPU backend's entry point:
SpMM ptr: indptr, indices, edge_ids, rows (or None), degree, out, argidx (or None), placeholders...
(then, with hubs staged, hub slots and hub ids); arg: num_rows, num_partitions, num_threads. Edge
templates ptr: srcs, dsts, eids, out, placeholders...; arg: num_edges, num_threads. Winner scatter ptr:
sources (per user edge id), winners, out, placeholders...; arg: num_rows, num_threads, out_size.
"""

from __future__ import annotations

import math

from ...kernel_spec import KernelSpec
from ...te.expr import Reduce
from .codegen import floor_power_of_2, message, next_power_of_2, output_axes_of, pointer_name

FEATURE_BLOCK_MAX = 128  # lanes of a feature block without an FDS split
LANE_BUDGET = 2048  # elements of a program's (rows x) edges x features block
MAX_ROWS_PER_PROGRAM = 16
MAX_REDUCE_LANES = 32  # reductions longer than this are chunked rather than given whole lanes
# edge lanes a message with a reduction keeps by narrowing its feature block: with 4 (an MLP's k = 8 beside 64
# output lanes) the fused MLP aggregation ran 3.9x slower on an H100 than with 32 (``featgraph bench gpu --ops
# mlp --tune 10``: the tuner's split of 8 output lanes)
MIN_REDUCING_EDGE_LANES = 32
STAGE_BUDGET = 4096  # elements of a staged hub tile (16 KiB of float32 per feature block)
MAX_HUBS = 128
EDGE_SUM_PROGRAMS = 256  # partial sums of an edge sum
TRITON_TYPES = {"float32": "tl.float32", "float64": "tl.float64"}
IDENTITY = {"sum": "0.0", "mean": "0.0", "max": 'float("-inf")', "min": 'float("inf")', "logsumexp": 'float("-inf")'}
INDENT = "        "
# Triton compiles a kernel once per class of its arguments' values (an integer divisible by 16, or 1; a pointer
# aligned to 16 bytes). The edge and row counts and the graph's index arrays change class from one graph to the
# next, every mini-batch block a new one, so a kernel is not specialised on them: it compiles once per
# configuration instead of again whenever a block's sizes fall in a class not seen before.
PER_GRAPH_COUNTS = ("num_rows", "num_edges", "num_pairs", "num_programs")
INDEX_ARRAYS = (
    "indptr", "indices", "eids", "rows", "argidx", "srcs", "dsts", "sources", "winners", "hub_slot", "hub_ids",
)  # fmt: skip

HEADER = """import torch
import triton
import triton.language as tl


@triton.jit
def fg_floormod(a, b):  # integer % as Python rounds it (Triton's takes the dividend's sign, its interpreter not)
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def fg_floordiv(a, b):  # integer // as Python rounds it: an exact division, however the backend rounds
    return (a - fg_floormod(a, b)) // b
"""


def size_key(spec: KernelSpec) -> tuple:
    """What the source reads of the placeholders' row counts: nothing (rows are indexed at run time)."""
    return ()


def feature_size(spec: KernelSpec) -> int:
    return math.prod(spec.op.shape)


def feature_block(spec: KernelSpec) -> int:
    """Lanes over the flattened output: the FDS split factor of the last output axis when the output has
    one axis, else ``num_feature_tiles`` blocks, else up to 128, and beside a reduction inside the message
    few enough to leave ``MIN_REDUCING_EDGE_LANES`` edge lanes."""
    size = feature_size(spec)
    plan = spec.schedule.plans.get(spec.op.axis[-1].name)
    if len(spec.op.axis) == 1 and plan is not None and plan.factor:
        return next_power_of_2(min(plan.factor, size))
    tiles = spec.params.num_feature_tiles
    if tiles > 1:
        return next_power_of_2(-(-size // tiles))
    lanes = reduce_lanes(spec)
    widest = FEATURE_BLOCK_MAX if lanes == 1 else max(1, LANE_BUDGET // (lanes * MIN_REDUCING_EDGE_LANES))
    return min(next_power_of_2(size), widest)


def reduce_lanes(spec: KernelSpec) -> int:
    """Lanes of the longest reduction inside the message (an MLP's k, at most ``MAX_REDUCE_LANES``), 1 if none."""
    extents = [math.prod(a.extent for a in node.axes) for node in spec.op.nodes if isinstance(node, Reduce)]
    return min(next_power_of_2(max(extents)), MAX_REDUCE_LANES) if extents else 1


def edge_block(block_f: int, reduce_lanes: int = 1) -> int:
    """Edge lanes beside ``block_f`` feature lanes and ``reduce_lanes`` lanes of a reduction inside the
    message: ``LANE_BUDGET`` elements a block, 1 to 64 edges."""
    return max(1, min(64, floor_power_of_2(LANE_BUDGET // (block_f * reduce_lanes))))


def message_edge_block(spec: KernelSpec, block_f: int) -> int:
    """Edge lanes for this message: fewer beside a short reduction (an MLP's k, up to 32 lanes) so the
    reduction fits one chunk and its edge-independent operands (the weight tile) are loaded once."""
    return edge_block(block_f, reduce_lanes(spec))


def _check_gpu_params(spec: KernelSpec) -> None:
    if spec.kind in ("spmm", "sddmm") and spec.params.num_partitions != 1:
        raise ValueError(
            "num_partitions is a CPU template parameter (1D source partitions for the L3 cache); "
            "target='gpu' takes num_partitions=1"
        )
    if spec.kind == "spmm" and spec.params.strategy == "gas" and spec.params.hub_threshold:
        raise ValueError("hub_threshold stages hubs for the vertex-centric template; strategy='gas' takes 0")


def jit_decorator(signature: str) -> str:
    """``@triton.jit`` for a kernel of parameters ``signature`` (its ``def`` line's): not specialised on the
    per-graph counts and index arrays among them."""
    names = [param.split(":")[0].strip() for param in signature.split(",")]
    counts = [name for name in names if name in PER_GRAPH_COUNTS]
    arrays = [name for name in names if name in INDEX_ARRAYS]
    return f"@triton.jit(do_not_specialize={counts!r}, do_not_specialize_on_alignment={arrays!r})"


def _placeholders(spec: KernelSpec) -> str:
    return "".join(f"{pointer_name(p)}, " for p in spec.op.placeholders)


def hub_capacity(spec: KernelSpec) -> int:
    """Hub rows a program stages (hybrid partitioning): as many as fit the stage budget, at most 128."""
    return max(1, min(MAX_HUBS, floor_power_of_2(STAGE_BUDGET // feature_block(spec))))


def _body(spec: KernelSpec, sizes: dict[str, int], stage: bool = False) -> tuple[list[str], list[str]]:
    """The message's prologue (once per program) and its statements per edge block, which end with
    ``msg`` and ``lanes`` (edges x features); ``stage`` reads hub sources from the staged tile."""
    prologue, lines, msg = message(spec.op, spec.schedule, TRITON_TYPES[spec.dtype], sizes, INDENT, stage)
    return prologue, [*lines, f"{INDENT}msg = {msg}", f"{INDENT}lanes = mE[:, None] & mF[None, :]"]


def rows_per_program(spec: KernelSpec, block_f: int) -> int:
    """Destination rows one program reduces together (the template parameter, else 1), at most 16 and at
    most as many as leave one edge lane in the ``LANE_BUDGET`` selection."""
    wanted = spec.params.rows_per_program or 1
    return max(1, min(floor_power_of_2(wanted), MAX_ROWS_PER_PROGRAM, floor_power_of_2(LANE_BUDGET // block_f)))


def default_rows_per_program(avg_degree: float, feature_size: int) -> int:
    """fuseGNN's GAR for short features: enough rows that their in-edges fill the edge lanes one row
    would get (rows of long features, or with many in-edges, fill them alone)."""
    block_f = min(next_power_of_2(feature_size), FEATURE_BLOCK_MAX)
    return max(1, min(MAX_ROWS_PER_PROGRAM, floor_power_of_2(int(edge_block(block_f) / max(avg_degree, 1.0)))))


def _row_update(reducer: str, t: str) -> tuple[list[str], list[str]]:
    """Statements folding one chunk's messages into the rows' accumulators, and the finishing ones.

    ``sel`` (rows x edges x features) says which lane belongs to which row; each reduction runs over the
    edge axis (1). max/min keep the CSR position of the first winning edge, as the CPU template does: NaN
    wins against numbers and stays (as torch.amax; ``tl.max`` on a GPU drops NaN, hence the explicit
    test), and a row whose messages are all the identity (-inf for max) keeps its first edge and -inf."""
    cand = f"{INDENT}cand = tl.where(sel, msg[None, :, :], {IDENTITY[reducer]})"
    if reducer in ("max", "min"):
        better = ">" if reducer == "max" else "<"
        update = [
            cand,
            f"{INDENT}first_nan = tl.min(tl.where(sel & (cand != cand), j[None, :, None], NO_EDGE), axis=1)",
            f'{INDENT}top = tl.where(first_nan < NO_EDGE, float("nan"), tl.{reducer}(cand, axis=1))',
            f"{INDENT}at = tl.min(tl.where(sel & (cand == top[:, None, :]), j[None, :, None], NO_EDGE), axis=1)",
            f"{INDENT}at = tl.minimum(at, first_nan)",
            f"{INDENT}win = (top {better} acc) | ((top != top) & (acc == acc)) | ((best < 0) & (at < NO_EDGE))",
            f"{INDENT}acc = tl.where(win, top, acc)",
            f"{INDENT}best = tl.where(win, at, best)",
        ]
        finish = [
            "    found = best >= 0",
            "    acc = tl.where(found, acc, 0.0)",
            "    if STORE_ARG:",
            "        won = tl.load(eids + best, mask=found & lanes_out, other=-1).to(tl.int64)",
            "        tl.store(argidx + out_at, tl.where(found, won, -1), mask=lanes_out)",
        ]
    elif reducer == "logsumexp":
        # running max ``acc`` and sum ``zs`` of exp(msg - acc); a value equal to the max (both -inf, say)
        # adds exactly 1, and -inf is never subtracted from -inf
        update = [
            cand,
            f"{INDENT}top = tl.maximum(acc, tl.max(cand, axis=1))",
            f'{INDENT}shift = tl.where(top == float("-inf"), 0.0, top)',
            f"{INDENT}zs = zs * tl.exp(tl.where(acc == top, 0.0, acc - shift))",
            f"{INDENT}terms = tl.exp(tl.where(cand == top[:, None, :], 0.0, cand - shift[:, None, :]))",
            f"{INDENT}zs += tl.sum(tl.where(sel, terms, 0.0), axis=1)",
            f"{INDENT}acc = top",
        ]
        # a NaN sum stays NaN; no edge gives 0
        finish = ["    acc = tl.where(zs > 0, acc + tl.log(tl.where(zs > 0, zs, 1.0)), tl.where(zs == zs, 0.0, zs))"]
    else:
        update = [f"{INDENT}acc += tl.sum(tl.where(sel, msg[None, :, :], 0.0), axis=1)"]
        finish = [f"    acc = acc / tl.maximum(count, 1).to({t})[:, None]"] if reducer == "mean" else []
    return update, finish


def spmm_source(spec: KernelSpec) -> str:
    """Vertex-centric SpMM: a program takes ``ROWS`` destination rows and one feature block, packs the
    rows' in-edges into its edge lanes ``BLOCK_E`` at a time and reduces each row's lanes (no atomics).
    A vertex without in-edges gets 0; max/min report the user edge id of the first winner in CSR order.
    With ``hub_threshold`` the hubs' source rows are loaded once per program into a tile and gathered
    from there (hybrid partitioning); the run function then takes the hubs' slot and id arrays last."""
    _check_gpu_params(spec)
    reducer, size = spec.reducer, feature_size(spec)
    t = TRITON_TYPES[spec.dtype]
    block_f = feature_block(spec)
    rows = rows_per_program(spec, block_f)
    # the rows x edges x features selection holds what one row's edges x features would: the edge lanes
    # shrink as rows are added, so registers stay those of one row (``featgraph bench gpu --compile-only 90``)
    block_e = message_edge_block(spec, block_f * rows)
    sizes = {"BLOCK_E": block_e, "BLOCK_F": block_f}
    argreduce = reducer in ("max", "min")
    stage = spec.params.hub_threshold > 0
    prologue, body = _body(spec, sizes, stage)
    update, finish = _row_update(reducer, t)
    hubs = ["    hv = tl.load(hub_ids + tl.arange(0, NUM_HUBS))", "    mH = hv >= 0", "    hv = tl.maximum(hv, 0)"]
    slot = [f"{INDENT}slot = tl.load(hub_slot + s, mask=mE, other=-1)"]
    signature = (
        f"indptr, indices, eids, rows, out, argidx, {_placeholders(spec)}{'hub_slot, hub_ids, ' if stage else ''}"
        "num_rows, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr, ROWS: tl.constexpr, HAS_ROWS: tl.constexpr, "
        "STORE_ARG: tl.constexpr, NUM_HUBS: tl.constexpr"
    )
    lines = [
        HEADER,
        "NO_EDGE = tl.constexpr(1 << 62)",
        "",
        "",
        jit_decorator(signature),
        f"def spmm_kernel({signature}):",
        "    of = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)",
        f"    mF = of < {size}",
        *(hubs if stage else []),
        *prologue,
        "    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)",
        "    mR = r < num_rows",
        "    if HAS_ROWS:",
        "        vr = tl.load(rows + r, mask=mR, other=0).to(tl.int64)",
        "    else:",
        "        vr = r",
        "    start = tl.load(indptr + vr, mask=mR, other=0).to(tl.int64)",
        "    count = tl.load(indptr + vr + 1, mask=mR, other=0).to(tl.int64) - start",
        "    lead = tl.cumsum(count, 0) - count  # the lane where each row's edges begin",
        "    total = tl.sum(count, 0)",
        f"    acc = tl.full([ROWS, BLOCK_F], {IDENTITY[reducer]}, {t})",
        *(["    best = tl.full([ROWS, BLOCK_F], -1, tl.int64)"] if argreduce else []),
        *([f"    zs = tl.zeros([ROWS, BLOCK_F], {t})"] if reducer == "logsumexp" else []),
        "    for q0 in range(0, total, BLOCK_E):",
        "        q = q0 + tl.arange(0, BLOCK_E)",
        "        mE = q < total",
        "        member = (q[None, :] >= lead[:, None]) & (q[None, :] < (lead + count)[:, None])",
        "        j = tl.sum(tl.where(member, (start - lead)[:, None] + q[None, :], 0), axis=0)  # CSR position",
        "        v = tl.sum(tl.where(member, vr[:, None], 0), axis=0)",
        "        s = tl.load(indices + j, mask=mE, other=0).to(tl.int64)",
        "        e = tl.load(eids + j, mask=mE, other=0).to(tl.int64)",
        *(slot if stage else []),
        *body,
        f"{INDENT}sel = member[:, :, None] & lanes[None, :, :]",
        *update,
        "    lanes_out = mR[:, None] & mF[None, :]",
        f"    out_at = vr[:, None] * {size} + of[None, :]",
        *finish,
        "    tl.store(out + out_at, acc, mask=lanes_out)",
        "",
        "",
        "def run(ptrs, args):",
        "    indptr, indices, eids, rows, _degree, out, argidx, *inputs = ptrs",
        "    if args[0] == 0:",
        "        return",
        f"    grid = (triton.cdiv(args[0], {rows}), triton.cdiv({size}, {block_f}))",
        "    spmm_kernel[grid](",
        "        indptr, indices, eids, indptr if rows is None else rows, out, out if argidx is None else argidx,",
        f"        *inputs, args[0], BLOCK_E={block_e}, BLOCK_F={block_f}, ROWS={rows}, HAS_ROWS=rows is not None,"
        f" STORE_ARG=argidx is not None, NUM_HUBS={hub_capacity(spec) if stage else 1},",
        "    )",
    ]
    return "\n".join(lines) + "\n"


def _edge_kernel(spec: KernelSpec, name: str, extra_args: str, head: list[str], sink: list[str]) -> list[str]:
    """An edge-parallel kernel: edges ``BLOCK_E`` at a time (positions ``j`` with mask ``mE``, set up by
    ``head``), the message over a feature block, then ``sink``."""
    block_f = feature_block(spec)
    sizes = {"BLOCK_E": message_edge_block(spec, block_f), "BLOCK_F": block_f}
    indent = INDENT[: len(head[-1]) - len(head[-1].lstrip())]
    prologue, lines = _body(spec, sizes)
    body = [indent + line[len(INDENT) :] for line in lines]
    signature = (
        f"srcs, dsts, eids, out, {_placeholders(spec)}num_edges, {extra_args}BLOCK_E: tl.constexpr, "
        "BLOCK_F: tl.constexpr"
    )
    return [
        HEADER,
        jit_decorator(signature),
        f"def {name}({signature}):",
        "    of = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)",
        f"    mF = of < {feature_size(spec)}",
        *prologue,
        *head,
        f"{indent}mE = j < num_edges",
        f"{indent}s = tl.load(srcs + j, mask=mE, other=0).to(tl.int64)",
        f"{indent}v = tl.load(dsts + j, mask=mE, other=0).to(tl.int64)",
        f"{indent}e = tl.load(eids + j, mask=mE, other=0).to(tl.int64)",
        *body,
        *sink,
    ]


def _edge_source(spec: KernelSpec, sink: str) -> str:
    """SDDMM (``store`` at the user edge id) or GAS SpMM (``atomic_add`` into the destination row)."""
    size, block_f = feature_size(spec), feature_block(spec)
    block_e = message_edge_block(spec, block_f)
    row = "e" if sink == "store" else "v"
    head = ["    j = tl.program_id(0) * BLOCK_E + tl.arange(0, BLOCK_E)"]
    lines = _edge_kernel(
        spec, "edge_kernel", "", head, [f"    tl.{sink}(out + {row}[:, None] * {size} + of[None, :], msg, mask=lanes)"]
    )
    lines += [
        "",
        "",
        "def run(ptrs, args):",
        "    if args[0] == 0:",
        "        return",
        f"    grid = (triton.cdiv(args[0], {block_e}), triton.cdiv({size}, {block_f}))",
        f"    edge_kernel[grid](*ptrs, args[0], BLOCK_E={block_e}, BLOCK_F={block_f})",
    ]
    return "\n".join(lines) + "\n"


def sddmm_source(spec: KernelSpec) -> str:
    """Edge-parallel SDDMM; each edge's result is stored at its user edge id."""
    _check_gpu_params(spec)
    return _edge_source(spec, "store")


def gas_source(spec: KernelSpec) -> str:
    """Edge-centric SpMM (GAS): atomic adds into destination rows; needs no CSR; the summation order, and
    so the last bits, vary from run to run."""
    _check_gpu_params(spec)
    return _edge_source(spec, "atomic_add")


def edge_sum_source(spec: KernelSpec) -> str:
    """Sum of the UDF over all edges (a dense parameter's gradient): ``EDGE_SUM_PROGRAMS`` programs stride
    over the edge blocks, each keeps a partial sum, the host adds the partials in program order."""
    size, block_f = feature_size(spec), feature_block(spec)
    block_e = message_edge_block(spec, block_f)
    t = TRITON_TYPES[spec.dtype]
    head = [
        f"    acc = tl.zeros([BLOCK_F], {t})",
        "    for j0 in range(tl.program_id(0) * BLOCK_E, num_edges, num_programs * BLOCK_E):",
        "        j = j0 + tl.arange(0, BLOCK_E)",
    ]
    sink = [
        f"{INDENT}acc += tl.sum(tl.where(lanes, msg, 0.0), axis=0)",
        f"    tl.store(out + tl.program_id(0) * {size} + of, acc, mask=mF)",
    ]
    lines = _edge_kernel(spec, "edge_sum_kernel", "num_programs, ", head, sink)
    lines += [
        "",
        "",
        "def run(ptrs, args):",
        "    srcs, dsts, eids, out, *inputs = ptrs",
        f"    programs = max(1, min({EDGE_SUM_PROGRAMS}, triton.cdiv(args[0], {block_e})))",
        f"    partial = torch.zeros((programs, {size}), dtype=out.dtype, device=out.device)",
        f"    grid = (programs, triton.cdiv({size}, {block_f}))",
        "    edge_sum_kernel[grid](",
        f"        srcs, dsts, eids, partial, *inputs, args[0], programs, BLOCK_E={block_e}, BLOCK_F={block_f},",
        "    )",
        "    out += partial.sum(0).view(out.shape)",
    ]
    return "\n".join(lines) + "\n"


def winner_source(spec: KernelSpec) -> str:
    """The max/min gradient through the winners: lanes over (destination, output element) pairs, each
    with its winning edge, the UDF over a block of the free axes, atomic adds at the write index (rows
    shared by several pairs: the last bits vary from run to run, as with GAS)."""
    params = spec.params
    outer = math.prod(a.extent for a in params.outer)
    size = feature_size(spec)
    block_f = min(next_power_of_2(size), FEATURE_BLOCK_MAX)
    block_e = message_edge_block(spec, block_f)
    prologue, lines, msg = message(
        spec.op, spec.schedule, TRITON_TYPES[spec.dtype], {"BLOCK_E": block_e, "BLOCK_F": block_f}, "    ",
        lane_vars=params.outer,
    )  # fmt: skip
    position = params.write_position(  # outer variables vary along the lanes (dim 0), free ones the features
        lambda var: f"_{var.name}" + ("[:, None]" if any(var is a for a in params.outer) else "[None, :]"),
        lambda row: f"{row}[:, None]",
    )
    signature = f"sources, winners, out, {_placeholders(spec)}num_pairs, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr"
    lines = [
        HEADER,
        jit_decorator(signature),
        f"def winner_kernel({signature}):",
        "    of = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)",
        f"    mF = of < {size}",
        *prologue,
        "    j = tl.program_id(0).to(tl.int64) * BLOCK_E + tl.arange(0, BLOCK_E)",
        "    won = tl.load(winners + j, mask=j < num_pairs, other=-1)",
        "    mE = won >= 0",
        "    e = tl.maximum(won, 0)",
        f"    v = j // {outer}",
        *output_axes_of(params.outer, f"j % {outer}"),
        "    s = tl.load(sources + e, mask=mE, other=0).to(tl.int64)",
        *lines,
        f"    msg = {msg}",
        # a dense weight's position may not vary along the lanes (no output axis pins it): broadcast it
        f"    at = tl.broadcast_to(out + {position}, [BLOCK_E, BLOCK_F])",
        "    tl.atomic_add(at, msg, mask=mE[:, None] & mF[None, :])",
        "",
        "",
        "def run(ptrs, args):",
        "    sources, winners, out, *inputs = ptrs",
        f"    pairs = args[0] * {outer}",
        "    if pairs == 0:",
        "        return",
        f"    grid = (triton.cdiv(pairs, {block_e}), triton.cdiv({size}, {block_f}))",
        f"    winner_kernel[grid](sources, winners, out, *inputs, pairs, BLOCK_E={block_e}, BLOCK_F={block_f})",
    ]
    return "\n".join(lines) + "\n"
