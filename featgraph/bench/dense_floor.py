"""``featgraph bench dense-floor``: the dense floor of GraphConv's training epoch. The training benchmark's
two-layer GraphConv model (``featgraph bench train --models graphconv``) with featgraph's layers, then the same
model with every aggregation replaced by its input (no sparse work left: the GEMMs of ``lin_rel`` and
``lin_root`` forward and backward, ReLU, loss and Adam), against PyG's CSR ``adj_t`` path in the same process.
Where the floor alone exceeds PyG's epoch divided by the target ratio, no aggregation speed reaches that ratio
on this machine."""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
from unittest import mock

import torch

from .report import Table, add_common_arguments, machine, write_json
from .training import CLASSES, GRAPHS, IN_FEATURES, _setups, epoch_ms

FLOOR = "featgraph, aggregation removed (dense floor)"
TABLE = Table({"model": "model", "ms/epoch": "ms:.1f", "pyg-csr / this": "pyg_csr_over_this:.2f"})


@dataclass
class Row:
    model: str
    ms: float  # median per epoch
    pyg_csr_over_this: float  # pyg-csr's ms / this row's ms


def verdict(floor_ms: float, pyg_csr_ms: float, target: float) -> str:
    """Whether ``target`` times pyg-csr's speed is within reach of an epoch that takes at least ``floor_ms``."""
    return "within reach" if floor_ms <= pyg_csr_ms / target else "out of reach"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--graph", choices=sorted(GRAPHS), default="email-Enron")
    parser.add_argument("--target", type=float, default=3.0, help="the speed-up over PyG's epoch to test")
    add_common_arguments(parser, repeat=7, threads=2, scale=1.0, scale_help="shrink the synthetic graphs (tests)")


def run(args: argparse.Namespace) -> list[Row]:
    torch.set_num_threads(args.threads)
    g = GRAPHS[args.graph](args.scale)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(g.num_nodes, IN_FEATURES, generator=gen)
    y = torch.randint(0, CLASSES, (g.num_nodes,), generator=gen)
    setups = _setups(g, "graphconv", ["featgraph", "pyg-csr"])
    if isinstance(setups["pyg-csr"], str):
        raise SystemExit(f"dense-floor compares against PyG: {setups['pyg-csr']}")

    def epoch(framework: str) -> float:
        net, graph = setups[framework]
        return epoch_ms(net, graph, torch.optim.Adam(net.parameters(), lr=0.01), x, y, args.repeat)[1]

    times = {"featgraph": epoch("featgraph")}
    with mock.patch("featgraph.nn.graph_conv.weighted_aggregate", lambda graph, x_src, weight, reduce: x_src):
        times[FLOOR] = epoch("featgraph")
    times["pyg-csr"] = pyg_csr = epoch("pyg-csr")
    rows = [Row(model, ms, pyg_csr / ms) for model, ms in times.items()]
    print(f"machine: {machine()}")
    print(f"{args.graph}, GraphConv, {args.threads} threads, median ms per epoch of {args.repeat}")
    print(TABLE(rows))
    reach = verdict(times[FLOOR], pyg_csr, args.target)
    print(
        f"\n{args.target:g}x pyg-csr needs {pyg_csr / args.target:.1f} ms/epoch; the dense floor is "
        f"{times[FLOOR]:.1f}: {reach}"
    )
    write_json(args.json, [asdict(r) for r in rows], graph=args.graph, target=args.target, verdict=reach)
    return rows
