"""Functional forms for PyG users' ``forward`` code: ``featgraph.nn.functional.dropout`` in place of
``torch.nn.functional.dropout``."""

from __future__ import annotations

import torch

from ..ops import dropout as hashed_dropout
from ..ops.dropout import TORCH_DROPOUT


def dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor:
    """``torch.nn.functional.dropout``'s signature and statistics on featgraph's hashed-mask dropout: each
    element is kept independently with probability ``1 - p`` (``p`` rounded to a multiple of 2**-24) and scaled
    by ``1 / (1 - p)``, so the expectation and variance are torch's; the random stream differs (masks come
    from a hash of one seed drawn from torch's generator, so ``torch.manual_seed`` reproduces them, and the
    backward recomputes the mask instead of storing it). On the CPU in float16, bfloat16, float32 and float64;
    elsewhere, and in TorchScript (``torch.jit.script`` of a model calling it), it is torch's dropout.
    ``inplace`` writes the result into ``input`` and returns it, as torch's."""
    if torch.jit.is_scripting():
        return TORCH_DROPOUT(input, p, training, inplace)
    return _hashed(input, p, training, inplace)


@torch.jit.unused
def _hashed(input: torch.Tensor, p: float, training: bool, inplace: bool) -> torch.Tensor:
    """``dropout`` outside TorchScript, which does not compile featgraph's operator or its checks."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"input: expected a torch.Tensor, got {type(input).__name__}")
    out = hashed_dropout(input, p, training)
    if not inplace or out is input:
        return out
    return input.copy_(out)
