"""``dropout``: inverted dropout with a hashed mask, its gradient and shape rule side by side.

Forward draws one 62-bit seed from torch's generator (so ``torch.manual_seed`` reproduces runs) and keeps
element ``i`` when a hash of (seed, i) clears the drop probability; backward applies the same mask to the
gradient by recomputing it, so no mask is stored. With ``relu=True`` it is dropout after ReLU in one pass,
whose gradient reads the output (positive or NaN where the input was, among the kept elements) with the
recomputed mask, as ReLU's own gradient reads its output: under ``torch.compile`` Inductor then stores no
boolean ReLU mask, which its CPU code writes slowly. The masks differ from ``torch.nn.functional.dropout``'s
(a different random stream); the distribution is the same. A dropped NaN or infinity is NaN, as torch's mask
multiplies it by 0. The gradient is the same masked scaling, differentiable in turn (to any order: gradient
penalties, Hessian-vector products). The CPU and CUDA kernels draw the same mask for a seed (a run moved to the
GPU keeps its masks); float16/bfloat16 data is scaled in float32 and rounded once; other devices use torch's
dropout.
"""

from __future__ import annotations

import numbers
import struct
from typing import Any

import torch
import torch.nn.functional as F

from ..backends import cpu
from ..backends.cpu import buffers
from ..backends.cpu.dropout import CTYPES, KEEP_BITS, dropout_source
from ..native import toolchain
from ..operator import NAMESPACE, operator
from ..templates.kernel import device_target
from .checks import check_tensor
from .udfs import TORCH_TO_TE

TORCH_DROPOUT = F.dropout  # torch's own, kept at import: a user may bind featgraph's in its place afterwards
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # the gradient's own gradient lives as long as this


def probability(p: Any, name: str = "p") -> float:
    """``p`` as a float in [0, 1]: a Python or NumPy number or a 0-d real tensor, as torch's dropout takes it;
    bools and anything else are refused by ``name``."""
    if isinstance(p, torch.Tensor):
        if p.dim() != 0 or p.dtype == torch.bool or p.is_complex():
            raise TypeError(f"{name}: dropout probability must be a number or a 0-d real tensor, got a "
                            f"{p.dtype} tensor of shape {tuple(p.shape)}")  # fmt: skip
        p = p.item()
    elif isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"{name}: dropout probability must be a number in [0, 1], got {type(p).__name__} {p!r}")
    if not 0.0 <= p <= 1.0:  # NaN fails too
        raise ValueError(f"{name}: dropout probability must be a number in [0, 1], got {p!r}")
    return float(p)


def dropout(x: torch.Tensor, p: float = 0.5, training: bool = True, relu: bool = False) -> torch.Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``; identity when not
    ``training``. With ``relu``, of ``relu(x)`` (one pass). Same shape as ``x``; the caller's tensor is not
    modified."""
    check_tensor("x", x, min_dims=0)
    p = probability(p)
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
    p = probability(p)
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


def relu_dropout_grad(grad: torch.Tensor, out: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """The gradient of ``dropout(x, p, relu=True)`` with the mask of ``seed`` from its output ``out``:
    ``grad / (1 - p)`` where kept and ``out`` is positive (or NaN), else 0."""
    return masked(grad, p, seed, "relu_grad", out)


def _gradient(x: torch.Tensor | None, p: float, seed: torch.Tensor, relu: bool, *, outputs, grads, wants) -> list:
    """The same mask on the gradient (recomputed from the seed), or ReLU's and the mask's gradient at once from
    the output; the seed gets none."""
    grad = relu_dropout_grad(grads[0], outputs[0], p, int(seed)) if relu else masked(grads[0], p, int(seed))
    return [grad, None]


@operator(
    "dropout", lambda x, p, seed, relu: torch.empty_like(x, memory_format=torch.contiguous_format), _gradient,
    saves=("seed",), saves_outputs=(0,),
)  # fmt: skip
def _dropout(x: torch.Tensor, p: float, seed: torch.Tensor, relu: bool) -> torch.Tensor:
    """Dropout in training with the mask of ``seed`` (a one-element int64 tensor), of ``relu(x)`` where
    ``relu``."""
    return masked(x, p, int(seed), "relu" if relu else "dropout")


def _setup_gradient_of_gradient(ctx: Any, inputs: tuple, output: Any) -> None:
    """Keep what the gradient's gradient reads: the seed, the forward's output (ReLU's gate), p and the form."""
    _, ctx.p, seed, ctx.relu, outputs, _, _ = inputs
    ctx.save_for_backward(seed, outputs[0])


def _gradient_of_gradient(ctx: Any, grads: list[torch.Tensor | None]) -> tuple:
    """The gradient is linear in the incoming gradient with the same mask (and, after ReLU, the same gate), so its
    gradient is itself, through the same operator: differentiable to any order. The gate and the seed get
    none (the gate's is 0 almost everywhere)."""
    seed, out = ctx.saved_tensors
    grad = grads[0]
    if grad is None or grad.numel() != out.numel():  # unwanted: the backward's empty placeholder
        return None, None, None, None, [None], [None], None
    (again, _) = torch.ops.featgraph.dropout_backward(grad, ctx.p, seed, ctx.relu, [out], [grad], [True, False])
    return None, None, None, None, [None], [again], None


torch.library.register_autograd(
    f"{NAMESPACE}::dropout_backward", _gradient_of_gradient, setup_context=_setup_gradient_of_gradient, lib=_LIBRARY
)
