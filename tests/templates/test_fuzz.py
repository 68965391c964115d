"""Property-based fuzz test of UDF kernels against an independent dense reference.

Each example draws a graph (empty, isolated vertices, self loops, duplicate edges, or a star of high
in-degree), feature sizes (odd ones included), a dtype (float32 or float64), a template (``spmm`` with every
reducer, ``sddmm``, ``edge_sum``) and a random UDF expression tree of the te language: + - * /, exp, log,
sqrt, tanh, sigmoid and abs on safe domains, pairwise te.max/te.min, where, sum-reductions (nested too) over
reduce axes that may start above 0, and vertex, edge and dense placeholders indexed by src/dst/eid, output
axes, reduce axes and constants, always in range (a narrower axis reads a leading or inner block).

The same tree is built twice: as a featgraph UDF, and as a dense torch evaluation per edge (``evaluate``
below: every value is a tensor over edges x output axes x one dimension per enclosing reduction), reduced
per destination with ``reference.reduce_messages``. Outputs must agree; in float64 the gradients of every
input must agree with torch autograd through that reference too. max/min (the aggregation and te.max/te.min)
send the gradient of a tie to the first winner, as featgraph documents. Every example runs on
target="cpu"; small graphs also on target="gpu" (Triton's interpreter without a GPU).

Examples are derandomized (the same every run). ``FEATGRAPH_FUZZ_EXAMPLES`` sets how many run per target
(default 80 on the CPU target and 30 on the GPU target: about 45 s on a 2-core machine with an empty
kernel cache); e.g. ``FEATGRAPH_FUZZ_EXAMPLES=500 pytest tests/templates/test_fuzz.py`` searches longer.
"""

from __future__ import annotations

import math
import operator
import os
from dataclasses import dataclass

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import featgraph as fg
from featgraph import te
from featgraph.templates import edge_sum
from tests.conftest import random_edges
from tests.templates.reference import reduce_messages

EXAMPLES = int(os.environ.get("FEATGRAPH_FUZZ_EXAMPLES", "0"))
CPU_EXAMPLES, GPU_EXAMPLES = (EXAMPLES, EXAMPLES) if EXAMPLES else (80, 30)
TEMPLATES = ("spmm-sum", "spmm-mean", "spmm-max", "spmm-min", "spmm-logsumexp", "sddmm", "edge_sum")
MAX_OPERATORS = 10  # operator nodes in one tree
MAX_NESTING = 2  # reductions nested in one another
CONSTANTS = (0.2, 0.5, -1.5, 2.0, 3.0)
SMALL = (1, 2, 3, 4, 5, 7)
# now and then an output wider than a GPU feature block (128) and a reduction longer than a chunk of lanes
OUTPUT_SIZES = (*SMALL, 33, 130)
REDUCE_SIZES = (*SMALL, 37)
MAX_OUTPUT = 300  # elements of a two-axis output
UNARY = ("exp", "log", "sqrt", "tanh", "sigmoid", "abs")
COMPARISONS = (">", "<", ">=", "<=")
# placeholder -> the graph variables that may index its first dimension (None: a dense weight)
ROWS = {"X": ("src", "dst"), "A": ("eid",), "W": (None,)}
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-10}


@dataclass(frozen=True)
class Axis:
    """A loop variable over ``range(start, start + extent)``; ``slot`` is the dimension of the reference's
    value tensors it runs along (0: edges, then the output axes, then one per reduction nesting level)."""

    name: str
    start: int
    extent: int
    slot: int


@dataclass(frozen=True)
class Load:
    tensor: str
    row: str | None  # src/dst/eid, or None for a dense placeholder
    index: tuple[Axis | int, ...]  # per feature dimension: a variable or a constant


@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class Apply:
    fn: str  # a key of TE_FUNCTIONS / TORCH_FUNCTIONS
    args: tuple


@dataclass(frozen=True)
class Sum:
    axis: Axis
    body: object


@dataclass(frozen=True)
class Case:
    num_nodes: int
    src: tuple[int, ...]
    dst: tuple[int, ...]
    out_shape: tuple[int, ...]
    features: dict  # placeholder -> its feature dimensions (all of them for the dense W)
    template: str
    dtype: torch.dtype
    tree: object
    seed: int


TE_FUNCTIONS = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le,
    "exp": te.exp, "log": te.log, "sqrt": te.sqrt, "tanh": te.tanh, "sigmoid": te.sigmoid, "abs": te.abs,
    "max": te.max, "min": te.min, "where": te.where,
}  # fmt: skip
TORCH_FUNCTIONS = {
    "+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div,
    ">": torch.gt, "<": torch.lt, ">=": torch.ge, "<=": torch.le,
    "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "abs": torch.abs,
    "max": lambda a, b: torch.where(a >= b, a, b),  # a tie's gradient goes to the first operand
    "min": lambda a, b: torch.where(a <= b, a, b),
    "where": torch.where,
}  # fmt: skip


# ---------------------------------------------------------------- generation


def loads_in(node) -> list[Load]:
    if isinstance(node, Load):
        return [node]
    if isinstance(node, Apply):
        return [found for arg in node.args for found in loads_in(arg)]
    if isinstance(node, Sum):
        return loads_in(node.body)
    return []


class TreeDrawer:
    """Draws an expression tree of at most ``MAX_OPERATORS`` operators over the variables in scope."""

    def __init__(self, draw, features: dict, out_shape: tuple[int, ...], max_work: int) -> None:
        self.draw, self.features, self.out_shape, self.max_work = draw, features, out_shape, max_work
        self.budget, self.names = MAX_OPERATORS, 0

    def expr(self, scope: list[Axis], nesting: int):
        kinds = ["load", "load", "const"]
        if self.budget > 0:
            kinds += ["arith", "arith", "div", "unary", "unary", "pairwise", "where"]
            if nesting < MAX_NESTING:
                kinds += ["sum", "sum"]
        kind = self.draw(st.sampled_from(kinds))
        if kind == "load":
            return self.load(scope)
        if kind == "const":
            return Const(self.draw(st.sampled_from(CONSTANTS)))
        self.budget -= 1
        if kind in ("arith", "pairwise"):
            fn = self.draw(st.sampled_from(("+", "-", "*") if kind == "arith" else ("max", "min")))
            return Apply(fn, (self.expr(scope, nesting), self.expr(scope, nesting)))
        if kind == "div":  # the denominator kept away from 0
            return Apply("/", (self.expr(scope, nesting), self.positive(self.expr(scope, nesting), 0.5)))
        if kind == "unary":
            return self.unary(self.draw(st.sampled_from(UNARY)), scope, nesting)
        if kind == "where":
            test = Apply(self.draw(st.sampled_from(COMPARISONS)), (self.load(scope), self.expr(scope, nesting)))
            return Apply("where", (test, self.expr(scope, nesting), self.expr(scope, nesting)))
        start = self.draw(st.sampled_from((0, 0, 1, 2)))
        self.names += 1
        work = math.prod(a.extent for a in scope)  # output elements x iterations of the enclosing reductions
        extent = self.draw(st.sampled_from([size for size in REDUCE_SIZES if size * work <= self.max_work]))
        axis = Axis(f"r{self.names}", start, extent, 1 + len(self.out_shape) + nesting)
        return Sum(axis, self.expr([*scope, axis], nesting + 1))

    def unary(self, fn: str, scope: list[Axis], nesting: int) -> Apply:
        x = self.expr(scope, nesting)
        if fn == "exp":
            return Apply("exp", (Apply("min", (x, Const(2.0))),))  # at most e^2
        if fn in ("log", "sqrt"):
            return Apply(fn, (self.positive(x, 0.25),))
        return Apply(fn, (x,))

    @staticmethod
    def positive(x, floor: float) -> Apply:
        return Apply("+", (Apply("abs", (x,)), Const(floor)))

    def load(self, scope: list[Axis]) -> Load:
        tensor = self.draw(st.sampled_from(sorted(ROWS)))
        row = self.draw(st.sampled_from(ROWS[tensor]))
        index: list[Axis | int] = []
        for size in self.features[tensor]:
            fitting = [a for a in scope if a.start + a.extent <= size and a not in index]
            choice = self.draw(st.integers(0, len(fitting)))  # the last choice: a constant
            index.append(fitting[choice] if choice < len(fitting) else self.draw(st.integers(0, size - 1)))
        return Load(tensor, row, tuple(index))


@st.composite
def cases(draw, max_nodes: int, max_star_degree: int, max_work: int) -> Case:
    """A graph of up to ``max_nodes`` vertices (a star's hub has up to ``max_star_degree`` in-edges) and a
    UDF whose innermost reduction runs at most ``max_work`` times per edge (output elements x iterations)."""
    shape = draw(st.sampled_from(("random", "random", "random", "star", "empty")))
    if shape == "empty":
        n = draw(st.integers(0, 3))
        src = dst = torch.zeros(0, dtype=torch.int64)
    else:
        n = draw(st.integers(1, max_nodes))
        src, dst = random_edges(n, draw(st.integers(1, 3 * max_nodes)), seed=draw(st.integers(0, 1 << 16)))
        if shape == "star":  # one destination of high in-degree beside the random edges
            degree = draw(st.integers(max_star_degree // 2, max_star_degree))
            hub_sources = torch.arange(degree) % n
            src, dst = torch.cat([src, hub_sources]), torch.cat([dst, torch.full((degree,), n // 2)])
    out_shape = tuple(draw(st.lists(st.sampled_from(OUTPUT_SIZES), min_size=1, max_size=2)))
    if math.prod(out_shape) > MAX_OUTPUT:
        out_shape = out_shape[-1:]
    # feature sizes that fit the axes exactly, leave one element over, or are unrelated to them
    sizes = st.sampled_from((*SMALL, *out_shape, *(s + 1 for s in out_shape), max(REDUCE_SIZES) + 2))
    features = {name: tuple(draw(st.lists(sizes, min_size=1, max_size=2))) for name in sorted(ROWS)}
    drawer = TreeDrawer(draw, features, out_shape, max_work)
    outputs = [Axis(f"o{j}", 0, size, 1 + j) for j, size in enumerate(out_shape)]
    tree = drawer.expr(outputs, 0)
    if not loads_in(tree):
        tree = Apply("*", (tree, drawer.load(outputs)))
    return Case(
        num_nodes=n,
        src=tuple(src.tolist()),
        dst=tuple(dst.tolist()),
        out_shape=out_shape,
        features=features,
        template=draw(st.sampled_from(TEMPLATES)),
        dtype=draw(st.sampled_from((torch.float32, torch.float64))),
        tree=tree,
        seed=draw(st.integers(0, 1 << 16)),
    )


# ---------------------------------------------------------------- featgraph


def placeholder_shapes(case: Case) -> dict[str, tuple[int, ...]]:
    rows = {"X": case.num_nodes, "A": len(case.src)}
    used = {load.tensor for load in loads_in(case.tree)}
    return {name: ((rows[name],) if name in rows else ()) + case.features[name] for name in sorted(used)}


def to_te(node, env: dict, placeholders: dict):
    """The tree as a te expression; ``env`` maps variable names (and src/dst/eid) to te variables."""
    if isinstance(node, Const):
        return te.Const(node.value)
    if isinstance(node, Load):
        index = [env[node.row]] if node.row else []
        index += [env[i.name] if isinstance(i, Axis) else i for i in node.index]
        return placeholders[node.tensor][tuple(index)]
    if isinstance(node, Sum):
        k = te.reduce_axis((node.axis.start, node.axis.start + node.axis.extent), name=node.axis.name)
        return te.sum(to_te(node.body, {**env, node.axis.name: k}, placeholders), axis=k)
    return TE_FUNCTIONS[node.fn](*(to_te(arg, env, placeholders) for arg in node.args))


def compile_kernel(case: Case, target: str, device: torch.device):
    src, dst = (torch.tensor(ids, dtype=torch.int64, device=device) for ids in (case.src, case.dst))
    graph = fg.Graph(src, dst, case.num_nodes)
    dtype = str(case.dtype).removeprefix("torch.")
    placeholders = {name: te.placeholder(shape, dtype, name) for name, shape in placeholder_shapes(case).items()}

    def udf(src, dst, eid):
        def body(*axes):
            env = {"src": src, "dst": dst, "eid": eid, **{f"o{j}": a for j, a in enumerate(axes)}}
            return to_te(case.tree, env, placeholders)

        return te.compute(case.out_shape, body)

    if case.template == "sddmm":
        return fg.sddmm(graph, udf, target=target)
    if case.template == "edge_sum":
        return edge_sum(graph, udf, target=target)
    return fg.spmm(graph, udf, case.template.removeprefix("spmm-"), target=target)


# ---------------------------------------------------------------- dense reference


def evaluate(node, inputs: dict, rows: dict, rank: int) -> torch.Tensor:
    """The tree per edge with torch: a tensor of ``rank`` dimensions (edges, output axes, one per nesting
    level of reductions), of size 1 along the variables it does not depend on."""
    if isinstance(node, Const):
        return torch.full([1] * rank, node.value, dtype=next(iter(inputs.values())).dtype)
    if isinstance(node, Load):
        value = inputs[node.tensor]
        value = value[rows[node.row]] if node.row else value.unsqueeze(0)
        slots, dim = [0], 1
        for i in node.index:
            if isinstance(i, Axis):
                value, dim = value.narrow(dim, i.start, i.extent), dim + 1
                slots.append(i.slot)
            else:
                value = value.select(dim, i)
        value = value.reshape(*value.shape, *[1] * (rank - value.dim()))
        order = slots + [s for s in range(rank) if s not in slots]
        return value.permute([order.index(s) for s in range(rank)])
    if isinstance(node, Sum):
        body = evaluate(node.body, inputs, rows, rank)
        shape = list(body.shape)
        shape[node.axis.slot] = node.axis.extent
        return body.expand(shape).sum(node.axis.slot, keepdim=True)
    return TORCH_FUNCTIONS[node.fn](*(evaluate(arg, inputs, rows, rank) for arg in node.args))


def reference(case: Case, inputs: dict) -> torch.Tensor:
    src, dst = torch.tensor(case.src, dtype=torch.int64), torch.tensor(case.dst, dtype=torch.int64)
    rows = {"src": src, "dst": dst, "eid": torch.arange(len(case.src))}
    rank = 1 + len(case.out_shape) + MAX_NESTING
    message = evaluate(case.tree, inputs, rows, rank)
    message = message.expand(len(case.src), *case.out_shape, *[1] * MAX_NESTING).reshape(-1, *case.out_shape)
    if case.template == "sddmm":
        return message
    if case.template == "edge_sum":
        return message.sum(0)
    return reduce_messages(message, dst, case.num_nodes, case.template.removeprefix("spmm-"))


# ---------------------------------------------------------------- the property


def gradients(out: torch.Tensor, upstream: torch.Tensor, inputs: dict) -> list[torch.Tensor]:
    if not out.requires_grad:  # nothing reaches the output (no edges)
        return [torch.zeros_like(t) for t in inputs.values()]
    return list(torch.autograd.grad(out, list(inputs.values()), upstream, allow_unused=True, materialize_grads=True))


def assert_close(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    tolerance = TOLERANCE[want.dtype]
    scale = max(1.0, float(want.abs().max())) if want.numel() else 1.0
    torch.testing.assert_close(got, want, rtol=tolerance, atol=tolerance * scale, msg=lambda m: f"{what}: {m}")


def check(case: Case, target: str, device: torch.device) -> None:
    """The kernel's output (and in float64 its gradients) against the dense reference."""
    kernel = compile_kernel(case, target, device)
    gen = torch.Generator().manual_seed(case.seed)
    shapes = placeholder_shapes(case)
    inputs = {name: torch.randn(shape, generator=gen, dtype=case.dtype) for name, shape in shapes.items()}
    out = kernel(**{name: t.to(device) for name, t in inputs.items()}).cpu()
    assert out.dtype == case.dtype
    assert_close(out, reference(case, inputs), "output")
    if case.dtype != torch.float64:
        return
    ours = {name: t.to(device).requires_grad_() for name, t in inputs.items()}
    theirs = {name: t.clone().requires_grad_() for name, t in inputs.items()}
    out = kernel(**ours)
    upstream = torch.randn(out.shape, generator=gen, dtype=case.dtype)
    got = gradients(out, upstream.to(device), ours)
    for name, grad, want in zip(ours, got, gradients(reference(case, theirs), upstream, theirs), strict=True):
        assert_close(grad.cpu(), want, f"gradient of {name}")


FUZZ = {"deadline": None, "derandomize": True, "database": None, "suppress_health_check": list(HealthCheck)}


@settings(max_examples=CPU_EXAMPLES, **FUZZ)
@given(case=cases(max_nodes=24, max_star_degree=80, max_work=50_000))
def test_udf_kernels_on_cpu_match_dense_reference(case: Case) -> None:
    check(case, "cpu", torch.device("cpu"))


@settings(max_examples=GPU_EXAMPLES, **FUZZ)
@given(case=cases(max_nodes=8, max_star_degree=70, max_work=1_000))
def test_udf_kernels_on_gpu_target_match_dense_reference(gpu: torch.device, case: Case) -> None:
    check(case, "gpu", gpu)
