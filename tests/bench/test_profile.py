import json

import pytest

from featgraph.bench import profile
from featgraph.cli import main


def test_bench_profile_lists_each_frameworks_costliest_operators(tmp_path, capsys):
    out = tmp_path / "p.json"
    main(["bench", "profile", "--scale", "0.002", "--top", "4", "--json", str(out)])
    report = json.loads(out.read_text())
    eager, compiled = report["rows"]
    assert (eager["framework"], compiled["framework"]) == ("featgraph", "featgraph-compiled")
    for p in (eager, compiled):
        assert p["note"] == "" and p["epoch_ms"] > 0 and p["launches"] is None  # no GPU: no kernel launches
        assert len(p["ops"]) == 4 and {op["side"] for op in p["ops"]} == {"host"}
        times = [op["ms"] for op in p["ops"]]
        assert times == sorted(times, reverse=True) and all(op["calls"] > 0 for op in p["ops"])
    assert any(op["op"].startswith("featgraph::") for op in eager["ops"])  # featgraph's operators show by name
    assert "featgraph-compiled:" in capsys.readouterr().out


def test_a_framework_that_cannot_run_is_noted_and_bad_options_refused(tmp_path):
    assert profile.run_one("rand100k-2.9M", 0.002, "gcn", "dgl", "cuda", 3, 4).note.startswith("not run on cuda")
    with pytest.raises(SystemExit, match="--epochs must be at least 3"):
        main(["bench", "profile", "--epochs", "2"])
