import json

import pytest

from featgraph.bench import dense_floor
from featgraph.cli import main


def test_verdict_compares_the_floor_with_the_targets_epoch():
    assert dense_floor.verdict(floor_ms=10.0, pyg_csr_ms=30.0, target=3.0) == "within reach"
    assert dense_floor.verdict(floor_ms=10.1, pyg_csr_ms=30.0, target=3.0) == "out of reach"


def test_bench_dense_floor_times_featgraph_its_floor_and_pyg(tmp_path, capsys):
    pytest.importorskip("torch_geometric")
    out = tmp_path / "dense_floor.json"
    main([
        "bench", "dense-floor", "--graph", "rand100k-2.9M", "--scale", "0.01", "--repeat", "1", "--threads", "1",
        "--target", "2", "--json", str(out),
    ])  # fmt: skip
    report = json.loads(out.read_text())
    rows = {r["model"]: r for r in report["rows"]}
    assert list(rows) == ["featgraph", dense_floor.FLOOR, "pyg-csr"]
    pyg_csr_ms = rows["pyg-csr"]["ms"]
    for r in rows.values():
        assert r["ms"] > 0
        assert r["pyg_csr_over_this"] == pytest.approx(pyg_csr_ms / r["ms"])
    assert report["verdict"] == dense_floor.verdict(rows[dense_floor.FLOOR]["ms"], pyg_csr_ms, 2.0)
    assert f"the dense floor is {rows[dense_floor.FLOOR]['ms']:.1f}: {report['verdict']}" in capsys.readouterr().out
