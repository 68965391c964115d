"""Counter-based dropout on the GPU: the CPU backend's hash, forms and rounding (``native/cpp/dropout.cpp``), so
one seed draws the same mask on either device and a run moved to the GPU keeps its masks.

Forms: ``0`` dropout (a dropped NaN or infinity is NaN, as torch's mask multiplies), ``1`` dropout of
``relu(x)`` in one pass (NaN kept), ``2`` that one's gradient from the mask and the forward's output ``gate``.
float16/bfloat16 data is scaled in float32 and rounded once, float64 in float64.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

FORMS = {"dropout": 0, "relu": 1, "relu_grad": 2}
BLOCK = 1024


@triton.jit(do_not_specialize=["n", "seed", "threshold"])  # per call: not a compile per value class
def _masked(
    x, out, gate, n, seed, threshold, scale,
    FORM: tl.constexpr, COMPUTE: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    value = tl.load(x + i, mask=inside, other=0).to(COMPUTE)
    factor = tl.load(scale)
    z = seed.to(tl.uint64) + i.to(tl.uint64) * 0x9E3779B97F4A7C15
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB
    kept = ((z ^ (z >> 31)) >> 40) >= threshold.to(tl.uint64)
    if FORM == 2:
        kept = kept & ~(tl.load(gate + i, mask=inside, other=0).to(COMPUTE) <= 0)  # a NaN output passes
        result = tl.where(kept, value * factor, tl.zeros_like(value))
    else:
        if FORM == 1:
            value = tl.where(value <= 0, tl.zeros_like(value), value)  # NaN passes, as in relu
        result = value * tl.where(kept, factor, tl.zeros_like(value))  # a dropped NaN or infinity: NaN
    tl.store(out + i, result.to(out.dtype.element_ty), mask=inside)


def masked(
    x: torch.Tensor, seed: int, threshold: int, scale: float, form: str, gate: torch.Tensor | None = None
) -> torch.Tensor:
    """One pass of ``form`` over contiguous ``x``: keep element ``i`` where the hash of (``seed``, ``i``) has its
    24 bits at or above ``threshold`` (for "relu_grad", and ``gate`` is positive or NaN), times ``scale``."""
    out = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return out
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    factor = torch.full((1,), scale, dtype=compute, device=x.device)  # a float argument would be float32
    _masked[(triton.cdiv(n, BLOCK),)](
        x, out, x if gate is None else gate, n, seed, threshold, factor,
        FORM=FORMS[form], COMPUTE=tl.float64 if compute == torch.float64 else tl.float32, BLOCK=BLOCK,
    )  # fmt: skip
    return out
