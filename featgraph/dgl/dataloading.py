"""DGL's ``DataLoader`` on featgraph's loaders: ``featgraph.dgl.DataLoader(graph, indices, graph_sampler, ...)``
takes DGL's arguments (a DGL graph, homogeneous or typed, int32 or int64; its seed node or edge ids; DGL's
``NeighborSampler`` / ``MultiLayerFullNeighborSampler``, alone or in ``as_edge_prediction_sampler``), translates
them into the arguments of one of featgraph's loaders (``BlockLoader``, ``HeteroBlockLoader``,
``LinkBlockLoader``, ``HeteroLinkBlockLoader``; the graph converted once) and iterates that loader's batches,
which unpack as DGL's and carry DGL's graph interface. A DGL option featgraph does not serve is refused by name.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch

from ..graph import Graph
from ..graph.hetero import HeteroGraph
from ..graph.interop import import_dgl
from ..loader import BlockLoader, HeteroBlockLoader, HeteroLinkBlockLoader, LinkBlockLoader
from ..loader.base import EpochLoader
from ..sampling import GlobalUniformNegatives

TORCH_OPTIONS = {"num_workers": "num_workers", "pin_memory": "pin_memory"}  # torch's DataLoader -> featgraph's
ACCEPTED_OPTIONS = ("persistent_workers",)  # featgraph starts nothing per epoch: its workers always persist


class DataLoader:
    """DGL's ``dgl.dataloading.DataLoader`` (same arguments) iterating a featgraph loader's batches.

    ``indices``: seed node ids (a dict node type -> ids on a typed graph) for a block sampler, seed edge ids (a
    dict edge type -> ids) for an edge-prediction sampler. ``device``: where the batches are put (None: the
    graph's device); the graph itself must be on the CPU, where featgraph samples. torch's ``num_workers`` (its
    batch-making processes) is featgraph's ``num_workers``, the threads its compiled sampler runs on while a
    background thread makes the batches ahead; ``pin_memory`` is featgraph's own; ``persistent_workers`` is
    accepted (nothing is started per epoch). ``use_prefetch_thread=False`` makes each batch when asked for
    (``prefetch=0``). ``use_ddp`` takes this rank's share of the seeds, split as DGL's; ``ddp_seed`` is accepted
    and not read, as in DGL 2.1, whose shares are shuffled within each rank alone. ``use_uva``, ``gpu_cache``,
    ``use_alternate_streams``, ``pin_prefetcher`` and any other option are refused by name.
    """

    def __init__(
        self,
        graph: Any,
        indices: Any,
        graph_sampler: Any,
        device: torch.device | str | None = None,
        use_ddp: bool = False,
        ddp_seed: int = 0,
        batch_size: int = 1,
        drop_last: bool = False,
        shuffle: bool = False,
        use_prefetch_thread: bool | None = None,
        use_alternate_streams: bool | None = None,
        pin_prefetcher: bool | None = None,
        use_uva: bool = False,
        gpu_cache: Any = None,
        **kwargs: Any,
    ) -> None:
        dgl = import_dgl()
        if dgl is None:
            raise ImportError("featgraph.dgl.DataLoader takes DGL's graphs and samplers: DGL does not import here")
        for name, value in (("use_uva", use_uva), ("use_alternate_streams", use_alternate_streams)):
            if value:
                raise ValueError(f"{name}={value!r}: featgraph samples on the CPU; {name} is not supported")
        if pin_prefetcher:
            raise ValueError("pin_prefetcher=True is not supported: pass pin_memory=True to pin whole batches")
        if gpu_cache is not None:
            raise ValueError("gpu_cache is not supported by featgraph's loaders")
        if not isinstance(graph, dgl.DGLGraph):
            raise TypeError(f"graph must be a DGL graph, got {type(graph).__name__}")
        if graph.device.type != "cpu":
            raise ValueError(
                f"graph is on {graph.device}; featgraph samples on the CPU: pass the graph on the CPU and "
                f"device={str(graph.device)!r} for the batches"
            )
        self.device = torch.device(graph.device if device is None else device)
        options = {
            "batch_size": batch_size,
            "shuffle": shuffle,
            "drop_last": drop_last,
            "use_ddp": use_ddp,
            "idtype": graph.idtype,
            **torch_options(kwargs),
        }
        if use_prefetch_thread is False:
            options["prefetch"] = 0
        self.loader = featgraph_loader(dgl, graph, indices, graph_sampler, options)

    def __iter__(self) -> Iterator[Any]:
        if self.device.type == "cpu":
            return iter(self.loader)
        return (batch.to(self.device) for batch in self.loader)

    def __len__(self) -> int:
        return len(self.loader)


def torch_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """torch ``DataLoader`` options as featgraph's loader options; an option featgraph has none for is refused."""
    unknown = sorted(set(kwargs) - set(TORCH_OPTIONS) - set(ACCEPTED_OPTIONS))
    if unknown:
        raise TypeError(f"DataLoader: option(s) {unknown} are not supported by featgraph's loaders")
    return {TORCH_OPTIONS[name]: value for name, value in kwargs.items() if name in TORCH_OPTIONS}


def featgraph_loader(dgl: Any, graph: Any, indices: Any, graph_sampler: Any, options: dict[str, Any]) -> EpochLoader:
    """The featgraph loader DGL's ``graph``, ``indices`` and ``graph_sampler`` translate into."""
    typed = len(graph.ntypes) != 1 or len(graph.canonical_etypes) != 1
    fg_graph = HeteroGraph.from_dgl(graph) if typed else Graph.from_dgl(graph)
    if not typed and isinstance(indices, Mapping):  # DGL also takes its one type's ids as a dict
        if len(indices) != 1:
            raise ValueError(
                f"indices: a graph of one node and edge type takes one type's ids, got keys {list(indices)}"
            )
        (indices,) = indices.values()
    edge_sampler = type(graph_sampler) is dgl.dataloading.EdgePredictionSampler
    sampler = graph_sampler.sampler if edge_sampler else graph_sampler
    fanouts, sampling = block_sampler_options(dgl, graph, sampler, typed)
    options.update(sampling)
    if not edge_sampler:
        loader = HeteroBlockLoader if typed else BlockLoader
        return loader(fg_graph, fanouts, input_nodes=indices, **options)
    if graph_sampler.prefetch_labels:
        raise ValueError("as_edge_prediction_sampler: prefetch_labels is not supported by featgraph's loaders")
    edge_options = {
        "edge_ids": indices,
        "negatives": negatives(dgl, graph_sampler.negative_sampler),
        "exclude": graph_sampler.exclude,
        "reverse_eids": graph_sampler.reverse_eids,
    }
    if typed:
        edge_options["reverse_etypes"] = graph_sampler.reverse_etypes
        return HeteroLinkBlockLoader(fg_graph, fanouts, **edge_options, **options)
    if graph_sampler.reverse_etypes is not None and not callable(graph_sampler.exclude):
        raise ValueError("as_edge_prediction_sampler: reverse_etypes is read on a graph of several edge types only")
    return LinkBlockLoader(fg_graph, fanouts, **edge_options, **options)


def block_sampler_options(dgl: Any, graph: Any, sampler: Any, typed: bool) -> tuple[Any, dict[str, Any]]:
    """featgraph's fan-outs (hop 0 from the seeds: DGL's list reversed; per canonical edge type where DGL gives
    dicts) and sampling options from DGL's ``NeighborSampler`` (``MultiLayerFullNeighborSampler``: -1 per hop);
    ``prob`` (or ``mask``, which DGL keeps under the same name) becomes ``weight_attr`` over the graph's edge
    data, a bool one drawn as a mask."""
    supported = (dgl.dataloading.NeighborSampler, dgl.dataloading.MultiLayerFullNeighborSampler)
    if type(sampler) not in supported:
        raise TypeError(
            f"graph_sampler: DGL's {type(sampler).__name__} is not supported by featgraph's loaders (supported: "
            "NeighborSampler, MultiLayerFullNeighborSampler, and as_edge_prediction_sampler of them)"
        )
    if sampler.edge_dir != "in":
        raise ValueError(f"NeighborSampler: edge_dir={sampler.edge_dir!r} is not supported; featgraph draws in-edges")
    for name in ("prefetch_node_feats", "prefetch_labels", "prefetch_edge_feats"):
        if getattr(sampler, name):
            raise ValueError(f"NeighborSampler: {name} is not supported by featgraph's loaders")
    if sampler.output_device is not None:
        raise ValueError("NeighborSampler: output_device is not supported; pass the DataLoader's device")
    hops = list(reversed(sampler.fanouts))
    fanouts: Any = hops
    if any(isinstance(hop, Mapping) for hop in hops):
        fanouts = {et: [typed_fanout(hop, et) for hop in hops] for et in graph.canonical_etypes}
    options: dict[str, Any] = {"replace": bool(sampler.replace)}  # DGL reads its flags by truth value
    if sampler.prob is not None:
        options["weight_attr"] = sampler.prob
        if typed:
            options["edge_attrs"] = {
                et: {sampler.prob: graph.edges[et].data[sampler.prob]}
                for et in graph.canonical_etypes
                if sampler.prob in graph.edges[et].data
            }
        else:
            options["edge_attrs"] = {sampler.prob: graph.edata[sampler.prob]}
    return fanouts, options


def typed_fanout(hop: Any, edge_type: tuple[str, str, str]) -> int:
    """One hop's fan-out of ``edge_type`` from DGL's dict (keyed by canonical edge type or relation name)."""
    if not isinstance(hop, Mapping):
        raise TypeError(f"NeighborSampler: fanouts mixes dicts and ints, got {hop!r}")
    for key in (edge_type, edge_type[1]):
        if key in hop:
            return hop[key]
    raise ValueError(f"NeighborSampler: a hop's fanouts name no fan-out for edge type {edge_type}, got {hop!r}")


def negatives(dgl: Any, negative_sampler: Any) -> Any:
    """DGL's negative sampler as featgraph's ``negatives``: ``PerSourceUniform(k)`` (``Uniform``) as ``k``,
    ``GlobalUniform`` as ``GlobalUniformNegatives``; None as None; any other refused by name."""
    module = dgl.dataloading.negative_sampler
    if negative_sampler is None:
        return None
    if type(negative_sampler) is module.PerSourceUniform:
        return negative_sampler.k
    if type(negative_sampler) is module.GlobalUniform:
        # DGL reads its flags by truth value (its own tests pass replace=3)
        return GlobalUniformNegatives(
            negative_sampler.k, bool(negative_sampler.exclude_self_loops), bool(negative_sampler.replace)
        )
    raise TypeError(
        f"negative_sampler: DGL's {type(negative_sampler).__name__} is not supported by featgraph's loaders "
        "(supported: Uniform / PerSourceUniform, GlobalUniform)"
    )
