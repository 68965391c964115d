import json

from featgraph.bench import plots, suite
from featgraph.cli import main


def test_bench_all_writes_every_section_figures_and_json(tmp_path, monkeypatch):
    monkeypatch.setenv("FEATGRAPH_TUNE_DIR", str(tmp_path / "tuning"))
    out = tmp_path / "all"
    main([
        "bench", "all", "--out", str(out), "--graphs", "uniform", "--scale", "0.004", "--dims", "8", "128",
        "--ops", "gcn", "attention", "--repeat", "1", "--density-vertices", "300", "--degrees", "4",
        "--heatmap-dim", "8", "--tune-budget", "2", "--train-models",
    ])  # fmt: skip
    report = (out / "report.md").read_text()
    for title in ("Table III", "Figure 10", "Roofline", "Gather-bound targets", "Table V", "Figure 14", "Tuning"):
        assert f"## {title}" in report
    assert "Table VI" not in report  # no training models asked for
    results = json.loads((out / "all.json").read_text())
    assert set(results["triad_gbps"]) == {"1", "2"}
    assert {r["op"] for r in results["roofline"]} == {"gcn", "attention"}
    assert all(r["x_gather"] == r["ms"] / r["gather_ms"] for r in results["roofline"])
    # at 1 and 2 threads: 2x torch.sparse at d=8 and 128, 3x and the perfect-reuse one at d=128 only
    assert len(results["feasibility"]) == 2 * 4
    assert len(results["tuning"]) == 4 and len(results["density"]) == 1
    if plots.available():
        for name in (
            "headline.png",
            "thread-scaling.png",
            "roofline-uniform.png",
            "density-d128.png",
            "heatmap-uniform-d8.png",
        ):
            assert (out / name).exists() and f"]({name})" in report


def test_roofline_targets_say_met_or_not():
    def row(graph, d, x_perfect, vs_no_reuse):
        return suite.RooflineRow("gcn", graph, d, 2, 1.0, 0.1, 2.0, 1.5, x_perfect, vs_no_reuse, 0.7)

    good = [row("uniform", 128, 3.0, 2.0), row("rand100k", 512, 9.0, 1.5)]
    assert suite.roofline_targets(good).count(": met") == 2
    bad = [row("uniform", 128, 7.0, 0.8)]
    assert suite.roofline_targets(bad).count("NOT met") == 2
    assert "no GCN row" in suite.roofline_targets([row("uniform", 32, 1.0, 1.0)])
