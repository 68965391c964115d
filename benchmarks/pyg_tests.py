"""PyG's own layer tests run against featgraph's layers: each of PyG's ``test/nn/conv`` files for a layer that
``featgraph.nn`` replaces runs twice, with PyG's classes and with featgraph's bound in their place
(``torch_geometric.nn.<Layer>`` and ``torch_geometric.nn.conv.<Layer>``, before the test files import them),
and a table says which tests pass with each. PyG's tests ship in neither PyG's wheel nor featgraph: check out
PyG's repository at the installed version's tag and point ``--tests`` at its ``test/nn/conv``.

python benchmarks/pyg_tests.py --tests <pytorch_geometric>/test/nn/conv
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import featgraph.nn

LAYERS = (
    "AGNNConv", "APPNP", "EdgeConv", "GATConv", "GATv2Conv", "GCNConv", "GINConv", "GINEConv", "GraphConv",
    "SAGEConv", "SGConv", "TransformerConv",
)  # fmt: skip
FILES = (
    "test_agnn_conv.py", "test_appnp.py", "test_edge_conv.py", "test_gat_conv.py", "test_gatv2_conv.py",
    "test_gcn_conv.py", "test_gin_conv.py", "test_graph_conv.py", "test_sage_conv.py", "test_sg_conv.py",
    "test_transformer_conv.py",
)  # fmt: skip
RUN = """
import sys
import pytest
if sys.argv[1] == "featgraph":
    import torch_geometric.nn, torch_geometric.nn.conv, featgraph.nn
    for name in {layers}:
        setattr(torch_geometric.nn, name, getattr(featgraph.nn, name))
        setattr(torch_geometric.nn.conv, name, getattr(featgraph.nn, name))
sys.exit(pytest.main(["-q", "-rA", "-p", "no:cacheprovider", *sys.argv[2:]]))
"""
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+?\.py)(?:::(\S+))?")


def outcomes(layers: str, files: list[Path]) -> dict[str, dict[str, str]]:
    """Per test file, each test's outcome (pytest's short summary) with ``layers`` "pyg" or "featgraph"."""
    code = RUN.format(layers=LAYERS)
    run = subprocess.run(
        [sys.executable, "-c", code, layers, *map(str, files)], capture_output=True, text=True, check=False
    )
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for line in run.stdout.splitlines():
        match = OUTCOME.match(line)
        if match:
            outcome, path, test = match.groups()
            found[Path(path).name][test or line] = outcome
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=Path, required=True, help="PyG's test/nn/conv directory")
    args = parser.parse_args()
    files = [args.tests / name for name in FILES]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"--tests: no {', '.join(missing)}")
    assert all(hasattr(featgraph.nn, name) for name in LAYERS)
    pyg, ours = outcomes("pyg", files), outcomes("featgraph", files)
    print("| test file | PyG's layers pass | featgraph's layers pass (of those) | failing with featgraph only |")
    print("|---|---|---|---|")
    total = kept = 0
    for name in FILES:
        passing = {t for t, o in pyg[name].items() if o == "PASSED"}
        lost = sorted(t for t in passing if ours[name].get(t) != "PASSED")
        total, kept = total + len(passing), kept + len(passing) - len(lost)
        print(f"| {name} | {len(passing)} | {len(passing) - len(lost)} | {', '.join(lost) or '-'} |")
    print(f"\n{kept} of {total} tests that pass with PyG's layers pass with featgraph's ({kept / max(total, 1):.0%})")


if __name__ == "__main__":
    main()
