"""``LinkNeighborLoader``: PyG's loader of the same name, for link prediction on graphs with one vertex type,
on featgraph's compiled sampler.

A batch takes ``batch_size`` seed edges of ``edge_label_index`` and, with ``neg_sampling``, random negative
ones; the endpoints of all of them, each once and in ascending id order (PyG's ``unique``), are the seeds of
one neighbour sample laid out as ``NeighborLoader``'s batches (``n_id`` seeds first, ``edge_index``, ``e_id``,
the per-vertex and per-edge tensors gathered, the per-hop counts). ``input_id`` holds the seed edges'
positions in ``edge_label_index``; binary mode (and no negative sampling) adds ``edge_label_index`` in batch
ids (positives, then negatives) and ``edge_label``; triplet mode ``src_index``, ``dst_pos_index`` and
``dst_neg_index`` (``[B]``, or ``[B, amount]`` when ``amount > 1``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..sampling.negative import checked_negative_sampling
from ..sampling.temporal import checked_times
from .base import SeedLoader
from .neighbor_loader import Batch, flat_attrs, pyg_data_class
from .source import checked_batching_flags, checked_flag, checked_subgraph_type, loader_source

# a PyG Data's own supervision values, which PyG's link batches replace or drop, never slice
LINK_KEYS = ("edge_label_index", "edge_label", "edge_label_time")


class LinkNeighborLoader(SeedLoader[Any]):
    """Mini-batches of seed edges ``edge_label_index`` (a ``(2, N)`` tensor of vertex ids; None: every edge of
    ``data``) with ``num_neighbors[h]`` in-neighbours sampled per vertex at hop ``h`` around their endpoints,
    PyG's ``LinkNeighborLoader`` interface and batch layout.

    ``edge_label``: one label per seed edge (None: ones when negatives are drawn, else no labels); binary
    negatives are labelled 0, and labels starting at 0 are shifted up by one, as PyG does. ``neg_sampling``:
    None, "binary", "triplet", a dict or an object with ``mode``, ``amount``, ``src_weight`` and
    ``dst_weight`` (PyG's ``NegativeSampling``); ``neg_sampling_ratio`` its deprecated binary form.
    ``subgraph_type``: "directional" (the sampled edges) or "bidirectional" (each also reversed, per-hop counts
    dropped, as PyG). ``transform`` is applied to each batch. ``is_sorted`` and ``filter_per_worker`` change
    only how PyG builds a batch, not the batch, and are accepted. ``disjoint``: a subgraph per endpoint (and
    negative), PyG's ``batch`` vector naming each vertex's seed edge, the seeds first and unmerged. Temporal
    sampling (``edge_label_time``, ``time_attr``, ``temporal_strategy`` other than "uniform"), the induced subgraph
    (``subgraph_type="induced"``, ``directed=False``), ``transform_sampler_output`` and a custom
    ``neighbor_sampler`` are refused by name. The other arguments are ``NeighborLoader``'s; ``seed`` also fixes
    the negatives.
    """

    def __init__(
        self,
        data: Any,
        num_neighbors: Sequence[int],
        edge_label_index: Any = None,
        edge_label: Any = None,
        edge_label_time: Any = None,
        replace: bool = False,
        subgraph_type: Any = "directional",
        disjoint: bool = False,
        temporal_strategy: str = "uniform",
        neg_sampling: Any = None,
        neg_sampling_ratio: float | None = None,
        time_attr: str | None = None,
        weight_attr: str | None = None,
        transform: Callable[[Any], Any] | None = None,
        transform_sampler_output: Callable[[Any], Any] | None = None,
        is_sorted: bool = False,
        filter_per_worker: bool | None = None,
        neighbor_sampler: Any = None,
        directed: bool = True,
        *,
        batch_size: int = 1,
        shuffle: bool = False,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        drop_last: bool = False,
        pin_memory: bool = False,
    ) -> None:
        refused = {
            "edge_label_time": (edge_label_time is not None and time_attr is None, "it needs time_attr"),
            "directed": (directed is not True, "directed=False (PyG's induced subgraph) is not supported"),
            "transform_sampler_output": (transform_sampler_output is not None, "no sampler output: use transform"),
            "neighbor_sampler": (neighbor_sampler is not None, "featgraph's compiled sampler is the only one"),
        }  # fmt: skip
        for name, (given, reason) in refused.items():
            if given:
                raise ValueError(f"{name} is given: {reason}")
        bidirectional = checked_subgraph_type(subgraph_type)
        checked_batching_flags(is_sorted, filter_per_worker)
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        source = loader_source(data)
        graph_attrs = {key: value for key, value in source.graph_attrs.items() if key not in LINK_KEYS}
        source = dataclasses.replace(source, graph_attrs=graph_attrs)
        num_nodes = source.graph.num_nodes
        seed_edges = _checked_edge_label_index(edge_label_index, source.graph)
        self.neg_sampling = checked_negative_sampling(neg_sampling, neg_sampling_ratio, num_nodes)
        self.edge_label = _checked_edge_label(edge_label, seed_edges.shape[0], self.neg_sampling)
        super().__init__(
            source, num_neighbors, "num_neighbors", batch_size, shuffle, seed_edges, replace, seed, num_workers,
            prefetch, drop_last, weight_attr, pin_memory=pin_memory, time_attr=time_attr,
            temporal_strategy=temporal_strategy,
        )  # fmt: skip
        self.edge_label_time = None
        if edge_label_time is not None:
            self.edge_label_time = checked_times(edge_label_time, seed_edges.shape[0], "edge_label_time")
        self.bidirectional = bidirectional
        self.disjoint = checked_flag(disjoint, "disjoint")
        self.transform = transform
        self.batch_class = pyg_data_class() or Batch

    @property
    def edge_label_index(self) -> torch.Tensor:
        """The seed edges, ``(2, N)``."""
        return self.inputs.t()

    def _batch(self, positions: torch.Tensor, seed: int) -> Any:
        src, dst = self.inputs[positions].unbind(1)
        positives = positions.numel()
        times = self._seed_edge_times(positions, src, dst)
        negative = self.neg_sampling
        generator = torch.Generator().manual_seed(seed)
        if negative is not None:
            count = negative.count(positives)
            if negative.mode == "binary":
                src = torch.cat([src, self._negatives(count, "src", times, generator)])
            dst = torch.cat([dst, self._negatives(count, "dst", times, generator)])
        ends = torch.cat([src, dst])
        attrs: dict[str, Any]
        if self.temporal is not None:  # always disjoint, as PyG: each endpoint's subgraph under its edge's time
            inverse = torch.arange(ends.numel())
            end_times = times.repeat(-(-ends.numel() // positives))[: ends.numel()] if positives else times
            attrs = flat_attrs(self.source, self.temporal.sample(ends, end_times, seed), self.bidirectional)
            attrs["batch"] = attrs["batch"] % max(positives, 1)
        elif self.disjoint:  # a subgraph per endpoint, each seed edge's (and its negatives') under one batch id
            inverse = torch.arange(ends.numel())
            attrs = flat_attrs(self.source, self.sampler.sample_disjoint(ends, seed), self.bidirectional)
            attrs["batch"] = attrs["batch"] % max(positives, 1)
        else:
            seeds, inverse = torch.unique(ends, return_inverse=True)
            attrs = flat_attrs(self.source, self.sampler.sample(seeds, seed), self.bidirectional)
        attrs["input_id"] = positions
        disjoint = self.disjoint or self.temporal is not None
        if negative is not None and negative.mode == "triplet":
            negatives = inverse[2 * positives :]
            # disjoint: the negatives come amount by amount, each block one per seed edge in order
            negatives = negatives.view(-1, positives).t() if disjoint else negatives.view(positives, -1)
            attrs.update(
                src_index=inverse[:positives],
                dst_pos_index=inverse[positives : 2 * positives],
                dst_neg_index=negatives.squeeze(-1),
            )
            if times is not None:
                attrs["seed_time"] = times
        else:
            attrs["edge_label_index"] = inverse.view(2, -1)
            labels = self._labels(positions, src.numel() - positives)
            if labels is not None:
                attrs["edge_label"] = labels
            if times is not None:
                attrs["edge_label_time"] = times.repeat(-(-src.numel() // max(positives, 1)))[: src.numel()]
        batch = self.batch_class(**attrs)
        return batch if self.transform is None else self.transform(batch)

    def _seed_edge_times(self, positions: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor | None:
        """The seed edges' times under temporal sampling: ``edge_label_time``, else the later endpoint's own time
        (per-vertex times); None without temporal sampling."""
        if self.temporal is None:
            return None
        if self.edge_label_time is not None:
            return self.edge_label_time[positions]
        return torch.maximum(self.temporal.seed_times(src), self.temporal.seed_times(dst))

    def _negatives(
        self, count: int, endpoint: str, times: torch.Tensor | None, generator: torch.Generator
    ) -> torch.Tensor:
        """``count`` negative endpoints; under per-vertex times none later than its seed edge (the seed edges'
        times repeated over the negatives, as PyG)."""
        node_time = None if self.temporal is None else self.temporal.node_time
        if times is None or node_time is None or times.numel() == 0:
            return self.neg_sampling.draw(count, endpoint, self.graph.num_nodes, generator)
        limit = times.repeat(-(-count // times.numel()))[:count]
        return self.neg_sampling.draw_before(limit, node_time, endpoint, generator)

    def _labels(self, positions: torch.Tensor, negatives: int) -> torch.Tensor | None:
        """The positives' labels (ones by default with negatives), then a zero per negative; None without
        labels or negatives."""
        if self.edge_label is None:
            if self.neg_sampling is None:
                return None
            labels = torch.ones(positions.numel())
        else:
            labels = self.edge_label[positions.to(self.edge_label.device)]
        return torch.cat([labels, labels.new_zeros((negatives, *labels.shape[1:]))])


def _checked_edge_label_index(edge_label_index: Any, graph: Any) -> torch.Tensor:
    """The seed edges as a fresh ``(N, 2)`` int64 CPU tensor of vertex ids of ``graph`` (None: its edges)."""
    if edge_label_index is None:
        return torch.stack(graph.coo(), dim=1).to(torch.int64)
    if isinstance(edge_label_index, (str, tuple)):
        raise TypeError(
            "edge_label_index as an edge type (heterogeneous graphs) is not supported: pass a (2, N) tensor"
        )
    edges = torch.as_tensor(edge_label_index)
    if edges.dim() != 2 or edges.shape[0] != 2:
        raise ValueError(f"edge_label_index must have shape (2, N), got {tuple(edges.shape)}")
    if edges.numel() == 0:
        return torch.zeros(0, 2, dtype=torch.int64)
    if edges.dtype == torch.bool or edges.is_floating_point() or edges.is_complex():
        raise TypeError(f"edge_label_index must hold integer vertex ids, got dtype {edges.dtype}")
    edges = edges.to(device="cpu", dtype=torch.int64)
    low, high = int(edges.min()), int(edges.max())
    if low < 0 or high >= graph.num_nodes:
        raise ValueError(
            f"edge_label_index holds vertex id {low if low < 0 else high}, out of range for a graph of "
            f"{graph.num_nodes} vertices"
        )
    return edges.t().contiguous()


def _checked_edge_label(edge_label: Any, count: int, negative: Any) -> torch.Tensor | None:
    """One label per seed edge; with binary negatives, labels from 0 shifted to start at 1 (0 marks the
    negatives), as PyG. Triplet mode takes none: its batches say which vertices are positive."""
    if edge_label is None:
        return None
    if negative is not None and negative.mode == "triplet":
        raise ValueError(
            "edge_label must be None with triplet negative sampling: src_index, dst_pos_index and dst_neg_index "
            "tell positives from negatives"
        )
    labels = torch.as_tensor(edge_label)
    if labels.dim() == 0 or labels.shape[0] != count:
        raise ValueError(f"edge_label must have one entry per seed edge ({count}), got shape {tuple(labels.shape)}")
    if negative is not None and count and labels.min() == 0:
        labels = labels + 1
    return labels
