"""``Dropout``: a drop-in for ``torch.nn.Dropout`` on featgraph's hashed-mask dropout."""

from __future__ import annotations

import torch

from .functional import dropout


class Dropout(torch.nn.Dropout):
    """``torch.nn.Dropout`` (same constructor, attributes, state dict and ``repr``) whose forward is
    ``featgraph.nn.functional.dropout``: the same expectation and variance, a different random stream, and no
    stored mask. On small graphs torch's dropout of the input features is most of an epoch on the CPU
    (``featgraph bench dropout`` measures both)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return dropout(input, self.p, self.training, self.inplace)
