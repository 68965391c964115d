import json

from featgraph.bench.report import cell, each_graph, machine, write_json
from featgraph.datasets import uniform


def test_cells_and_json(tmp_path):
    assert cell(None, ".2f") == "-" and cell(1.2345, ".2f") == "1.23"
    write_json(None, [{"a": 1}])  # no path: nothing written, no error
    path = tmp_path / "r.json"
    write_json(str(path), [{"a": 1}], threads=2)
    assert json.loads(path.read_text()) == {"machine": machine(), "threads": 2, "rows": [{"a": 1}]}


def test_each_graph_builds_in_order_and_announces_size_and_header(capsys):
    builders = {"a": lambda scale: uniform(int(10 * scale), 2), "b": lambda scale: uniform(int(20 * scale), 1)}
    built = list(each_graph(["b", "a"], builders, 2.0, "| header |"))
    assert [(name, g.num_nodes, g.num_edges) for name, g in built] == [("b", 40, 40), ("a", 20, 40)]
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["graph b: 40 vertices, 40 edges", "| header |", "graph a: 20 vertices, 40 edges", "| header |"]
