"""Every Triton kernel featgraph generates compiles for sm_90 (Hopper) through Triton's NVIDIA backend,
on this machine, without a GPU: what the interpreter cannot check (constexpr globals, layouts, register
and shared-memory budgets) is checked here."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import featgraph as fg
from featgraph import ops, te
from featgraph.backends.gpu import aot
from tests.conftest import random_edges

triton = pytest.importorskip("triton")
PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
pytestmark = pytest.mark.skipif(not PTXAS.exists(), reason="this Triton build has no bundled ptxas")
N, E, D = 40, 300, 24


@pytest.fixture(scope="module")
def graph() -> fg.Graph:
    src, dst = random_edges(N, E, seed=21)
    src[:100] = 3  # a hub, for the staged variant
    return fg.Graph(src, dst, N)


def copy_u(d: int):
    X = te.placeholder((N, d), name="X")
    return lambda s, t, e: te.compute((d,), lambda i: X[s, i])


def mlp(s, t, e):
    X, W = te.placeholder((N, 8), name="X"), te.placeholder((8, D), name="W")
    k = te.reduce_axis((0, 8), name="k")
    return te.compute((D,), lambda i: te.max(te.sum((X[s, k] + X[t, k]) * W[k, i], axis=k), 0.0))


def dot(s, t, e):
    X = te.placeholder((N, 2, D), name="X")
    k = te.reduce_axis((0, D), name="k")
    return te.compute((2,), lambda h: te.sum(X[s, h, k] * X[t, h, k], axis=k))


def check(launches: list[aot.CompiledLaunch], expected: int = 1) -> None:
    assert len(launches) == expected
    for launch in launches:
        assert launch.arch == 90 and 0 < launch.registers <= 255 and launch.spills >= 0


KERNELS = {
    "spmm-sum-rows": lambda g: (fg.spmm(g, copy_u(D), "sum", target="gpu", rows_per_program=4), {"X": (N, D)}),
    "spmm-max-degree-order": lambda g: (
        fg.spmm(g, copy_u(D), "max", target="gpu", row_order="degree"),
        {"X": (N, D)},
    ),
    "spmm-logsumexp": lambda g: (fg.spmm(g, copy_u(D), "logsumexp", target="gpu"), {"X": (N, D)}),
    "spmm-hubs-staged": lambda g: (fg.spmm(g, copy_u(64), "mean", target="gpu", hub_threshold=20), {"X": (N, 64)}),
    "spmm-gas": lambda g: (fg.spmm(g, copy_u(D), "sum", target="gpu", strategy="gas"), {"X": (N, D)}),
    "spmm-mlp": lambda g: (fg.spmm(g, mlp, "max", target="gpu"), {"X": (N, 8), "W": (8, D)}),
    "sddmm-dot": lambda g: (fg.sddmm(g, dot, target="gpu"), {"X": (N, 2, D)}),
}


@pytest.mark.parametrize("name", KERNELS)
def test_template_kernels_compile_for_hopper(interpreted_gpu, graph, name):
    kernel, shapes = KERNELS[name](graph)
    launches = kernel.compile_for_gpu(**{key: torch.randn(*shape) for key, shape in shapes.items()})
    check(launches)
    if name == "spmm-hubs-staged":  # the hub tile lives in shared memory: 64 hubs x 64 floats
        assert launches[0].shared_bytes >= 64 * 64 * 4


def test_gradient_and_fused_kernels_compile_for_hopper(interpreted_gpu, graph):
    """The GAT forward (two kernels) and backward, and a UDF's gradient kernels (edge sum included; with
    max, the winner scatter)."""
    feat = torch.randn(N, 2, 8, requires_grad=True)
    attn = torch.randn(2, 8, requires_grad=True)
    x, w = torch.randn(N, 8, requires_grad=True), torch.randn(8, D, requires_grad=True)
    with aot.compiling() as launches, fg.default_target("gpu"):
        ops.gat_attention(graph, feat, attn, attn).sum().backward()
        for reducer in ("sum", "max"):
            fg.spmm(graph, mlp, reducer, target="gpu")(X=x, W=w).sum().backward()
    kinds = {launch.kernel for launch in launches}
    assert len(launches) >= 8 and kinds >= {"spmm_kernel", "edge_sum_kernel", "winner_kernel"}
    check(launches, len(launches))


def test_tensor_core_kernels_compile_for_hopper(interpreted_gpu, graph):
    with aot.compiling() as launches:  # one compile job for every dtype (bf16: the interpreter's gap) and shape
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            x = torch.randn(N, 20, dtype=dtype, requires_grad=True)
            weight = torch.rand(E, dtype=dtype, requires_grad=True)
            for tile_rows in (16, 8):  # an 8-row window: Triton pads its products to the MMA's 16 rows
                ops.tc_spmm(graph, x, weight, tile_rows).sum().backward()
                ops.tc_sddmm(graph, x, x, tile_rows).sum().backward()
    assert {launch.kernel for launch in launches} == {"_block_spmm", "_block_sddmm"}
    check(launches, len(launches))


def test_grouped_product_kernels_compile_for_hopper(interpreted_gpu):
    lengths = torch.tensor([5, 0, 40, 3])
    dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
    with aot.compiling() as launches, fg.default_target("gpu"):  # one compile job for every dtype
        for dtype in dtypes:
            a = torch.randn(48, 20, dtype=dtype, requires_grad=True)
            b = torch.randn(4, 20, 9, dtype=dtype, requires_grad=True)
            ops.segment_mm(a, b, lengths).sum().backward()
    kernels = ["_segment_products", "_segment_products", "_segment_weight_gradient"] * len(dtypes)
    assert sorted(launch.kernel for launch in launches) == sorted(kernels)
    check(launches, len(launches))
