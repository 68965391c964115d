"""The grouped segment products in one Triton launch against a loop of ``torch.mm`` per segment: forward
(direct and gathered rows, transposed weights), the weight gradient, and ``segment_mm`` / ``gather_mm`` /
R-GCN's aggregation on the GPU target against the CPU target."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import featgraph as fg
from featgraph.graph import HeteroGraph
from featgraph.ops import gather_mm, relational_aggregate, segment_mm
from featgraph.ops.grouped_mm import GROUPED_SEGMENTS, grouped_on_gpu
from tests.conftest import assert_gpu_target_agrees

TOLERANCE = {
    torch.float64: {},
    torch.float32: {"rtol": 1e-4, "atol": 1e-4},
    torch.float16: {"rtol": 2e-2, "atol": 2e-2},
    torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
}
# Triton 3.9's interpreter computes tl.dot of bfloat16 blocks wrongly: float16 stands for the 16-bit case there


def _loop_products(a, b, lengths, a_rows=None):
    """The reference: each segment's rows times its weight, one ``torch.mm`` each, in float64."""
    rows = a if a_rows is None else a[a_rows]
    parts, start = [], 0
    for k, count in enumerate(lengths):
        parts.append(rows[start : start + count].double() @ b[k].double())
        start += count
    return torch.cat(parts) if parts else rows.new_zeros((0, b.shape[2]), dtype=torch.float64)


def _loop_weight_gradient(a, grad, lengths, a_rows=None, grad_rows=None):
    left = (a if a_rows is None else a[a_rows]).double()
    right = (grad if grad_rows is None else grad[grad_rows]).double()
    out, start = [], 0
    for count in lengths:
        out.append(left[start : start + count].t() @ right[start : start + count])
        start += count
    return torch.stack(out)


@st.composite
def problems(draw):
    """Segment lengths (empty ones, one past a product tile, one past a gradient chunk at times), widths on
    both sides of the 16-lane blocks, a dtype, rows read directly or through an index, a transposed weight."""
    lengths = draw(st.lists(st.sampled_from([0, 1, 3, 17, 64, 65, 130]), min_size=1, max_size=6))
    if draw(st.integers(0, 7)) == 0:
        lengths.append(1100)  # more rows than one weight-gradient chunk
    inner, cols = draw(st.sampled_from([1, 5, 16, 33])), draw(st.sampled_from([1, 7, 16, 70]))
    dtype = draw(st.sampled_from([torch.float32, torch.float64, "16-bit"]))
    return lengths, inner, cols, dtype, draw(st.booleans()), draw(st.booleans()), draw(st.integers(0, 2**16))


@given(problems())
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_grouped_products_and_weight_gradient_match_a_loop_of_products(gpu, problem):
    from featgraph.backends.gpu import grouped_mm

    lengths, inner, cols, dtype, gathered, transposed, seed = problem
    if dtype == "16-bit":
        dtype = torch.float16 if gpu.type == "cpu" else torch.bfloat16
    gen = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    a = torch.randn(total + 5, inner, generator=gen).to(dtype)
    a_rows = torch.randint(0, total + 5, (total,), generator=gen) if gathered else None
    a = a if gathered else a[:total]
    b = torch.randn(len(lengths), cols, inner, generator=gen).to(dtype).transpose(1, 2) if transposed else (
        torch.randn(len(lengths), inner, cols, generator=gen).to(dtype)
    )  # fmt: skip
    grad = torch.randn(total, cols, generator=gen).to(dtype)
    before = [t.clone() for t in (a, b, grad)]
    on = {"device": gpu}
    got = grouped_mm.segment_products(a.to(**on), b.to(**on), lengths, None if a_rows is None else a_rows.to(**on))
    torch.testing.assert_close(got.cpu().double(), _loop_products(a, b, lengths, a_rows), **TOLERANCE[dtype])
    assert got.dtype == dtype and got.shape == (total, cols)
    weight = grouped_mm.segment_weight_gradient(
        a.to(**on), grad.to(**on), lengths, len(lengths), None if a_rows is None else a_rows.to(**on)
    )
    want = _loop_weight_gradient(a, grad, lengths, a_rows)
    half = dtype in (torch.float16, torch.bfloat16)
    scale = {"rtol": 5e-2, "atol": 5e-2 * max(1, total) ** 0.5} if half else TOLERANCE[dtype]
    torch.testing.assert_close(weight.cpu().double(), want, **scale)
    for t, copy in zip((a, b, grad), before, strict=True):
        assert torch.equal(t, copy)


def test_segment_mm_and_gather_mm_on_the_gpu_target_gradcheck(gpu, interpreted_gpu):
    gen = torch.Generator().manual_seed(5)
    lengths = torch.tensor([3, 0, 4])  # narrow products: grouped from two segments
    a = torch.randn(7, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 3, 2, generator=gen, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([2, 0, 0, 1, 2, 2, 0])
    with fg.default_target("gpu"):
        assert grouped_on_gpu(a, lengths.tolist(), 3, 2)
        assert torch.autograd.gradcheck(lambda a, b: segment_mm(a, b, lengths), (a, b))
        assert torch.autograd.gradcheck(lambda a, b: gather_mm(a, b, idx), (a, b))
        got = segment_mm(a, b, lengths)
    torch.testing.assert_close(got, segment_mm(a, b, lengths))


@pytest.mark.parametrize("strategy", ["transform_first", "aggregate_first"])
def test_relational_aggregation_on_the_gpu_target_agrees_with_the_cpu(gpu, strategy):
    gen = torch.Generator().manual_seed(2)
    relations, n = 20, 40
    edges = {("v", f"r{r}", "v"): torch.randint(0, n, (2, int(torch.randint(0, 12, (1,), generator=gen))),
                                                generator=gen) for r in range(relations)}  # fmt: skip
    typed = HeteroGraph(edges, {"v": n})
    x = torch.randn(n, 9, generator=gen, requires_grad=True)
    weight = torch.randn(relations, 9, 5, generator=gen, requires_grad=True)
    etype = typed.etype

    def aggregate(g: fg.Graph, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return relational_aggregate(g, x, weight, etype.to(x.device), strategy=strategy)

    assert_gpu_target_agrees(aggregate, typed.graph, (x, weight), gpu)


@pytest.mark.parametrize(
    ("lengths", "inner", "cols", "grouped"),
    [
        ([5], 8, 8, False),  # one segment: torch.mm
        ([5, 6], 8, 8, True),  # narrow products
        ([5, 6], 512, 512, False),  # few wide segments: the library's GEMM
        ([1] * GROUPED_SEGMENTS, 512, 512, True),  # many segments: one launch beats one each
    ],
)
def test_the_grouped_launch_is_chosen_for_many_or_narrow_segments(gpu, lengths, inner, cols, grouped):
    a = torch.zeros(sum(lengths), inner, device=gpu)
    with fg.default_target("gpu"):
        assert grouped_on_gpu(a, lengths, inner, cols) is grouped
        assert grouped_on_gpu(a, lengths, inner, cols, block_diagonal=True) is False  # they keep the loop
    assert grouped_on_gpu(torch.zeros(3, 2), [1, 2], 2, 2) is False  # the CPU target
