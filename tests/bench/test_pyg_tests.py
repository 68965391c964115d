import json
from pathlib import Path

import pytest

from featgraph.bench import pyg_tests
from featgraph.cli import main

TRIVIAL = "def test_trivial():\n    pass\n"
GCN_TESTS = """import torch_geometric.nn


def test_trivial():
    pass


def test_layer_is_pygs():
    assert torch_geometric.nn.GCNConv.__module__.startswith("torch_geometric")
"""


def test_every_layer_it_swaps_in_is_one_of_featgraphs():
    nn = pytest.importorskip("featgraph.nn")
    assert all(hasattr(nn, name) for name in pyg_tests.LAYERS)


def test_a_tests_directory_without_pygs_files_is_refused_naming_the_option(tmp_path):
    with pytest.raises(SystemExit, match="--tests: no .*test_agnn_conv.py"):
        main(["bench", "pyg-tests", "--tests", str(tmp_path / "missing")])


def test_rows_count_the_tests_that_pass_with_pygs_layers_and_featgraphs(tmp_path):
    pytest.importorskip("torch_geometric")
    conv = tmp_path / "conv"  # as PyG's test/nn/conv, the to_hetero files one level up
    conv.mkdir()
    for name in pyg_tests.FILES:
        (conv / name).write_text(GCN_TESTS if name == "test_gcn_conv.py" else TRIVIAL)
    out = tmp_path / "pyg_tests.json"
    main(["bench", "pyg-tests", "--tests", str(conv), "--json", str(out)])
    rows = {r["file"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == [Path(name).name for name in pyg_tests.FILES]
    assert rows["test_gcn_conv.py"] == {
        "file": "test_gcn_conv.py",
        "pyg_passing": 2,
        "featgraph_passing": 1,
        "failing_with_featgraph_only": ["test_layer_is_pygs"],
        "passing_where_pyg_skips": 0,
        "failing_where_pyg_skips": [],
    }
    assert all(
        r["pyg_passing"] == r["featgraph_passing"] == 1 for name, r in rows.items() if name != "test_gcn_conv.py"
    )


LINK_TESTS = """import pytest
import torch_geometric.loader
from torch_geometric.testing import onlyNeighborSampler, withPackage


@onlyNeighborSampler
def test_homo_sampled():
    assert torch_geometric.loader.LinkNeighborLoader.__module__.startswith("featgraph")


@withPackage("pyg_lib")
def test_homo_needs_a_sampler_package():
    assert False


@onlyNeighborSampler
def test_hetero_link_sampled():
    assert torch_geometric.loader.LinkNeighborLoader.__module__.startswith("featgraph")
"""
NEIGHBOR_TESTS = """import torch_geometric.loader
from torch_geometric.testing import onlyNeighborSampler


@onlyNeighborSampler
def test_hetero_neighbor_loader_sampled():
    assert torch_geometric.loader.NeighborLoader.__module__.startswith("featgraph")
"""


def test_with_loaders_pygs_sampler_markers_let_featgraphs_loaders_run_their_tests(tmp_path):
    typing = pytest.importorskip("torch_geometric.typing")
    if typing.WITH_PYG_LIB or typing.WITH_TORCH_SPARSE:
        pytest.skip("pyg-lib or torch-sparse installed: PyG's loader runs these tests itself")
    (tmp_path / "test_link_neighbor_loader.py").write_text(LINK_TESTS)
    (tmp_path / "test_neighbor_loader.py").write_text(NEIGHBOR_TESTS)
    out = tmp_path / "rows.json"
    main(["bench", "pyg-tests", "--loaders", "--tests", str(tmp_path), "--json", str(out)])
    row, neighbor = json.loads(out.read_text())["rows"]
    assert neighbor["passing_where_pyg_skips"] == 1 and neighbor["failing_where_pyg_skips"] == []
    assert row == {
        "file": "test_link_neighbor_loader.py",
        "pyg_passing": 0,
        "featgraph_passing": 0,
        "failing_with_featgraph_only": [],
        "passing_where_pyg_skips": 2,
        "failing_where_pyg_skips": ["test_homo_needs_a_sampler_package"],
    }
