import importlib.util
import json

import pytest

from featgraph.cli import main


def test_bench_hetero_minibatch_times_sampling_and_training_steps(tmp_path):
    out = tmp_path / "rows.json"
    main([
        "bench", "hetero-minibatch", "--scale", "0.002", "--fanouts", "3", "2", "--batch", "16", "--batches", "2",
        "--train-batches", "2", "--repeat", "1", "--json", str(out),
    ])  # fmt: skip
    result = json.loads(out.read_text())
    rows = result["rows"]
    assert rows[0]["sampler"].startswith("featgraph HeteroNeighborSampler") and rows[0]["time_over_featgraph"] == 1.0
    assert rows[1]["sampler"] == "featgraph HeteroNeighborSampler.sample_blocks (DGL's blocks)"
    if importlib.util.find_spec("torch_geometric") is not None:
        assert any(r["sampler"].startswith("featgraph NeighborLoader on HeteroData") for r in rows)
        steps = {r["layers"]: r for r in result["training"]}
        assert set(steps) == {"featgraph (accelerate)", "PyG"} and steps["featgraph (accelerate)"]["ratio"] == 1.0
        assert steps["PyG"]["ratio"] == pytest.approx(steps["PyG"]["ms"] / steps["featgraph (accelerate)"]["ms"])
    for r in rows:
        assert r["ms_per_batch"] > 0
        assert r["seeds_per_s"] == pytest.approx(16 / r["ms_per_batch"] * 1e3)
        assert r["time_over_featgraph"] == pytest.approx(r["ms_per_batch"] / rows[0]["ms_per_batch"])
