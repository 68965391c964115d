"""The CPU prelude's vectorisable exp against torch's, through a compiled kernel."""

import math

import torch

import featgraph as fg
from featgraph import te


def _exp_kernel(values: torch.Tensor, fn) -> torch.Tensor:
    """``fn`` applied to each value, as an SDDMM over one edge per value (one kernel, float32)."""
    m = values.numel()
    g = fg.Graph(torch.zeros(m, dtype=torch.int64), torch.zeros(m, dtype=torch.int64), 1)
    A = te.placeholder((m, 1), name="A")
    return fg.sddmm(g, lambda s, t, e: te.compute((1,), lambda i: fn(A[e, 0])))(A=values.view(-1, 1)).view(-1)


def test_exp_is_within_one_ulp_of_the_exact_value_over_float32s_range():
    """Subnormal results included (2^128 and 2^-149 need the scale split in two powers of two)."""
    spread = torch.randn(50_000, generator=torch.Generator().manual_seed(0)) * 10  # the same values in any test order
    x = torch.cat([torch.linspace(-103.9, 88.72, 200_001), spread, torch.tensor([0.0, -0.0])])
    ours, exact = _exp_kernel(x, te.exp).double(), torch.exp(x.double())
    ulp = torch.ldexp(torch.ones_like(exact), torch.frexp(exact).exponent - 24).clamp(min=2.0**-149)
    assert ((ours - exact).abs() <= ulp).all()


def test_exp_keeps_the_limits():
    x = torch.tensor([float("-inf"), -1e30, -104.5, 88.8, 1e30, float("inf"), float("nan")])
    ours = _exp_kernel(x, te.exp)
    assert ours[:3].eq(0).all() and ours[3:6].eq(math.inf).all() and ours[6].isnan()


def test_sigmoid_uses_it_and_saturates():
    x = torch.cat([torch.linspace(-30, 30, 10_001), torch.tensor([float("-inf"), float("inf")])])
    torch.testing.assert_close(_exp_kernel(x, te.sigmoid), torch.sigmoid(x), rtol=3e-7, atol=1e-7)
