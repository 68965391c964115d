import json

import pytest

from featgraph.bench import dropout
from featgraph.cli import main


def test_bench_dropout_times_both_dropouts_on_every_shape(tmp_path, capsys):
    out = tmp_path / "dropout.json"
    main(["bench", "dropout", "--scale", "0.001", "--repeat", "1", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["tensor"] for r in rows] == list(dropout.SHAPES)
    for r in rows:
        assert r["rows"] == max(1, int(dropout.SHAPES[r["tensor"]][0] * 0.001))
        assert r["featgraph_ms"] > 0 and r["torch_ms"] > 0
        assert r["torch_over_featgraph"] == pytest.approx(r["torch_ms"] / r["featgraph_ms"])
    assert "| hidden (100 x 128) |" in capsys.readouterr().out
