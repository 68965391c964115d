"""Expression-tree nodes of featgraph's tensor-expression language.

A UDF builds one tree when it is called with the symbolic ``src``, ``dst`` and ``eid`` variables; backends
lower the tree to code. Python never runs per edge. Operators on nodes build new nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, wraps
from typing import Any, TypeVar, Union

ExprLike = Union["Expr", int, float]

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
GRAPH_KINDS = ("src", "dst", "eid")  # the kinds of the graph variables a UDF is called with


def as_expr(value: ExprLike) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Const(int(value))
    if isinstance(value, (int, float)):
        return Const(value)
    raise TypeError(f"cannot use {type(value).__name__} in a tensor expression")


def _binary(op: str, reverse: bool = False) -> Callable[[Expr, ExprLike], BinOp]:
    """The operator method building ``BinOp(op, self, other)`` (``BinOp(op, other, self)`` when ``reverse``:
    ``2 * x``)."""

    def method(self: Expr, other: ExprLike) -> BinOp:
        return BinOp(op, as_expr(other), self) if reverse else BinOp(op, self, as_expr(other))

    return method


class Expr:
    """Base of every node; arithmetic and comparison operators build ``BinOp`` nodes."""

    def children(self) -> tuple[Expr, ...]:
        """The node's operands, in order (none for a leaf)."""
        return ()

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, parents first, operands in order (one stack, not a generator
        per level: a node deep in a UDF's tree was passed up through every level above it)."""
        stack: list[Expr] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children()))

    __add__, __radd__ = _binary("+"), _binary("+", reverse=True)
    __sub__, __rsub__ = _binary("-"), _binary("-", reverse=True)
    __mul__, __rmul__ = _binary("*"), _binary("*", reverse=True)
    __truediv__, __rtruediv__ = _binary("/"), _binary("/", reverse=True)
    __floordiv__, __rfloordiv__ = _binary("//"), _binary("//", reverse=True)
    __mod__, __rmod__ = _binary("%"), _binary("%", reverse=True)
    __lt__, __le__, __gt__, __ge__ = _binary("<"), _binary("<="), _binary(">"), _binary(">=")

    def __neg__(self) -> BinOp:
        return BinOp("-", Const(0), self)

    def __bool__(self) -> bool:
        raise TypeError(
            "a tensor expression has no truth value while the UDF is being built; use te.where(cond, a, b) "
            "instead of if/and/or, and te.max/te.min instead of Python's max/min"
        )

    __hash__ = object.__hash__


@dataclass(eq=False)
class Const(Expr):
    """A numeric constant."""

    value: int | float

    @property
    def is_int(self) -> bool:
        return isinstance(self.value, int)


@dataclass(eq=False)
class Var(Expr):
    """A loop variable: ``kind`` is ``src``/``dst``/``eid`` (graph), ``axis`` (output) or ``reduce``."""

    name: str
    kind: str
    extent: int = 0  # for axis/reduce variables
    start: int = 0  # reduce axes may start above 0

    @property
    def label(self) -> str:
        """The name the user gave: ``te.reduce_axis(..., name="k")`` is held as ``rk_k_<n>``, an axis
        ``i`` of ``te.compute`` as ``ax_i``."""
        if self.kind == "reduce":
            return self.name.removeprefix("rk_").rsplit("_", 1)[0]
        return self.name.removeprefix("ax_")


@dataclass(eq=False)
class BinOp(Expr):
    """A binary operation ``a op b``: arithmetic, comparison, or pairwise max/min."""

    op: str
    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)


@dataclass(eq=False)
class Call(Expr):
    """Elementwise intrinsic: exp, log, sqrt, tanh, sigmoid, abs, max, min, where, cast, equal, ..."""

    fn: str
    args: tuple[Expr, ...]
    dtype: str | None = None  # target of a cast

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(eq=False)
class Placeholder:
    """A named input tensor; indexing it with expressions yields a ``Load``. A first dimension of ``None``:
    one row per vertex or edge of the graph a kernel binds (``te.placeholder``)."""

    shape: tuple[int | None, ...]
    dtype: str
    name: str

    def __getitem__(self, index: ExprLike | Sequence[ExprLike]) -> Load:
        items = tuple(index) if isinstance(index, tuple) else (index,)
        if len(items) != len(self.shape):
            raise IndexError(f"placeholder {self.name!r} has {len(self.shape)} dims, indexed with {len(items)}")
        return Load(self, tuple(as_expr(i) for i in items))

    @property
    def ndim(self) -> int:
        return len(self.shape)


@dataclass(eq=False)
class Load(Expr):
    """A read of ``tensor`` at ``indices`` (one expression per dimension)."""

    tensor: Placeholder
    indices: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.indices


@dataclass(eq=False)
class Reduce(Expr):
    """``op`` in sum/max/min of ``body`` over the reduce variables ``axes``."""

    op: str
    body: Expr
    axes: tuple[Var, ...]

    def children(self) -> tuple[Expr, ...]:
        return (self.body,)


@dataclass(eq=False)
class ComputeOp:
    """The result of ``te.compute``: an output of ``shape`` whose element at ``axis`` is ``body``."""

    shape: tuple[int, ...]
    axis: tuple[Var, ...]
    body: Expr
    name: str = "out"
    placeholders: tuple[Placeholder, ...] = field(default=())
    dtype: str | None = None  # the output's dtype; None: the placeholders' promoted as torch promotes them

    def __post_init__(self) -> None:
        for v in free_vars(self.body):
            if v.kind == "reduce":
                raise ValueError(
                    f"reduce axis {v.label!r} is used outside a te.sum, te.max or te.min over it: reduce it, "
                    "or use an output axis"
                )
            if not any(v is a for a in self.axis):
                raise ValueError(f"axis {v.label!r} belongs to another te.compute")
        seen: dict[str, Placeholder] = {}
        for node in self.nodes:
            if isinstance(node, Load):
                other = seen.setdefault(node.tensor.name, node.tensor)
                if other is not node.tensor:
                    raise ValueError(f"two different placeholders are named {node.tensor.name!r}")
        self.placeholders = tuple(seen[name] for name in sorted(seen))

    @cached_property
    def nodes(self) -> tuple[Expr, ...]:
        """``body.walk()`` kept: the kernel's checks, schedule and lowering each look through the body, several
        times for each kernel a mini-batch's fresh graph binds."""
        return tuple(self.body.walk())

    @cached_property
    def reduce_axis(self) -> tuple[Var, ...]:
        axes: list[Var] = []
        for node in self.nodes:
            if isinstance(node, Reduce):
                axes.extend(a for a in node.axes if a not in axes)
        return tuple(axes)


Result = TypeVar("Result")


def per_op(analysis: Callable[..., Result]) -> Callable[..., Result]:
    """``analysis(op, *args)`` computed once per op and arguments and kept on the op: an op traced once and
    bound to many graphs (each mini-batch's block) is checked, described and differentiated once. An op is
    not changed after ``te.compute`` builds it, so neither is what is derived from it."""

    @wraps(analysis)
    def remembered(op: ComputeOp, *args: Any) -> Result:
        memo = op.__dict__.setdefault("_analyses", {})
        key = (analysis, *args)
        found = memo.get(key, memo)  # the memo itself stands for "not computed yet"
        if found is memo:
            found = memo[key] = analysis(op, *args)
        return found

    return remembered


def free_vars(e: Expr) -> list[Var]:
    """Iteration variables (output or reduce axes) that ``e`` depends on and does not bind itself, in order of
    first use (one walk, each node with the reduce variables bound above it)."""
    found: list[Var] = []
    stack: list[tuple[Expr, tuple[Var, ...]]] = [(e, ())]
    while stack:
        node, bound = stack.pop()
        if isinstance(node, Var):
            fresh = node.kind in ("axis", "reduce") and not any(node is v for v in (*bound, *found))
            if fresh:
                found.append(node)
        elif isinstance(node, Reduce):
            stack.append((node.body, (*bound, *node.axes)))
        else:
            stack.extend((child, bound) for child in reversed(node.children()))
    return found


def is_integer(e: Expr) -> bool:
    """Whether ``e`` is integer arithmetic (usable as an index): int constants, loop and graph variables,
    int64 loads, and + - * // % of those."""
    if isinstance(e, Const):
        return e.is_int
    if isinstance(e, Var):
        return True
    if isinstance(e, Load):
        return e.tensor.dtype == "int64"
    return isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%") and is_integer(e.a) and is_integer(e.b)


@per_op
def structure(op: ComputeOp) -> tuple[tuple, dict[str, str]]:
    """A hashable description of ``op``'s expression graph, and the name it gives each loop variable.

    Two ops with equal descriptions lower to the same code once reduce variables are numbered by use: a
    reduce variable is described by its label and its order of first use (not the process-wide counter in
    its name), a node that occurs again by a reference to its first occurrence (lowering computes a shared
    reduction once), and a placeholder indexed by a graph variable without its first dimension (a row count
    that each graph decides). So a UDF traced again for another mini-batch's graph describes itself alike.
    """
    seen: dict[int, int] = {}
    names: dict[str, str] = {}
    reduce_numbers: dict[str, int] = {}

    def variable(v: Var) -> tuple:
        if v.name not in names:
            number = reduce_numbers.setdefault(v.name, len(reduce_numbers)) if v.kind == "reduce" else None
            names[v.name] = v.name if number is None else f"{v.label}#{number}"
        return ("V", v.kind, names[v.name], v.extent, v.start)

    parts: list[tuple] = [(op.name, op.shape, op.dtype, tuple(variable(a) for a in op.axis))]
    stack: list[Expr] = [op.body]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            parts.append(("ref", seen[id(node)]))
            continue
        seen[id(node)] = len(seen)
        if isinstance(node, Const):
            parts.append(("C", repr(node.value)))
        elif isinstance(node, Var):
            parts.append(variable(node))
        elif isinstance(node, BinOp):
            parts.append(("B", node.op))
        elif isinstance(node, Call):
            parts.append(("F", node.fn, node.dtype, len(node.args)))
        elif isinstance(node, Load):
            p, first = node.tensor, node.indices[0]
            by_graph = isinstance(first, Var) and first.kind in GRAPH_KINDS
            parts.append(("L", p.name, p.dtype, p.shape[1:] if by_graph else p.shape, len(node.indices)))
        elif isinstance(node, Reduce):
            parts.append(("R", node.op, tuple(variable(a) for a in node.axes)))
        else:
            raise TypeError(f"cannot describe {type(node).__name__}")
        stack.extend(reversed(node.children()))
    return tuple(parts), names
