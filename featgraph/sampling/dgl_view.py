"""DGL's graph interface on featgraph's mini-batch objects, without DGL: what DGL code reads of a block
(``srcdata``, ``dstdata`` and ``edata`` frames holding ``dgl.NID`` / ``dgl.EID``, ``num_src_nodes()``,
``number_of_*``, ``device``, ``idtype``, ``edges()``, ``local_scope()``), on homogeneous blocks
(``DGLBlockView``) and typed ones (``DGLHeteroBlockView``: frames per type as DGL gives them, ``block[etype]``),
and of an edge-prediction batch's pair graphs (``PairGraph``, ``HeteroPairGraph``), so a loop written against
DGL's ``DataLoader`` runs on featgraph's batches as they come."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

import torch

from ..graph import Graph
from ..graph.hetero import EdgeType, canonical_edge_type

ID = "_ID"  # dgl.NID and dgl.EID


class ScopedFrames:
    """DGL's ``local_scope`` over the plain dicts ``_leaf_frames`` gives (each made on first use)."""

    def _leaf_frames(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    @contextmanager
    def local_scope(self) -> Iterator[Any]:
        """Within the scope, data assigned to the frames is forgotten on leaving it (DGL's ``local_scope``): the
        frames are restored to what they held on entering."""
        frames = self._leaf_frames()
        saved = [dict(frame) for frame in frames]
        try:
            yield self
        finally:
            for frame, before in zip(frames, saved, strict=True):
                frame.clear()
                frame.update(before)


class DGLBlockView(ScopedFrames):
    """Mixin over ``self.graph`` (a bipartite ``Graph``: destinations the first ``num_dst`` sources),
    ``self.n_id`` (every source's global id) and ``self.e_id`` (every edge's): DGL's block methods. Frames are
    plain dicts made on first use; assigning into them keeps the tensor for this block, as DGL's do."""

    graph: Graph
    n_id: torch.Tensor
    e_id: torch.Tensor

    @property
    def _frames(self) -> dict[str, dict[str, Any]]:
        frames = self.__dict__.get("_dgl_frames")
        if frames is None:
            num_dst = self.graph.num_dst_nodes
            frames = {"src": {ID: self.n_id}, "dst": {ID: self.n_id[:num_dst]}, "edge": {ID: self.e_id}}
            self.__dict__["_dgl_frames"] = frames
        return frames

    def _leaf_frames(self) -> list[dict[str, Any]]:
        return list(self._frames.values())

    @property
    def srcdata(self) -> dict[str, Any]:
        """The sources' data: ``srcdata[dgl.NID]`` their global ids."""
        return self._frames["src"]

    @property
    def dstdata(self) -> dict[str, Any]:
        """The destinations' data: ``dstdata[dgl.NID]`` their global ids (the sources' first rows)."""
        return self._frames["dst"]

    @property
    def edata(self) -> dict[str, Any]:
        """The edges' data: ``edata[dgl.EID]`` their global ids."""
        return self._frames["edge"]

    @property
    def is_block(self) -> bool:
        return True

    @property
    def device(self) -> torch.device:
        return self.graph.device

    @property
    def idtype(self) -> torch.dtype:
        """The type of the block's ids, as DGL's ``idtype``."""
        return self.n_id.dtype

    def num_src_nodes(self, ntype: str | None = None) -> int:
        _one_type(ntype, "ntype")
        return self.graph.num_src_nodes

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        _one_type(ntype, "ntype")
        return self.graph.num_dst_nodes

    def num_edges(self, etype: str | None = None) -> int:
        _one_type(etype, "etype")
        return self.graph.num_edges

    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes
    number_of_edges = num_edges

    def edges(self, form: str = "uv", order: str = "eid") -> tuple[torch.Tensor, ...]:
        """Every edge's local (source, destination) ids in the block's edge order (DGL's ``form="uv"``;
        ``"all"`` adds the local edge ids)."""
        return edge_tuple(self.graph, form, order)

    def in_degrees(self) -> torch.Tensor:
        return self.graph.in_degrees()


def _one_type(name: str | None, argument: str) -> None:
    if name is not None and name not in ("_N", "_E"):
        raise ValueError(f"{argument}={name!r}: a homogeneous block has one node and one edge type")


class TypedFrames(MutableMapping):
    """DGL's data view over several types' frames (``frames``: type -> dict): ``view[key]`` is a dict type ->
    value over the types holding ``key``, ``view[key] = {type: value}`` assigns per type."""

    def __init__(self, frames: dict[Any, dict[str, Any]]) -> None:
        self._frames = frames

    def __getitem__(self, key: str) -> dict[Any, Any]:
        found = {t: frame[key] for t, frame in self._frames.items() if key in frame}
        if not found:
            raise KeyError(key)
        return found

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(value, Mapping):
            raise TypeError(f"{key!r}: several types take a dict type -> value, not {type(value).__name__}")
        for t, item in value.items():
            if t not in self._frames:
                raise KeyError(f"{key!r}: unknown type {t!r} (types: {list(self._frames)})")
            self._frames[t][key] = item

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        for frame in self._frames.values():
            frame.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(key for frame in self._frames.values() for key in frame))

    def __len__(self) -> int:
        return sum(1 for _ in self)


def typed_view(frames: dict[Any, dict[str, Any]]) -> MutableMapping:
    """DGL's view of ``frames``: the one type's own frame where there is one type, else a ``TypedFrames``."""
    return next(iter(frames.values())) if len(frames) == 1 else TypedFrames(frames)


class TypeData:
    """One type's frame, as DGL's ``g.srcnodes[ntype]`` holds it in ``data``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data


class TypeIndex:
    """DGL's ``g.srcnodes`` / ``g.dstnodes`` / ``g.nodes``: ``index[ntype].data`` is that type's frame."""

    def __init__(self, frames: dict[Any, dict[str, Any]], lookup: Callable[[Any], Any]) -> None:
        self._frames, self._lookup = frames, lookup

    def __getitem__(self, name: Any) -> TypeData:
        return TypeData(self._frames[self._lookup(name)])


class DGLHeteroBlockView(ScopedFrames):
    """Mixin over a typed block's ``relations`` (edge type -> bipartite ``Graph``), ``n_id`` (node type -> every
    source's global id, destinations first), ``num_dst_nodes_dict`` and ``e_id`` (edge type -> global edge ids
    within the type): DGL's heterogeneous block methods. ``srcdata`` / ``dstdata`` / ``edata`` are the one
    type's frame where the block has one type, else keyed by type (``block.srcdata[dgl.NID]["user"]``);
    ``srcnodes[ntype].data`` and ``edges(etype=...)`` reach one type, ``block[etype]`` one relation."""

    relations: dict[EdgeType, Graph]
    n_id: dict[str, torch.Tensor]
    num_dst_nodes_dict: dict[str, int]
    e_id: dict[EdgeType, torch.Tensor]

    @property
    def _frames(self) -> dict[str, dict[Any, dict[str, Any]]]:
        frames = self.__dict__.get("_dgl_frames")
        if frames is None:
            frames = {
                "src": {t: {ID: ids} for t, ids in self.n_id.items()},
                "dst": {t: {ID: ids[: self.num_dst_nodes_dict[t]]} for t, ids in self.n_id.items()},
                "edge": {et: {ID: ids} for et, ids in self.e_id.items()},
            }
            self.__dict__["_dgl_frames"] = frames  # a frozen dataclass: set past its __setattr__
        return frames

    def _leaf_frames(self) -> list[dict[str, Any]]:
        return [frame for frames in self._frames.values() for frame in frames.values()]

    def _node_type(self, ntype: str | None) -> str:
        if ntype is None:
            if len(self.n_id) != 1:
                raise ValueError(f"ntype: the block has node types {list(self.n_id)}; name one")
            return next(iter(self.n_id))
        if ntype not in self.n_id:
            raise KeyError(f"ntype: unknown node type {ntype!r} (node types: {list(self.n_id)})")
        return ntype

    def _edge_type(self, etype: EdgeType | str | None) -> EdgeType:
        if etype is None:
            if len(self.relations) != 1:
                raise ValueError(f"etype: the block has edge types {list(self.relations)}; name one")
            return next(iter(self.relations))
        return canonical_edge_type(tuple(self.relations), etype)

    @property
    def srcdata(self) -> MutableMapping:
        """The sources' data (per node type where there are several): ``srcdata[dgl.NID]`` their global ids."""
        return typed_view(self._frames["src"])

    @property
    def dstdata(self) -> MutableMapping:
        """The destinations' data: ``dstdata[dgl.NID]`` their global ids (each type's sources' first rows)."""
        return typed_view(self._frames["dst"])

    @property
    def edata(self) -> MutableMapping:
        """The edges' data (per edge type where there are several): ``edata[dgl.EID]`` their ids in the type."""
        return typed_view(self._frames["edge"])

    @property
    def srcnodes(self) -> TypeIndex:
        return TypeIndex(self._frames["src"], self._node_type)

    @property
    def dstnodes(self) -> TypeIndex:
        return TypeIndex(self._frames["dst"], self._node_type)

    @property
    def ntypes(self) -> list[str]:
        return list(self.n_id)

    srctypes = dsttypes = ntypes

    @property
    def etypes(self) -> list[str]:
        return [et[1] for et in self.relations]

    @property
    def device(self) -> torch.device:
        return next(iter(self.n_id.values())).device

    @property
    def idtype(self) -> torch.dtype:
        """The type of the block's ids, as DGL's ``idtype``."""
        return next(iter(self.n_id.values())).dtype

    def num_src_nodes(self, ntype: str | None = None) -> int:
        """How many sources of ``ntype`` the block reads (None: the one node type)."""
        return self.n_id[self._node_type(ntype)].numel()

    def num_dst_nodes(self, ntype: str | None = None) -> int:
        """How many destinations of ``ntype`` the block computes: its sources' prefix."""
        return self.num_dst_nodes_dict[self._node_type(ntype)]

    def num_edges(self, etype: EdgeType | str | None = None) -> int:
        """The edges of ``etype`` (None: of every type)."""
        if etype is None:
            return sum(graph.num_edges for graph in self.relations.values())
        return self.relations[self._edge_type(etype)].num_edges

    number_of_src_nodes = num_src_nodes
    number_of_dst_nodes = num_dst_nodes
    number_of_edges = num_edges

    def edges(
        self, form: str = "uv", order: str = "eid", etype: EdgeType | str | None = None
    ) -> tuple[torch.Tensor, ...]:
        """The local (source, destination) ids of ``etype``'s edges (None: the one edge type), as DGL's."""
        return edge_tuple(self.relations[self._edge_type(etype)], form, order)

    def __getitem__(self, etype: EdgeType | str) -> Any:
        """The block of one relation (DGL's ``block[etype]``): its edges, its two node types' ids."""
        edge_type = self._edge_type(etype)
        types = dict.fromkeys((edge_type[0], edge_type[2]))
        return type(self)(
            {edge_type: self.relations[edge_type]},
            {t: self.n_id[t] for t in types},
            {t: self.num_dst_nodes_dict[t] for t in types},
            {edge_type: self.e_id[edge_type]},
        )


def edge_tuple(graph: Graph, form: str, order: str) -> tuple[torch.Tensor, ...]:
    """DGL's ``edges(form, order)`` of ``graph``: (src, dst) local ids in edge-id order, ``"all"`` adding the
    edge ids."""
    if order != "eid":
        raise ValueError(f"edges: order {order!r} is not supported; featgraph's graphs give order='eid'")
    src, dst = graph.coo()
    if form == "uv":
        return src, dst
    if form == "all":
        return src, dst, torch.arange(src.numel(), device=src.device)
    raise ValueError(f"edges: form must be 'uv' or 'all', got {form!r}")


class Count(int):
    """A count that is also DGL's method form of it: ``graph.num_nodes`` is featgraph's int and
    ``graph.num_nodes()`` DGL's call (an optional type name, the one type's, is accepted)."""

    def __call__(self, name: Any = None) -> int:
        return int(self)


class PairGraph(Graph):
    """An edge-prediction batch's pair graph: a featgraph ``Graph`` over the batch's seed vertices (usable
    wherever featgraph takes one) with DGL's graph methods: ``num_nodes()`` / ``num_edges()`` (also plain ints,
    featgraph's properties), ``edges()``, ``ndata[dgl.NID]`` (the seeds' global ids; per node type on a typed
    batch's relation between two types), ``edata[dgl.EID]`` (the
    positives' edge ids; absent for negatives), ``device``, ``idtype``. Graphs derived from it (``reverse()``,
    looped) are plain ``Graph``s."""

    def __init__(self, src: Any, dst: Any, num_nodes: Any, node_ids: Any, edge_ids: torch.Tensor | None = None) -> None:
        super().__init__(src, dst, num_nodes)
        self._ids = (node_ids, edge_ids)  # node_ids: a tensor, or per node type where the ends' types differ

    @classmethod
    def _derived(cls, *args: Any) -> Graph:
        return Graph._derived(*args)

    def _mapped(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> PairGraph:
        moved = Graph._mapped(self, fn)
        pair = PairGraph.__new__(PairGraph)
        pair.__dict__.update(moved.__dict__)
        node_ids, edge_ids = self._ids
        moved_nodes = {t: fn(ids) for t, ids in node_ids.items()} if isinstance(node_ids, dict) else fn(node_ids)
        pair._ids = (moved_nodes, None if edge_ids is None else fn(edge_ids))
        return pair

    @property
    def ndata(self) -> dict[str, Any]:
        """The vertices' data: ``ndata[dgl.NID]`` the seeds' global ids."""
        return self._frame("ndata", {ID: self._ids[0]})

    @property
    def edata(self) -> dict[str, Any]:
        """The edges' data: ``edata[dgl.EID]`` the positive edges' ids (nothing for negative pairs)."""
        return self._frame("edata", {} if self._ids[1] is None else {ID: self._ids[1]})

    def _frame(self, name: str, initial: dict[str, Any]) -> dict[str, Any]:
        return self.__dict__.setdefault(f"_dgl_{name}", initial)

    @property
    def num_nodes(self) -> Count:
        return Count(super().num_nodes)

    @property
    def num_src_nodes(self) -> Count:
        return Count(super().num_src_nodes)

    @property
    def num_dst_nodes(self) -> Count:
        return Count(super().num_dst_nodes)

    @property
    def num_edges(self) -> Count:
        return Count(super().num_edges)

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    @property
    def idtype(self) -> torch.dtype:
        node_ids = self._ids[0]
        return next(iter(node_ids.values())).dtype if isinstance(node_ids, dict) else node_ids.dtype

    def edges(self, form: str = "uv", order: str = "eid", etype: Any = None) -> tuple[torch.Tensor, ...]:
        """The pairs' local (source, destination) ids, as DGL's ``edges()``."""
        return edge_tuple(self, form, order)


class HeteroPairGraph(dict):
    """A typed edge-prediction batch's pair graph: a dict seed edge type -> ``PairGraph`` (from its source
    type's seeds to its destination type's) with DGL's heterograph methods: ``pair[etype]`` by canonical type
    or relation name, ``edata[dgl.EID]`` / ``ndata[dgl.NID]`` per type, ``num_nodes(ntype)``,
    ``num_edges(etype)``, ``edges(etype=...)``, ``canonical_etypes``, ``ntypes``, ``device``, ``idtype``."""

    def __init__(self, pairs: Mapping[EdgeType, PairGraph], node_ids: Mapping[str, torch.Tensor]) -> None:
        super().__init__(pairs)
        self.node_ids = dict(node_ids)

    def __getitem__(self, etype: EdgeType | str) -> PairGraph:
        return dict.__getitem__(self, canonical_edge_type(tuple(self), etype))

    @property
    def canonical_etypes(self) -> list[EdgeType]:
        return list(self)

    @property
    def etypes(self) -> list[str]:
        return [et[1] for et in self]

    @property
    def ntypes(self) -> list[str]:
        return list(self.node_ids)

    @property
    def edata(self) -> MutableMapping:
        """Per edge type its frame (``edata[dgl.EID]``: the positives' edge ids within the type)."""
        return typed_view({et: pair.edata for et, pair in self.items()})

    @property
    def ndata(self) -> MutableMapping:
        """Per node type the seeds' global ids, ``ndata[dgl.NID]``."""
        return typed_view({t: {ID: ids} for t, ids in self.node_ids.items()})

    @property
    def device(self) -> torch.device:
        return next(iter(self.node_ids.values())).device

    @property
    def idtype(self) -> torch.dtype:
        return next(iter(self.node_ids.values())).dtype

    def num_nodes(self, ntype: str | None = None) -> int:
        """The seeds of ``ntype`` (None: of every type)."""
        if ntype is None:
            return sum(ids.numel() for ids in self.node_ids.values())
        if ntype not in self.node_ids:
            raise KeyError(f"ntype: unknown node type {ntype!r} (node types: {list(self.node_ids)})")
        return self.node_ids[ntype].numel()

    def num_edges(self, etype: EdgeType | str | None = None) -> int:
        """The pairs of ``etype`` (None: of every type)."""
        if etype is None:
            return sum(pair.num_edges for pair in self.values())
        return self[etype].num_edges

    number_of_nodes = num_nodes
    number_of_edges = num_edges

    def edges(self, form: str = "uv", order: str = "eid", etype: EdgeType | str | None = None) -> tuple:
        """The local (source, destination) ids of ``etype``'s pairs (None: the one edge type)."""
        if etype is None and len(self) != 1:
            raise ValueError(f"etype: the pair graph has edge types {list(self)}; name one")
        return self[next(iter(self)) if etype is None else etype].edges(form, order)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> HeteroPairGraph:
        """The pair graph on ``device``."""
        return HeteroPairGraph(
            {et: pair.to(device, non_blocking) for et, pair in self.items()},
            {t: ids.to(device, non_blocking=non_blocking) for t, ids in self.node_ids.items()},
        )

    def pin_memory(self) -> HeteroPairGraph:
        """The pair graph in page-locked memory."""
        return HeteroPairGraph(
            {et: pair.pin_memory() for et, pair in self.items()},
            {t: ids.pin_memory() for t, ids in self.node_ids.items()},
        )
