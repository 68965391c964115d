"""featgraph's hashed-mask dropout against torch's, forward + backward, in the same run.

python benchmarks/dropout.py
"""

import torch
import torch.nn.functional as F

from featgraph.bench.report import machine
from featgraph.ops import dropout
from featgraph.timing import best_ms

SHAPES = {"Cora input (2708 x 1433)": (2708, 1433), "100k x 128 hidden": (100_000, 128)}


def forward_backward(fn, x):
    def step():
        x.grad = None
        fn(x, 0.5, True).sum().backward()

    return step


if __name__ == "__main__":
    print(f"machine: {machine()}")
    print("| tensor | featgraph ms | torch ms | torch / featgraph |\n|---|---|---|---|")
    for name, shape in SHAPES.items():
        x = torch.randn(*shape, requires_grad=True)
        ours, theirs = (best_ms(forward_backward(fn, x)) for fn in (dropout, F.dropout))
        print(f"| {name} | {ours:.2f} | {theirs:.2f} | {theirs / ours:.1f}x |", flush=True)
