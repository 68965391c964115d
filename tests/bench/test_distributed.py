import argparse
import math

import pytest
import torch

from featgraph.bench import distributed as bench
from featgraph.bench.distributed import PAPERS_EDGES, PAPERS_NODES, PartitionRow, TimingRow, by_class, model_rows


def arguments(**given) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args([])
    for key, value in given.items():
        setattr(args, key, value)
    return args


def test_model_scales_compute_and_extrapolates_the_halo():
    n, e, width = 1000, 20_000, 8
    partitions = [
        PartitionRow("metis", 2, 0, 0.0, 100, 0, 0),  # 0.1 halo rows per vertex at 2 parts
        PartitionRow("metis", 4, 0, 0.0, 250, 0, 0),  # 0.25 at 4: +0.15 per doubling
        PartitionRow("random", 2, 0, 0.0, 900, 0, 0),
        PartitionRow("random", 4, 0, 0.0, 2500, 0, 0),
    ]
    timings = [TimingRow("one part", 1, 2, 2.0)]
    rows = model_rows(partitions, timings, n, e, width, arguments(machines=[1, 2, 16], bandwidth=[10.0]))
    by = {(r.method, r.machines): r for r in rows}
    assert by["metis", 1].halo_bytes == 0
    assert by["metis", 1].compute_seconds == pytest.approx(2.0 / e * PAPERS_EDGES)
    assert by["metis", 16].compute_seconds == pytest.approx(2.0 / e * PAPERS_EDGES / 16)
    assert by["metis", 2].halo_bytes == pytest.approx(2 * 0.1 * PAPERS_NODES * width * 4)
    assert by["metis", 16].halo_bytes == pytest.approx(2 * (0.1 + 0.15 * 3) * PAPERS_NODES * width * 4)
    assert by["random", 16].halo_bytes == pytest.approx(2 * (0.9 + 1.6 * 3) * PAPERS_NODES * width * 4)
    row = by["random", 16]
    link = 10e9 / 8
    assert row.epoch_seconds["s/epoch @ 10 Gbit/s"] == pytest.approx(row.compute_seconds + row.halo_bytes / 16 / link)
    assert math.isfinite(by["random", 2].epoch_seconds["s/epoch @ 10 Gbit/s"])


def test_model_caps_the_halo_at_every_other_machine():
    partitions = [PartitionRow(m, p, 0, 0.0, halo, 0, 0) for m in bench.METHODS for p, halo in [(2, 9), (4, 30)]]
    rows = model_rows(partitions, [TimingRow("one part", 1, 2, 1.0)], 10, 10, 1, arguments(machines=[2, 64]))
    assert max(r.halo_bytes for r in rows) <= 2 * 63 * PAPERS_NODES * 4


def test_too_few_epochs_are_refused():
    with pytest.raises(ValueError, match="--epochs"):
        bench.run(arguments(epochs=1))


@pytest.mark.parametrize("num_parts", [2, 3])
def test_by_class_keeps_classes_whole_and_parts_near_equal(num_parts):
    labels = torch.tensor([0] * 7 + [1] * 5 + [2] * 4 + [3] * 3 + [4] * 1)
    parts = by_class(labels, num_parts)
    for label in range(5):
        assert parts[labels == label].unique().numel() == 1  # a class is never split
    sizes = torch.bincount(parts, minlength=num_parts)
    assert int(sizes.sum()) == labels.numel() and int(sizes.max() - sizes.min()) <= int(torch.bincount(labels).max())
    assert sizes.tolist() == ([10, 10] if num_parts == 2 else [7, 6, 7])  # greedy: largest class to lightest part
