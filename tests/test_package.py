"""The package's import contract: featgraph's core never needs PyG; ``featgraph.nn`` loads on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE_WITHOUT_PYG = """
import sys

class NoPyG:
    def find_spec(self, name, path, target=None):
        if name == "torch_geometric" or name.startswith("torch_geometric."):
            raise ImportError("PyG is not installed")
        return None

sys.meta_path.insert(0, NoPyG())
import torch
import featgraph
assert callable(featgraph.ops.gspmm), 'import featgraph gives featgraph.ops'
from featgraph import Graph, ops, te, loader, sampling
g = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
out = ops.gspmm(g, "copy_lhs", "sum", torch.ones(2, 3), None)
assert out.tolist() == [[1.0] * 3] * 2
try:
    featgraph.nn
except ImportError as error:
    print("nn needs PyG:", error)
"""


def test_the_core_imports_and_runs_without_pyg():
    done = subprocess.run([sys.executable, "-c", CORE_WITHOUT_PYG], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "nn needs PyG: PyG is not installed" in done.stdout


def test_nn_loads_on_first_use():
    pytest.importorskip("torch_geometric")
    import featgraph

    assert featgraph.nn.GCNConv.__module__ == "featgraph.nn.gcn"
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        featgraph.nope  # noqa: B018
