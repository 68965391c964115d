"""The dense floor of GraphConv's training epoch: the training benchmark's two-layer GraphConv model
(``featgraph bench train --models graphconv``) with featgraph's layers, then the same model with every
aggregation replaced by its input (no sparse work left: the GEMMs of ``lin_rel`` and ``lin_root`` forward and
backward, ReLU, loss and Adam), against PyG's CSR ``adj_t`` path in the same process. Where the floor alone
exceeds PyG's epoch divided by the target ratio, no aggregation speed reaches that ratio on this machine.

python benchmarks/dense_floor.py [--graph email-Enron] [--target 3] [--repeat 7]
"""

from __future__ import annotations

import argparse
from unittest import mock

import torch

from featgraph.bench.training import CLASSES, GRAPHS, IN_FEATURES, _layer_setups, epoch_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", choices=sorted(GRAPHS), default="email-Enron")
    parser.add_argument("--target", type=float, default=3.0, help="the speed-up over PyG's epoch to test")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    g = GRAPHS[args.graph](1.0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(g.num_nodes, IN_FEATURES, generator=gen)
    y = torch.randint(0, CLASSES, (g.num_nodes,), generator=gen)
    setups = _layer_setups(g, "graphconv", ["featgraph", "pyg-csr"])

    def epoch(framework: str) -> float:
        net, graph = setups[framework]
        return epoch_ms(net, graph, torch.optim.Adam(net.parameters(), lr=0.01), x, y, args.repeat)[1]

    rows = {"featgraph": epoch("featgraph")}
    with mock.patch("featgraph.nn.graph_conv.weighted_aggregate", lambda graph, x_src, weight, reduce: x_src):
        rows["featgraph, aggregation removed (dense floor)"] = epoch("featgraph")
    rows["pyg-csr"] = epoch("pyg-csr")
    pyg = rows["pyg-csr"]
    print(f"{args.graph}, GraphConv, {args.threads} threads, median ms per epoch of {args.repeat}")
    print("| model | ms/epoch | pyg-csr / this |\n|---|---|---|")
    for name, ms in rows.items():
        print(f"| {name} | {ms:.1f} | {pyg / ms:.2f} |")
    floor = rows["featgraph, aggregation removed (dense floor)"]
    verdict = "within reach" if floor <= pyg / args.target else "out of reach"
    needed = pyg / args.target
    print(f"\n{args.target:g}x pyg-csr needs {needed:.1f} ms/epoch; the dense floor is {floor:.1f}: {verdict}")


if __name__ == "__main__":
    main()
