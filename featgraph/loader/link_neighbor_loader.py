"""``LinkNeighborLoader``: PyG's loader of the same name, for link prediction, on featgraph's compiled sampler;
on a typed graph (``HeteroData``) a ``HeteroLinkNeighborLoader``, as PyG's class serves both.

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

from ..graph.hetero import EdgeType, HeteroGraph
from ..sampling.disjoint import checked_times
from ..sampling.negative import NegativeSampling, checked_negative_sampling
from .base import SeedLoader
from .hetero_loader import TypedLoader, is_typed, typed_source
from .neighbor_loader import Batch, flat_attrs, pyg_data_class
from .source import checked_batching_flags, checked_subgraph_type, loader_source

# a PyG Data's own supervision values, which PyG's link batches replace or drop, never slice
LINK_KEYS = ("edge_label_index", "edge_label", "edge_label_time")
# the supervision values a typed batch keeps on node types (0: the source type, 2: the destination type), as PyG;
# the others go on the edge type
NODE_TYPE_VALUES = {"src_index": (0,), "dst_pos_index": (2,), "dst_neg_index": (2,), "seed_time": (0, 2)}


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
    sampling, as PyG's, takes ``edge_label_time`` (one time per seed edge) and ``time_attr`` together (one
    without the other is refused): each endpoint samples its own subgraph (disjoint) under its seed edge's time,
    by ``temporal_strategy`` ("uniform" or "last"), negatives are drawn no later than their seed edge where the
    times are per vertex, and a batch carries ``edge_label_time`` (triplet mode: ``seed_time``). The induced
    subgraph (``subgraph_type="induced"``, ``directed=False``), ``transform_sampler_output`` and a custom
    ``neighbor_sampler`` are refused by name. The other arguments are ``NeighborLoader``'s; ``seed`` also fixes
    the negatives.
    """

    def __new__(cls, data: Any = None, *args: Any, **kwargs: Any) -> Any:
        if is_typed(data):
            return HeteroLinkNeighborLoader(data, *args, **kwargs)
        return super().__new__(cls)

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
        worker_processes: int = 0,
    ) -> None:
        checked_link_options(
            edge_label_time, time_attr, directed, transform, transform_sampler_output, neighbor_sampler
        )
        bidirectional = checked_subgraph_type(subgraph_type)
        checked_batching_flags(is_sorted, filter_per_worker)
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
            temporal_strategy=temporal_strategy, disjoint=disjoint, worker_processes=worker_processes,
        )  # fmt: skip
        self.edge_label_time = None
        if edge_label_time is not None:
            self.edge_label_time = checked_times(edge_label_time, seed_edges.shape[0], "edge_label_time")
        self.bidirectional = bidirectional
        self.transform = transform
        self.batch_class = pyg_data_class() or Batch

    @property
    def edge_label_index(self) -> torch.Tensor:
        """The seed edges, ``(2, N)``."""
        return self.inputs.t()

    def _batch(self, positions: torch.Tensor, seed: int) -> Any:
        positives = positions.numel()
        times = None if self.edge_label_time is None else self.edge_label_time[positions]
        generator = torch.Generator().manual_seed(seed)
        src, dst = seed_ends(self.inputs[positions], times, self.neg_sampling, self._negatives, generator)
        ends = torch.cat([src, dst])
        attrs: dict[str, Any]
        if self.disjoint_sampler is not None:  # a subgraph per endpoint (temporal: always, as PyG), under its
            # seed edge's time where there are times; each seed edge's (and its negatives') under one batch id
            inverse = torch.arange(ends.numel())
            end_times = None if times is None else repeated(times, ends.numel())
            sampled = self.disjoint_sampler.sample(ends, end_times, seed)
            attrs = flat_attrs(self.source, sampled, self.bidirectional)
            attrs["batch"] = attrs["batch"] % max(positives, 1)
        else:
            seeds, inverse = torch.unique(ends, return_inverse=True)
            attrs = flat_attrs(self.source, self.sampler.sample(seeds, seed), self.bidirectional)
        attrs["input_id"] = positions
        disjoint = self.disjoint_sampler is not None
        ends_local = (inverse[: src.numel()], inverse[src.numel() :])
        attrs.update(supervision(self.neg_sampling, self.edge_label, positions, *ends_local, times, disjoint))
        batch = self.batch_class(**attrs)
        return batch if self.transform is None else self.transform(batch)

    def _negatives(
        self, count: int, endpoint: str, times: torch.Tensor | None, generator: torch.Generator
    ) -> torch.Tensor:
        node_time = None if self.time_attr is None else self.disjoint_sampler.node_time
        return negatives(self.neg_sampling, count, endpoint, self.graph.num_nodes, times, node_time, generator)


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


def checked_link_options(
    edge_label_time: Any,
    time_attr: Any,
    directed: Any,
    transform: Any,
    transform_sampler_output: Any,
    neighbor_sampler: Any,
) -> None:
    """The link loaders' options that featgraph refuses, by name; temporal sampling needs both ``edge_label_time``
    and ``time_attr`` (as PyG)."""
    if (edge_label_time is None) != (time_attr is None):
        state = {
            name: "set" if value is not None else "not set"
            for name, value in (("e", edge_label_time), ("t", time_attr))
        }
        raise ValueError(
            f"'edge_label_time' is {state['e']} while 'time_attr' is {state['t']}: temporal sampling needs both"
        )
    refused = {
        "directed": (directed is not True, "directed=False (PyG's induced subgraph) is not supported"),
        "transform_sampler_output": (transform_sampler_output is not None, "no sampler output: use transform"),
        "neighbor_sampler": (neighbor_sampler is not None, "featgraph's compiled sampler is the only one"),
    }  # fmt: skip
    for name, (given, reason) in refused.items():
        if given:
            raise ValueError(f"{name} is given: {reason}")
    if transform is not None and not callable(transform):
        raise TypeError(f"transform must be callable, got {type(transform).__name__}")


def negatives(
    sampling: NegativeSampling,
    count: int,
    endpoint: str,
    num_nodes: int,
    times: torch.Tensor | None,
    node_time: torch.Tensor | None,
    generator: torch.Generator,
) -> torch.Tensor:
    """``count`` negative endpoints among ``num_nodes`` vertices; under per-vertex times (``node_time`` of those
    vertices) none later than its seed edge (the seed edges' times repeated over the negatives, as PyG)."""
    if times is None or node_time is None or times.numel() == 0:
        return sampling.draw(count, endpoint, num_nodes, generator)
    return sampling.draw_before(repeated(times, count), node_time, endpoint, generator)


def link_labels(
    edge_label: torch.Tensor | None, sampling: NegativeSampling | None, positions: torch.Tensor, count: int
) -> torch.Tensor | None:
    """The positives' labels (ones by default with negatives), then a zero per negative (``count`` of them);
    None without labels or negatives."""
    if edge_label is None:
        if sampling is None:
            return None
        labels = torch.ones(positions.numel())
    else:
        labels = edge_label[positions.to(edge_label.device)]
    return torch.cat([labels, labels.new_zeros((count, *labels.shape[1:]))])


def repeated(times: torch.Tensor, count: int) -> torch.Tensor:
    """``times`` repeated over ``count`` entries (each negative takes its seed edge's time, as PyG)."""
    return times.repeat(-(-count // max(times.numel(), 1)))[:count]


def seed_ends(
    edges: torch.Tensor,
    times: torch.Tensor | None,
    sampling: NegativeSampling | None,
    draw: Callable[[int, str, torch.Tensor | None, torch.Generator], torch.Tensor],
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sources and destinations of the seed edges ``edges`` ((B, 2)) with the negatives after them, binary
    ones at both ends and triplet ones at the destinations; ``draw(count, endpoint, times, generator)`` draws
    them."""
    src, dst = edges.unbind(1)
    if sampling is not None:
        count = sampling.count(edges.shape[0])
        if sampling.mode == "binary":
            src = torch.cat([src, draw(count, "src", times, generator)])
        dst = torch.cat([dst, draw(count, "dst", times, generator)])
    return src, dst


def supervision(
    sampling: NegativeSampling | None,
    edge_label: torch.Tensor | None,
    positions: torch.Tensor,
    src_local: torch.Tensor,
    dst_local: torch.Tensor,
    times: torch.Tensor | None,
    disjoint: bool,
) -> dict[str, torch.Tensor]:
    """PyG's supervision values of a link batch from its seed ends' batch ids (``seed_ends``' order): in
    triplet mode ``src_index``, ``dst_pos_index``, ``dst_neg_index`` (a disjoint batch holds the negatives
    amount by amount, one per seed edge each) and ``seed_time``; else ``edge_label_index`` with
    ``edge_label`` and ``edge_label_time`` where there are labels and times."""
    positives = positions.numel()
    out: dict[str, torch.Tensor] = {}
    if sampling is not None and sampling.mode == "triplet":
        drawn = dst_local[positives:]
        negatives_local = drawn.view(-1, positives).t() if disjoint else drawn.view(positives, -1)
        out.update(
            src_index=src_local[:positives],
            dst_pos_index=dst_local[:positives],
            dst_neg_index=negatives_local.squeeze(-1),
        )
        if times is not None:
            out["seed_time"] = times
        return out
    out["edge_label_index"] = torch.stack([src_local, dst_local])
    labels = link_labels(edge_label, sampling, positions, src_local.numel() - positives)
    if labels is not None:
        out["edge_label"] = labels
    if times is not None:
        out["edge_label_time"] = repeated(times, src_local.numel())
    return out


class HeteroLinkNeighborLoader(TypedLoader):
    """``LinkNeighborLoader`` on a PyG ``HeteroData`` (or a typed store pair): seed edges of one edge type, its
    endpoints of each node type the seeds of one typed sample (each once, in ascending id order), laid out as the
    typed ``NeighborLoader``'s batches. ``edge_label_index``: the edge type (all its edges; ``(src, dst)``
    names the one edge type between two node types) or ``(edge type, (2, N) ids)``. Negatives are drawn among the
    source type's and the destination type's vertices. On the edge type a batch holds ``input_id`` and
    ``edge_label_index`` (row 0 in the source type's batch ids, row 1 in the destination type's), ``edge_label``
    and ``edge_label_time``; in triplet mode ``src_index`` sits on the source type, ``dst_pos_index`` and
    ``dst_neg_index`` on the destination type. ``time_attr`` and ``disjoint`` as the typed
    ``NeighborLoader``'s (each endpoint its own subgraph, under its seed edge's time); the other arguments are
    ``LinkNeighborLoader``'s.
    """

    def __init__(
        self,
        data: Any,
        num_neighbors: Any,
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
        worker_processes: int = 0,
    ) -> None:
        checked_link_options(
            edge_label_time, time_attr, directed, transform, transform_sampler_output, neighbor_sampler
        )
        source = typed_source(data)
        self.input_type, seed_edges = _typed_edge_label_index(edge_label_index, source.graph)
        src_type, _, dst_type = self.input_type
        counts = (source.graph.num_nodes_dict[src_type], source.graph.num_nodes_dict[dst_type])
        self.neg_sampling = checked_negative_sampling(neg_sampling, neg_sampling_ratio, counts)
        self.edge_label = _checked_edge_label(edge_label, seed_edges.shape[0], self.neg_sampling)
        super().__init__(
            source, num_neighbors, seed_edges, batch_size, shuffle, replace, seed, num_workers, prefetch, drop_last,
            weight_attr, pin_memory, subgraph_type, is_sorted, filter_per_worker, time_attr, temporal_strategy,
            disjoint, worker_processes,
        )  # fmt: skip
        self.edge_label_time = None
        if edge_label_time is not None:
            self.edge_label_time = checked_times(edge_label_time, seed_edges.shape[0], "edge_label_time")
        self.transform = transform

    def __repr__(self) -> str:
        return "LinkNeighborLoader()"  # PyG's class serves typed graphs under that name

    def _batch(self, positions: torch.Tensor, seed: int) -> Any:
        graph, edge_type = self.graph, self.input_type
        src_type, _, dst_type = edge_type
        positives = positions.numel()
        times = None if self.edge_label_time is None else self.edge_label_time[positions]
        generator = torch.Generator().manual_seed(seed)
        src, dst = seed_ends(self.inputs[positions], times, self.neg_sampling, self._negatives, generator)
        if self.disjoint_sampler is not None:  # temporal or disjoint: each endpoint its own subgraph
            ends = torch.cat([src + graph.node_offset(src_type), dst + graph.node_offset(dst_type)])
            end_times = None if times is None else repeated(times, ends.numel())
            out, local = self._disjoint_layout(ends, end_times, seed)
            for node_type in graph.node_types:
                out[node_type].batch = out[node_type].batch % max(positives, 1)
            src_local, dst_local = local[: src.numel()], local[src.numel() :]
        elif src_type == dst_type:
            unique, inverse = torch.unique(torch.cat([src, dst]), return_inverse=True)
            out = self._layout(self.sampler.sample_types({src_type: unique}, seed))
            src_local, dst_local = inverse[: src.numel()], inverse[src.numel() :]
        else:
            (src_seeds, src_local), (dst_seeds, dst_local) = (torch.unique(v, return_inverse=True) for v in (src, dst))
            out = self._layout(self.sampler.sample_types({src_type: src_seeds, dst_type: dst_seeds}, seed))
        for key in LINK_KEYS:  # the data's own supervision on the edge type: replaced or dropped, as PyG
            if key in out[edge_type]:
                del out[edge_type][key]
        out[edge_type].input_id = positions
        disjoint = self.disjoint_sampler is not None
        values = supervision(self.neg_sampling, self.edge_label, positions, src_local, dst_local, times, disjoint)
        for name, value in values.items():
            for store in [edge_type[i] for i in NODE_TYPE_VALUES[name]] if name in NODE_TYPE_VALUES else [edge_type]:
                out[store][name] = value
        return out if self.transform is None else self.transform(out)

    def _negatives(
        self, count: int, endpoint: str, times: torch.Tensor | None, generator: torch.Generator
    ) -> torch.Tensor:
        node_type = self.input_type[0] if endpoint == "src" else self.input_type[2]
        num_nodes = self.graph.num_nodes_dict[node_type]
        node_time = None
        if self.time_attr is not None and self.disjoint_sampler.node_time is not None:
            start = self.graph.node_offset(node_type)
            node_time = self.disjoint_sampler.node_time[start : start + num_nodes]
        return negatives(self.neg_sampling, count, endpoint, num_nodes, times, node_time, generator)


def _typed_edge_label_index(value: Any, graph: HeteroGraph) -> tuple[EdgeType, torch.Tensor]:
    """(the edge type, the seed edges as a fresh ``(N, 2)`` int64 CPU tensor of its two node types' ids) from
    PyG's typed ``edge_label_index``: an edge type (all its edges), ``(src, dst)`` for the one edge type between
    them, or ``(edge type, (2, N) ids)``."""
    ids = None
    if isinstance(value, (tuple, list)) and len(value) == 2 and not isinstance(value[1], str):
        value, ids = value
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, str) for v in value):
        between = [et for et in graph.edge_types if (et[0], et[2]) == tuple(value)]
        if len(between) > 1 or (not between and ids is None):
            raise ValueError(
                f"edge_label_index: {len(between)} edge types from {value[0]!r} to {value[1]!r}; name one "
                "as (src, relation, dst)"
            )
        value = between[0] if between else (value[0], "to", value[1])  # PyG's name for an edge type of two
    if not (isinstance(value, (tuple, list)) and len(value) == 3 and all(isinstance(v, str) for v in value)):
        raise TypeError(
            "edge_label_index: a typed graph's seed edges are an edge type or (edge type, (2, N) ids), got "
            f"{type(value).__name__}"
        )
    edge_type = tuple(value)
    src_type, _, dst_type = edge_type
    for node_type in (src_type, dst_type):
        graph.node_type_id(node_type)  # names an unknown node type
    if edge_type not in graph.edge_types and ids is None:  # seed edges of their own may pair any two node types
        raise ValueError(f"edge_label_index: unknown edge type {edge_type!r} (edge types: {list(graph.edge_types)})")
    if ids is None:
        return edge_type, torch.stack(graph.relation(edge_type).coo(), dim=1).to(torch.int64)
    edges = torch.as_tensor(ids)
    if edges.dim() != 2 or edges.shape[0] != 2:
        raise ValueError(f"edge_label_index must have shape (2, N), got {tuple(edges.shape)}")
    if edges.numel() == 0:
        return edge_type, torch.zeros(0, 2, dtype=torch.int64)
    if edges.dtype == torch.bool or edges.is_floating_point() or edges.is_complex():
        raise TypeError(f"edge_label_index must hold integer vertex ids, got dtype {edges.dtype}")
    edges = edges.to(device="cpu", dtype=torch.int64)
    for row, node_type in ((0, src_type), (1, dst_type)):
        count = graph.num_nodes_dict[node_type]
        low, high = int(edges[row].min()), int(edges[row].max())
        if low < 0 or high >= count:
            raise ValueError(
                f"edge_label_index holds {node_type!r} id {low if low < 0 else high}, out of range for its "
                f"{count} vertices"
            )
    return edge_type, edges.t().contiguous()
