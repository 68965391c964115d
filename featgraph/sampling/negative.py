"""Negative examples for link prediction, as PyG's ``NegativeSampling``: vertices drawn with replacement,
uniformly or in proportion to a per-vertex weight. Like PyG's, the draws are not checked against the graph,
so a negative pair may be a true edge; on large sparse graphs that is rare and checking costs a lookup each.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Literal

import torch

MODES = ("binary", "triplet")
REDRAWS = 5  # rounds of drawing again the temporal negatives that are later than their seed edge


@dataclass(frozen=True)
class NegativeSampling:
    """``mode`` "binary": ``ceil(amount * positives)`` random (source, destination) pairs beside the positive
    edges, labelled 0; "triplet": ``amount`` (an int) random destinations per positive edge's source.
    ``src_weight`` / ``dst_weight``: per-vertex weights to draw sources / destinations in proportion to
    (None: uniform)."""

    mode: str
    amount: float = 1
    src_weight: torch.Tensor | None = None
    dst_weight: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"neg_sampling mode must be 'binary' or 'triplet', got {self.mode!r}")
        amount = self.amount
        if isinstance(amount, bool) or not isinstance(amount, numbers.Real) or not 0 < amount < math.inf:
            raise ValueError(f"neg_sampling amount must be a positive number, got {amount!r}")
        if self.mode == "triplet":
            if amount != math.ceil(amount):
                raise ValueError(f"neg_sampling amount must be an int in 'triplet' mode, got {amount!r}")
            object.__setattr__(self, "amount", int(amount))

    def count(self, positives: int) -> int:
        """Negatives drawn for ``positives`` positive edges (per endpoint in "binary" mode)."""
        return math.ceil(positives * self.amount)

    def draw(
        self, count: int, endpoint: Literal["src", "dst"], num_nodes: int, generator: torch.Generator
    ) -> torch.Tensor:
        """``count`` vertex ids of a graph of ``num_nodes`` vertices, with replacement, by ``endpoint``'s
        weight (uniform without one)."""
        weight = self.src_weight if endpoint == "src" else self.dst_weight
        if weight is None:
            return torch.randint(num_nodes, (count,), generator=generator)
        return torch.multinomial(weight, count, replacement=True, generator=generator)

    def draw_before(
        self,
        limit: torch.Tensor,
        node_time: torch.Tensor,
        endpoint: Literal["src", "dst"],
        generator: torch.Generator,
    ) -> torch.Tensor:
        """One vertex per entry of ``limit`` whose ``node_time`` is at most it (temporal negatives, as PyG): draws
        that break it are drawn again up to ``REDRAWS`` times, then take the earliest vertex."""
        drawn = self.draw(limit.numel(), endpoint, node_time.numel(), generator)
        late = node_time[drawn] > limit
        for _ in range(REDRAWS):
            if not bool(late.any()):
                break
            drawn[late] = self.draw(int(late.sum()), endpoint, node_time.numel(), generator)
            late = node_time[drawn] > limit
        drawn[late] = int(node_time.argmin())
        return drawn


def checked_negative_sampling(value: Any, ratio: Any, num_nodes: int | tuple[int, int]) -> NegativeSampling | None:
    """PyG's ``neg_sampling`` for a graph of ``num_nodes`` vertices (a typed seed edge's: (source type's,
    destination type's)): None, a mode name, a dict of
    ``NegativeSampling``'s fields, or an object with them as attributes (PyG's ``NegativeSampling``, read
    without importing PyG). ``ratio`` is PyG's deprecated ``neg_sampling_ratio``: "binary" negatives of that
    amount (0 or None: none)."""
    if ratio is not None and ratio != 0:
        if value is not None:
            raise ValueError("pass neg_sampling or neg_sampling_ratio (its deprecated form), not both")
        value = {"mode": "binary", "amount": ratio}
    if value is None:
        return None
    if isinstance(value, str):
        fields: dict[str, Any] = {"mode": value}
    elif isinstance(value, dict):
        unknown = sorted(set(value) - {"mode", "amount", "src_weight", "dst_weight"})
        if unknown or "mode" not in value:
            raise ValueError(
                f"neg_sampling as a dict takes mode, amount, src_weight and dst_weight, got keys {sorted(value)}"
            )
        fields = dict(value)
    elif hasattr(value, "mode"):
        names = ("mode", "amount", "src_weight", "dst_weight")
        fields = {name: getattr(value, name) for name in names if hasattr(value, name)}
    else:
        raise TypeError(
            f"neg_sampling must be None, 'binary', 'triplet', a dict or a NegativeSampling, got {type(value).__name__}"
        )
    mode = fields["mode"]
    fields["mode"] = getattr(mode, "value", mode)  # PyG's NegativeSamplingMode enum
    counts = num_nodes if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)  # sources', destinations'
    for name, count in zip(("src_weight", "dst_weight"), counts, strict=True):
        if fields.get(name) is not None:
            fields[name] = _checked_weight(fields[name], f"neg_sampling {name}", count)
    return NegativeSampling(**fields)


def _checked_weight(weight: Any, name: str, num_nodes: int) -> torch.Tensor:
    """``weight`` as a float64 CPU vector of one finite, non-negative entry per vertex, not all zero."""
    tensor = torch.as_tensor(weight)
    if tensor.dtype == torch.bool or tensor.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {tensor.dtype}")
    if tensor.shape != (num_nodes,):
        raise ValueError(f"{name} must have one entry per vertex, shape ({num_nodes},), got {tuple(tensor.shape)}")
    tensor = tensor.detach().to(device="cpu", dtype=torch.float64)
    if not bool(torch.isfinite(tensor).all()) or bool((tensor < 0).any()) or not bool((tensor > 0).any()):
        raise ValueError(f"{name} must be finite and non-negative with a positive entry")
    return tensor


@dataclass(frozen=True)
class GlobalUniformNegatives:
    """DGL's ``GlobalUniform`` negatives for edge-prediction batches: ``k`` per positive edge, each a (source,
    destination) pair drawn uniformly over the whole relation that is not one of its edges, nor a self loop
    where ``exclude_self_loops`` (on a relation from one vertex set to itself), and no pair twice where not
    ``replace``. Draws are made in rounds, as DGL's rejection sampling: a batch may get fewer pairs on a dense
    relation."""

    k: int
    exclude_self_loops: bool = True
    replace: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, numbers.Integral) or self.k < 1:
            raise ValueError(f"k must be an int >= 1, got {self.k!r}")
        for name in ("exclude_self_loops", "replace"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {getattr(self, name)!r}")

    def pairs(
        self, positives: int, sizes: tuple[int, int], edge_keys: torch.Tensor, same_set: bool, generator: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Up to ``k * positives`` pairs of a relation of ``sizes`` (sources, destinations) vertices whose edges'
        keys ``src * sizes[1] + dst`` are ``edge_keys`` (sorted); ``same_set``: sources and destinations are one
        vertex set, so self loops count as such."""
        count, (num_src, num_dst) = self.k * positives, sizes
        found = torch.zeros(0, dtype=torch.int64)
        for _ in range(REDRAWS + 1):
            missing = count - found.numel()
            if missing <= 0 or num_src * num_dst == 0:
                break
            keys = torch.randint(num_src * num_dst, (2 * missing,), generator=generator)
            keep = torch.ones_like(keys, dtype=torch.bool)
            if edge_keys.numel():
                at = torch.searchsorted(edge_keys, keys).clamp_max(edge_keys.numel() - 1)
                keep &= edge_keys[at] != keys
            if self.exclude_self_loops and same_set:
                keep &= keys // num_dst != keys % num_dst
            found = torch.cat([found, keys[keep]])
            if not self.replace:
                found = found[first_occurrences(found)]
        found = found[:count]
        return found // num_dst, found % num_dst


def first_occurrences(values: torch.Tensor) -> torch.Tensor:
    """The positions in ``values`` of each value's first occurrence, in order."""
    unique, inverse = torch.unique(values, return_inverse=True)
    first = torch.full((unique.numel(),), values.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, inverse, torch.arange(values.numel()), "amin")
    return first.sort().values
