import json

import pytest

from featgraph.bench import tc_fill
from featgraph.cli import main
from featgraph.datasets import load


def test_rows_report_each_order_against_the_graph_as_given():
    g = load("cora").graph
    rows = tc_fill.fill_rows("cora", g, list(tc_fill.ORDERS))
    assert [r.order for r in rows] == list(tc_fill.ORDERS) and rows[0].fill_vs_given == 1.0
    for row in rows:
        ordered = g if row.order == "as given" else g.reordered(row.order)[0]
        assert row.tile_fill == ordered.tc_translation(tc_fill.TILE_WIDTH).fill()
        assert row.fill_vs_given == pytest.approx(row.tile_fill / rows[0].tile_fill)
        assert 0 < row.tile_fill < row.vector_fill <= 1  # 8 x 1 vectors waste fewer cells than 16 x 16 tiles
        assert row.bytes_per_edge > 8  # a sparse graph's tiles cost more than a CSR's int32 column + weight
        # a window of 8 rows shares its sources with fewer rows than one of 16: it gathers at least as many
        assert 0 < row.tile_rows_per_edge <= row.vector_rows_per_edge <= 1


def test_bench_tc_fill_prints_a_table_per_graph_and_writes_json(tmp_path, capsys):
    out = tmp_path / "fill.json"
    main(["bench", "tc-fill", "--graphs", "pubmed-like", "uniform", "--scale", "0.01", "--json", str(out)])
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(table) == 2 * (1 + len(tc_fill.ORDERS))
    rows = json.loads(out.read_text())["rows"]
    assert [(r["graph"], r["order"]) for r in rows] == [
        (graph, order) for graph in ("pubmed-like", "uniform") for order in tc_fill.ORDERS
    ]
