"""The Triton expression lowering: float64 kernels compute in float64 throughout, constants included."""

from __future__ import annotations

import torch

import featgraph as fg
from featgraph import ops, te
from tests.conftest import random_edges

F64 = torch.float64


def test_float64_constants_keep_their_precision(gpu):
    """Constants that float32 cannot hold (0.2; the dropout factor 1 / 0.9) arrive exactly: a select of two
    constants and the keep factor are float64 like the CPU backend's."""
    n, e = 9, 30
    src, dst = random_edges(n, e, seed=6)
    X, seed = te.placeholder((n, 1), "float64", "X"), te.placeholder((1,), "int64", "SEED")

    def udf(s, t, k):
        return te.compute((2,), lambda i: te.where(X[s, 0] > 0, 1.0, 0.2) * te.keep(seed[0], k * 2 + i, 0.1))

    x = torch.randn(n, 1, dtype=F64)
    inputs = {"X": x, "SEED": torch.tensor([123])}
    kernel = fg.sddmm(fg.Graph(src.to(gpu), dst.to(gpu), n), udf, target="gpu")
    got = kernel(**{name: t.to(gpu) for name, t in inputs.items()})
    want = fg.sddmm(fg.Graph(src, dst, n), udf, target="cpu")(**inputs)
    factor = torch.where(x[src] > 0, 1.0, torch.tensor(0.2, dtype=F64)) * (1.0 / 0.9)
    assert torch.equal(want, torch.where(want == 0, 0.0, factor.expand(e, 2)))  # the CPU: exact float64
    torch.testing.assert_close(got.cpu(), want, rtol=1e-15, atol=0)


def test_gat_attention_float64_backward_matches_cpu(gpu):
    """The fused GAT kernels' leaky-relu slope (0.2 in a select) and dropout factor stay float64: the
    gradients agree with the CPU kernels' to float64 rounding."""
    n, heads, d = 12, 2, 3
    src, dst = random_edges(n, 50, seed=3)
    gen = torch.Generator().manual_seed(4)
    inputs = [torch.randn(shape, generator=gen, dtype=F64) for shape in ((n, heads, d), (heads, d), (heads, d))]
    results = []
    for target, device in (("gpu", gpu), ("cpu", torch.device("cpu"))):
        leaves = [t.to(device).requires_grad_() for t in inputs]
        torch.manual_seed(5)  # the dropout seed
        with fg.default_target(target):
            out = ops.gat_attention(fg.Graph(src.to(device), dst.to(device), n), *leaves, dropout=0.1, training=True)
            grads = torch.autograd.grad(out.square().sum(), leaves)
        results.append([t.detach().cpu() for t in (out, *grads)])
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
