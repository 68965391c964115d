"""``featgraph bench pyg-tests``: PyG's own layer tests run against featgraph's layers. Each of PyG's
``test/nn/conv`` files for a layer that ``featgraph.nn`` replaces runs twice, with PyG's classes and with
featgraph's bound in their place (``torch_geometric.nn.<Layer>`` and ``torch_geometric.nn.conv.<Layer>``, before
the test files import them), and a table says which tests pass with each. PyG's tests ship in neither PyG's
wheel nor featgraph: check out PyG's repository at the installed version's tag and point ``--tests`` at its
``test/nn/conv``."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from .report import Table, write_json

LAYERS = (
    "AGNNConv", "APPNP", "EdgeConv", "FastRGCNConv", "GATConv", "GATv2Conv", "GCNConv", "GINConv", "GINEConv",
    "GraphConv", "RGATConv", "RGCNConv", "SAGEConv", "SGConv", "TransformerConv",
)  # fmt: skip
FILES = (
    "test_agnn_conv.py", "test_appnp.py", "test_edge_conv.py", "test_gat_conv.py", "test_gatv2_conv.py",
    "test_gcn_conv.py", "test_gin_conv.py", "test_graph_conv.py", "test_rgat_conv.py", "test_rgcn_conv.py",
    "test_sage_conv.py", "test_sg_conv.py", "test_transformer_conv.py",
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
TABLE = Table({
    "test file": "file", "PyG's layers pass": "pyg_passing", "featgraph's layers pass (of those)": "featgraph_passing",
    "failing with featgraph only": lambda r: ", ".join(r.failing_with_featgraph_only) or "-",
})  # fmt: skip
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+?\.py)(?:::(\S+))?")


@dataclass
class Row:
    file: str
    pyg_passing: int  # tests passing with PyG's layers
    featgraph_passing: int  # of those, the ones passing with featgraph's
    failing_with_featgraph_only: list[str]


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


def compare(pyg: dict[str, dict[str, str]], featgraph: dict[str, dict[str, str]]) -> list[Row]:
    """One row per file of ``FILES``: the tests passing with PyG's layers, and which of them fail with featgraph's."""
    rows = []
    for name in FILES:
        passing = {test for test, outcome in pyg[name].items() if outcome == "PASSED"}
        lost = sorted(test for test in passing if featgraph[name].get(test) != "PASSED")
        rows.append(Row(name, len(passing), len(passing) - len(lost), lost))
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tests", type=Path, required=True, help="PyG's test/nn/conv directory")
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[Row]:
    files = [args.tests / name for name in FILES]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"--tests: no {', '.join(missing)} (point --tests at PyG's test/nn/conv)")
    rows = compare(outcomes("pyg", files), outcomes("featgraph", files))
    print(TABLE(rows))
    total, kept = sum(r.pyg_passing for r in rows), sum(r.featgraph_passing for r in rows)
    print(f"\n{kept} of {total} tests that pass with PyG's layers pass with featgraph's ({kept / max(total, 1):.0%})")
    write_json(args.json, [asdict(r) for r in rows])
    return rows
