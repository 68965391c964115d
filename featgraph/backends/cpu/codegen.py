"""Lower a UDF's expression tree and its feature dimension schedule to C++ statements.

The templates (``spmm.py``/``sddmm.py`` beside this file) own the graph loops; this module emits, for the
current edge (variables ``s``, ``v``, ``e``), the loop nest over the output feature axes that computes the
message and hands each element to a *sink* (accumulate into a row, or store for an edge).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from ...native.sources import cpp_source
from ...schedule import AxisPlan, Schedule
from ...te.expr import BinOp, Call, ComputeOp, Const, Expr, Load, Placeholder, Reduce, Var, free_vars, is_integer
from ..expression import ExpressionLowering

GRAPH_VARS = {"src": "s", "dst": "v", "eid": "e"}
REDUCE_INIT = {"sum": "T(0)", "max": "-std::numeric_limits<T>::infinity()", "min": "std::numeric_limits<T>::infinity()"}
REDUCE_UPDATE = {"sum": "{acc} + ({x})", "max": "std::max<T>({acc}, {x})", "min": "std::min<T>({acc}, {x})"}
SIMD_REDUCTION = {"sum": "+", "max": "max", "min": "min"}
SIMD_BYTES = 64  # one AVX-512 register
REDUCTION_LANES = SIMD_BYTES // 4  # float lanes: shorter reduce axes keep the plain SIMD reduction
CAST_TYPES = {"float32": "float", "float64": "double", "int64": "int64_t"}
HALF_BITS = {"bfloat16": "bf16", "float16": "half"}  # fg_from_<x> / fg_to_<x> in the prelude

# sink(tile_flat, row_flat, value) -> C++ statements for one computed element
Sink = Callable[[str, str, str], str]

PRELUDE = cpp_source("prelude.h")  # written for the compute type ``T``, typedef'd before it
KEEP_BITS = 24  # fg_keep compares 24 hash bits


def storage_type(dtype: str) -> str:
    """The C++ element type an array of ``dtype`` is read or written through: its 16 bits for
    float16/bfloat16, ``T`` (the compute type) for float32/float64 data."""
    return "uint16_t" if dtype in HALF_BITS else "int64_t" if dtype == "int64" else "T"


def read_element(dtype: str, element: str) -> str:
    """An element read as ``T`` from an array of ``storage_type(dtype)``."""
    return f"fg_from_{HALF_BITS[dtype]}({element})" if dtype in HALF_BITS else element


def write_element(dtype: str, value: str) -> str:
    """A ``T`` value converted for an array of ``storage_type(dtype)`` (rounded to nearest even)."""
    return f"fg_to_{HALF_BITS[dtype]}({value})" if dtype in HALF_BITS else value


def stored_type(dtype: str) -> list[str]:
    """Lines after the prelude defining ``O``, the element type of arrays of ``dtype``, with its conversions
    ``fg_store`` (T -> O) and ``fg_load`` (O -> T)."""
    return [
        f"typedef {storage_type(dtype)} O;",
        f"static inline O fg_store(T x) {{ return {write_element(dtype, 'x')}; }}",
        f"static inline T fg_load(O x) {{ return {read_element(dtype, 'x')}; }}",
    ]


def pointer_name(tensor: Placeholder) -> str:
    return f"P_{tensor.name}"


def row_stride(tensor: Placeholder) -> int:
    """Elements per first-dimension row (the other dims are compile-time constants)."""
    stride = 1
    for dim in tensor.shape[1:]:
        stride *= dim
    return stride


@dataclass
class WidenedRows:
    """bfloat16 rows read along a short unsplit output loop (fewer than ``REDUCTION_LANES`` elements, such as
    a GAT layer's heads), widened per edge into a float buffer (``fg_widen_bf16``) before the loops that read
    them.

    g++ 12 leaves such a loop scalar when it mixes 16-bit loads with float arithmetic, or widens four
    values as two 8-byte halves that each read waits for; widened once per edge, the loops that read them
    vectorise (GAT in bf16: ``featgraph bench train --models gat --frameworks featgraph --bf16``)."""

    loops: dict[int, Loop]  # id(loop variable) -> its loop, for the short loops
    lines: list[str]  # each buffer's declaration and widening, in order
    names: dict[str, str]  # a row's 16-bit element (C++) -> its buffer

    @classmethod
    def over(cls, loops: list[Loop]) -> WidenedRows:
        short = {id(lp.var): lp for lp in loops if lp.extent < REDUCTION_LANES and lp.plan.factor is None}
        return cls(short, [], {})

    def read(self, e: Load, emitter: Emitter) -> str | None:
        """The buffer element standing for ``e``, or None when ``e`` is not such a row."""
        loop = self.loops.get(id(e.indices[-1]))
        if e.tensor.dtype != "bfloat16" or loop is None or any(free_vars(i) for i in e.indices[:-1]):
            return None
        element, var = emitter.element(e), loop.var.name
        name = self.names.get(element)
        if name is None:
            name = self.names[element] = f"wide{len(self.names)}"
            widen = f"{{ const int64_t {var} = {loop.lo}; fg_widen_bf16(&{element}, {name}, {loop.extent}); }}"
            self.lines += [f"      T {name}[{loop.extent}];", f"      {widen}"]
        return f"{name}[{var} - {loop.lo}]"


@dataclass
class Emitter(ExpressionLowering):
    """Turns expressions into C++: ``value`` gives a ``T`` expression, ``index`` an ``int64_t`` one."""

    reduce_names: dict[int, str]  # id(Reduce) -> C++ expression holding its value
    widened: WidenedRows | None = None  # 16-bit rows read through float buffers

    FLOOR = "std::floor"
    UNARY = {
        **{fn: f"std::{fn}({{0}})" for fn in ("log", "sqrt", "tanh", "abs")},
        "exp": "fg_exp({0})",
        "sigmoid": "fg_sigmoid({0})",
    }

    def variable(self, e: Var) -> str:
        return GRAPH_VARS.get(e.kind, e.name)

    def element(self, e: Load) -> str:
        """The array element ``e`` reads, in its storage type."""
        flat = self.index(e.indices[0])
        for idx, dim in zip(e.indices[1:], e.tensor.shape[1:], strict=True):
            flat = f"({flat}) * {dim} + {self.index(idx)}"
        return f"{pointer_name(e.tensor)}[{flat}]"

    def load(self, e: Load) -> str:
        widened = self.widened.read(e, self) if self.widened is not None else None
        return widened or read_element(e.tensor.dtype, self.element(e))

    def reduction_value(self, e: Reduce) -> str:
        return self.reduce_names[id(e)]

    def constant(self, value: float) -> str:
        if math.isnan(value):
            return "std::numeric_limits<T>::quiet_NaN()"
        if math.isinf(value):
            return f"{'-' if value < 0 else ''}std::numeric_limits<T>::infinity()"
        return f"T({value!r})"

    def as_value(self, integer: str) -> str:
        return f"T({integer})"

    def truth(self, condition: str) -> str:
        return f"T({condition})"

    def pairwise(self, fn: str, a: str, b: str) -> str:
        return f"std::{fn}<T>({a}, {b})"

    def select(self, condition: str, a: str, b: str) -> str:
        return f"fg_select({condition}, {a}, {b})"

    def cast(self, dtype: str, x: str) -> str:
        if dtype == "float16":
            return f"fg_half({x})"
        if dtype == "bfloat16":
            return f"fg_bf16({x})"
        return f"T(({CAST_TYPES[dtype]})({x}))"

    def keep(self, e: Call) -> str:
        p = e.args[2].value
        seed, element = self.index(e.args[0]), self.index(e.args[1])
        threshold = round(p * (1 << KEEP_BITS))
        return f"(fg_keep((uint64_t)({seed}), {element}, {threshold}ULL) ? T({1.0 / (1.0 - p)!r}) : T(0))"


def reduces_inner_first(body: Expr) -> list[tuple[Reduce, bool]]:
    """Every Reduce node, innermost first, with whether it sits inside another Reduce."""
    found: list[tuple[Reduce, bool]] = []

    def visit(e: Expr, inside: bool) -> None:
        for child in e.children():
            visit(child, inside or isinstance(e, Reduce))
        if isinstance(e, Reduce):
            found.append((e, inside))

    visit(body, False)
    return found


@dataclass
class Loop:
    var: Var
    lo: str  # C++ expression of the first value
    extent: int
    plan: AxisPlan
    reduction: str | None = None  # "+"/"max"/"min": the loop reduces into ``reduction_var``
    reduction_var: str | None = None


def open_loop(loop: Loop, indent: str) -> tuple[list[str], int]:
    """C++ lines opening ``loop`` (split into outer/inner when planned), and how many braces to close."""
    name, plan = loop.var.name, loop.plan
    pragmas = []
    if plan.vectorize:
        clause = f" reduction({loop.reduction}:{loop.reduction_var})" if loop.reduction else ""
        pragmas.append(f"#pragma omp simd{clause}")
    if plan.unroll and not plan.vectorize:  # g++ accepts no second pragma beside omp simd
        inner = plan.factor or loop.extent
        pragmas.append(f"#pragma GCC unroll {inner if inner <= 32 else 8}")
    factor = plan.factor
    if factor is None or factor >= loop.extent:
        return [
            *pragmas,
            f"{indent}for (int64_t {name} = {loop.lo}; {name} < {loop.lo} + {loop.extent}; ++{name}) {{",
        ], 1
    outer = -(-loop.extent // factor)
    bound = (
        str(factor)
        if loop.extent % factor == 0
        else f"std::min<int64_t>({factor}, {loop.extent} - {name}_o * {factor})"
    )
    return [
        f"{indent}for (int64_t {name}_o = 0; {name}_o < {outer}; ++{name}_o) {{",
        *pragmas,
        f"{indent}for (int64_t {name}_i = 0; {name}_i < {bound}; ++{name}_i) {{",
        f"{indent}const int64_t {name} = {loop.lo} + {name}_o * {factor} + {name}_i;",
    ], 2


def nest(loops: list[Loop], body: list[str], indent: str = "      ") -> list[str]:
    """The loops around ``body``. OpenMP forbids a simd loop inside another (or around an atomic), so only
    the innermost vectorised loop keeps its SIMD pragma, and none does around a body with an atomic."""
    simd_inside = any("#pragma omp simd" in line or "#pragma omp atomic" in line for line in body)
    for n, loop in enumerate(loops):
        inner_simd = simd_inside or any(lp.plan.vectorize for lp in loops[n + 1 :])
        if loop.plan.vectorize and inner_simd:
            loops[n] = replace(loop, plan=replace(loop.plan, vectorize=False))
    lines: list[str] = []
    closes = 0
    for loop in loops:
        opened, n = open_loop(loop, indent)
        lines += opened
        closes += n
    return lines + [indent + "  " + b for b in body] + [indent + "}" * closes]


@dataclass(frozen=True)
class Tile:
    """The slice [lo, lo + extent) of the last output axis that one template pass computes; ``lo`` is a
    constant, or a C++ expression where a loop over equal chunks computes it."""

    lo: int | str
    extent: int


def tile_flat(op: ComputeOp, tile: Tile) -> str:
    """Row-major index of an output element inside the tile's local buffer."""
    flat = ""
    for k, axis in enumerate(op.axis):
        last = k == len(op.axis) - 1
        extent = tile.extent if last else axis.extent
        term = f"({axis.name} - {tile.lo})" if last else axis.name
        flat = term if not flat else f"({flat}) * {extent} + {term}"
    return flat


def row_flat(op: ComputeOp) -> str:
    """Row-major index of an output element inside one output row."""
    flat = ""
    for axis in op.axis:
        flat = axis.name if not flat else f"({flat}) * {axis.extent} + {axis.name}"
    return flat


def tile_size(op: ComputeOp, tile: Tile) -> int:
    size = tile.extent
    for axis in op.axis[:-1]:
        size *= axis.extent
    return size


def output_loops(op: ComputeOp, schedule: Schedule, tile: Tile) -> list[Loop]:
    """Loops over the output axes, in the schedule's order (unordered axes keep their natural order)."""
    order = [a for a in (schedule.order or []) if a.kind == "axis"]
    order += [a for a in op.axis if not any(a is b for b in order)]
    last = op.axis[-1]
    return [
        Loop(
            a,
            str(tile.lo) if a is last else "0",
            tile.extent if a is last else a.extent,
            schedule.plans.get(a.name, AxisPlan()),
        )
        for a in order
    ]


def reduce_loops(red: Reduce, schedule: Schedule, target: str | None = None) -> list[Loop]:
    plans = schedule.plans
    return [
        Loop(
            a, str(a.start), a.extent, plans.get(a.name, AxisPlan()), SIMD_REDUCTION[red.op] if target else None, target
        )
        for a in red.axes
    ]


def lane_reducible(loops: list[Loop]) -> bool:
    """One vectorised, unsplit reduce axis of at least ``REDUCTION_LANES`` elements (a split or several
    axes keep the schedule's own loops)."""
    if len(loops) != 1:
        return False
    plan = loops[0].plan
    return plan.vectorize and plan.factor is None and loops[0].extent >= REDUCTION_LANES


def lane_reduction(loop: Loop, acc: str, update: str, init: str, value: str) -> list[str]:
    """``acc`` = the reduction of ``value`` over ``loop``: one partial result per SIMD lane, the lanes
    combined by a halving tree, the remainder added last.

    g++ without -ffast-math ends an ``omp simd reduction`` with one dependent scalar add per lane (16 in
    a row for float on AVX-512), which the tree replaces by a few vector steps (``featgraph bench kernels
    --ops attention``)."""
    k, lo, extent = loop.var.name, loop.lo, loop.extent
    lanes, width, full = f"{acc}_l", f"{acc}_n", f"{acc}_full"
    lane = f"{lanes}[q]"
    return [
        f"constexpr int64_t {width} = {SIMD_BYTES} / sizeof(T), {full} = {extent} / {width} * {width};",
        f"T {lanes}[{width}]; for (int64_t q = 0; q < {width}; ++q) {lane} = {init};",
        f"for (int64_t {k}_o = 0; {k}_o < {full}; {k}_o += {width}) {{",
        "#pragma omp simd",
        f"for (int64_t q = 0; q < {width}; ++q) {{",
        f"const int64_t {k} = {lo} + {k}_o + q; {lane} = {update.format(acc=lane, x=value)};",
        "}",
        "}",
        *[
            f"if constexpr ({width} > {w}) {{\n#pragma omp simd\nfor (int64_t q = 0; q < {w}; ++q) "
            f"{lane} = {update.format(acc=lane, x=f'{lanes}[q + {w}]')};\n}}"
            for w in (REDUCTION_LANES >> i for i in range(1, REDUCTION_LANES.bit_length()))
        ],
        f"T {acc} = {lanes}[0];",
        f"for (int64_t {k} = {lo} + {full}; {k} < {lo} + {extent}; ++{k})",
        f"{acc} = {update.format(acc=acc, x=value)};",
    ]


def bf16_dot(red: Reduce, loops: list[Loop], emitter: Emitter) -> list[str] | None:
    """``fg_dot_bf16`` for a sum over one unsplit reduce axis of the product of two bfloat16 rows read along
    it (dot attention, GAT's gradient weights), or None for any other reduction. On a CPU with AVX-512 BF16
    it multiplies 32 pairs per ``vdpbf16ps``, where widening both rows and multiplying in float is no faster
    than the float32 kernel (``featgraph bench kernels --ops attention-bf16``)."""
    body = red.body
    if red.op != "sum" or len(loops) != 1 or loops[0].plan.factor is not None:
        return None
    if not (isinstance(body, BinOp) and body.op == "*"):
        return None
    k = loops[0].var
    rows = (body.a, body.b)
    if not all(
        isinstance(x, Load)
        and x.tensor.dtype == "bfloat16"
        and x.indices[-1] is k
        and all(v is not k for i in x.indices[:-1] for v in free_vars(i))
        for x in rows
    ):
        return None
    a, b = (f"&{emitter.element(x)}" for x in rows)
    acc = loops[0].reduction_var
    return [f"T {acc}; {{ const int64_t {k.name} = {loops[0].lo}; {acc} = fg_dot_bf16({a}, {b}, {loops[0].extent}); }}"]


def hoisted(schedule: Schedule, red: Reduce) -> bool:
    """A reduce is computed for the whole tile at once when the schedule orders one of its axes before
    an output axis (e.g. ``reorder(k, i)``)."""
    order = schedule.order or []
    positions = {a.name: n for n, a in enumerate(order)}
    red_pos = [positions[a.name] for a in red.axes if a.name in positions]
    out_pos = [n for n, a in enumerate(order) if a.kind == "axis"]
    return bool(red_pos and out_pos and min(red_pos) < max(out_pos))


def message_block(op: ComputeOp, schedule: Schedule, tile: Tile, sink: Sink) -> list[str]:
    """Statements that compute the message of the current edge over the tile and feed ``sink``.

    A reduction that depends only on output axes is computed per output element with a scalar accumulator
    (vectorised as a SIMD reduction when planned). One that is nested in another reduction, or that the
    schedule orders outside an output axis, is computed first into a per-edge buffer over its free
    variables, innermost reductions first, so nesting costs one buffer, never an E-sized tensor.
    """
    names: dict[int, str] = {}
    lines: list[str] = []
    per_element: list[str] = []
    out_loops = {lp.var.name: lp for lp in output_loops(op, schedule, tile)}
    for n, (red, nested) in enumerate(reduces_inner_first(op.body)):
        acc, update, init = f"red{n}", REDUCE_UPDATE[red.op], REDUCE_INIT[red.op]
        value = Emitter(names).value(red.body)
        free = free_vars(red)
        if not nested and not hoisted(schedule, red) and all(v.kind == "axis" for v in free):
            names[id(red)] = acc
            loops = reduce_loops(red, schedule, acc)
            dot = bf16_dot(red, loops, Emitter(names))
            if dot is not None:
                per_element += dot
                continue
            if lane_reducible(loops):
                per_element += lane_reduction(loops[0], acc, update, init, value)
                continue
            per_element.append(f"T {acc} = {init};")
            per_element += nest(loops, [f"{acc} = {update.format(acc=acc, x=value)};"], "")
            continue
        space = [out_loops[v.name] if v.kind == "axis" else Loop(v, str(v.start), v.extent, AxisPlan()) for v in free]
        flat, size = buffer_index(space)
        slot = f"{acc}[{flat}]"
        names[id(red)] = slot
        if hoisted(schedule, red) and not nested:
            # the schedule interleaves reduce axes with output axes: update the buffer element-wise
            lines.append(f"      T {acc}[{size}]; for (int64_t q = 0; q < {size}; ++q) {acc}[q] = {init};")
            loops = {lp.var.name: lp for lp in space + reduce_loops(red, schedule)}
            ordered = [loops[a.name] for a in schedule.order if a.name in loops]
            ordered += [lp for name, lp in loops.items() if all(name != a.name for a in schedule.order)]
            lines += nest(ordered, [f"{slot} = {update.format(acc=slot, x=value)};"])
        else:
            scalar = f"{acc}_s"
            fill = [f"T {scalar} = {init};"]
            fill += nest(reduce_loops(red, schedule, scalar), [f"{scalar} = {update.format(acc=scalar, x=value)};"], "")
            lines.append(f"      T {acc}[{size}];")
            lines += nest([replace(lp) for lp in space], [*fill, f"{slot} = {scalar};"])
    loops = output_loops(op, schedule, tile)
    message, invariants = hoist_invariants(op.body, loops, everywhere=bool(per_element))
    widened = WidenedRows.over(loops)
    emitter = Emitter(names, widened)
    for name, access, e, deps in invariants:  # each over the loops it depends on, before the message's loops
        if not deps:
            lines.append(f"      const T {name} = {emitter.value(e)};")
            continue
        vectorised = [*deps[:-1], replace(deps[-1], plan=AxisPlan(vectorize=True))]
        lines.append(f"      T {name}[{buffer_index(deps)[1]}];")
        lines += nest(vectorised, [f"{access} = {emitter.value(e)};"])
    body = [*per_element, f"const T msg = {emitter.value(message)};", sink(tile_flat(op, tile), row_flat(op), "msg")]
    return widened.lines + lines + nest(loops, body)


def buffer_index(loops: list[Loop]) -> tuple[str, int]:
    """Row-major position in a buffer over ``loops`` (each from its first value), and the buffer's size."""
    flat, size = "0", 1
    for lp in loops:
        flat = f"({flat}) * {lp.extent} + ({lp.var.name} - {lp.lo})"
        size *= lp.extent
    return flat, size


def hoist_invariants(
    body: Expr, loops: list[Loop], everywhere: bool = False
) -> tuple[Expr, list[tuple[str, str, Expr, list[Loop]]]]:
    """Loop-invariant code motion over the output loops: each largest arithmetic subexpression (no
    reduction inside) that the innermost loop does not change is computed before the loops, over the loops
    it depends on (a SIMD loop of its own; none: once per edge), and read back. A GAT weight
    ``exp(score[h] - lse[h])`` times ``F[s, h, i]`` is then one vectorised exp per edge over the heads
    instead of one per feature. ``everywhere`` (the message reduces per element, so its innermost output
    loop is not the one that vectorises) hoists the subexpressions that vary with every loop too, so they
    still get SIMD loops of their own. Returns the message reading each hoisted value through a ``Var`` named by
    its C++ access (``invN`` or ``invN[flat]``), and (name, access, expression, loops) per hoisted value."""
    level = {id(lp.var): n for n, lp in enumerate(loops)}
    innermost = len(loops) - 1
    found: list[tuple[str, str, Expr, list[Loop]]] = []

    def visit(e: Expr) -> Expr:
        if isinstance(e, (Const, Var, Load, Reduce)):
            return e
        if not any(isinstance(n, Reduce) for n in e.walk()):
            deps = sorted({level[id(v)] for v in free_vars(e) if id(v) in level})
            if not deps or deps[-1] < innermost or everywhere:
                over = [loops[n] for n in deps]
                name = f"inv{len(found)}"
                access = f"{name}[{buffer_index(over)[0]}]" if over else name  # a buffer over the loops, or a scalar
                found.append((name, access, e, over))
                return Var(access, "invariant")
        if isinstance(e, BinOp):
            return BinOp(e.op, visit(e.a), visit(e.b))
        if isinstance(e, Call):
            return Call(e.fn, tuple(visit(a) if not is_integer(a) else a for a in e.args), e.dtype)
        return e

    return visit(body), found
