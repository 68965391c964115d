"""Feature rows for distributed mini-batch training: every rank holds its part's rows and serves them to the
others on request (``FeatureStore``), or, when the whole feature matrix fits in each process, every rank holds
all of it (``ReplicatedFeatures``). Both give ``fetch(ids)``: the rows of global vertex ids, in their order.

A fetch is collective: every rank of the group calls it at the same time, each with its own ids. The ranks
first all-gather how many rows each asks of each other one (gloo has no all_to_all), then each pair of
ranks exchanges the ids one asks of the other and the rows that answer them by batched isend/irecv, so
a rank receives only the rows it asked for.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from .halo import transfer
from .store import Part


class ReplicatedFeatures:
    """The whole feature matrix in every process: a fetch is a local gather, no communication."""

    def __init__(self, features: torch.Tensor) -> None:
        self.features = features
        self.bytes_received = 0  # what fetches brought from other ranks: nothing

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows of the global vertex ids ``ids``."""
        return self.features.index_select(0, ids)


class FeatureStore:
    """This rank's rows of a feature matrix split by ``owner`` (the part, i.e. rank, of every global vertex):
    ``features`` holds the rows of ``own`` (ascending global ids, those with ``owner == rank``). Every rank of
    ``group`` (None: the default group) builds one and calls ``fetch`` together. ``bytes_received`` counts the
    feature bytes fetches brought from other ranks."""

    def __init__(
        self,
        features: torch.Tensor,
        own: torch.Tensor,
        owner: torch.Tensor,
        group: dist.ProcessGroup | None = None,
        timeout: timedelta = dist.default_pg_timeout,
    ) -> None:
        self.rank, self.world_size = dist.get_rank(group), dist.get_world_size(group)
        if owner.dim() != 1 or owner.dtype != torch.int64:
            raise ValueError(f"owner must be a 1-D int64 tensor (one part per vertex), got {owner.dtype} {owner.shape}")
        if not torch.equal(torch.nonzero(owner == self.rank).flatten(), own):
            raise ValueError(f"own must be the ascending global ids whose owner is this rank ({self.rank})")
        if features.shape[0] != own.numel():
            raise ValueError(f"features must have one row per own vertex ({own.numel()}), got {tuple(features.shape)}")
        self.features, self.owner, self.group, self.timeout = features, owner, group, timeout
        self.row_of = torch.full_like(owner, -1)  # global id -> row of ``features`` (own vertices only)
        self.row_of[own] = torch.arange(own.numel())
        self.bytes_received = 0

    @classmethod
    def of(
        cls, part: Part, owner: torch.Tensor, group: dist.ProcessGroup | None = None,
        timeout: timedelta = dist.default_pg_timeout,
    ) -> FeatureStore:  # fmt: skip
        """The store of a stored part's feature rows."""
        return cls(part.features, part.own, owner, group, timeout)

    def fetch(self, ids: torch.Tensor) -> torch.Tensor:
        """The rows of the global vertex ids ``ids`` (any order, repeats allowed), from whichever rank owns
        each; every rank of the group calls it at the same time."""
        if ids.dim() != 1 or ids.dtype != torch.int64:
            raise ValueError(f"ids must be a 1-D int64 tensor of global vertex ids, got {ids.dtype} {ids.shape}")
        if ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < self.owner.numel():
            raise ValueError(f"ids holds a vertex id out of range [0, {self.owner.numel()})")
        owners = self.owner[ids]
        order = torch.argsort(owners, stable=True)
        wanted = list(ids[order].split(torch.bincount(owners, minlength=self.world_size).tolist()))
        local = wanted[self.rank]
        wanted[self.rank] = local[:0]  # own rows are read here, not sent to itself
        requests = [ids.new_empty(count) for count in self._asked([piece.numel() for piece in wanted])]
        transfer(wanted, requests, self.group, self.timeout)
        tail = self.features.shape[1:]
        answers = [self.features.new_empty((piece.numel(), *tail)) for piece in wanted]
        transfer([self.features[self.row_of[request]] for request in requests], answers, self.group, self.timeout)
        answers[self.rank] = self.features[self.row_of[local]]
        rows = self.features.new_empty((ids.numel(), *tail))
        rows[order] = torch.cat(answers)
        self.bytes_received += (ids.numel() - local.numel()) * self.features[:1].nbytes
        return rows

    def _asked(self, counts: list[int]) -> list[int]:
        """How many rows each rank asks of this one, given how many this one asks of each (``counts``)."""
        gathered = [torch.empty(self.world_size, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(gathered, torch.tensor(counts), group=self.group)
        return [int(row[self.rank]) for row in gathered]
