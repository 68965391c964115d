"""DGL's block interface on featgraph's blocks, without DGL: what DGL code reads of a block (``srcdata``,
``dstdata`` and ``edata`` frames holding ``dgl.NID`` / ``dgl.EID``, ``num_src_nodes()``, ``number_of_*``,
``device``, ``edges()``, ``local_scope()``), so a loop written against DGL's ``DataLoader`` runs on
featgraph's batches as they come."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..graph import Graph

ID = "_ID"  # dgl.NID and dgl.EID


class DGLBlockView:
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
        if order != "eid":
            raise ValueError(f"edges: order {order!r} is not supported; featgraph's blocks give order='eid'")
        src, dst = self.graph.coo()
        if form == "uv":
            return src, dst
        if form == "all":
            return src, dst, torch.arange(src.numel(), device=src.device)
        raise ValueError(f"edges: form must be 'uv' or 'all', got {form!r}")

    def in_degrees(self) -> torch.Tensor:
        return self.graph.in_degrees()

    @contextmanager
    def local_scope(self) -> Iterator[DGLBlockView]:
        """Within the block, data assigned to its frames is forgotten on leaving the scope (DGL's
        ``local_scope``): the frames are restored to what they held on entering."""
        saved = {name: dict(frame) for name, frame in self._frames.items()}
        try:
            yield self
        finally:
            for name, frame in self._frames.items():
                frame.clear()
                frame.update(saved[name])


def _one_type(name: str | None, argument: str) -> None:
    if name is not None and name not in ("_N", "_E"):
        raise ValueError(f"{argument}={name!r}: a homogeneous block has one node and one edge type")
