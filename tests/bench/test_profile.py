import json

import pytest

from featgraph.bench import profile
from featgraph.cli import main


def test_bench_profile_lists_each_frameworks_costliest_operators(tmp_path, capsys):
    """Two frameworks, each profiled in its own process; both eager, as a compiled one adds its compilation to
    the suite and its name only wraps the same model in torch.compile, which bench train's tests run."""
    out = tmp_path / "p.json"
    main(["bench", "profile", "--scale", "0.002", "--top", "4", "--frameworks", "featgraph", "featgraph-torch-dropout",
          "--json", str(out)])  # fmt: skip
    report = json.loads(out.read_text())
    ours, torch_dropout = report["rows"]
    assert (ours["framework"], torch_dropout["framework"]) == ("featgraph", "featgraph-torch-dropout")
    for p in (ours, torch_dropout):
        assert p["note"] == "" and p["epoch_ms"] > 0 and p["launches"] is None  # no GPU: no kernel launches
        assert len(p["ops"]) == 4 and {op["side"] for op in p["ops"]} == {"host"}
        times = [op["ms"] for op in p["ops"]]
        assert times == sorted(times, reverse=True) and all(op["calls"] > 0 for op in p["ops"])
    assert any(op["op"].startswith("featgraph::") for op in ours["ops"])  # featgraph's operators show by name
    assert "featgraph-torch-dropout:" in capsys.readouterr().out


def test_a_framework_that_cannot_run_is_noted_and_bad_options_refused(tmp_path):
    assert profile.run_one("rand100k-2.9M", 0.002, "gcn", "dgl", "cuda", 3, 4).note.startswith("not run on cuda")
    with pytest.raises(SystemExit, match="--epochs must be at least 3"):
        main(["bench", "profile", "--epochs", "2"])
