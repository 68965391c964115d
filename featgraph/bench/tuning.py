"""``featgraph bench tuning``: the heuristic default against the tuned configuration, per kernel row.

For GCN aggregation, MLP aggregation and dot-product attention on each graph and feature length, the
tuner searches (or reads its stored result), then the default and the tuned kernels are timed again in
the same run. ``default / tuned`` is the price of not tuning (target: at most 1.3 on every row).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass

import torch

from ..graph import Graph
from ..timing import best_ms
from ..tuning import synthetic_inputs, tune
from .kernels import GRAPHS, op_kernel
from .report import Table, add_table_arguments, machine, table_rows, write_json

OPS = ("gcn", "mlp", "attention")
TARGET_RATIO = 1.3


@dataclass
class Row:
    op: str
    graph: str
    d: int
    default_ms: float
    tuned_ms: float
    ratio: float  # default / tuned
    config: str  # what the tuner chose, as differences from the class defaults
    candidates: int
    from_cache: bool


def measure_row(op: str, graph_name: str, g: Graph, d: int, threads: int, repeat: int, budget_s: float) -> Row:
    base = op_kernel(op, g, d, threads)
    tuned = tune(base, budget_s=budget_s)
    inputs = synthetic_inputs(base)
    default_ms = best_ms(lambda: base.evaluate(inputs, want_arg=False), repeat)
    tuned_ms = best_ms(lambda: tuned.evaluate(inputs, want_arg=False), repeat)
    record = tuned.tuning
    return Row(
        op, graph_name, d, default_ms, tuned_ms, default_ms / tuned_ms, record.config.describe(), record.tried,
        record.from_cache,
    )  # fmt: skip


TABLE = Table({
    "op": "op", "graph": "graph", "d": "d", "default ms": "default_ms:.2f", "tuned ms": "tuned_ms:.2f",
    "default / tuned": "ratio:.2f", "tuned configuration": "config",
    "candidates": lambda r: f"{r.candidates}{' (stored)' if r.from_cache else ''}",
})  # fmt: skip


def summary(rows: list[Row]) -> str:
    worst = max(rows, key=lambda r: r.ratio)
    met = "met" if worst.ratio <= TARGET_RATIO else "NOT met"
    return (
        f"default within {TARGET_RATIO}x of tuned on every row: {met} "
        f"(worst {worst.ratio:.2f}x: {worst.op} {worst.graph} d={worst.d})"
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_table_arguments(parser, GRAPHS, OPS, [32, 128, 512], repeat=5)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds of search per row at most")


def run(args: argparse.Namespace) -> list[Row]:
    torch.set_num_threads(args.threads)
    print(f"machine: {machine()}; featgraph threads: {args.threads}")
    rows = table_rows(
        args,
        GRAPHS,
        TABLE,
        lambda name, g, op, d: [measure_row(op, name, g, d, args.threads, args.repeat, args.budget)],
    )
    print(summary(rows))
    write_json(args.json, [asdict(r) for r in rows], threads=args.threads)
    return rows
