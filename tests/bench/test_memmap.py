"""bench memmap: the memory-mapped row holds the features as file-backed pages, the in-memory row as its own."""

import json

import numpy as np
import pytest
import torch

from featgraph.bench import memmap
from featgraph.cli.main import main


def test_write_features_writes_the_seeded_rows_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(memmap, "CHUNK_ROWS", 7)
    path = tmp_path / "f.npy"
    memmap.write_features(path, 30, 5, seed=3)
    got = np.load(path)
    gen = torch.Generator().manual_seed(3)
    want = torch.cat([torch.randn(min(7, 30 - s), 5, generator=gen) for s in range(0, 30, 7)]).numpy()
    assert got.shape == (30, 5) and got.dtype == np.float32 and np.array_equal(got, want)


def test_mapped_features_stay_out_of_the_process_s_own_memory(tmp_path):
    pytest.importorskip("torch_geometric")
    out = tmp_path / "rows.json"
    # small batches, so the gathered rows (which grow with the width) stay small beside the features
    argv = ["--scale", "0.01", "--width", "2048", "--batches", "2", "--batch-size", "64", "--fanouts", "5", "5"]
    main(["bench", "memmap", *argv, "--json", str(out)])
    mapped, loaded = json.loads(out.read_text())["rows"]
    assert mapped["mode"] == "memory-mapped" and loaded["mode"] == "in memory"
    assert mapped["features_mb"] == pytest.approx(24_490 * 2048 * 4 / 2**20)
    # loading puts the features in the process's anonymous memory; mapping leaves them file-backed
    assert loaded["peak_anon_mb"] - mapped["peak_anon_mb"] > 0.8 * mapped["features_mb"]
    with pytest.raises(SystemExit, match="--width, --batches and --batch-size must be >= 1"):
        main(["bench", "memmap", "--width", "0"])
