"""``featgraph bench pyg-tests``: PyG's own tests run against featgraph's replacements. Each of PyG's
``test/nn/conv`` files for a layer that ``featgraph.nn`` replaces runs twice, with PyG's classes and with
featgraph's bound in their place (``torch_geometric.nn.<Layer>`` and ``torch_geometric.nn.conv.<Layer>``, before
the test files import them), and a table says which tests pass with each. ``--loaders`` does the same for
PyG's ``test/loader`` files of ``NeighborLoader`` and ``LinkNeighborLoader`` (typed graphs included): with
featgraph's loaders bound, PyG's
markers that skip a test for want of a neighbour-sampling package (pyg-lib, torch-sparse) let it run, since
featgraph's loader is that sampler. PyG's tests ship in
neither PyG's wheel nor featgraph: check out PyG's repository at the installed version's tag and point
``--tests`` at its ``test/nn/conv`` (or ``test/loader``)."""

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
    "GraphConv", "HeteroConv", "HGTConv", "RGATConv", "RGCNConv", "SAGEConv", "SGConv", "TransformerConv",
)  # fmt: skip
FILES = (
    "test_agnn_conv.py", "test_appnp.py", "test_edge_conv.py", "test_gat_conv.py", "test_gatv2_conv.py",
    "test_gcn_conv.py", "test_gin_conv.py", "test_graph_conv.py", "test_hgt_conv.py", "test_rgat_conv.py",
    "test_rgcn_conv.py", "test_sage_conv.py", "test_sg_conv.py", "test_transformer_conv.py",
    # typed models built of these layers: HeteroConv, and to_hetero beside test/nn/conv
    "test_hetero_conv.py", "../test_to_hetero_transformer.py", "../test_to_hetero_with_bases_transformer.py",
)  # fmt: skip


@dataclass(frozen=True)
class Suite:
    """PyG test ``files`` in its ``directory``, run with featgraph's ``module``'s ``names`` bound in each of
    PyG's ``targets``; ``samplers``: featgraph stands in for PyG's neighbour-sampling packages."""

    directory: str
    targets: tuple[str, ...]
    module: str
    names: tuple[str, ...]
    files: tuple[str, ...]
    samplers: bool = False


LAYER_SUITE = Suite("test/nn/conv", ("torch_geometric.nn", "torch_geometric.nn.conv"), "featgraph.nn", LAYERS, FILES)
LOADER_SUITE = Suite(
    "test/loader", ("torch_geometric.loader",), "featgraph.loader", ("LinkNeighborLoader", "NeighborLoader"),
    ("test_link_neighbor_loader.py", "test_neighbor_loader.py"), samplers=True,
)  # fmt: skip
RUN = """
import importlib, sys
import pytest
suite = {suite}
if sys.argv[1] == "featgraph":
    featgraph = importlib.import_module(suite["module"])
    for target in suite["targets"]:
        for name in suite["names"]:
            setattr(importlib.import_module(target), name, getattr(featgraph, name))
    if suite["samplers"]:
        import torch_geometric.testing as testing
        pyg_with_package = testing.withPackage
        testing.onlyNeighborSampler = lambda func: func
        samplers = ("pyg_lib", "torch_sparse")
        testing.withPackage = lambda *names: pyg_with_package(*(n for n in names if n not in samplers))
sys.exit(pytest.main(["-q", "-rA", "-p", "no:cacheprovider", *sys.argv[2:]]))
"""
TABLE = Table({
    "test file": "file", "PyG's pass": "pyg_passing", "featgraph's pass (of those)": "featgraph_passing",
    "failing with featgraph only": lambda r: ", ".join(r.failing_with_featgraph_only) or "-",
    "featgraph's pass where PyG's skip": "passing_where_pyg_skips",
    "failing with featgraph where PyG's skip": lambda r: ", ".join(r.failing_where_pyg_skips) or "-",
})  # fmt: skip
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+?\.py)(?:::(\S+))?")


@dataclass
class Row:
    file: str
    pyg_passing: int  # tests passing with PyG's classes
    featgraph_passing: int  # of those, the ones passing with featgraph's
    failing_with_featgraph_only: list[str]
    passing_where_pyg_skips: int  # tests PyG skips here (a missing package) that pass with featgraph's
    failing_where_pyg_skips: list[str]


def outcomes(suite: Suite, classes: str, files: list[Path]) -> dict[str, dict[str, str]]:
    """Per test file, each test's outcome (pytest's short summary) with ``classes`` "pyg" or "featgraph"."""
    code = RUN.format(suite=asdict(suite))
    run = subprocess.run(
        [sys.executable, "-c", code, classes, *map(str, files)], capture_output=True, text=True, check=False
    )
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for line in run.stdout.splitlines():
        match = OUTCOME.match(line)
        if match:
            outcome, path, test = match.groups()
            found[Path(path).name][test or line] = outcome
    return found


def compare(files: tuple[str, ...], pyg: dict[str, dict[str, str]], featgraph: dict[str, dict[str, str]]) -> list[Row]:
    """One row per file: the tests passing with PyG's classes and which of them fail with featgraph's, and how
    the tests PyG skips here fare with featgraph's."""
    rows = []
    for name in (Path(file).name for file in files):
        passing = {test for test, outcome in pyg[name].items() if outcome == "PASSED"}
        lost = sorted(test for test in passing if featgraph[name].get(test) != "PASSED")
        skipped = {test for test, outcome in featgraph[name].items() if pyg[name].get(test, "SKIPPED") == "SKIPPED"}
        failing = sorted(test for test in skipped if featgraph[name][test] in ("FAILED", "ERROR"))
        gained = sum(featgraph[name][test] == "PASSED" for test in skipped)
        rows.append(Row(name, len(passing), len(passing) - len(lost), lost, gained, failing))
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tests", type=Path, required=True, help="PyG's test/nn/conv (with --loaders test/loader)")
    parser.add_argument(
        "--loaders", action="store_true", help="PyG's NeighborLoader and LinkNeighborLoader tests, not the layers'"
    )
    parser.add_argument("--json", metavar="PATH", help="write every row as JSON")


def run(args: argparse.Namespace) -> list[Row]:
    suite = LOADER_SUITE if args.loaders else LAYER_SUITE
    files = [args.tests / name for name in suite.files]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"--tests: no {', '.join(missing)} (point --tests at PyG's {suite.directory})")
    rows = compare(suite.files, outcomes(suite, "pyg", files), outcomes(suite, "featgraph", files))
    print(TABLE(rows))
    total, kept = sum(r.pyg_passing for r in rows), sum(r.featgraph_passing for r in rows)
    print(f"\n{kept} of {total} tests that pass with PyG's classes pass with featgraph's ({kept / max(total, 1):.0%})")
    gained = sum(r.passing_where_pyg_skips for r in rows)
    ran = gained + sum(len(r.failing_where_pyg_skips) for r in rows)
    if ran:
        print(f"{gained} of {ran} tests that PyG's skip here pass with featgraph's")
    write_json(args.json, [asdict(r) for r in rows])
    return rows
