"""Partitions on disk, one directory per graph: ``meta.json`` (graph fingerprint, part count, method, sizes)
and ``part-<k>.pt`` per part, which its rank loads alone.

A part owns some vertices (``own``, global ids, ascending) and all their in-edges. Its local vertex ids are
its own vertices (0..num_own-1) then its halo: the sources of its in-edges owned by other parts, grouped by
owner part and ascending within each. Its in-edges form a bipartite CSR (destinations: its own vertices;
sources: own + halo), the layout of a sampled block, so featgraph's bipartite layers run on it as they are.
``send_index[q]`` lists the own rows part ``q``'s halo holds, in its order, and ``recv_counts[q]`` how many
of this part's halo rows ``q`` owns: what one halo exchange sends and receives.

Every file is written whole and renamed into place (``checked_file``); ``meta.json``, written last, records
each part file's SHA-256 digest, and each part file its rank and the graph's fingerprint, so a damaged,
truncated or swapped file is reported by name when a rank loads it, an intact one in the wrong place as what
it is (the part of another rank, a part of another graph).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from ..graph import Graph
from .checked_file import read_verified, write_atomically, write_text_atomically
from .partition import edge_cut

FORMAT_VERSION = 2  # part files carry their rank and graph fingerprint; meta.json their digests
META_FILE = "meta.json"


def rebuild_hint(directory: str | Path) -> str:
    """How to replace a partition directory that cannot be used."""
    return (
        f"delete {str(directory)!r} and partition again (featgraph.distributed.save_parts, or featgraph train "
        "--distributed, which partitions into a --partition-dir that holds none)"
    )


@dataclass(frozen=True)
class Part:
    """One part of a partitioned graph, as its rank loads it (see the module's docstring)."""

    rank: int
    num_parts: int
    own: torch.Tensor  # (num_own,) global ids of the vertices this part owns, ascending
    halo: torch.Tensor  # (num_halo,) global ids of the other parts' sources of its in-edges
    indptr: torch.Tensor  # (num_own + 1,) CSR of in-edges over the own vertices
    indices: torch.Tensor  # (num_local_edges,) local source ids in [0, num_own + num_halo)
    edge_ids: torch.Tensor  # (num_local_edges,) each local edge's id in the whole graph
    degree: torch.Tensor  # (num_own + num_halo,) in-degree in the whole graph, self loops excluded
    send_index: list[torch.Tensor]  # per part q: own rows (local ids) that q's halo holds, in q's order
    recv_counts: list[int]  # per part q: how many halo rows q owns (0 for this part)
    features: torch.Tensor  # (num_own, F)
    labels: torch.Tensor | None  # (num_own,)
    masks: dict[str, torch.Tensor]  # name -> (num_own,) bool, e.g. train/val/test

    @property
    def num_own(self) -> int:
        return self.own.numel()

    @property
    def num_halo(self) -> int:
        return self.halo.numel()

    def graph(self) -> Graph:
        """The part's in-edges as a bipartite graph: sources own + halo, destinations own (the first sources)."""
        return Graph.from_csr(self.indptr, self.indices, self.num_own + self.num_halo)


def save_parts(
    directory: str | Path,
    graph: Graph,
    parts: torch.Tensor,
    features: torch.Tensor,
    labels: torch.Tensor | None = None,
    masks: dict[str, torch.Tensor] | None = None,
    method: str = "given",
) -> dict:
    """Write ``graph`` split by ``parts`` (the owning part of each vertex, as ``partition`` gives) to
    ``directory``, with each part's rows of ``features``, ``labels`` and the boolean vertex ``masks``.
    Returns the metadata written to ``meta.json``."""
    n = graph.num_nodes
    parts = torch.as_tensor(parts).cpu()
    if parts.shape != (n,) or parts.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"parts must be an integer tensor of shape ({n},), got {parts.dtype} {tuple(parts.shape)}")
    parts = parts.to(torch.int64)
    num_parts = int(parts.max()) + 1 if n else 1
    if n and int(parts.min()) < 0:
        raise ValueError(f"parts holds a negative part id {int(parts.min())}")
    masks = dict(masks or {})
    _check_rows("features", features, n)
    if labels is not None:
        _check_rows("labels", labels, n)
    for name, mask in masks.items():
        _check_rows(f"masks[{name!r}]", mask, n)
        if mask.dtype != torch.bool:
            raise TypeError(f"masks[{name!r}] must be a bool tensor, got {mask.dtype}")
    src, dst = (t.cpu() for t in graph.coo())
    degree = torch.bincount(dst[src != dst], minlength=n)
    owners = [torch.nonzero(parts == k).flatten() for k in range(num_parts)]
    local = torch.empty(n, dtype=torch.int64)  # reused per part: global id -> local id
    halos, pieces = [], []
    for k, own in enumerate(owners):
        into = torch.nonzero(parts[dst] == k).flatten()  # edge ids into part k, ascending
        sources = src[into]
        foreign = torch.unique(sources[parts[sources] != k])
        halo = foreign[torch.argsort(parts[foreign] * n + foreign)]
        local[own] = torch.arange(own.numel())
        local[halo] = own.numel() + torch.arange(halo.numel())
        order = torch.sort(local[dst[into]], stable=True).indices
        into = into[order]
        counts = torch.bincount(local[dst[into]], minlength=own.numel())
        indptr = torch.zeros(own.numel() + 1, dtype=torch.int64)
        indptr[1:] = torch.cumsum(counts, 0)
        halos.append(halo)
        pieces.append((own, halo, indptr, local[src[into]], into))
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    sizes = []
    for k, (own, halo, indptr, indices, edge_ids) in enumerate(pieces):
        send_index = [torch.searchsorted(own, halos[q][parts[halos[q]] == k]) for q in range(num_parts)]
        recv_counts = [int((parts[halo] == q).sum()) for q in range(num_parts)]
        record = {
            "rank": k, "num_parts": num_parts, "own": own, "halo": halo, "indptr": indptr, "indices": indices,
            "edge_ids": edge_ids, "degree": degree[torch.cat([own, halo])], "send_index": send_index,
            "recv_counts": recv_counts, "features": features[own].contiguous(),
            "labels": None if labels is None else labels[own].contiguous(),
            "masks": {name: mask[own].contiguous() for name, mask in masks.items()},
            "fingerprint": graph.fingerprint,
        }  # fmt: skip
        digest = write_atomically(directory / f"part-{k}.pt", record)
        sizes.append({"own": own.numel(), "halo": halo.numel(), "edges": edge_ids.numel(), "sha256": digest})
    meta = {
        "format": FORMAT_VERSION, "fingerprint": graph.fingerprint, "num_parts": num_parts, "method": method,
        "num_nodes": n, "num_edges": graph.num_edges, "edge_cut": edge_cut(graph, parts), "parts": sizes,
    }  # fmt: skip
    write_text_atomically(directory / META_FILE, json.dumps(meta, indent=1))
    return meta


def read_meta(directory: str | Path) -> dict:
    """The metadata of a partition directory; a clear error where there is none."""
    path = Path(directory) / META_FILE
    if not path.is_file():
        raise FileNotFoundError(f"directory {str(directory)!r} holds no partition ({META_FILE} is missing)")
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{str(path)!r} is damaged ({err}); {rebuild_hint(directory)}") from err
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_VERSION:
        found = meta.get("format") if isinstance(meta, dict) else None
        raise ValueError(
            f"directory {str(directory)!r}: partition format {found!r}, expected {FORMAT_VERSION}; "
            f"{rebuild_hint(directory)}"
        )
    return meta


def check_meta(meta: dict, directory: str | Path, fingerprint: str | None = None, num_parts: int | None = None) -> None:
    """Raise where the partition in ``directory`` was made for another graph or part count."""
    if fingerprint is not None and meta["fingerprint"] != fingerprint:
        raise ValueError(
            f"directory {str(directory)!r} holds a partition of another graph (fingerprint {meta['fingerprint']}, "
            f"this graph's is {fingerprint}); partition this graph into a new directory"
        )
    if num_parts is not None and meta["num_parts"] != num_parts:
        raise ValueError(
            f"directory {str(directory)!r} holds {meta['num_parts']} parts, but {num_parts} were asked for"
        )


def load_part(directory: str | Path, rank: int, world_size: int, fingerprint: str | None = None) -> Part:
    """Part ``rank`` of the partition in ``directory``, for a job of ``world_size`` processes (one part each,
    so the part count must equal ``world_size``); with ``fingerprint``, the partition must be of that graph."""
    meta = read_meta(directory)
    if meta["num_parts"] != world_size:
        raise ValueError(
            f"world size {world_size} does not match the {meta['num_parts']} parts in {str(directory)!r}: "
            "run one process per part, or partition again"
        )
    check_meta(meta, directory, fingerprint)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int in [0, {world_size}), got {rank!r}")
    path = Path(directory) / f"part-{rank}.pt"
    hint = rebuild_hint(directory)
    try:
        record = read_verified(path, hint, meta["parts"][rank]["sha256"])
    except ValueError as err:
        stray = _stray_part(path, meta, hint)
        if stray is None:
            raise
        raise ValueError(_misplaced(path, stray, rank, hint)) from err
    what = _held_part(record, meta)
    if what != f"the part of rank {rank}":
        raise ValueError(_misplaced(path, what, rank, hint))
    return Part(**{f.name: record[f.name] for f in fields(Part)})


# what a misplaced part file is -> how it got there
_CAUSES = {
    "the part of rank": "part files swapped between ranks",
    "a part of another graph": "copied in from a partition of another graph",
    "a part of another partition": "copied in from another partition of this graph",
    "not a part file": "not written by save_parts",
}


def _held_part(record: object, meta: dict) -> str:
    """What a part file's ``record`` is, told from the rank, part count and graph fingerprint it carries."""
    if not isinstance(record, dict) or not isinstance(record.get("fingerprint"), str):
        return "not a part file"
    rank, num_parts, fingerprint = record.get("rank"), record.get("num_parts"), record["fingerprint"]
    if fingerprint != meta["fingerprint"]:
        return (
            f"a part of another graph (its part {rank!r}, of graph {fingerprint}; this partition's graph is "
            f"{meta['fingerprint']})"
        )
    if num_parts != meta["num_parts"]:
        return f"a part of another partition of this graph (its part {rank!r} of {num_parts!r})"
    return f"the part of rank {rank!r}"


def _stray_part(path: Path, meta: dict, hint: str) -> str | None:
    """What the file at ``path``, whose digest is not the one recorded for it, is where it is an intact part
    file from elsewhere: another rank's (its digest is the one recorded for that rank) or another partition's;
    None where it is none of these (damaged)."""
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
    for k, part in enumerate(meta["parts"]):
        if isinstance(part, dict) and part.get("sha256") == digest:
            return f"the part of rank {k}"
    try:
        record = read_verified(path, hint)
    except ValueError:
        return None
    if not _consistent(record):
        return None
    if record["fingerprint"] != meta["fingerprint"] and not _unrelated(record["fingerprint"], meta["fingerprint"]):
        return None  # one character changed: this graph's part, damaged
    what = _held_part(record, meta)
    return what if what.startswith("a part of another") else None


def _consistent(record: object) -> bool:
    """Whether ``record`` is a part file's, its rank and part count agreeing with its per-part lists (a damaged
    byte that still loads changes one of them, not all)."""
    if not isinstance(record, dict) or not isinstance(record.get("fingerprint"), str):
        return False
    rank, num_parts = record.get("rank"), record.get("num_parts")
    if not isinstance(rank, int) or not isinstance(num_parts, int) or not 0 <= rank < num_parts:
        return False
    lists = (record.get("send_index"), record.get("recv_counts"))
    return all(isinstance(v, list) and len(v) == num_parts for v in lists)


def _unrelated(a: str, b: str) -> bool:
    """Whether two fingerprints differ in most of their characters, as two graphs' digests do (a damaged byte
    changes one)."""
    return len(a) != len(b) or 2 * sum(x != y for x, y in zip(a, b, strict=True)) > len(a)


def _misplaced(path: Path, what: str, rank: int, hint: str) -> str:
    """The error for part ``rank``'s file at ``path`` holding ``what`` instead."""
    cause = next(cause for start, cause in _CAUSES.items() if what.startswith(start))
    return f"{str(path)!r} is {what}, not the part of rank {rank} ({cause}); {hint}"


def _check_rows(name: str, tensor: torch.Tensor, n: int) -> None:
    if not isinstance(tensor, torch.Tensor) or tensor.dim() < 1 or tensor.shape[0] != n:
        shape = tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise ValueError(f"{name} must be a tensor with one row per vertex ({n}), got {shape}")
