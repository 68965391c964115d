"""``featgraph bench sparse-features``: ``featgraph.ops.linear`` (the product over a mostly-zero input's nonzeros)
against ``F.linear`` on bag-of-words feature matrices, forward + the weight's gradient, in the same run."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from functools import partial

import torch
import torch.nn.functional as F

from ..ops import linear
from ..timing import interleaved_best_ms
from .kernels import ForwardBackward
from .report import Table, add_common_arguments, machine, write_json

# name: (rows, columns, share of nonzeros): Planetoid's feature matrices (Cora and Citeseer bag-of-words after
# dropout at 0.5 keeps half their nonzeros; PubMed's TF-IDF), and Cora's undropped
SHAPES = {
    "Cora": (2708, 1433, 0.0127),
    "Cora, dropout 0.6": (2708, 1433, 0.0051),
    "Citeseer": (3327, 3703, 0.0085),
    "PubMed": (19717, 500, 0.1002),
}
OUTPUTS = (16, 64)
TABLE = Table({
    "features": lambda r: f"{r.features} ({r.rows} x {r.columns}, {100 * r.density:.2f}%)", "outputs": "outputs",
    "featgraph ms": "featgraph_ms:.3f", "F.linear ms": "torch_ms:.3f",
    "F.linear / featgraph": lambda r: f"{r.torch_over_featgraph:.2f}x",
})  # fmt: skip


@dataclass
class Row:
    features: str
    rows: int
    columns: int
    density: float
    outputs: int
    featgraph_ms: float
    torch_ms: float
    torch_over_featgraph: float


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common_arguments(parser, repeat=20, scale=1.0, scale_help="shrink the matrices' row counts (tests)")


def run(args: argparse.Namespace) -> list[Row]:
    print(f"machine: {machine()}")
    print(TABLE.header, flush=True)
    gen = torch.Generator().manual_seed(0)
    rows = []
    for name, (num_rows, columns, density) in SHAPES.items():
        n = max(1, int(num_rows * args.scale))
        x = torch.where(torch.rand(n, columns, generator=gen) < density, torch.rand(n, columns, generator=gen), 0.0)
        for outputs in OUTPUTS:
            weight = torch.randn(outputs, columns, generator=gen, requires_grad=True)
            times = interleaved_best_ms(
                {  # a first layer's product in training: the features need no gradient
                    "featgraph": ForwardBackward(partial(linear, x, weight), [weight]),
                    "torch": ForwardBackward(partial(F.linear, x, weight), [weight]),
                },
                args.repeat,
            )
            ours, theirs = times["featgraph"], times["torch"]
            rows.append(Row(name, n, columns, density, outputs, ours, theirs, theirs / ours))
            print(TABLE.rows(rows[-1:]), flush=True)
    write_json(args.json, [asdict(r) for r in rows])
    return rows
