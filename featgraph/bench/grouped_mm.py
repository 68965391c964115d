"""``featgraph bench grouped-mm``: ``segment_mm`` on the GPU (one grouped launch, ``backends.gpu.grouped_mm``)
against a loop of ``torch.mm`` per segment (what autograd makes of the obvious loop), forward + backward, on
segment lengths shaped like typed graphs' relations: many skewed ones (R-GCN on the AM shape: 266 relations)
and a few large ones (a heterogeneous layer's node types). Without a GPU it runs on CPU tensors through Triton's
interpreter (``TRITON_INTERPRET=1``; tiny ``--scale`` only, for tests)."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from functools import partial

import torch

from ..ops import segment_mm
from ..ops.grouped_mm import grouped_on_gpu
from ..templates.kernel import default_target
from ..timing import interleaved_best_ms
from .kernels import ForwardBackward
from .report import Table, add_common_arguments, machine, write_json

# name: (segments, rows at scale 1, Zipf exponent of their lengths, (in, out) widths)
CASES = {
    "am-like relations": (266, 1_200_000, 1.2, ((16, 16), (64, 64))),
    "16 relations": (16, 1_000_000, 1.0, ((128, 128),)),
    "4 node types": (4, 1_000_000, 0.5, ((256, 256),)),
}
TABLE = Table({
    "case": "case", "segments": "segments", "rows": "rows", "in": "inner", "out": "cols",
    "grouped": lambda r: "yes" if r.grouped else "no (torch.mm each)", "featgraph ms": "featgraph_ms:.2f",
    "torch loop ms": "loop_ms:.2f", "loop / featgraph": lambda r: f"{r.loop_over_featgraph:.2f}x",
})  # fmt: skip


@dataclass
class Row:
    case: str
    segments: int
    rows: int
    inner: int
    cols: int
    grouped: bool
    featgraph_ms: float
    loop_ms: float
    loop_over_featgraph: float


def skewed_lengths(segments: int, rows: int, exponent: float) -> list[int]:
    """``segments`` lengths summing to ``rows``, the k-th about ``1 / k**exponent`` of the first (some empty
    where rows are few, as small relations have no edges in a sample)."""
    weights = torch.arange(1, segments + 1, dtype=torch.float64).pow(-exponent)
    lengths = (weights / weights.sum() * rows).floor().to(torch.int64)
    lengths[0] += rows - int(lengths.sum())
    return lengths.tolist()


def torch_loop(a: torch.Tensor, b: torch.Tensor, lengths: list[int]) -> torch.Tensor:
    """The baseline: each segment times its weight by ``torch.mm``, concatenated (autograd's backward)."""
    return torch.cat([part @ b[k] for k, part in enumerate(a.split(lengths))])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cuda", help="cuda (default), or cpu under TRITON_INTERPRET=1 (tests)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    add_common_arguments(parser, repeat=5, scale=1.0, scale_help="shrink the row counts (tests)")


def run(args: argparse.Namespace) -> list[Row]:
    device = torch.device(args.device)
    print(f"machine: {machine()}, device: {device}")
    print(TABLE.header, flush=True)
    rows = []
    generator = torch.Generator().manual_seed(0)
    for name in args.cases:
        segments, total, exponent, widths = CASES[name]
        lengths = skewed_lengths(segments, max(segments, int(total * args.scale)), exponent)
        for inner, cols in widths:
            a = torch.randn(sum(lengths), inner, generator=generator).to(device).requires_grad_()
            b = (torch.randn(segments, inner, cols, generator=generator) / inner**0.5).to(device).requires_grad_()
            seglen = torch.tensor(lengths)
            with default_target("gpu"):
                grouped = grouped_on_gpu(a, lengths, inner, cols)
                times = interleaved_best_ms(
                    {
                        "featgraph": ForwardBackward(partial(segment_mm, a, b, seglen), [a, b]),
                        "loop": ForwardBackward(partial(torch_loop, a, b, lengths), [a, b]),
                    },
                    args.repeat,
                )
            ours, loop = times["featgraph"], times["loop"]
            rows.append(Row(name, segments, sum(lengths), inner, cols, grouped, ours, loop, loop / ours))
            print(TABLE.rows(rows[-1:]), flush=True)
    write_json(args.json, [asdict(r) for r in rows])
    return rows
