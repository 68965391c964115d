"""``LinkBlockLoader``: link-prediction mini-batches as DGL's edge-prediction sampler lays them out: DGL's
``DataLoader`` over edge ids with ``as_edge_prediction_sampler(NeighborSampler(fanouts),
negative_sampler=Uniform(k))``.

A batch takes ``batch_size`` of the loader's edges (the positives) and, with ``negatives=k``, ``k`` negative
pairs per positive: its source with a uniform random destination, as DGL's ``Uniform`` (``PerSourceUniform``)
draws them. The endpoints of all of them, each once, are the seeds of one ``NeighborSampler`` sample into
blocks; ``pair_graph`` holds the positives and ``neg_pair_graph`` the negatives, both over the seeds (the last
block's destinations, in their order). A batch unpacks as DGL's ``(input_nodes, pair_graph, neg_pair_graph,
blocks)`` (``(input_nodes, pair_graph, blocks)`` without negatives). ``exclude`` leaves the batch's own edges
(and their reverses) out of its sampled neighbourhoods, as DGL's ``exclude`` does, so a model never reads the
edge it is asked to predict.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..graph import Graph
from ..graph.hetero import EdgeType, HeteroGraph
from ..sampling import Block
from ..sampling.dgl_view import HeteroPairGraph, PairGraph
from ..sampling.hetero import HeteroBlock
from ..sampling.negative import GlobalUniformNegatives
from ..sampling.neighbor import SEED_LIMIT, checked_ids
from .base import EpochLoader, SeedLoader, gathered
from .block_loader import MovableBatch
from .hetero_block_loader import typed_ids
from .hetero_loader import edge_weights, is_typed, typed_rows, typed_sampler, typed_source
from .source import checked_count, checked_idtype, graph_counts, loader_source

ID_LIMIT = SEED_LIMIT - 1  # a reverse id past the graph's edges is read (and names no edge) up to int64's largest


@dataclass(frozen=True)
class LinkBlockBatch(MovableBatch):
    """``input_nodes`` (global ids of the first block's sources), ``pair_graph`` (the positives, in the seeds'
    local ids), ``neg_pair_graph`` (the negatives, or None), ``blocks`` (input layer first), ``edge_ids`` (the
    positives' edge ids, DGL's ``pair_graph.edata[dgl.EID]``), ``seeds`` (the global ids of the pair graphs'
    vertices, the last block's destinations), ``input_id`` (the positives' positions among the loader's
    edges) and ``x`` (``x[input_nodes]`` where the loader has features)."""

    input_nodes: torch.Tensor
    pair_graph: PairGraph
    neg_pair_graph: PairGraph | None
    blocks: list[Block]
    edge_ids: torch.Tensor
    seeds: torch.Tensor
    input_id: torch.Tensor
    x: torch.Tensor | None = None

    def __iter__(self) -> Iterator[Any]:
        if self.neg_pair_graph is None:
            return iter((self.input_nodes, self.pair_graph, self.blocks))
        return iter((self.input_nodes, self.pair_graph, self.neg_pair_graph, self.blocks))

    @property
    def batch_size(self) -> int:
        return self.edge_ids.numel()


class LinkBlockLoader(SeedLoader[LinkBlockBatch]):
    """Mini-batches of ``graph_or_data``'s edges ``edge_ids`` (None: every edge; ids in the graph's edge order)
    as DGL's edge-prediction batches, ``fanouts[h]`` in-neighbours drawn per vertex at hop ``h`` from the
    pairs' endpoints (``blocks[-1 - h]`` is hop ``h``'s block; -1: all).

    ``negatives``: None, an int ``k`` or DGL's ``negative_sampler.Uniform(k)`` (``PerSourceUniform``): ``k``
    negatives per positive, its source with a uniform random destination; or ``GlobalUniformNegatives`` (DGL's
    ``GlobalUniform``): pairs drawn over the whole graph that are not edges. ``exclude``, as DGL's: None (the
    sampled neighbourhoods may hold the batch's own edges), ``"self"`` (no hop draws them), ``"reverse_id"``
    (nor their reverses: ``reverse_eids[e]`` is the id of edge ``e``'s reverse) or a callable from the batch's
    edge ids to the ids to leave out. As DGL's, ``reverse_eids`` may be longer than the graph's edges (its
    first ``num_edges`` entries are read), ids naming no edge of the graph (a reverse's or a callable's) exclude
    nothing, and beside a callable ``reverse_eids`` is accepted and not read. The batch's pair graphs are
    ``PairGraph``s (DGL's ``num_nodes()``, ``edata[dgl.EID]``...). ``idtype``, ``use_ddp`` and ``edge_attrs``
    as in ``BlockLoader`` (``use_ddp``: this rank's share of the edges). The other arguments are
    ``BlockLoader``'s; ``seed`` also fixes the negatives.
    """

    def __init__(
        self,
        graph_or_data: Any,
        fanouts: Any,
        batch_size: int = 1024,
        *,
        edge_ids: Any = None,
        negatives: Any = None,
        exclude: Any = None,
        reverse_eids: Any = None,
        shuffle: bool = True,
        replace: bool = False,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        drop_last: bool = False,
        weight_attr: str | None = None,
        pin_memory: bool = False,
        self_loops: bool = False,
        x: Any = None,
        worker_processes: int = 0,
        idtype: torch.dtype = torch.int64,
        use_ddp: bool = False,
        edge_attrs: Mapping[str, Any] | None = None,
    ) -> None:
        self.negatives = checked_negatives(negatives)
        source = loader_source(graph_or_data, x, edge_attrs=edge_attrs)
        self.idtype = checked_idtype(idtype, graph_counts(source.graph))
        self.exclude = checked_exclude(exclude, reverse_eids, None, source.graph)
        edges = checked_edge_ids(edge_ids, source.graph.num_edges)
        self._edge_keys = edge_keys(source.graph) if isinstance(self.negatives, GlobalUniformNegatives) else None
        super().__init__(
            source, fanouts, "fanouts", batch_size, shuffle, edges, replace, seed, num_workers, prefetch, drop_last,
            weight_attr, self_loops, pin_memory, worker_processes=worker_processes, use_ddp=use_ddp,
        )  # fmt: skip

    def __new__(cls, graph_or_data: Any = None, *args: Any, **kwargs: Any) -> Any:
        if isinstance(graph_or_data, HeteroGraph) or is_typed(graph_or_data):
            return HeteroLinkBlockLoader(graph_or_data, *args, **kwargs)
        return super().__new__(cls)

    def _batch(self, positions: torch.Tensor, seed: int) -> LinkBlockBatch:
        edge_ids = self.inputs[positions]
        all_src, all_dst = self.graph.coo()
        src, dst = all_src[edge_ids].cpu(), all_dst[edge_ids].cpu()
        ends = [src, dst]
        if self.negatives:
            sizes = (self.graph.num_nodes,) * 2
            generator = torch.Generator().manual_seed(seed)
            ends += negative_pairs(self.negatives, src, sizes, self._edge_keys, True, generator)
        seeds, inverse = torch.unique(torch.cat(ends), return_inverse=True)
        local = inverse.split([end.numel() for end in ends])
        excluded = None if self.exclude is None else existing(self.exclude(edge_ids), self.graph.num_edges)
        sampled = self.sampler.sample(seeds, seed, excluded)
        ids = seeds.to(self.idtype)
        pair_graph = PairGraph(local[0], local[1], seeds.numel(), ids, edge_ids.to(self.idtype))
        negative = PairGraph(local[2], local[3], seeds.numel(), ids) if self.negatives else None
        x = self.source.node_attrs.get("x")
        features = None if x is None else gathered(x, sampled.input_nodes)
        return LinkBlockBatch(
            sampled.input_nodes.to(self.idtype), pair_graph, negative,
            [block.astype(self.idtype) for block in sampled.blocks], edge_ids, ids, positions, features,
        )  # fmt: skip


@dataclass(frozen=True)
class HeteroLinkBlockBatch(MovableBatch):
    """A typed graph's edge-prediction batch: ``input_nodes`` and ``seeds`` per node type (the seeds: the pairs'
    endpoints, each type's last block's destinations), ``pair_graph`` and ``neg_pair_graph`` (None without
    negatives): ``HeteroPairGraph``s, per seed edge type a ``PairGraph`` from its source type's seeds to its
    destination type's, ``blocks`` (``HeteroBlock``s, input layer first), ``edge_ids`` per seed edge type (ids
    within the edge type), ``input_id`` (the positives' positions among the loader's edges, edge type by edge
    type) and ``x`` per node type with a per-vertex ``x``. Unpacks as DGL's ``(input_nodes, pair_graph,
    neg_pair_graph, blocks)`` (without negatives ``(input_nodes, pair_graph, blocks)``)."""

    input_nodes: dict[str, torch.Tensor]
    pair_graph: HeteroPairGraph
    neg_pair_graph: HeteroPairGraph | None
    blocks: list[HeteroBlock]
    edge_ids: dict[EdgeType, torch.Tensor]
    seeds: dict[str, torch.Tensor]
    input_id: torch.Tensor
    x: dict[str, torch.Tensor]

    def __iter__(self) -> Iterator[Any]:
        if self.neg_pair_graph is None:
            return iter((self.input_nodes, self.pair_graph, self.blocks))
        return iter((self.input_nodes, self.pair_graph, self.neg_pair_graph, self.blocks))

    @property
    def batch_size(self) -> int:
        return self.input_id.numel()


class HeteroLinkBlockLoader(EpochLoader[HeteroLinkBlockBatch]):
    """``LinkBlockLoader`` on a typed graph (a PyG ``HeteroData``, a typed store pair or a featgraph
    ``HeteroGraph``), as DGL's edge-prediction ``DataLoader`` on a heterograph: ``edge_ids`` maps each seed edge
    type (or its relation name) to its edges' ids within the type (None: all of them); each positive's ``k``
    negatives join its source with uniform random vertices of the edge type's destination type. The endpoints
    of every type seed one ``HeteroNeighborSampler.sample_blocks``; ``fanouts`` one per-hop list for every edge
    type or a dict of them per edge type. ``exclude``: as ``LinkBlockLoader``'s (ids within each edge type; a
    callable maps a dict edge type -> ids to one), and ``"reverse_types"``: each seed edge type's edges and the
    edges of the same ids in its reverse type, ``reverse_etypes[edge_type]``; ``"reverse_id"`` reads
    ``reverse_eids`` per edge type; beside a callable, ``reverse_eids`` and ``reverse_etypes`` are accepted and
    not read, as DGL's. The other arguments are ``LinkBlockLoader``'s and ``HeteroBlockLoader``'s."""

    def __init__(
        self,
        data: Any,
        fanouts: Any,
        batch_size: int = 1024,
        *,
        edge_ids: Any = None,
        negatives: Any = None,
        exclude: Any = None,
        reverse_eids: Any = None,
        reverse_etypes: Any = None,
        shuffle: bool = True,
        replace: bool = False,
        seed: int | None = None,
        num_workers: int = 0,
        prefetch: int = 2,
        drop_last: bool = False,
        weight_attr: str | None = None,
        pin_memory: bool = False,
        worker_processes: int = 0,
        idtype: torch.dtype = torch.int64,
        use_ddp: bool = False,
        edge_attrs: Mapping[Any, Mapping[str, Any]] | None = None,
    ) -> None:
        self.negatives = checked_negatives(negatives)
        self.source = source = typed_source(data, edge_attrs)
        graph = self.graph = source.graph
        self.idtype = checked_idtype(idtype, graph_counts(graph.graph))
        self.exclude = checked_exclude(exclude, reverse_eids, reverse_etypes, graph)
        if not isinstance(edge_ids, Mapping) or not edge_ids:
            raise TypeError(
                f"edge_ids: a typed graph's seed edges are a non-empty dict edge type -> ids (None: all of the type), "
                f"got {type(edge_ids).__name__}"
            )
        self.seed_types = tuple(graph.edge_type(key) for key in edge_ids)
        parts = []
        for edge_type, ids in zip(self.seed_types, edge_ids.values(), strict=True):
            local = checked_edge_ids(ids, graph.num_edges_of(edge_type))
            parts.append(local + int(graph.edge_offsets[graph.relation_id(edge_type)]))
        super().__init__(
            torch.cat(parts), batch_size, shuffle, seed, prefetch, drop_last, pin_memory, worker_processes, use_ddp
        )  # fmt: skip
        self.sampler = typed_sampler(source, fanouts, replace, edge_weights(source, weight_attr), num_workers)
        global_negatives = isinstance(self.negatives, GlobalUniformNegatives)
        self._edge_keys = {et: edge_keys(graph.relation(et)) for et in self.seed_types} if global_negatives else {}

    def _batch(self, positions: torch.Tensor, seed: int) -> HeteroLinkBlockBatch:
        graph, k = self.graph, self.negatives
        chosen = self.inputs[positions]
        relation = graph.etype[chosen]
        generator = torch.Generator().manual_seed(seed)
        ends: dict[str, list[torch.Tensor]] = {t: [] for t in graph.node_types}  # each type's endpoints, in order
        edge_ids, order, pairs = {}, [], []
        for edge_type in self.seed_types:
            r = graph.relation_id(edge_type)
            mine = relation == r
            ids = chosen[mine] - int(graph.edge_offsets[r])
            all_src, all_dst = graph.relation(edge_type).coo()
            src, dst = all_src[ids], all_dst[ids]
            ends_of_type = [src, dst]
            if k:
                sizes = (graph.num_nodes_dict[edge_type[0]], graph.num_nodes_dict[edge_type[2]])
                same_set = edge_type[0] == edge_type[2]
                keys = self._edge_keys.get(edge_type)
                ends_of_type += negative_pairs(k, src, sizes, keys, same_set, generator)
            for position, end in enumerate(ends_of_type):
                ends[edge_type[position % 2 * 2]].append(end)
            edge_ids[edge_type] = ids
            order.append(positions[mine])
            pairs.append(edge_type)
        seeds, local = {}, {}
        for node_type, parts in ends.items():
            if parts:
                seeds[node_type], inverse = torch.unique(torch.cat(parts), return_inverse=True)
                local[node_type] = list(inverse.split([part.numel() for part in parts]))
        excluded = None
        if self.exclude is not None:
            excluded = {key: existing(ids, graph.num_edges_of(key)) for key, ids in self.exclude(edge_ids).items()}
        sampled = self.sampler.sample_blocks(seeds, seed, excluded)
        counts = {t: ids.numel() for t, ids in seeds.items()}
        node_ids = typed_ids(seeds, self.idtype)
        positive, negative = {}, {}
        for edge_type in pairs:  # each type's endpoints come back in the order they went in
            src_type, _, dst_type = edge_type
            sizes = (counts[src_type], counts[dst_type])
            ends = {t: node_ids[t] for t in (src_type, dst_type)}
            ends_ids = ends[src_type] if len(ends) == 1 else ends
            src, dst = local[src_type].pop(0), local[dst_type].pop(0)
            positive[edge_type] = PairGraph(src, dst, sizes, ends_ids, edge_ids[edge_type].to(self.idtype))
            if k:
                negative[edge_type] = PairGraph(local[src_type].pop(0), local[dst_type].pop(0), sizes, ends_ids)
        x = typed_rows(self.source, "x", sampled.input_nodes)
        return HeteroLinkBlockBatch(
            typed_ids(sampled.input_nodes, self.idtype), HeteroPairGraph(positive, node_ids),
            HeteroPairGraph(negative, node_ids) if k else None, [block.astype(self.idtype) for block in sampled.blocks],
            edge_ids, node_ids, torch.cat(order), x,
        )  # fmt: skip


EXCLUDE_MODES = ("self", "reverse_id", "reverse_types")
REVERSE_MAPS = {"reverse_eids": "reverse_id", "reverse_etypes": "reverse_types"}  # each map and the mode reading it


@dataclass(frozen=True)
class Exclusion:
    """One of DGL's named ``exclude`` modes, as a map (picklable, for worker processes) from a batch's seed edge
    ids (a dict edge type -> ids where typed) to the ids no hop may draw: ``"self"`` the seeds, ``"reverse_id"``
    also ``reverse[e]`` of each (per edge type where typed), ``"reverse_types"`` also the same ids under
    ``reverse[edge_type]``."""

    mode: str
    reverse: Any = None

    def __call__(self, ids: Any) -> Any:
        if self.mode == "self":
            return ids
        if self.mode == "reverse_types":
            return _with_reverse_types(ids, self.reverse)
        if isinstance(ids, dict):
            return {t: torch.cat([e, self.reverse[t][e]]) if t in self.reverse else e for t, e in ids.items()}
        return torch.cat([ids, self.reverse[ids]])


def existing(ids: Any, count: int) -> torch.Tensor:
    """The ids of ``ids`` that name one of ``count`` edges: as DGL's, an exclusion of an id past the graph's
    edges (a reverse id or a callable's) excludes nothing."""
    tensor = torch.as_tensor(ids)
    return tensor[tensor < count]


def checked_exclude(
    exclude: Any, reverse_eids: Any, reverse_etypes: Any, graph: Graph | HeteroGraph
) -> Callable[[Any], Any] | None:
    """DGL's ``exclude`` as a map from a batch's seed edge ids (a tensor; on a typed ``graph`` a dict edge type ->
    ids within the type) to the edge ids no hop may draw (the samplers' ``exclude_edges``), or None. Each mode's
    map is checked against ``graph`` here, and a map no mode reads is refused by name rather than ignored."""
    modes = EXCLUDE_MODES if isinstance(graph, HeteroGraph) else EXCLUDE_MODES[:2]
    if exclude is not None and not callable(exclude) and exclude not in modes:
        raise ValueError(f"exclude must be None, {', '.join(map(repr, modes))} or a callable, got {exclude!r}")
    for name, value in (("reverse_eids", reverse_eids), ("reverse_etypes", reverse_etypes)):
        mode = REVERSE_MAPS[name]
        if value is None and exclude == mode:
            raise ValueError(f"exclude={mode!r} needs {name}")
        if value is not None and exclude != mode and not callable(exclude):  # beside a callable, DGL's ignore it
            raise ValueError(f"{name} is only read with exclude={mode!r}, got exclude={exclude!r}")
    if exclude is None or callable(exclude):
        return exclude
    if exclude == "reverse_id":
        return Exclusion(exclude, _reverse_eids(reverse_eids, graph))
    if exclude == "reverse_types":
        return Exclusion(exclude, _reverse_etypes(reverse_etypes, graph))
    return Exclusion(exclude)


def _reverse_eids(reverse_eids: Any, graph: Graph | HeteroGraph) -> Any:
    """``reverse_eids`` checked: a vector of every edge's reverse id (a dict of them per edge type where typed)."""
    if not isinstance(graph, HeteroGraph):
        return _reverse_vector(reverse_eids, graph.num_edges, "reverse_eids")
    if not isinstance(reverse_eids, Mapping):
        raise TypeError(f"reverse_eids: a typed graph's are a dict edge type -> ids, got {type(reverse_eids).__name__}")
    checked = {}
    for key, ids in reverse_eids.items():
        edge_type = graph.edge_type(key)
        checked[edge_type] = _reverse_vector(ids, graph.num_edges_of(edge_type), f"reverse_eids[{key!r}]")
    return checked


def _reverse_vector(ids: Any, count: int, name: str) -> torch.Tensor:
    """Each of ``count`` edges' reverse id, read as DGL reads them: the first ``count`` entries of ``ids``; one
    naming no edge (``count`` or more) becomes ``count``, which ``existing`` leaves out."""
    tensor = checked_ids(ids, ID_LIMIT, name, "edge", "int64 ids", None)
    if tensor.numel() < count:
        raise ValueError(f"{name} must hold a reverse edge id for each of the {count} edges, got {tensor.numel()}")
    return tensor[:count].clamp_max(count)


def _reverse_etypes(reverse_etypes: Any, graph: HeteroGraph) -> dict[EdgeType, EdgeType]:
    """``reverse_etypes`` checked: edge type -> its reverse edge type, with as many edges (DGL pairs ids)."""
    if not isinstance(reverse_etypes, Mapping):
        raise TypeError(f"reverse_etypes must be a dict edge type -> reverse edge type, got {reverse_etypes!r}")
    checked = {}
    for key, value in reverse_etypes.items():
        edge_type, reverse = graph.edge_type(key), graph.edge_type(value)
        if graph.num_edges_of(edge_type) != graph.num_edges_of(reverse):
            raise ValueError(
                f"reverse_etypes: {edge_type} has {graph.num_edges_of(edge_type)} edges and its reverse {reverse} "
                f"{graph.num_edges_of(reverse)}; the reverse of edge e is edge e of the reverse type"
            )
        checked[edge_type] = reverse
    return checked


def _with_reverse_types(ids: dict[EdgeType, torch.Tensor], reverse_types: dict[EdgeType, EdgeType]) -> dict:
    """The seed edges of each type and, under their reverse type, the same ids."""
    excluded: dict[EdgeType, list[torch.Tensor]] = {}
    for edge_type, edge_ids in ids.items():
        excluded.setdefault(edge_type, []).append(edge_ids)
        if edge_type in reverse_types:
            excluded.setdefault(reverse_types[edge_type], []).append(edge_ids)
    return {t: torch.cat(parts) for t, parts in excluded.items()}


def checked_negatives(negatives: Any) -> int | GlobalUniformNegatives:
    """Negatives per positive (0: none) from None, an int >= 1 or DGL's per-source ``Uniform(k)``; or
    ``GlobalUniformNegatives`` as given."""
    if negatives is None:
        return 0
    if isinstance(negatives, GlobalUniformNegatives):
        return negatives
    if type(negatives).__name__ in ("Uniform", "PerSourceUniform") and hasattr(negatives, "k"):
        negatives = negatives.k
    elif not isinstance(negatives, numbers.Integral) or isinstance(negatives, bool):
        raise TypeError(
            f"negatives: expected None, an int, DGL's negative_sampler.Uniform(k) or GlobalUniformNegatives, got "
            f"{type(negatives).__name__}"
        )
    return checked_count(negatives, "negatives", 1)


def negative_pairs(
    negatives: int | GlobalUniformNegatives,
    src: torch.Tensor,
    sizes: tuple[int, int],
    keys: torch.Tensor | None,
    same_set: bool,
    generator: torch.Generator,
) -> list[torch.Tensor]:
    """The negatives of positives with sources ``src`` on a relation of ``sizes`` (sources, destinations): an
    int ``k``, each source with ``k`` uniform destinations; else global pairs that are not edges (``keys``: the
    relation's ``edge_keys``)."""
    if isinstance(negatives, GlobalUniformNegatives):
        return list(negatives.pairs(src.numel(), sizes, keys, same_set, generator))
    return [src.repeat_interleave(negatives), torch.randint(sizes[1], (src.numel() * negatives,), generator=generator)]


def edge_keys(graph: Graph) -> torch.Tensor:
    """``graph``'s edges as sorted keys ``src * num_dst_nodes + dst``, which global negatives are checked against."""
    src, dst = graph.coo()
    return (src.cpu() * graph.num_dst_nodes + dst.cpu()).sort().values


def checked_edge_ids(edge_ids: Any, num_edges: int) -> torch.Tensor:
    """The seed edges' ids as a fresh int64 CPU vector (None: every edge), each below ``num_edges``."""
    if edge_ids is None:
        return torch.arange(num_edges)
    return checked_ids(edge_ids, num_edges, "edge_ids", "edge", f"{num_edges} edges", "a batch needs at least one edge")
