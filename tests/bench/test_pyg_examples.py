import json
import os
from pathlib import Path

import pytest

from featgraph.bench import pyg_examples
from featgraph.cli import main

EXAMPLES = {e.path: e for e in pyg_examples.EXAMPLES}
PLANETOID = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "planetoid"

# Lines as PyG 2.8.0.post1's examples print them on the CPU
GCN_OUTPUT = """Epoch: 199, Loss: 0.2390, Train: 1.0000, Val: 0.7900, Test: 0.8130
Epoch: 200, Loss: 0.2573, Train: 1.0000, Val: 0.7900, Test: 0.8130
Median time per epoch: 0.5327s
"""
GLNN_OUTPUT = """Training Teacher GNN:
Epoch: 200, Loss: 0.2662, Train: 1.0000, Val: 0.7800, Test: 0.8090
Median time per epoch: 0.0113s
Training Student MLP:
Epoch: 500, Loss: 0.0447, Train: 0.9857, Val: 0.5900, Test: 0.6140
Median time per epoch: 0.0024s
"""
SGC_OUTPUT = """Epoch: 099, Train: 0.9786, Val: 0.7920, Test: 0.8100
Epoch: 100, Train: 0.9786, Val: 0.7920, Test: 0.8100
"""
RBCD_OUTPUT = """------------- GAT: Local Evasion -------------
Clean accuracy: 0.781
------------- GCN: Global Evasion -------------
Clean accuracy: 0.804
PRBCD: Accuracy dropped from 0.804 to 0.741
"""
# a synthetic example: prints the class torch_geometric.nn's GCNConv name is bound to, and builds one
BINDING = """import inspect
import torch_geometric.nn
print("bound:", torch_geometric.nn.GCNConv.__module__, torch_geometric.nn.models.basic_gnn.GCNConv.__module__)
torch_geometric.nn.GCNConv(4, 2)
import torch
print("dropout:", torch.nn.functional.dropout.__module__, torch.nn.Dropout.__module__)
print("Test: 0.5")
print("source:", inspect.getsource(inspect.currentframe()).splitlines()[0])
"""


def test_the_scripts_own_median_time_per_epoch_is_read_the_first_one_where_it_prints_two():
    assert pyg_examples.parse_timer(EXAMPLES["gcn.py"], GCN_OUTPUT) == 0.5327
    assert pyg_examples.parse_timer(EXAMPLES["glnn.py"], GLNN_OUTPUT) == 0.0113
    assert pyg_examples.parse_timer(EXAMPLES["sgc.py"], SGC_OUTPUT) is None


def test_the_final_metric_is_the_last_one_the_script_prints():
    assert pyg_examples.parse_metric(EXAMPLES["gcn.py"], GCN_OUTPUT) == 0.8130
    assert pyg_examples.parse_metric(EXAMPLES["glnn.py"], GLNN_OUTPUT) == 0.6140
    assert pyg_examples.parse_metric(EXAMPLES["sgc.py"], SGC_OUTPUT) == 0.8100
    assert pyg_examples.parse_metric(EXAMPLES["contrib/rbcd_attack.py"], RBCD_OUTPUT) == 0.804
    no_metric = pyg_examples.Example("explain.py", "Cora", "../data", timer=None, metric=None)
    assert pyg_examples.parse_metric(no_metric, GCN_OUTPUT) is None


def test_fallback_warnings_are_read_from_stderr_once_each():
    stderr = (
        "/tmp/x/examples/explain/gnn_explainer.py:23: FallbackWarning: GCNConv: explain mode; running PyG's "
        "implementation\n  x = F.relu(self.conv1(x, edge_index))\n"
    )
    assert pyg_examples.parse_fallbacks(stderr * 2) == ["GCNConv: explain mode; running PyG's implementation"]
    assert pyg_examples.parse_fallbacks("UserWarning: something else\n") == []


def test_speedups_are_over_the_pyg_run_of_the_same_example_by_timer_and_by_wall():
    def row(mode, timer_ms, wall_s, error=None):
        return pyg_examples.Row("gcn.py", mode, [], timer_ms, wall_s, 0.8, 0.8, 0.8, 1, error=error)

    rows = [row("pyg", 10.0, 6.0), row("featgraph", 4.0, 3.0), row("featgraph+dropout", None, 2.0, "boom")]
    pyg_examples.add_speedups(rows)
    assert (rows[0].speedup_timer, rows[0].speedup_wall) == (1.0, 1.0)
    assert (rows[1].speedup_timer, rows[1].speedup_wall) == (2.5, 2.0)
    assert (rows[2].speedup_timer, rows[2].speedup_wall) == (None, None)


@pytest.mark.parametrize("mode", pyg_examples.MODES)
def test_the_prelude_binds_featgraphs_classes_before_the_script_imports_them(tmp_path, mode):
    pytest.importorskip("torch_geometric")
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "binding.py").write_text(BINDING)
    example = pyg_examples.Example("binding.py", "Cora", "../data", timer=None)
    file = tmp_path / "elsewhere" / "binding.py"
    stdout, stderr, _, failed = pyg_examples.run_script(example, mode, 0, examples, file, timeout=300)
    assert not failed, stderr
    assert pyg_examples.parse_metric(example, stdout) == 0.5
    bound = stdout.split("bound: ")[1].split("\n")[0].split()
    dropout = stdout.split("dropout: ")[1].split("\n")[0].split()
    layers = pyg_examples.parse_layers(stdout)
    assert "source: import inspect" in stdout  # torch.jit.script reads the source of the script's classes
    if mode == "pyg":
        assert bound == ["torch_geometric.nn.conv.gcn_conv"] * 2
        assert layers == ["torch_geometric.nn.conv.gcn_conv.GCNConv"]
    else:
        assert all(module.startswith("featgraph.nn") for module in bound)
        assert layers == ["featgraph.nn.gcn.GCNConv"]
    if mode == "featgraph+dropout":
        assert not any(module.startswith("torch.nn") for module in dropout)
    else:
        assert dropout == ["torch.nn.functional", "torch.nn.modules.dropout"]


def test_a_failing_script_is_a_failed_run_with_its_error(tmp_path):
    examples = tmp_path / "examples"
    examples.mkdir()
    (examples / "broken.py").write_text("raise RuntimeError('the example broke')\n")
    example = pyg_examples.Example("broken.py", "Cora", "../data")
    result = pyg_examples.run_once(example, "featgraph", 0, examples, tmp_path / "x" / "broken.py", timeout=300)
    assert "RuntimeError: the example broke" in result.error
    assert (result.timer_s, result.metric) == (None, None)


def test_an_examples_directory_without_pygs_scripts_is_refused_naming_the_option(tmp_path):
    with pytest.raises(SystemExit, match="--examples: no gcn.py"):
        main(["bench", "pyg-examples", "--examples", str(tmp_path), "--only", "gcn.py"])


@pytest.mark.slow
def test_pygs_sgc_example_runs_with_pygs_classes_and_featgraphs_and_reaches_the_same_accuracy(tmp_path):
    examples = os.environ.get("FEATGRAPH_PYG_EXAMPLES")
    if not examples:
        pytest.skip("FEATGRAPH_PYG_EXAMPLES: set it to a PyG checkout's examples directory")
    if not any(PLANETOID.glob("ind.cora.*")):
        pytest.skip(f"no Planetoid raw files in {PLANETOID}")
    out = tmp_path / "rows.json"
    main([
        "bench", "pyg-examples", "--examples", examples, "--planetoid", str(PLANETOID), "--only", "sgc.py",
        "--json", str(out),
    ])  # fmt: skip
    rows = {r["mode"]: r for r in json.loads(out.read_text())["rows"]}
    assert list(rows) == list(pyg_examples.MODES)
    assert all(r["error"] is None for r in rows.values())
    assert rows["pyg"]["layers"] == ["torch_geometric.nn.conv.sg_conv.SGConv"]
    assert rows["featgraph"]["layers"] == rows["featgraph+dropout"]["layers"] == ["featgraph.nn.sg_conv.SGConv"]
    # SGC on Cora reaches about 81% (Wu et al. 2019); featgraph's within two points of PyG's, one seed each
    assert rows["pyg"]["metric"] > 0.75
    assert abs(rows["featgraph"]["metric"] - rows["pyg"]["metric"]) < 0.02
