"""``featgraph bench rgcn-train``: RGCN entity-classification training epochs (2 layers, 16 hidden, no bases,
mean per relation, as Schlichtkrull et al.) on graphs of the RGCN datasets' shapes (``entity_like``):
featgraph's ``RGCNConv`` (PyG's API) and ``RelGraphConv`` (DGL's API, ``featgraph-dgl-api``) against PyG's
``RGCNConv`` (a loop over relations), PyG's ``FastRGCNConv`` (an
(E, in, out) weight per edge, skipped where it passes ``--fast-max-gb``) and DGL's ``RelGraphConv`` where DGL
installs; on request (``--frameworks ... featgraph-compiled``) featgraph's model under
``torch.compile(fullgraph=True)``. Each row trains in a fresh process: seconds per epoch (forward, loss on the
training nodes, backward, Adam step) and the peak memory the training adds. ``--device cuda`` trains every row on
the GPU (graphs, features and models there, featgraph's layers on its GPU kernels; DGL's row is not run, its
build being CPU-only), epochs timed to the end of their GPU work, peak memory the GPU's; a row that runs out of
GPU memory says so in its note.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, replace

import torch
import torch.nn.functional as F

from ..datasets import ENTITY_SHAPES, entity_like
from ..datasets.planted import EntityDataset
from ..graph.interop import import_dgl
from .hetero import OUT_OF_MEMORY, on_device
from .measure import peak_extra_mb
from .report import Table, add_common_arguments, device_name, machine, run_worker, write_json
from .training import epoch_ms

FRAMEWORKS = ("featgraph", "featgraph-compiled", "featgraph-dgl-api", "pyg", "pyg-fast", "dgl")
DEFAULT_FRAMEWORKS = tuple(f for f in FRAMEWORKS if f != "featgraph-compiled")
HIDDEN = 16
TABLE = Table({
    "graph": lambda r: f"{r.graph} ({r.nodes} nodes, {r.edges} edges, {r.relations} relations)",
    "framework": "framework", "ms/epoch": "ms:.1f", "time / featgraph": "ratio:.2f", "peak MB": "peak_mb:.0f",
    "note": "note",
})  # fmt: skip


@dataclass
class Row:
    graph: str
    framework: str
    nodes: int = 0
    edges: int = 0
    relations: int = 0
    ms: float | None = None
    peak_mb: float | None = None
    ratio: float | None = None
    note: str = ""


class RGCN(torch.nn.Module):
    """Two relational layers with a ReLU between; ``conv`` builds a layer from (in, out)."""

    def __init__(self, conv, in_channels: int, classes: int) -> None:
        super().__init__()
        self.conv1, self.conv2 = conv(in_channels, HIDDEN), conv(HIDDEN, classes)

    def forward(self, x: torch.Tensor, *graph: object) -> torch.Tensor:
        return self.conv2(F.relu(self.conv1(x, *graph)), *graph)


class OnTrainingNodes(torch.nn.Module):
    """``model``'s outputs on the training nodes only, called as ``training.epoch_ms`` calls a net (the graph
    arguments as one tuple), so that the loss it takes is on those nodes."""

    def __init__(self, model: torch.nn.Module, train_idx: torch.Tensor) -> None:
        super().__init__()
        self.model, self.train_idx = model, train_idx

    def forward(self, x: torch.Tensor, graph: tuple) -> torch.Tensor:
        return self.model(x, *graph)[self.train_idx]


class DglRGCN(torch.nn.Module):
    """``RelGraphConv`` (DGL's, or featgraph's with DGL's API) twice, each edge weighted by 1 / (its
    destination's in-edges of its relation): the mean per relation. The edges come sorted by relation, so DGL
    takes its ``presorted`` path (``segment_mm`` over each relation's messages rather than ``gather_mm`` by
    type)."""

    def __init__(self, conv, in_channels: int, classes: int, relations: int) -> None:
        super().__init__()
        self.conv1, self.conv2 = conv(in_channels, HIDDEN, relations), conv(HIDDEN, classes, relations)

    def forward(self, x: torch.Tensor, g: object, etype: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.conv1(g, x, etype, norm, presorted=True))
        return self.conv2(g, h, etype, norm, presorted=True)


def _model(framework: str, data: EntityDataset, fast_max_gb: float) -> tuple[torch.nn.Module, tuple] | str:
    """The model on the data's device and its graph arguments, or why the framework does not run here."""
    hg, relations, width = data.graph, data.graph.num_relations, data.x.shape[1]
    edge_index, edge_type, device = hg.graph.edge_index, hg.etype, hg.device
    if framework in ("featgraph", "featgraph-compiled"):
        from ..nn import RGCNConv

        model = RGCN(lambda i, o: RGCNConv(i, o, relations), width, data.num_classes).to(device)
        return (model if framework == "featgraph" else torch.compile(model, fullgraph=True)), (hg,)
    if framework in ("pyg", "pyg-fast"):
        from torch_geometric import nn as pyg_nn

        if framework == "pyg-fast":
            gb = hg.num_edges * width * HIDDEN * 4 / 2**30
            if gb > fast_max_gb:
                return f"skipped: its per-edge weight takes {gb:.1f} GB (--fast-max-gb {fast_max_gb:g})"
        conv = pyg_nn.RGCNConv if framework == "pyg" else pyg_nn.FastRGCNConv
        model = RGCN(lambda i, o: conv(i, o, relations), width, data.num_classes).to(device)
        return model, (edge_index, edge_type)
    src, dst = edge_index
    counts = torch.zeros(hg.num_nodes * relations, dtype=torch.float32, device=device)
    slot = dst * relations + edge_type
    counts.index_add_(0, slot, torch.ones_like(slot, dtype=torch.float32))
    norm = (1.0 / counts[slot]).unsqueeze(1)
    if framework == "featgraph-dgl-api":
        from ..nn import RelGraphConv

        model = DglRGCN(RelGraphConv, width, data.num_classes, relations).to(device)
        return model, (hg.graph, edge_type, norm)
    if device.type != "cpu":
        return f"not run on {device.type}: DGL's CPU build"
    dgl = import_dgl()
    if dgl is None:
        return "skipped: DGL is not installed"
    g = dgl.graph((src, dst), num_nodes=hg.num_nodes)
    return DglRGCN(dgl.nn.pytorch.RelGraphConv, width, data.num_classes, relations), (g, edge_type, norm)


def run_one(shape: str, scale: float, framework: str, repeat: int, fast_max_gb: float, device: str = "cpu") -> Row:
    """One row on ``device``, meant for a fresh process: the median epoch after two warm-up epochs, and the peak
    memory the training adds above the resident data and model (on a GPU, above the memory allocated there)."""
    where = torch.device(device)
    data = entity_like(shape, scale)
    data = replace(
        data, graph=on_device(data.graph, where), x=data.x.to(where), y=data.y.to(where),
        train_idx=data.train_idx.to(where), test_idx=data.test_idx.to(where),
    )  # fmt: skip
    hg = data.graph
    row = Row(data.name, framework, hg.num_nodes, hg.num_edges, hg.num_relations)
    torch.manual_seed(0)
    built = _model(framework, data, fast_max_gb)
    if isinstance(built, str):
        row.note = built
        return row
    model, graph = built
    net = OnTrainingNodes(model, data.train_idx)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    y = data.y[data.train_idx]
    times: list[float] = []
    try:
        row.peak_mb = peak_extra_mb(lambda: times.extend(epoch_ms(net, graph, optimizer, data.x, y, repeat)), where)
    except torch.OutOfMemoryError:
        row.note = OUT_OF_MEMORY
        return row
    except (RuntimeError, MemoryError) as err:
        row.note = f"failed: {str(err)[:80]}"
        return row
    row.ms = times[1]
    return row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shapes", nargs="+", default=["aifb", "mutag", "bgs", "am"], choices=list(ENTITY_SHAPES))
    parser.add_argument(
        "--frameworks", nargs="+", default=list(DEFAULT_FRAMEWORKS), choices=FRAMEWORKS,
        help="featgraph-compiled: featgraph's model under torch.compile(fullgraph=True), Inductor (not by default)",
    )  # fmt: skip
    parser.add_argument("--fast-max-gb", type=float, default=4.0, help="skip FastRGCNConv above this per-edge weight")
    add_common_arguments(parser, repeat=3, scale=1.0, scale_help="shrink the graphs' nodes and edges")
    parser.add_argument("--device", default="cpu", help="where the models train: cpu (default) or cuda")


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}; device: {device_name(args.device)}")
    print(TABLE.header, flush=True)
    rows: list[Row] = []
    for shape in args.shapes:
        batch = []
        for framework in args.frameworks:
            spec = [shape, args.scale, framework, args.repeat, args.fast_max_gb, args.device]
            result = run_worker(__name__, spec)
            batch.append(Row(shape, framework, note=result) if isinstance(result, str) else Row(**result))
        ours = batch[0].ms if batch[0].framework == "featgraph" else None
        for row in batch:
            row.ratio = None if row.ms is None or not ours else row.ms / ours
        print(TABLE.rows(batch), flush=True)
        rows += batch
    write_json(args.json, [asdict(r) for r in rows], device=device_name(args.device))
    return rows


if __name__ == "__main__":  # the worker: one row as JSON on the last line of stdout
    print(json.dumps(asdict(run_one(*json.loads(sys.argv[1])))))
