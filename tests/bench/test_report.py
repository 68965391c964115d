import json

from featgraph.bench.report import cell, machine, write_json


def test_cells_and_json(tmp_path):
    assert cell(None, ".2f") == "-" and cell(1.2345, ".2f") == "1.23"
    write_json(None, [{"a": 1}])  # no path: nothing written, no error
    path = tmp_path / "r.json"
    write_json(str(path), [{"a": 1}], threads=2)
    assert json.loads(path.read_text()) == {"machine": machine(), "threads": 2, "rows": [{"a": 1}]}
