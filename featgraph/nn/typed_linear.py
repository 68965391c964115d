"""``TypedLinear``: DGL's typed linear layer, ``out[i] = x[i] @ W[x_type[i]]``, with DGL's parameters (``W``, and
``coeff`` for the basis decomposition) and its three regularizers, on featgraph's grouped products.

DGL's layer multiplies by ``gather_mm`` / ``segment_mm`` and, for the block-diagonal ("bdd") decomposition,
gathers one weight per row (an N x blocks x in/blocks x out/blocks tensor) for a batched product. Here every
form is one ``ops.gather_mm`` (or ``ops.segment_mm`` on rows sorted by type): "bdd" treats each row's blocks
as rows of their own whose type is (row type, block), so no per-row weight is ever built.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..ops import gather_mm, segment_mm
from ..ops.checks import check_tensor
from ..ops.grouped_mm import _integer_vector

REGULARIZERS = (None, "basis", "bdd")


class TypedLinear(nn.Module):
    """DGL's ``TypedLinear(in_size, out_size, num_types, regularizer=None, num_bases=None)``: a weight per type
    (``regularizer=None``), weights combined from ``num_bases`` shared bases (``"basis"``), or block-diagonal
    weights of ``num_bases`` blocks (``"bdd"``); ``forward(x, x_type, sorted_by_type=False)``. A DGL state dict
    loads as it is."""

    def __init__(
        self, in_size: int, out_size: int, num_types: int, regularizer: str | None = None, num_bases: int | None = None
    ) -> None:
        super().__init__()
        if regularizer not in REGULARIZERS:
            raise ValueError(f"regularizer: expected one of {REGULARIZERS}, got {regularizer!r}")
        if regularizer is not None and (num_bases is None or num_bases < 1):
            raise ValueError(f"num_bases: the {regularizer!r} regularizer needs a positive count, got {num_bases!r}")
        self.in_size, self.out_size, self.num_types = in_size, out_size, num_types
        self.regularizer, self.num_bases = regularizer, num_bases
        if regularizer is None:
            self.W = nn.Parameter(torch.empty(num_types, in_size, out_size))
        elif regularizer == "basis":
            self.W = nn.Parameter(torch.empty(num_bases, in_size, out_size))
            self.coeff = nn.Parameter(torch.empty(num_types, num_bases))
        else:
            if in_size % num_bases or out_size % num_bases:
                raise ValueError(
                    f"num_bases: in_size {in_size} and out_size {out_size} must be multiples of it, got {num_bases}"
                )
            self.submat_in, self.submat_out = in_size // num_bases, out_size // num_bases
            self.W = nn.Parameter(torch.empty(num_types, num_bases * self.submat_in * self.submat_out))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """DGL's initialisation: uniform in +-1/sqrt(fan-in) (a block's fan-in for "bdd"), Xavier for ``coeff``."""
        fan_in = self.submat_in if self.regularizer == "bdd" else self.in_size
        with torch.no_grad():
            nn.init.uniform_(self.W, -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
            if self.regularizer == "basis":
                nn.init.xavier_uniform_(self.coeff, gain=nn.init.calculate_gain("relu"))

    def get_weight(self) -> torch.Tensor:
        """The weights as DGL's ``get_weight`` gives them: (types, in, out), or for "bdd" (types, blocks x
        in/blocks x out/blocks)."""
        if self.regularizer == "basis":
            return (self.coeff @ self.W.view(self.num_bases, -1)).view(self.num_types, self.in_size, self.out_size)
        return self.W

    def forward(self, x: torch.Tensor, x_type: torch.Tensor, sorted_by_type: bool = False) -> torch.Tensor:
        """``x`` (N, in_size) and a type id per row; ``sorted_by_type`` (rows grouped by ascending type) lets the
        product run segment by segment."""
        check_tensor("x", x, dims=2)
        if x.shape[1] != self.in_size:
            raise ValueError(f"x: expected {self.in_size} features per row, got shape {tuple(x.shape)}")
        x_type = _integer_vector("x_type", torch.as_tensor(x_type, device=x.device))  # gather_mm's check: no bools
        if x_type.numel() != x.shape[0]:
            raise ValueError(
                f"x_type: expected {x.shape[0]} integer type ids, got {x_type.dtype} {tuple(x_type.shape)}"
            )
        if x_type.numel() and not 0 <= int(x_type.min()) <= int(x_type.max()) < self.num_types:
            raise IndexError(
                f"x_type: type ids must lie in [0, {self.num_types}), got {int(x_type.min())}..{int(x_type.max())}"
            )
        x_type = x_type.to(torch.int64)
        if self.regularizer == "bdd":
            blocks = self.num_bases
            weight = self.W.view(self.num_types * blocks, self.submat_in, self.submat_out)
            block_type = (x_type.unsqueeze(1) * blocks + torch.arange(blocks, device=x.device)).reshape(-1)
            rows = gather_mm(x.reshape(-1, self.submat_in), weight, block_type)
            return rows.view(x.shape[0], self.out_size)
        weight = self.get_weight()
        if sorted_by_type:
            if x_type.numel() > 1 and bool((x_type[1:] < x_type[:-1]).any()):
                raise ValueError("x_type: sorted_by_type=True, but the type ids are not in ascending order")
            return segment_mm(x, weight, torch.bincount(x_type, minlength=self.num_types).cpu())
        return gather_mm(x, weight, x_type)

    def extra_repr(self) -> str:
        bases = "" if self.regularizer is None else f", regularizer={self.regularizer!r}, num_bases={self.num_bases}"
        return f"in_size={self.in_size}, out_size={self.out_size}, num_types={self.num_types}{bases}"
