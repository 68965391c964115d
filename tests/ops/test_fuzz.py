"""Property-based fuzz test of every op and reducer against dense torch references.

Each example draws a graph (no vertices, no edges, isolated vertices, self loops, duplicate edges, a star whose
hub has more in-edges than a GPU program's edge lanes), feature shapes (1, odd sizes, NumPy broadcasting as DGL
allows it, multi-head (n, h, d), 1-D tensors as DGL's scalar features), a dtype (float32 or float64) and one of:
every ``gspmm``/``gsddmm`` shortcut with every reducer (and ``gsddmm`` with equal targets), ``edge_softmax``,
``segment_reduce``, ``gcn_aggregate``, ``gat_attention`` (with attention dropout too) and ``dropout``.

The references below are written with dense torch only (gathers, ``index_add``, ``scatter_reduce`` with
``include_self=False``), never with featgraph. Outputs must agree (float32 within 1e-4 of the float64
reference); in float64 the gradients of every input for a random upstream gradient must agree with torch
autograd through the reference too, and the caller's tensors must be left as they were. Values are finite
here; the max/min semantics of -inf and NaN have a test of their own. Small graphs run again under
``featgraph.default_target("gpu")`` (Triton's interpreter without a GPU), and tiny ones through
``torch.autograd.gradcheck``.

Examples are derandomized (the same every run, so their kernels stay in the disk cache after the first run).
``FEATGRAPH_FUZZ_EXAMPLES`` sets how many examples each fuzz test runs (with the defaults below this file and
tests/nn/test_fuzz.py take about 90 s of CPU with an empty kernel cache, compiling ~370 kernels, and about 20 s
with a warm one); tests/templates/test_fuzz.py and tests/nn/test_fuzz.py read the same variable the same way,
e.g. ``FEATGRAPH_FUZZ_EXAMPLES=500 pytest tests/ops/test_fuzz.py``.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.autograd import gradcheck

import featgraph as fg
from featgraph import ops
from tests.conftest import random_edges

EXAMPLES = int(os.environ.get("FEATGRAPH_FUZZ_EXAMPLES", "0"))
REDUCERS = ("sum", "mean", "max", "min")
ARITHMETIC = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}
HUB_IN_DEGREE = 70  # above the 64 edge lanes a GPU program packs at a time


def fuzz(default_examples: int) -> settings:
    """Settings of a fuzz test: the same examples every run, no deadline (first calls compile kernels), and
    ``FEATGRAPH_FUZZ_EXAMPLES`` examples where that is set."""
    return settings(
        max_examples=EXAMPLES or default_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


# ----------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Scale:
    """How large the drawn cases get."""

    max_nodes: int
    hub_in_degree: int  # 0: no star
    sizes: tuple[int, ...]  # feature extents to draw from
    max_features: int  # elements of one row's broadcast feature shape
    dtypes: tuple[torch.dtype, ...]


BOTH = (torch.float32, torch.float64)
# 17: vectorised and lane-tree paths of the C++ kernels; 130: more than one 128-lane GPU feature block
FULL = Scale(24, HUB_IN_DEGREE, (1, 2, 3, 5, 17, 130), 600, BOTH)
SMALL = Scale(12, HUB_IN_DEGREE, (1, 2, 3, 5, 130), 300, BOTH)  # Triton's interpreter
TINY = Scale(6, 0, (1, 2, 3), 6, (torch.float64,))  # gradcheck: two forward calls per input element


@dataclass(frozen=True)
class FuzzGraph:
    graph: fg.Graph
    src: torch.Tensor
    dst: torch.Tensor

    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def num_edges(self) -> int:
        return self.src.numel()

    def rows(self, target: str) -> torch.Tensor:
        """The row of ``target``-data (u: source, v: destination, e: edge) that each edge reads."""
        return {"u": self.src, "v": self.dst, "e": torch.arange(self.num_edges)}[target]


@st.composite
def graphs(draw: st.DrawFn, scale: Scale = FULL) -> FuzzGraph:
    """A random multigraph: conftest's edges (isolated vertices, duplicates, a self loop) over 0 or more
    vertices, 0 or more edges, sometimes plus a star into one hub, in shuffled edge order."""
    num_nodes = draw(st.integers(0, scale.max_nodes))
    num_edges = draw(st.integers(0, 4 * num_nodes))
    seed = draw(st.integers(0, 2**16))
    src, dst = random_edges(num_nodes, num_edges, seed)
    if num_nodes and scale.hub_in_degree and draw(st.booleans()):
        gen = torch.Generator().manual_seed(seed)
        hub = draw(st.integers(0, num_nodes - 1))
        src = torch.cat([src, torch.randint(0, num_nodes, (scale.hub_in_degree,), generator=gen)])
        dst = torch.cat([dst, torch.full((scale.hub_in_degree,), hub)])
        order = torch.randperm(src.numel(), generator=gen)
        src, dst = src[order], dst[order]
    return FuzzGraph(fg.Graph(src, dst, num_nodes), src, dst)


@st.composite
def broadcast_features(draw: st.DrawFn, scale: Scale, operands: int) -> list[tuple[int, ...]]:
    """Feature shapes that broadcast together: each a right-aligned part of one full shape, any extent
    replaced by 1; a shape (1,) sometimes becomes () (a 1-D tensor, DGL's scalar feature)."""
    full = draw(
        st.lists(st.sampled_from(scale.sizes), min_size=1, max_size=3).filter(
            lambda shape: math.prod(shape) <= scale.max_features
        )
    )
    shapes = []
    for _ in range(operands):
        rank = draw(st.integers(1, len(full)))
        shape = tuple(size if draw(st.booleans()) else 1 for size in full[len(full) - rank :])
        shapes.append(() if shape == (1,) and draw(st.booleans()) else shape)
    return shapes


def random_tensor(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator, divisor: bool = False):
    """Standard normal values; a divisor's are kept 0.5 or more away from zero."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    if divisor:
        x = x + 0.5 * torch.where(x < 0, -1.0, 1.0)
    return x.to(dtype)


def generator(data: st.DataObject) -> torch.Generator:
    return torch.Generator().manual_seed(data.draw(st.integers(0, 2**31), label="values seed"))


# ------------------------------------------------------------------------------------- dense references


def aggregate(messages: torch.Tensor, dst: torch.Tensor, num_nodes: int, reduce: str) -> torch.Tensor:
    """``out[v] = reduce`` of the messages of v's in-edges, 0 where v has none."""
    out = messages.new_zeros((num_nodes, *messages.shape[1:]))
    if reduce in ("sum", "mean"):
        out = out.index_add(0, dst, messages)
        if reduce == "mean":
            count = torch.bincount(dst, minlength=num_nodes).clamp(min=1).to(messages.dtype)
            out = out / count.view(-1, *[1] * (messages.dim() - 1))
        return out
    index = dst.view(-1, *[1] * (messages.dim() - 1)).expand_as(messages)
    return out.scatter_reduce(0, index, messages, {"max": "amax", "min": "amin"}[reduce], include_self=False)


def dense_softmax(scores: torch.Tensor, dst: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Softmax of each edge's scores over its destination's in-edges."""
    peak = aggregate(scores.detach(), dst, num_nodes, "max")[dst]
    weights = torch.exp(scores - peak)
    return weights / aggregate(weights, dst, num_nodes, "sum")[dst]


@dataclass(frozen=True)
class OpCase:
    """One gspmm/gsddmm op: a shortcut name (or a gsddmm call the shortcuts lack) and what it computes."""

    name: str
    op: str  # add, sub, mul, div, dot, copy_lhs, copy_rhs
    lhs: str | None  # where lhs lives (u, v, e); None when the op does not read it
    rhs: str | None
    reduce: str | None  # None: one result per edge (gsddmm)

    def call(self, g: fg.Graph, *operands: torch.Tensor, **options) -> torch.Tensor:
        if self.name in ops.SHORTCUTS:
            return ops.SHORTCUTS[self.name](g, *operands, **options)
        lhs, rhs = (None, operands[0]) if self.op == "copy_rhs" else operands
        return ops.gsddmm(g, self.op, lhs, rhs, self.lhs or self.rhs, self.rhs or self.lhs, **options)

    def reference(self, fgraph: FuzzGraph, *operands: torch.Tensor) -> torch.Tensor:
        targets = [t for t in (self.lhs, self.rhs) if t is not None]
        rank = max(max(x.dim() - 1, 1) for x in operands)
        # DGL's broadcasting: 1-D tensors are one feature, feature shapes are right-aligned
        aligned = [x.reshape(x.shape[0], *[1] * (rank - max(x.dim() - 1, 1)), *(x.shape[1:] or (1,))) for x in operands]
        a, *b = [x[fgraph.rows(t)] for x, t in zip(aligned, targets, strict=True)]
        if self.op == "dot":
            message = (a * b[0]).sum(-1, keepdim=True)
        else:
            message = ARITHMETIC[self.op](a, b[0]) if self.op in ARITHMETIC else a
        if all(x.dim() == 1 for x in operands):  # DGL's scalar features stay 1-D
            message = message.squeeze(-1)
        return message if self.reduce is None else aggregate(message, fgraph.dst, fgraph.num_nodes, self.reduce)


def _op_cases() -> list[OpCase]:
    spmm = {"copy_u": ("copy_lhs", "u", None), "copy_e": ("copy_rhs", None, "e")}
    spmm |= {f"u_{op}_e": (op, "u", "e") for op in ARITHMETIC}
    cases = [OpCase(f"{prefix}_{reduce}", *spec, reduce) for prefix, spec in spmm.items() for reduce in REDUCERS]
    sddmm_ops = (*ARITHMETIC, "dot")
    pairs = itertools.permutations("uve", 2)
    cases += [OpCase(f"{lhs}_{op}_{rhs}", op, lhs, rhs, None) for lhs, rhs in pairs for op in sddmm_ops]
    cases += [OpCase(f"copy_{t}", "copy_lhs", t, None, None) for t in "uv"]
    cases += [OpCase(f"gsddmm {op} {t}{t}", op, t, t, None) for t in "uve" for op in sddmm_ops]
    cases += [OpCase(f"gsddmm copy_rhs {t}", "copy_rhs", None, t, None) for t in "uve"]
    return cases


OP_CASES = _op_cases()


# ------------------------------------------------------------------------------- cases and the checker


@dataclass
class Case:
    """``fn(*inputs)`` (featgraph) must equal ``reference(*inputs)`` (dense torch); both may return tuples."""

    fn: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
    reference: Callable[..., torch.Tensor | tuple[torch.Tensor, ...]]
    inputs: tuple[torch.Tensor, ...]


def _outputs(result) -> tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)


def strided(x: torch.Tensor) -> torch.Tensor:
    """The same values in a non-contiguous layout (first and last dimensions swapped in memory)."""
    return x.transpose(0, -1).contiguous().transpose(0, -1) if x.dim() > 1 else x.repeat_interleave(2)[::2]


def assert_matches_reference(
    case: Case, gen: torch.Generator, noncontiguous: bool = False, differentiate: Sequence[bool] | None = None
) -> None:
    """Forward in the inputs' dtype against the float64 reference; in float64 also the gradients of the
    inputs ``differentiate`` marks (default all) for a random upstream gradient; the inputs unchanged.
    ``noncontiguous`` passes the inputs in a strided layout."""
    dtype = case.inputs[0].dtype
    exact = dtype == torch.float64
    differentiate = [exact and d for d in differentiate or [True] * len(case.inputs)]
    before = [x.clone() for x in case.inputs]
    layout = strided if noncontiguous else torch.Tensor.detach
    leaves = [layout(x).detach().requires_grad_(d) for x, d in zip(case.inputs, differentiate, strict=True)]
    outs = _outputs(case.fn(*leaves))
    ref_leaves = [x.detach().double().requires_grad_(d) for x, d in zip(case.inputs, differentiate, strict=True)]
    refs = _outputs(case.reference(*ref_leaves))
    tolerance = {} if exact else {"rtol": 1e-4, "atol": 1e-4}
    assert len(outs) == len(refs)
    for out, ref in zip(outs, refs, strict=True):
        assert out.dtype == dtype and out.shape == ref.shape, (out.dtype, out.shape, ref.shape)
        torch.testing.assert_close(out.detach().double(), ref.detach(), **tolerance)
        assert out.requires_grad or not ref.requires_grad, "an output is not differentiable in the inputs"
    for x, original in zip(case.inputs, before, strict=True):
        assert torch.equal(x, original), "an input was modified"
    if not any(differentiate):
        return
    upstream = [torch.randn(ref.shape, generator=gen, dtype=torch.float64) for ref in refs]
    wanted = [i for i, d in enumerate(differentiate) if d]
    results = []
    for outputs, inputs in ((outs, leaves), (refs, ref_leaves)):
        pairs = [(o, u) for o, u in zip(outputs, upstream, strict=True) if o.requires_grad]
        grads = torch.autograd.grad(
            [o for o, _ in pairs], [inputs[i] for i in wanted], [u for _, u in pairs], allow_unused=True
        )
        results.append([torch.zeros_like(inputs[i]) if g is None else g for i, g in zip(wanted, grads, strict=True)])
    for i, got, expected in zip(wanted, *results, strict=True):
        torch.testing.assert_close(got, expected, msg=lambda m, i=i: f"gradient of input {i}: {m}")


def check(data: st.DataObject, case: Case) -> None:
    """``assert_matches_reference`` with a drawn layout and a drawn set of inputs that require grad."""
    noncontiguous = data.draw(st.booleans(), label="non-contiguous")
    count = len(case.inputs)
    differentiate = data.draw(st.lists(st.booleans(), min_size=count, max_size=count), label="requires grad")
    assert_matches_reference(case, generator(data), noncontiguous, differentiate if any(differentiate) else None)


# ------------------------------------------------------------------------------------------- families


def draw_op(data: st.DataObject, scale: Scale) -> Case:
    case = data.draw(st.sampled_from(OP_CASES), label="op")
    fgraph = data.draw(graphs(scale), label="graph")
    dtype = data.draw(st.sampled_from(scale.dtypes), label="dtype")
    targets = [t for t in (case.lhs, case.rhs) if t is not None]
    shapes = data.draw(broadcast_features(scale, len(targets)), label="features")
    gen = generator(data)
    rows = {"u": fgraph.num_nodes, "v": fgraph.num_nodes, "e": fgraph.num_edges}
    inputs = tuple(
        random_tensor((rows[t], *shape), dtype, gen, divisor=i == 1 and case.op == "div")
        for i, (t, shape) in enumerate(zip(targets, shapes, strict=True))
    )
    options = {}
    if case.reduce in ("sum", "mean"):
        options["strategy"] = data.draw(st.sampled_from(("gar", "gas", "auto")), label="strategy")
    return Case(lambda *x: case.call(fgraph.graph, *x, **options), lambda *x: case.reference(fgraph, *x), inputs)


def draw_edge_softmax(data: st.DataObject, scale: Scale) -> Case:
    fgraph = data.draw(graphs(scale), label="graph")
    heads = data.draw(st.sampled_from([(), (1,), (3,), (2, 1)]), label="heads")
    dtype = data.draw(st.sampled_from(scale.dtypes), label="dtype")
    magnitude = data.draw(st.sampled_from([1.0, 30.0, 1000.0]), label="magnitude")  # exp overflows past 88
    scores = random_tensor((fgraph.num_edges, *heads), dtype, generator(data)) * magnitude

    def reference(s: torch.Tensor) -> torch.Tensor:
        return dense_softmax(s, fgraph.dst, fgraph.num_nodes)

    return Case(lambda s: ops.edge_softmax(fgraph.graph, s), reference, (scores,))


def draw_segment_reduce(data: st.DataObject, scale: Scale) -> Case:
    seglen = torch.tensor(data.draw(st.lists(st.integers(0, 6), max_size=scale.max_nodes), label="seglen"))
    seglen = seglen.to(torch.int64)
    (features,) = data.draw(broadcast_features(scale, 1), label="features")
    reducer = data.draw(st.sampled_from(REDUCERS), label="reducer")
    dtype = data.draw(st.sampled_from(scale.dtypes), label="dtype")
    value = random_tensor((int(seglen.sum()), *features), dtype, generator(data))
    segment = torch.repeat_interleave(torch.arange(seglen.numel()), seglen)

    def reference(v: torch.Tensor) -> torch.Tensor:
        return aggregate(v, segment, seglen.numel(), reducer)

    return Case(lambda v: ops.segment_reduce(seglen, v, reducer), reference, (value,))


def dense_gcn(fgraph: FuzzGraph, x, weight, add_self_loops: bool, normalize: bool, fill_value: float) -> torch.Tensor:
    """PyG's ``gcn_norm`` and propagation: self loops replaced by one per vertex (weighing the last existing
    loop's weight, else ``fill_value``), ``deg^-1/2`` at both ends from the destinations' weighted degrees."""
    n, src, dst = fgraph.num_nodes, fgraph.src, fgraph.dst
    weight = torch.ones(fgraph.num_edges, dtype=x.dtype) if weight is None else weight
    if add_self_loops:
        loop = src == dst
        last = torch.full((n,), fgraph.num_edges, dtype=torch.int64)  # the index of the fill value below
        for e in loop.nonzero().flatten().tolist():
            last[src[e]] = e
        loop_weight = torch.cat([weight, torch.full((1,), fill_value, dtype=x.dtype)])[last]
        vertices = torch.arange(n)
        src, dst = torch.cat([src[~loop], vertices]), torch.cat([dst[~loop], vertices])
        weight = torch.cat([weight[~loop], loop_weight])
    if normalize:
        degree = torch.zeros(n, dtype=x.dtype).index_add(0, dst, weight)
        norm = torch.where(degree > 0, degree.clamp(min=1e-300).pow(-0.5), torch.zeros((), dtype=x.dtype))
        weight = norm[src] * weight * norm[dst]
    return aggregate(weight.unsqueeze(1) * x[src], dst, n, "sum")


def draw_gcn_aggregate(data: st.DataObject, scale: Scale) -> Case:
    fgraph = data.draw(graphs(scale), label="graph")
    width = data.draw(st.sampled_from(scale.sizes), label="width")
    dtype = data.draw(st.sampled_from(scale.dtypes), label="dtype")
    weighted = data.draw(st.booleans(), label="edge weights")
    add_self_loops, normalize = data.draw(st.sampled_from([(True, True), (False, True), (False, False)]))
    fill_value = data.draw(st.sampled_from([1.0, 2.0, 0.5]), label="fill_value")
    gen = generator(data)
    x = random_tensor((fgraph.num_nodes, width), dtype, gen)
    options = {"add_self_loops": add_self_loops, "normalize": normalize, "fill_value": fill_value}
    if not weighted:
        return Case(
            lambda x: ops.gcn_aggregate(fgraph.graph, x, None, **options),
            lambda x: dense_gcn(fgraph, x, None, **options),
            (x,),
        )
    weight = (torch.rand(fgraph.num_edges, generator=gen, dtype=torch.float64) + 0.1).to(dtype)
    return Case(
        lambda x, w: ops.gcn_aggregate(fgraph.graph, x, w, **options),
        lambda x, w: dense_gcn(fgraph, x, w, **options),
        (x, weight),
    )


def dense_gat(fgraph: FuzzGraph, feat, attn_src, attn_dst, slope: float, keep=None):
    """GAT's attention and aggregation per edge; ``keep`` scales each weight (a dropout mask)."""
    logits = (feat * attn_src).sum(-1)[fgraph.src] + (feat * attn_dst).sum(-1)[fgraph.dst]
    alpha = dense_softmax(F.leaky_relu(logits, slope), fgraph.dst, fgraph.num_nodes)
    if keep is not None:
        alpha = alpha * keep
    return aggregate(alpha.unsqueeze(-1) * feat[fgraph.src], fgraph.dst, fgraph.num_nodes, "sum"), alpha


def draw_gat_attention(data: st.DataObject, scale: Scale) -> Case:
    """Without dropout: against the dense attention. With dropout in training: the mask is read from the
    per-edge path's weights (the same seed gives the same mask in the fused path), then both paths are
    compared against the dense attention with that mask."""
    fgraph = data.draw(graphs(scale), label="graph")
    heads = data.draw(st.sampled_from([1, 2, 3]), label="heads")
    width = data.draw(st.sampled_from(scale.sizes), label="width")
    slope = data.draw(st.sampled_from([0.2, 0.0, 1.5]), label="negative_slope")
    dropout = data.draw(st.sampled_from([0.0, 0.0, 0.5]), label="dropout")
    return_attention = data.draw(st.booleans(), label="return_attention")
    dtype = data.draw(st.sampled_from(scale.dtypes), label="dtype")
    gen = generator(data)
    inputs = (
        random_tensor((fgraph.num_nodes, heads, width), dtype, gen),
        random_tensor((heads, width), dtype, gen),
        random_tensor((heads, width), dtype, gen),
    )
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))

    def attend(feat, attn_src, attn_dst, return_attention=return_attention):
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return ops.gat_attention(
                fgraph.graph, feat, attn_src, attn_dst, slope, dropout, training=dropout > 0,
                return_attention=return_attention,
            )  # fmt: skip

    keep = None
    if dropout > 0:
        _, alpha = attend(*inputs, return_attention=True)
        keep = (alpha != 0).to(torch.float64) / (1 - dropout)

    def reference(feat, attn_src, attn_dst):
        out, alpha = dense_gat(fgraph, feat, attn_src, attn_dst, slope, keep)
        return (out, alpha) if return_attention else out

    return Case(attend, reference, inputs)


def draw_dropout(data: st.DataObject, scale: Scale) -> Case:
    """The mask is read from one call (zeros where dropped); the same seed must give the same mask, the kept
    elements scaled by 1 / (1 - p), and the gradient through the same mask."""
    (features,) = data.draw(broadcast_features(scale, 1), label="features")
    rows = data.draw(st.integers(0, 4 * scale.max_nodes), label="rows")
    p = data.draw(st.sampled_from([0.0, 0.3, 0.5, 1.0]), label="p")
    training = data.draw(st.booleans(), label="training")
    dtype = data.draw(st.sampled_from(scale.dtypes), label="dtype")
    gen = generator(data)
    x = random_tensor((rows, *features), dtype, gen, divisor=True)  # no zeros: a zero output means dropped
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))

    def dropped(x: torch.Tensor) -> torch.Tensor:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            return ops.dropout(x, p, training)

    kept = (dropped(x) != 0).to(torch.float64)
    if training and 0 < p < 1 and x.numel() >= 1000:
        assert abs(float(kept.mean()) - (1 - p)) < 0.1
    scale_kept = 1 / (1 - p) if training and p < 1 else 1.0
    expected_kept = torch.ones_like(kept) if not training or p == 0 else kept
    return Case(dropped, lambda x: x * expected_kept * scale_kept, (x,))


def draw_tc_spmm(data: st.DataObject, scale: Scale) -> Case:
    """Tensor-core SpMM, weighted or not; float64 only (float32 runs in TF32 on a GPU)."""
    fgraph = data.draw(graphs(scale), label="graph")
    width = data.draw(st.sampled_from(scale.sizes), label="width")
    gen = generator(data)
    x = random_tensor((fgraph.num_nodes, width), torch.float64, gen)
    src, dst, n = fgraph.src, fgraph.dst, fgraph.num_nodes
    if not data.draw(st.booleans(), label="edge weights"):
        return Case(lambda x: ops.tc_spmm(fgraph.graph, x), lambda x: aggregate(x[src], dst, n, "sum"), (x,))
    weight = random_tensor((fgraph.num_edges,), torch.float64, gen)

    def reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return aggregate(w.unsqueeze(1) * x[src], dst, n, "sum")

    return Case(lambda x, w: ops.tc_spmm(fgraph.graph, x, w), reference, (x, weight))


def draw_tc_sddmm(data: st.DataObject, scale: Scale) -> Case:
    """Tensor-core SDDMM (per-edge dot products); float64 only, as ``draw_tc_spmm``."""
    fgraph = data.draw(graphs(scale), label="graph")
    width = data.draw(st.sampled_from(scale.sizes), label="width")
    gen = generator(data)
    inputs = tuple(random_tensor((fgraph.num_nodes, width), torch.float64, gen) for _ in range(2))

    def reference(x_src: torch.Tensor, x_dst: torch.Tensor) -> torch.Tensor:
        return (x_src[fgraph.src] * x_dst[fgraph.dst]).sum(-1)

    return Case(lambda a, b: ops.tc_sddmm(fgraph.graph, a, b), reference, inputs)


FAMILIES: dict[str, Callable[[st.DataObject, Scale], Case]] = {
    "op": draw_op,
    "edge_softmax": draw_edge_softmax,
    "segment_reduce": draw_segment_reduce,
    "gcn_aggregate": draw_gcn_aggregate,
    "gat_attention": draw_gat_attention,
    "dropout": draw_dropout,
}
# dropout is not a graph kernel; the tensor-core ops run on the GPU target only
TENSOR_CORE_FAMILIES = {"tc_spmm": draw_tc_spmm, "tc_sddmm": draw_tc_sddmm}
GPU_FAMILIES = {**{name: draw for name, draw in FAMILIES.items() if name != "dropout"}, **TENSOR_CORE_FAMILIES}


# ---------------------------------------------------------------------------------------------- tests


def test_every_shortcut_is_fuzzed():
    assert {case.name for case in OP_CASES if case.name in ops.SHORTCUTS} == set(ops.SHORTCUTS)


@fuzz(40)
@given(data=st.data())
def test_ops_match_dense_reference(data):
    check(data, draw_op(data, FULL))


@pytest.mark.parametrize("family", [name for name in FAMILIES if name != "op"])
@fuzz(6)
@given(data=st.data())
def test_fused_ops_match_dense_reference(family, data):
    check(data, FAMILIES[family](data, FULL))


@pytest.mark.parametrize("family", list(GPU_FAMILIES))
@fuzz(4)
@given(data=st.data())
def test_gpu_target_matches_dense_reference(interpreted_gpu, family, data):
    with fg.default_target("gpu"):
        check(data, GPU_FAMILIES[family](data, SMALL))


@pytest.mark.parametrize("family", list(FAMILIES))
@fuzz(3)
@given(data=st.data())
def test_gradcheck_small_cases(family, data):
    """Finite differences against featgraph's gradients (fast mode: along random directions), independent
    of the dense references."""
    case = FAMILIES[family](data, TINY)
    inputs = tuple(x.detach().requires_grad_() for x in case.inputs)
    assert gradcheck(case.fn, inputs, fast_mode=True)


@pytest.mark.parametrize("target", ["cpu", "gpu"])
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_max_min_follow_torch_on_inf_and_nan(request, reduce, target):
    """A destination whose messages are all -inf (max) or +inf (min) gets that infinity, a NaN message makes
    the result NaN, and a destination without in-edges gets 0 (DGL's convention)."""
    if target == "gpu":
        request.getfixturevalue("interpreted_gpu")
    inf = float("inf") if reduce == "min" else -float("inf")
    # destinations: 0 <- {inf, inf}, 1 <- {1, nan}, 2 <- {nan, 2}, 3 <- {inf, 3}, 4 <- nothing
    src, dst = torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    g = fg.Graph(src, dst, 8)
    values = torch.tensor([inf, inf, 1.0, float("nan"), float("nan"), 2.0, inf, 3.0])
    x = torch.stack([values, -values.flip(0)], dim=1)
    expected = aggregate(x[src], dst, 8, reduce)
    with fg.default_target(target):
        torch.testing.assert_close(ops.gspmm(g, "copy_lhs", reduce, x, None), expected, equal_nan=True)
        torch.testing.assert_close(ops.gspmm(g, "copy_rhs", reduce, None, x), expected, equal_nan=True)
