import json

import pytest
import torch

import featgraph as fg
from featgraph import ops
from featgraph.backends import cpu
from featgraph.bench import overhead
from featgraph.cli import main

pytest.importorskip("torch_geometric")


def test_kernel_clock_times_every_launch_and_puts_the_launcher_back():
    g = fg.Graph.from_edge_index(torch.tensor([[0, 1, 2], [1, 2, 0]]), num_nodes=3)
    x = torch.randn(3, 5)
    launch = cpu.launch
    with overhead.kernel_clock() as total:
        out = ops.copy_u_sum(g, x)
        after_one = total[0]
        ops.copy_u_sum(g, x)
    assert after_one > 0 and total[0] > after_one  # each call's launch adds its time
    assert cpu.launch is launch
    torch.testing.assert_close(out, x[[2, 0, 1]])


def test_bench_overhead_splits_featgraphs_call_and_times_pygs(tmp_path, capsys):
    out = tmp_path / "overhead.json"
    argv = ["bench", "overhead", "--edges", "300", "--dims", "7", "--calls", "2", "--repeat", "1", "--threads", "1"]
    main([*argv, "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == list(overhead.CASES)
    for r in rows:
        assert r["edges"] == 300 and r["d"] == 7
        assert r["kernels_us"] > 0 and r["featgraph_us"] > 0 and r["pyg_us"] > 0
        assert r["other_us"] == pytest.approx(max(0.0, r["featgraph_us"] - r["kernels_us"]))
        assert r["pyg_over_featgraph"] == pytest.approx(r["pyg_us"] / r["featgraph_us"])
    assert "| GATConv | 300 | 7 |" in capsys.readouterr().out
