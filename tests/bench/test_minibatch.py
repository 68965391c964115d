import json
import time
from typing import NamedTuple

import pytest
import torch

from featgraph.bench import minibatch
from featgraph.cli import main
from featgraph.graph.interop import import_dgl


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory):
    path, described = minibatch.write_graph(0.002, tmp_path_factory.mktemp("minibatch"))
    assert "products-like-0.002" in described
    return str(path)


@pytest.mark.parametrize(
    "bench_model,framework", [("sage", "featgraph"), ("gat", "featgraph"), ("gat", "featgraph-pyg")]
)
def test_featgraph_loader_rows_measure_sampling_training_format_and_memory(graph_file, bench_model, framework):
    if framework == "featgraph-pyg":
        pytest.importorskip("torch_geometric")
    row = minibatch.run_one(graph_file, bench_model, framework, 1, 1)
    assert row.note == "" and row.sample_seeds_s > 0 and row.train_seeds_s > 0
    assert row.format_share >= 0 and (row.peak_mb is None or row.peak_mb >= 0)
    assert 0 <= row.wait_share <= 1


def test_rows_on_a_gpu_sample_on_the_cpu_and_train_there(graph_file, cuda):
    rows = [("sage", "featgraph"), ("gat", "featgraph")]
    rows += [("gat", "featgraph-pyg")] if minibatch.unavailable("featgraph-pyg") == "" else []
    for bench_model, framework in rows:
        row = minibatch.run_one(graph_file, bench_model, framework, 2, 1, "wall", str(cuda))
        assert row.note == "" and row.train_seeds_s > 0 and row.sample_seeds_s > 0, row
        assert 0 <= row.wait_share <= 1 and row.format_share >= 0 and row.peak_mb > 0


class Pair(NamedTuple):
    edges: torch.Tensor
    counts: list[int]


def test_moved_takes_every_tensor_and_graph_of_a_batch_and_keeps_its_shape():
    from featgraph.graph import Graph

    g = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2)
    batch = (torch.ones(2), [g], (Pair(torch.zeros(2, 1), [3, 4]), 5))
    x, (graph,), (pair, count) = minibatch.moved(batch, torch.device("meta"))
    assert x.is_meta and graph.device.type == "meta" and pair.edges.is_meta
    assert isinstance(pair, Pair) and pair.counts == [3, 4] and count == 5


def test_wait_share_is_the_part_of_the_loop_spent_obtaining_batches():
    def slow_batches():
        while True:
            time.sleep(0.01)
            yield torch.zeros(1), torch.zeros(4)

    cpu = torch.device("cpu")
    waiting = minibatch.throughput(slow_batches(), 3, 1, lambda batch: None, "wall", cpu)
    assert 0.9 < waiting.wait_share <= 1 and 0 < waiting.per_s < 4 / 0.01
    working = minibatch.throughput(slow_batches(), 3, 0, lambda batch: time.sleep(0.05), "wall", cpu)
    assert 0 < working.wait_share < 0.5


def test_missing_baselines_are_rows_saying_why(graph_file):
    if import_dgl() is None:
        assert minibatch.run_one(graph_file, "sage", "dgl", 1, 1).note == "DGL does not import here"
    pyg = minibatch.run_one(graph_file, "sage", "pyg", 1, 1)
    assert pyg.note or pyg.train_seeds_s > 0


def test_bench_minibatch_prints_one_row_per_framework(tmp_path, capsys):
    out = tmp_path / "m.json"
    frameworks = ["featgraph", "dgl", "pyg"]
    args = ["bench", "minibatch", "--scale", "0.002", "--models", "gat", "--batches", "1", "--warmup", "0"]
    main([*args, "--frameworks", *frameworks, "--clock", "cpu", "--device", "cpu", "--json", str(out)])
    printed = capsys.readouterr().out
    table = [line for line in printed.splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(frameworks) and "wait share" in table[0]
    assert {line.count("|") for line in table} == {11}
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert report["clock"] == "cpu" and report["device"] == "cpu" and "device: cpu" in printed
    assert [(r["model"], r["framework"]) for r in rows] == [("gat", framework) for framework in frameworks]
    for r in rows:
        assert (r["train_seeds_s"] is not None) != bool(r["note"]), r
        assert r["wait_share"] is None if r["note"] else 0 <= r["wait_share"] <= 1
        assert (r["train_vs_dgl"] is not None) == (r["train_seeds_s"] is not None and import_dgl() is not None)


def test_format_ops_name_the_operators_a_fresh_batch_spends_more_on(graph_file):
    row = minibatch.run_one(graph_file, "sage", "featgraph", 2, 0, "wall", "cpu", 4)
    assert row.note == "" and row.format_ops is not None and len(row.format_ops) <= 4
    extra = [ms for _, ms in row.format_ops]
    assert all(ms > 0 for ms in extra) and extra == sorted(extra, reverse=True)
    assert all(isinstance(op, str) and op for op, _ in row.format_ops)
    assert minibatch.run_one(graph_file, "sage", "featgraph", 1, 0).format_ops is None  # off by default
