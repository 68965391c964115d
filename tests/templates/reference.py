"""Independent references: messages materialised with dense torch, reduced per vertex in plain Python."""

from __future__ import annotations

import torch


def reduce_messages(messages: torch.Tensor, dst: torch.Tensor, num_nodes: int, reducer: str) -> torch.Tensor:
    """out[v] = reducer over the messages of edges into v; 0 for vertices without in-edges."""
    out = torch.zeros((num_nodes, *messages.shape[1:]), dtype=messages.dtype)
    for v in range(num_nodes):
        mine = messages[dst == v]
        if mine.shape[0] == 0:
            continue
        if reducer == "sum":
            out[v] = mine.sum(0)
        elif reducer == "mean":
            out[v] = mine.mean(0)
        elif reducer == "max":
            out[v] = mine.max(0).values
        elif reducer == "min":
            out[v] = mine.min(0).values
        else:
            out[v] = torch.logsumexp(mine, 0)
    return out
