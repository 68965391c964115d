"""``featgraph bench dropout``: featgraph's hashed-mask dropout (``featgraph.ops.dropout``, the mask recomputed
in backward) against torch's ``F.dropout``, forward + backward, in the same run."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from ..ops import dropout
from ..timing import interleaved_best_ms
from .report import machine, markdown_header, markdown_row, write_json

SHAPES = {"Cora input": (2708, 1433), "hidden": (100_000, 128)}  # tensor: (rows, columns) at scale 1


@dataclass
class Row:
    tensor: str
    rows: int
    columns: int
    featgraph_ms: float
    torch_ms: float
    torch_over_featgraph: float


def forward_backward(fn: Callable[..., torch.Tensor], x: torch.Tensor) -> Callable[[], None]:
    """One training step of dropout ``fn`` at p = 0.5: forward, then backward into ``x``."""

    def step() -> None:
        x.grad = None
        fn(x, 0.5, True).sum().backward()

    return step


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="shrink the tensors' row counts (tests)")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}")
    print(markdown_header("tensor", "featgraph ms", "torch ms", "torch / featgraph"), flush=True)
    rows = []
    for name, (num_rows, columns) in SHAPES.items():
        x = torch.randn(max(1, int(num_rows * args.scale)), columns, requires_grad=True)
        times = interleaved_best_ms(
            {"featgraph": forward_backward(dropout, x), "torch": forward_backward(F.dropout, x)}, args.repeat
        )
        ours, theirs = times["featgraph"], times["torch"]
        row = Row(name, x.shape[0], columns, ours, theirs, theirs / ours)
        rows.append(row)
        label = f"{name} ({row.rows} x {columns})"
        print(markdown_row([label, f"{ours:.2f}", f"{theirs:.2f}", f"{row.torch_over_featgraph:.1f}x"]), flush=True)
    write_json(args.json, [asdict(r) for r in rows])
    return rows
