"""The halo exchange: each rank receives the rows of its halo vertices from their owners, and in backward
sends their gradients back, where the owners add them to their own rows' gradients.

Point-to-point over torch.distributed (``batch_isend_irecv``; gloo has no all_to_all): each pair of ranks
exchanges exactly the rows one needs from the other, so a rank sends and receives its cut's rows only,
where an all-gather of every rank's boundary rows would deliver all of them to everyone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from .store import Part


@dataclass(frozen=True)
class HaloPlan:
    """What one exchange sends to and receives from each rank of ``group`` (None: the default group, whose
    ranks are the parts), and how long it waits for them: gloo's point-to-point transfers wait for ever
    unless told, so a rank that stops answering would hang the others."""

    send_index: list[torch.Tensor]  # per rank q: own rows q's halo holds, in q's order
    recv_counts: list[int]  # per rank q: halo rows owned by q, which come first in q's rank order
    num_own: int
    group: dist.ProcessGroup | None = None
    timeout: timedelta = dist.default_pg_timeout

    @classmethod
    def of(
        cls, part: Part, group: dist.ProcessGroup | None = None, timeout: timedelta = dist.default_pg_timeout
    ) -> HaloPlan:
        """The plan of a stored part."""
        return cls(part.send_index, part.recv_counts, part.num_own, group, timeout)

    def rows_moved(self) -> tuple[int, int]:
        """(rows sent, rows received) by one forward exchange; backward moves as many the other way."""
        return sum(index.numel() for index in self.send_index), sum(self.recv_counts)


def exchange(x: torch.Tensor, plan: HaloPlan, with_own: bool = False) -> torch.Tensor:
    """The halo rows (num_halo, ...) of the own rows ``x`` (num_own, ...) that every rank passes in at the
    same time: rows owned by rank 0 first, then rank 1, ... (the part's halo order). With ``with_own``, the
    part's source rows: ``x``'s rows then the halo's, received in place rather than concatenated after.
    Differentiable: the gradient of a halo row goes back to its owner's row."""
    if x.shape[0] != plan.num_own:
        raise ValueError(f"x must have one row per own vertex ({plan.num_own}), got {tuple(x.shape)}")
    return _HaloExchange.apply(x, plan, with_own)


def transfer(
    outgoing: list[torch.Tensor],
    incoming: list[torch.Tensor],
    group: dist.ProcessGroup | None = None,
    timeout: timedelta = dist.default_pg_timeout,
) -> None:
    """Send ``outgoing[q]`` to and receive ``incoming[q]`` from each rank q of ``group`` (empty ones skipped:
    both sides know the counts), failing after ``timeout``."""
    ops = []
    for peer, (send, recv) in enumerate(zip(outgoing, incoming, strict=True)):
        if send.numel():
            ops.append(dist.P2POp(dist.isend, send.contiguous(), peer, group))
        if recv.numel():
            ops.append(dist.P2POp(dist.irecv, recv, peer, group))
    if ops:
        for request in dist.batch_isend_irecv(ops):
            request.wait(timeout)


class _HaloExchange(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, plan: HaloPlan, with_own: bool) -> torch.Tensor:  # noqa: D102
        ctx.plan, ctx.with_own = plan, with_own
        first = plan.num_own if with_own else 0
        out = x.new_empty((first + sum(plan.recv_counts), *x.shape[1:]))
        if with_own:
            out[:first] = x
        incoming = list(out[first:].split(plan.recv_counts))  # contiguous row ranges of ``out``
        transfer([x[index] for index in plan.send_index], incoming, plan.group, plan.timeout)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # noqa: D102
        plan = ctx.plan
        first = plan.num_own if ctx.with_own else 0
        tail = grad.shape[1:]
        incoming = [grad.new_empty((index.numel(), *tail)) for index in plan.send_index]
        transfer(list(grad[first:].split(plan.recv_counts)), incoming, plan.group, plan.timeout)
        grad_x = grad[:first].clone() if ctx.with_own else grad.new_zeros((plan.num_own, *tail))
        for index, rows in zip(plan.send_index, incoming, strict=True):
            grad_x.index_add_(0, index, rows)
        return grad_x, None, None
