"""``featgraph bench dropout``: featgraph's hashed-mask dropout (``featgraph.ops.dropout``, the mask recomputed
in backward) against torch's ``F.dropout``, forward + backward, in the same run."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from functools import partial

import torch
import torch.nn.functional as F

from ..ops import dropout
from ..timing import interleaved_best_ms
from .kernels import ForwardBackward
from .report import Table, add_common_arguments, machine, write_json

SHAPES = {"Cora input": (2708, 1433), "hidden": (100_000, 128)}  # tensor: (rows, columns) at scale 1
TABLE = Table({
    "tensor": lambda r: f"{r.tensor} ({r.rows} x {r.columns})", "featgraph ms": "featgraph_ms:.2f",
    "torch ms": "torch_ms:.2f", "torch / featgraph": lambda r: f"{r.torch_over_featgraph:.1f}x",
})  # fmt: skip


@dataclass
class Row:
    tensor: str
    rows: int
    columns: int
    featgraph_ms: float
    torch_ms: float
    torch_over_featgraph: float


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser, repeat=5, scale=1.0, scale_help="shrink the tensors' row counts (tests)")


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}")
    print(TABLE.header, flush=True)
    rows = []
    for name, (num_rows, columns) in SHAPES.items():
        x = torch.randn(max(1, int(num_rows * args.scale)), columns, requires_grad=True)
        times = interleaved_best_ms(
            {
                "featgraph": ForwardBackward(partial(dropout, x, 0.5, True), [x]),
                "torch": ForwardBackward(partial(F.dropout, x, 0.5, True), [x]),
            },
            args.repeat,
        )
        ours, theirs = times["featgraph"], times["torch"]
        rows.append(Row(name, x.shape[0], columns, ours, theirs, theirs / ours))
        print(TABLE.rows(rows[-1:]), flush=True)
    write_json(args.json, [asdict(r) for r in rows])
    return rows
