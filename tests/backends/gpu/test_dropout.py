"""The Triton dropout kernel draws the CPU kernel's mask: same seed, same elements kept, same rounding."""

from __future__ import annotations

import pytest
import torch

import featgraph as fg
from featgraph.ops import dropout
from featgraph.ops.dropout import dropout_with_seed

SAME = {"rtol": 0, "atol": 0, "equal_nan": True}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shape", [(0, 3), (1,), (37, 29), (5003,)])
def test_triton_dropout_is_the_cpu_kernels_mask_forward_and_backward(gpu, dtype, relu, shape):
    """Forward and gradient on the GPU target equal the CPU kernel's for the same seed, NaN and infinities
    included, with an odd element count; the caller's tensor is left alone."""
    gen = torch.Generator().manual_seed(sum(shape) + 1)
    x = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    if x.numel() >= 4:
        x.view(-1)[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0]).to(dtype)
    grad = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
    results = []
    for target, device in (("gpu", gpu), ("cpu", torch.device("cpu"))):
        leaf = x.to(device).requires_grad_()
        before = leaf.detach().clone()
        with fg.default_target(target):
            out = dropout_with_seed(leaf, 0.3, 2**61 + 12345, relu=relu)
            out.backward(grad.to(device))
        torch.testing.assert_close(leaf.detach(), before, **SAME)
        results.append((out.detach().cpu(), leaf.grad.cpu()))
    (got, got_grad), (want, want_grad) = results
    # Triton's interpreter truncates float32 to bfloat16 where a GPU rounds to nearest: one unit apart there
    same = {**SAME, "rtol": 2**-7} if gpu.type == "cpu" and dtype == torch.bfloat16 else SAME
    for a, b in ((got, want), (got_grad, want_grad)):
        assert torch.equal(a == 0, b == 0)  # the same elements kept
        torch.testing.assert_close(a, b, **same)
    if x.numel() > 1000:
        kept = (want != 0).double().mean().item()
        assert abs(kept - 0.7 * (0.5 if relu else 1.0)) < 0.05


def test_dropout_on_the_gpu_is_seeded_by_torch_as_on_the_cpu(gpu):
    """``dropout`` draws its seed from torch's CPU generator on either device: the same ``torch.manual_seed``
    gives the same mask on the GPU target as on the CPU."""
    x = torch.rand(129, 65) + 0.5
    results = []
    for target, device in (("gpu", gpu), ("cpu", torch.device("cpu"))):
        torch.manual_seed(11)
        with fg.default_target(target):
            results.append(dropout(x.to(device), 0.6).cpu())
    assert torch.equal(*results)
    assert 0.3 < (results[0] != 0).double().mean().item() < 0.5
