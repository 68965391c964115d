"""Lower a UDF's expression tree to Triton block expressions.

A template program works on a block of edges times a block of flattened output elements: every value is a
tensor over *dims* (edge lanes, feature lanes, and one more per enclosing reduction), so the UDF is
evaluated for ``BLOCK_E`` edges and ``BLOCK_F`` output elements at once. A reduction inside the message
loops over its flattened axes in chunks of ``BLOCK_K`` lanes and reduces each chunk with ``tl.sum`` /
``tl.max`` / ``tl.min`` (a tree reduction across lanes), so nested reductions add one dim each and nothing
per edge ever reaches memory.

Loads that no edge changes (a weight ``W[k, i]`` of an MLP message, a seed) are hoisted into the program's
*prologue*, before its edge loop: the weight tile is read once per program and stays in registers. That
holds where every reduction around the load fits one chunk (its lanes then never move).

With ``stage`` (FeatGraph's hybrid partitioning) a source feature row ``X[src, i]`` is read from a tile of
the hub vertices' rows, loaded in the prologue (``hv``: hub ids, ``mH``: their mask), whenever the edge's
source is a hub (``slot``: its row in the tile, else -1); only the other sources go to global memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...kernel_spec import HALF_DTYPES
from ...schedule import Schedule
from ...te.expr import Call, ComputeOp, Expr, Load, Placeholder, Reduce, Var
from ..expression import ExpressionLowering

# a block tensor of a reduction inside the message holds at most this many elements (half without
# tree_reduce). For sm_90, 8192 compiles dot attention at d >= 128 to 255 registers a thread (occupancy 2
# blocks an SM), 4096 to 142 (the GAT score gradient: 255 and 90), with no spills either way
# (``TRITON_INTERPRET=1 featgraph bench gpu --compile-only 90``)
BLOCK_BUDGET = 4096
REDUCE_IDENTITY = {"sum": "0.0", "max": 'float("-inf")', "min": 'float("inf")'}
REDUCE_COMBINE = {"sum": "{a} + {b}", "max": "tl.maximum({a}, {b})", "min": "tl.minimum({a}, {b})"}
CAST_TYPES = {"float16": "tl.float16", "bfloat16": "tl.bfloat16", "float32": "tl.float32", "float64": "tl.float64"}
UNARY = {
    "exp": "tl.exp({0})",
    "log": "tl.log({0})",
    "sqrt": "tl.sqrt({0})",
    "abs": "tl.abs({0})",
    "sigmoid": "(1.0 / (1.0 + tl.exp(-({0}))))",
    "tanh": "(2.0 / (1.0 + tl.exp(-2.0 * ({0}))) - 1.0)",  # no tanh in tl's core; exact at both limits
}
KEEP_BITS = 24  # as the CPU backend's fg_keep: compare 24 hash bits
# every template defines the edges' source, destination and id as vectors over the edge lanes (dim 0)
GRAPH_VARS = {"src": ("s", 0), "dst": ("v", 0), "eid": ("e", 0)}
PROLOGUE_INDENT = "    "  # the prologue sits at the top level of the kernel body


def pointer_name(tensor: Placeholder) -> str:
    return f"P_{tensor.name}"


def next_power_of_2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(n, 1))))


def floor_power_of_2(n: int) -> int:
    return 1 << max(0, int(math.log2(max(n, 1))))


@dataclass(frozen=True)
class Dim:
    """One axis of the block tensors: its block-size constant and its 1-D mask variable."""

    block: str  # constexpr name or literal, e.g. "BLOCK_E"
    mask: str  # 1-D mask variable name


@dataclass
class Emitter(ExpressionLowering):
    """Turns expressions into Triton source over the current dims; statements for reductions go to
    ``lines``. ``graph_vars`` maps src/dst/eid to (variable, dim index)."""

    schedule: Schedule
    dtype: str  # "tl.float32" / "tl.float64"
    dims: list[Dim]
    indent: str
    graph_vars: dict[str, tuple[str, int]] = field(default_factory=lambda: dict(GRAPH_VARS))
    lines: list[str] = field(default_factory=list)
    prologue: list[str] = field(default_factory=list)  # statements run once per program, before the edges
    moving: set[int] = field(default_factory=lambda: {0})  # dims whose lanes change inside the edge loop
    hoisted: dict[str, str] = field(default_factory=dict)  # load expression -> its prologue variable
    stage: bool = False  # read hub sources' feature rows from the staged tile
    var_dims: dict[int, tuple[str, int]] = field(default_factory=dict)  # id(Var) -> (name, dim)
    reduce_values: dict[int, str] = field(default_factory=dict)
    counter: list[int] = field(default_factory=lambda: [0])
    sizes: dict[str, int] = field(default_factory=dict)  # values of the block-size constants

    FLOOR = "tl.floor"
    UNARY = UNARY

    def place(self, name: str, dim: int) -> str:
        """A 1-D variable over ``dim`` broadcast to the rank of the current dims."""
        return f"{name}[{', '.join(':' if d == dim else 'None' for d in range(len(self.dims)))}]"

    def deps(self, e: Expr) -> set[int]:
        """Dims the expression varies along."""
        if isinstance(e, Var):
            if e.kind in self.graph_vars:
                return {self.graph_vars[e.kind][1]}
            return {self.var_dims[id(e)][1]}
        if isinstance(e, Reduce):
            return self.reduce_deps(e)
        found: set[int] = set()
        for child in e.children():
            found |= self.deps(child)
        return found

    def reduce_deps(self, red: Reduce) -> set[int]:
        inner = len(self.dims)  # the dim the reduction's own axes get while its body is emitted
        for a in red.axes:
            self.var_dims.setdefault(id(a), (f"_{a.name}", inner))
        return {d for d in self.deps(red.body) if d < inner}

    def mask(self, dims: set[int]) -> str | None:
        parts = [self.place(self.dims[d].mask, d) for d in sorted(dims)]
        return " & ".join(parts) if parts else None

    def variable(self, e: Var) -> str:
        if e.kind in self.graph_vars:
            return self.place(*self.graph_vars[e.kind])
        return self.place(*self.var_dims[id(e)])

    def load(self, e: Load) -> str:
        deps: set[int] = set()
        for idx in e.indices:
            deps |= self.deps(idx)
        if self._stageable(e, deps):
            tile = self._prologue_value(self._staged_tile(e, deps), "hub")
            index = "tl.broadcast_to(tl.maximum(slot, 0)[:, None], [BLOCK_E, BLOCK_F])"
            rest = self._load_text(e, deps, " & (slot < 0)[:, None]")
            return f"tl.where(slot[:, None] >= 0, tl.gather({tile}, {index}, 0), {rest})"
        text = self._load_text(e, deps)
        if deps & self.moving or any(self._graph_var(i) for i in e.indices):
            return text
        return self._prologue_value(text, "w")  # the same lanes for every edge: read once per program

    def _load_text(self, e: Load, deps: set[int], extra_mask: str = "") -> str:
        flat = self.index(e.indices[0])
        for idx, dim in zip(e.indices[1:], e.tensor.shape[1:], strict=True):
            flat = f"({flat}) * {dim} + {self.index(idx)}"
        mask = self.mask(deps)
        masked = f", mask={mask}{extra_mask}, other=0" if mask else ""
        text = f"tl.load({pointer_name(e.tensor)} + ({flat}){masked})"
        # float16/bfloat16 data is read in its own dtype and widened in registers; stores round to the
        # output pointer's dtype
        return f"{text}.to({self.dtype})" if e.tensor.dtype in HALF_DTYPES else text

    def _prologue_value(self, text: str, prefix: str) -> str:
        if text not in self.hoisted:
            self.hoisted[text] = f"{prefix}{self.fresh()}"
            self.prologue.append(f"{PROLOGUE_INDENT}{self.hoisted[text]} = {text}")
        return self.hoisted[text]

    def _stageable(self, e: Load, deps: set[int]) -> bool:
        """A float source row over the edge x feature lanes, outside any reduction."""
        first = e.indices[0]
        return (
            self.stage
            and e.tensor.dtype != "int64"
            and isinstance(first, Var)
            and first.kind == "src"
            and len(self.dims) == 2
            and deps == {0, 1}
            and not any(self._graph_var(i) for i in e.indices[1:])
        )

    def _staged_tile(self, e: Load, deps: set[int]) -> str:
        """The load with the hub ids in place of the edges' sources: a hubs x features tile."""
        graph_vars, edge_dim = self.graph_vars, self.dims[0]
        self.graph_vars, self.dims[0] = {**graph_vars, "src": ("hv", 0)}, Dim("NUM_HUBS", "mH")
        try:
            return self._load_text(e, deps)
        finally:
            self.graph_vars, self.dims[0] = graph_vars, edge_dim

    def _graph_var(self, e: Expr) -> bool:
        return any(isinstance(n, Var) and n.kind in self.graph_vars for n in e.walk())

    def reduction_value(self, e: Reduce) -> str:
        if id(e) not in self.reduce_values:
            self.reduce_values[id(e)] = self.reduction(e)
        return self.reduce_values[id(e)]

    def constant(self, value: float) -> str:
        """A scalar of the compute type: a bare Python float is a float32 constant to Triton, so in a float64
        kernel ``tl.where(c, 1.0, 0.2)`` would round 0.2 to float32."""
        text = repr(float(value))
        return f"tl.full([], {text if math.isfinite(value) else f'float({text!r})'}, {self.dtype})"

    def as_value(self, integer: str) -> str:
        return f"({integer}).to({self.dtype})"

    def truth(self, condition: str) -> str:
        return f"tl.where({condition}, 1.0, 0.0).to({self.dtype})"

    def pairwise(self, fn: str, a: str, b: str) -> str:
        return f"tl.{fn}imum({a}, {b})"

    def select(self, condition: str, a: str, b: str) -> str:
        return f"tl.where(({condition}) != 0, {a}, {b})"

    def cast(self, dtype: str, x: str) -> str:
        if dtype == "int64":
            return f"({x}).to(tl.int64).to({self.dtype})"
        return f"({x}).to({CAST_TYPES[dtype]}).to({self.dtype})"

    def keep(self, e: Call) -> str:
        """Dropout's keep factor: splitmix64's finaliser over (seed, element), the CPU backend's hash."""
        p = e.args[2].value
        n = self.fresh()
        seed, element = self.index(e.args[0]), self.index(e.args[1])
        threshold = round(p * (1 << KEEP_BITS))
        self.lines += [
            f"{self.indent}z{n} = ({seed}).to(tl.uint64) + ({element}).to(tl.uint64) * 0x9E3779B97F4A7C15",
            f"{self.indent}z{n} = (z{n} ^ (z{n} >> 30)) * 0xBF58476D1CE4E5B9",
            f"{self.indent}z{n} = (z{n} ^ (z{n} >> 27)) * 0x94D049BB133111EB",
            f"{self.indent}z{n} = (z{n} ^ (z{n} >> 31)) >> 40",
        ]
        return f"tl.where(z{n} >= {threshold}, {self.constant(1.0 / (1.0 - p))}, {self.constant(0.0)})"

    def fresh(self) -> int:
        self.counter[0] += 1
        return self.counter[0]

    def reduce_block(self, red: Reduce, extent: int) -> int:
        """Lanes per chunk: the FDS split factor of a single reduce axis, the whole axis under
        ``tree_reduce``, else what fits the block budget beside the dims already open."""
        plans = [self.schedule.plans.get(a.name) for a in red.axes]
        if len(red.axes) == 1 and plans[0] is not None and plans[0].factor:
            return next_power_of_2(min(plans[0].factor, extent))
        budget = BLOCK_BUDGET if any(p is not None and p.tree_reduce for p in plans) else BLOCK_BUDGET // 2
        opened = math.prod(self.block_sizes)
        return min(next_power_of_2(extent), floor_power_of_2(max(1, budget // opened)))

    @property
    def block_sizes(self) -> list[int]:
        return [int(d.block) if d.block.isdigit() else self.sizes[d.block] for d in self.dims]

    def reduction(self, red: Reduce) -> str:
        """Statements computing ``red`` over the current dims into an accumulator; returns its name."""
        n = self.fresh()
        extent = math.prod(a.extent for a in red.axes)
        block = self.reduce_block(red, extent)
        shape = f"[{', '.join(d.block for d in self.dims)}]"
        acc, offsets, mask = f"acc{n}", f"k{n}", f"mk{n}"
        outer_indent = self.indent
        one_chunk = block >= extent  # its lanes are fixed: defined once, in the prologue, with no loop
        if one_chunk:
            inner, where, start = outer_indent, self.prologue, "0"
        else:
            inner, where, start = outer_indent + "    ", self.lines, f"c{n}"
            self.lines.append(f"{outer_indent}{acc} = tl.full({shape}, {REDUCE_IDENTITY[red.op]}, {self.dtype})")
            self.lines.append(f"{outer_indent}for c{n} in range(0, {extent}, {block}):")
        indent = PROLOGUE_INDENT if one_chunk else inner
        where.append(f"{indent}{offsets} = {start} + tl.arange(0, {block})")
        where.append(f"{indent}{mask} = {offsets} < {extent}")
        stride = extent
        for a in red.axes:
            stride //= a.extent
            where.append(f"{indent}_{a.name}_r{n} = ({offsets} // {stride}) % {a.extent} + {a.start}")
            self.var_dims[id(a)] = (f"_{a.name}_r{n}", len(self.dims))
        self.dims.append(Dim(str(block), mask))
        if not one_chunk:
            self.moving.add(len(self.dims) - 1)
        self.indent = inner
        outer_values = dict(self.reduce_values)  # reductions of the body live inside the loop only
        body = self.value(red.body)
        axis = len(self.dims) - 1
        lanes = f"tl.where({self.place(mask, axis)}, {body}, {REDUCE_IDENTITY[red.op]})"
        reduced = f"tl.{red.op}({lanes}, axis={axis})"
        combined = reduced if one_chunk else REDUCE_COMBINE[red.op].format(a=acc, b=reduced)
        self.lines.append(f"{inner}{acc} = {combined}")
        self.moving.discard(len(self.dims) - 1)
        self.dims.pop()
        self.indent = outer_indent
        self.reduce_values = outer_values
        return acc


def output_axes_of(axes: tuple[Var, ...], flat: str, indent: str = PROLOGUE_INDENT) -> list[str]:
    """Each axis as a 1-D variable ``_{name}`` derived from the row-major flattened offsets ``flat``."""
    lines, stride = [], math.prod(a.extent for a in axes)
    for a in axes:
        stride //= a.extent
        lines.append(f"{indent}_{a.name} = ({flat} // {stride}) % {a.extent}")
    return lines


def message(
    op: ComputeOp,
    schedule: Schedule,
    dtype: str,
    sizes: dict[str, int],
    indent: str,
    stage: bool = False,
    lane_vars: tuple[Var, ...] = (),
) -> tuple[list[str], list[str], str]:
    """The message over dims (edges ``BLOCK_E``, features ``BLOCK_F``): prologue statements (once per
    program, after ``of``/``mF``, the feature offsets and mask, are defined), statements per edge block
    (after ``s``/``v``/``e``, the edges' source, destination and id, and ``mE``, the edge mask) and the
    final expression. ``lane_vars`` vary along the edge lanes like the graph variables (the template
    defines each as ``_{name}``; the winner scatter's output positions)."""
    dims = [Dim("BLOCK_E", "mE"), Dim("BLOCK_F", "mF")]
    emitter = Emitter(schedule, dtype, dims, indent, sizes=sizes, stage=stage)
    for a in op.axis:
        emitter.var_dims[id(a)] = (f"_{a.name}", 1)
    for a in lane_vars:
        emitter.var_dims[id(a)] = (f"_{a.name}", 0)
    emitter.prologue += output_axes_of(op.axis, "of")
    value = emitter.value(op.body)
    return emitter.prologue, emitter.lines, f"({value}) + tl.zeros([BLOCK_E, BLOCK_F], {dtype})"
