import json

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
    for name in pyg_tests.FILES:
        (tmp_path / name).write_text(GCN_TESTS if name == "test_gcn_conv.py" else TRIVIAL)
    out = tmp_path / "pyg_tests.json"
    main(["bench", "pyg-tests", "--tests", str(tmp_path), "--json", str(out)])
    rows = {r["file"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == list(pyg_tests.FILES)
    assert rows["test_gcn_conv.py"] == {
        "file": "test_gcn_conv.py",
        "pyg_passing": 2,
        "featgraph_passing": 1,
        "failing_with_featgraph_only": ["test_layer_is_pygs"],
    }
    assert all(
        r["pyg_passing"] == r["featgraph_passing"] == 1 for name, r in rows.items() if name != "test_gcn_conv.py"
    )
