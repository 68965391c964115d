import json

import pytest

from featgraph.bench import sparse_features
from featgraph.cli import main


def test_bench_sparse_features_times_both_products_on_every_matrix(tmp_path, capsys):
    out = tmp_path / "sparse.json"
    main(["bench", "sparse-features", "--scale", "0.05", "--repeat", "1", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    expected = [(name, outputs) for name in sparse_features.SHAPES for outputs in sparse_features.OUTPUTS]
    assert [(r["features"], r["outputs"]) for r in rows] == expected
    for r in rows:
        assert r["rows"] == max(1, int(sparse_features.SHAPES[r["features"]][0] * 0.05))
        assert r["featgraph_ms"] > 0 and r["torch_ms"] > 0
        assert r["torch_over_featgraph"] == pytest.approx(r["torch_ms"] / r["featgraph_ms"])
    assert "| Cora (135 x 1433, 1.27%) | 16 |" in capsys.readouterr().out
