"""``dropout``: inverted dropout with a hashed mask, its gradient and shape rule side by side.

Forward draws one 62-bit seed from torch's generator (so ``torch.manual_seed`` reproduces runs) and keeps
element ``i`` when a hash of (seed, i) clears the drop probability; backward applies the same mask to the
gradient by recomputing it, so no mask is stored. With ``relu=True`` it is dropout after ReLU in one pass,
whose gradient reads the output (positive exactly where the input was positive and kept), as ReLU's own
gradient would: under ``torch.compile`` Inductor then stores no boolean ReLU mask, which its CPU code writes
slowly. The masks differ from ``torch.nn.functional.dropout``'s (a different random stream); the
distribution is the same. The CPU and CUDA kernels draw the same mask for a seed (a run moved to the GPU keeps
its masks); float16/bfloat16 data is scaled in float32 and rounded once; other devices use torch's dropout.
"""

from __future__ import annotations

import struct

import torch
import torch.nn.functional as F

from ..backends import cpu
from ..backends.cpu import buffers
from ..backends.cpu.dropout import CTYPES, KEEP_BITS, dropout_source
from ..native import toolchain
from ..operator import operator
from ..templates.kernel import device_target
from .checks import check_tensor
from .udfs import TORCH_TO_TE

TORCH_DROPOUT = F.dropout  # torch's own, kept at import: a user may bind featgraph's in its place afterwards


def dropout(x: torch.Tensor, p: float = 0.5, training: bool = True, relu: bool = False) -> torch.Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity when not
    ``training``. With ``relu``, of ``relu(x)`` (one pass). Same shape as ``x``; the caller's tensor is not
    modified."""
    check_tensor("x", x, min_dims=0)
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"p: dropout probability must be a number in [0, 1], got {p!r}")
    if not training or p == 0.0:
        return F.relu(x) if relu else x
    if p == 1.0:
        return x * 0.0
    dtype = TORCH_TO_TE.get(x.dtype)
    if x.device.type not in ("cpu", "cuda") or dtype not in CTYPES:
        return TORCH_DROPOUT(F.relu(x) if relu else x, p, training)
    return _dropout(x, p, torch.randint(0, 2**62, (1,)), relu)


def dropout_with_seed(x: torch.Tensor, p: float, seed: int | torch.Tensor, relu: bool = False) -> torch.Tensor:
    """``dropout`` in training with a given seed (an int or a one-element int64 tensor, which traced code keeps
    as a tensor): the mask ``te.keep(seed, element, p)`` draws in fused kernels, so a recomputation reproduces
    a fused kernel's dropout exactly. float16/bfloat16/float32/float64 on the CPU or a CUDA device."""
    return _dropout(x, p, seed if isinstance(seed, torch.Tensor) else torch.tensor([seed]), relu)


def masked(
    x: torch.Tensor, p: float, seed: int, form: str = "dropout", gate: torch.Tensor | None = None
) -> torch.Tensor:
    """One pass of ``dropout_source``'s ``form`` over ``x`` with the mask of ``seed`` and scale ``1 / (1 - p)``
    (forward and backward alike; ``gate``: the forward's output, for "relu_grad"), by the Triton kernel where
    the target is "gpu" (a CUDA tensor, or ``default_target("gpu")`` under Triton's interpreter)."""
    x = x.contiguous()
    threshold = round(p * (1 << KEEP_BITS))
    gate = None if gate is None else gate.contiguous()
    if device_target(x.device) == "gpu":
        from ..backends.gpu.dropout import masked as gpu_masked  # imports triton, which only the GPU needs

        return gpu_masked(x, seed, threshold, 1.0 / (1.0 - p), form, gate)
    out = buffers.empty(x.shape, x.dtype)  # pooled: fresh pages would cost a fault each
    kernel = cpu.compile_source(dropout_source(TORCH_TO_TE[x.dtype], form))
    (scale_bits,) = struct.unpack("<q", struct.pack("<d", 1.0 / (1.0 - p)))
    cpu.launch(kernel, [x, out, gate], [x.numel(), seed, threshold, toolchain.num_threads(), scale_bits])
    return out


def relu_dropout_grad(grad: torch.Tensor, out: torch.Tensor, p: float) -> torch.Tensor:
    """The gradient of ``dropout(x, p, relu=True)`` from its output ``out``: ``grad / (1 - p)`` where ``out``
    is positive, else 0."""
    return masked(grad, p, 0, "relu_grad", out)


def _gradient(x: torch.Tensor | None, p: float, seed: torch.Tensor, relu: bool, *, outputs, grads, wants) -> list:
    """The same mask on the gradient (recomputed from the seed), or ReLU's and the mask's gradient at once from
    the output; the seed gets none."""
    grad = relu_dropout_grad(grads[0], outputs[0], p) if relu else masked(grads[0], p, int(seed))
    return [grad, None]


@operator(
    "dropout", lambda x, p, seed, relu: torch.empty_like(x, memory_format=torch.contiguous_format), _gradient,
    saves=("seed",), saves_outputs=(0,),
)  # fmt: skip
def _dropout(x: torch.Tensor, p: float, seed: torch.Tensor, relu: bool) -> torch.Tensor:
    """Dropout in training with the mask of ``seed`` (a one-element int64 tensor), of ``relu(x)`` where
    ``relu``."""
    return masked(x, p, int(seed), "relu" if relu else "dropout")
