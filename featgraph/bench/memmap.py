"""``featgraph bench memmap``: mini-batch training on features kept in a file, a ``numpy.memmap`` in PyG's
``Data`` that ``NeighborLoader`` reads batch by batch, against the same features loaded into memory; each row in
its own process. Reported: the peak resident memory, its anonymous part (the process's own memory) and its
file-backed part (the file's pages mapped in, page cache the kernel may drop), against the features' size.

The graph is products-like at ``--scale`` with ``--width`` random float32 features per vertex, written to a
``.npy`` file in chunks (never held whole by the command); a two-layer GraphSAGE (featgraph's layers, 64
hidden) trains ``--batches`` batches of ``--batch-size`` seeds with fan-outs ``--fanouts``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from ..datasets import products_like
from .measure import status_kb
from .report import Table, machine, run_worker, write_json

MODES = ("memory-mapped", "in memory")
CHUNK_ROWS = 1 << 16  # rows written at a time
STATUS_FIELDS = ("VmRSS", "RssAnon", "RssFile")
HIDDEN = 64


@dataclass
class Row:
    mode: str
    features_mb: float
    peak_rss_mb: float | None = None
    peak_anon_mb: float | None = None
    peak_file_mb: float | None = None
    ms_per_batch: float | None = None
    note: str = ""


TABLE = Table({
    "features": "mode", "features MB": "features_mb:.0f", "peak RSS MB": "peak_rss_mb:.0f",
    "anonymous MB": "peak_anon_mb:.0f", "file-backed MB": "peak_file_mb:.0f",
    "anonymous / features": lambda r: f"{r['peak_anon_mb'] / r['features_mb']:.2f}" if r["peak_anon_mb"] else "-",
    "ms / batch": "ms_per_batch:.1f", "note": "note",
})  # fmt: skip


def write_features(path: Path, rows: int, width: int, seed: int = 0) -> None:
    """``rows`` x ``width`` random float32 features into a ``.npy`` file, ``CHUNK_ROWS`` rows at a time."""
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, width))
    gen = torch.Generator().manual_seed(seed)
    for start in range(0, rows, CHUNK_ROWS):
        stop = min(rows, start + CHUNK_ROWS)
        out[start:stop] = torch.randn(stop - start, width, generator=gen).numpy()
    out.flush()
    del out


def run_one(path: str, scale: float, batches: int, batch_size: int, fanouts: list[int], mode: str) -> Row:
    """One row, meant for a fresh process: train on the features at ``path``, mapped or loaded."""
    from torch_geometric.data import Data

    from ..loader import NeighborLoader
    from ..nn import SAGEConv

    dataset = products_like(scale)
    mapped = np.load(path, mmap_mode="r")
    features_mb = mapped.nbytes / 2**20
    x = mapped if mode == MODES[0] else torch.from_numpy(np.load(path))
    data = Data(x=x, edge_index=dataset.edge_index, y=dataset.labels)
    width = mapped.shape[1]
    convs = torch.nn.ModuleList([SAGEConv(width, HIDDEN), SAGEConv(HIDDEN, dataset.num_classes)])
    optimizer = torch.optim.Adam(convs.parameters(), lr=0.01)
    loader = NeighborLoader(data, fanouts, batch_size=batch_size, shuffle=True, seed=0, input_nodes=dataset.train_idx)
    peaks = dict.fromkeys(STATUS_FIELDS, 0.0)
    start, done = time.perf_counter(), 0
    for batch in loader:
        h = convs[1](convs[0](batch.x, batch.edge_index).relu(), batch.edge_index)[: batch.batch_size]
        loss = torch.nn.functional.cross_entropy(h, batch.y[: batch.batch_size])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        peaks = {field: max(peak, (status_kb(field) or 0) / 1024) for field, peak in peaks.items()}
        done += 1
        if done == batches:
            break
    ms = (time.perf_counter() - start) / max(done, 1) * 1e3
    return Row(mode, features_mb, peaks["VmRSS"], peaks["RssAnon"], peaks["RssFile"], ms)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scale", type=float, default=0.1, help="products-like's scale (default 0.1)")
    parser.add_argument("--width", type=int, default=1024, help="features per vertex (default 1024)")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--fanouts", type=int, nargs="+", default=[10, 5])
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[Row]:
    if args.width < 1 or args.batches < 1 or args.batch_size < 1:
        raise SystemExit("memmap: --width, --batches and --batch-size must be >= 1")
    print(f"machine: {machine()}")
    num_nodes = products_like(args.scale).graph.num_nodes
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "features.npy"
        write_features(path, num_nodes, args.width)
        print(f"products-like at {args.scale}: {num_nodes:,} vertices, features {num_nodes:,} x {args.width} float32")
        for mode in MODES:
            spec = [str(path), args.scale, args.batches, args.batch_size, list(args.fanouts), mode]
            row = run_worker("featgraph.bench.memmap", spec)
            rows.append(Row(mode, 0.0, note=row) if isinstance(row, str) else Row(**row))
    print(TABLE([asdict(r) for r in rows]))
    write_json(args.json, [asdict(r) for r in rows])
    return rows


if __name__ == "__main__":  # the worker: one row as JSON on the last line of stdout
    print(json.dumps(asdict(run_one(*json.loads(sys.argv[1])))))
