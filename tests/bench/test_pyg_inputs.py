import json

import pytest
import torch

from featgraph.bench import pyg_inputs
from featgraph.cli import main
from featgraph.graph import conversion


def test_build_ms_forgets_the_graphs_built_before():
    conversion.as_graph(torch.tensor([[0, 1], [1, 0]]), 2)
    assert pyg_inputs.build_ms(torch.tensor([[0, 1, 2], [1, 2, 0]]), ["csr", "csc"], 3) > 0
    assert len(conversion._graphs) == 1  # the timed call's graph alone


def test_bench_pyg_inputs_times_every_input_form(tmp_path, capsys):
    pytest.importorskip("torch_geometric")
    out = tmp_path / "pyg_inputs.json"
    main(["bench", "pyg-inputs", "--scale", "0.001", "--repeat", "1", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert len(rows) == 7
    assert {r["formats"] for r in rows} == {"CSR", "CSC", "CSR + CSC"}
    assert all(r["cpu_ms"] > 0 for r in rows)
    assert "| torch sparse CSR `adj_t` | CSR |" in capsys.readouterr().out
