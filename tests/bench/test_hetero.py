import json

import pytest
import torch

from featgraph.bench import hetero
from featgraph.cli import main

pytest.importorskip("torch_geometric")


def test_bench_hetero_times_every_implementation_on_every_graph(tmp_path, capsys):
    out = tmp_path / "hetero.json"
    main(["bench", "hetero", "--scale", "0.002", "--repeat", "1", "--channels", "8", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["graph"] for r in rows] == list(hetero.GRAPHS)
    for r in rows:
        assert r["featgraph_ms"] > 0 and r["featgraph_fused_ms"] > 0 and r["pyg_rgcn_ms"] > 0
        assert r["rgcn_over_featgraph"] == pytest.approx(r["pyg_rgcn_ms"] / r["featgraph_ms"])
        assert r["fast_rgcn_over_featgraph"] == pytest.approx(r["pyg_fast_rgcn_ms"] / r["featgraph_ms"])
    assert "| 3 types, 10 relations (" in capsys.readouterr().out


def test_fast_rgcn_is_skipped_over_its_memory_limit(tmp_path, capsys):
    out = tmp_path / "hetero.json"
    main(["bench", "hetero", "--scale", "0.002", "--repeat", "1", "--channels", "8", "--fast-max-gb", "0",
          "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert all(r["pyg_fast_rgcn_ms"] is None and r["fast_rgcn_over_featgraph"] is None for r in rows)
    assert "skipped (" in capsys.readouterr().out


def test_typed_graph_is_seeded_and_skewed():
    hg = hetero.typed_graph((30, 20, 10), 6, 600)
    again = hetero.typed_graph((30, 20, 10), 6, 600)
    assert torch.equal(hg.graph.edge_index, again.graph.edge_index) and hg.edge_types == again.edge_types
    sizes = (hg.edge_offsets[1:] - hg.edge_offsets[:-1]).tolist()
    assert sum(sizes) == 600 and sizes[0] > sizes[-1] and hg.num_nodes == 60
