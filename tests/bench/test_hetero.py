import json

import pytest
import torch

from featgraph.bench import hetero
from featgraph.cli import main

pytest.importorskip("torch_geometric")


def test_bench_hetero_times_every_implementation_on_every_graph(tmp_path, capsys):
    out = tmp_path / "hetero.json"
    main([
        "bench", "hetero", "--scale", "0.002", "--mag-scale", "0.0005", "--repeat", "1", "--channels", "8",
        "--json", str(out),
    ])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["device"] == "cpu"
    rows = written["rows"]
    assert [r["graph"] for r in rows] == [*hetero.GRAPHS, "mag-like-0.0005, 8 relations"]
    for r in rows:
        assert r["featgraph_ms"] > 0 and r["featgraph_fused_ms"] > 0 and r["pyg_rgcn_ms"] > 0
        assert r["rgcn_over_featgraph"] == pytest.approx(r["pyg_rgcn_ms"] / r["featgraph_ms"])
        assert r["fast_rgcn_over_featgraph"] == pytest.approx(r["pyg_fast_rgcn_ms"] / r["featgraph_ms"])
    assert "| 3 types, 10 relations (" in capsys.readouterr().out


def test_fast_rgcn_is_skipped_over_its_memory_limit(tmp_path, capsys):
    out = tmp_path / "hetero.json"
    main(["bench", "hetero", "--scale", "0.002", "--mag-scale", "0.0005", "--repeat", "1", "--channels", "8",
          "--fast-max-gb", "0", "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert all(r["pyg_fast_rgcn_ms"] is None and r["fast_rgcn_over_featgraph"] is None for r in rows)
    assert "skipped (" in capsys.readouterr().out


def test_bench_hetero_rgat_times_both_mechanisms_against_pygs_layer(tmp_path, capsys):
    out = tmp_path / "rgat.json"
    main([
        "bench", "hetero", "--layer", "rgat", "--scale", "0.002", "--mag-scale", "0.0005", "--repeat", "1",
        "--channels", "8", "--heads", "2", "--device", "cpu", "--json", str(out),
    ])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["device"] == "cpu"
    rows = written["rows"]
    assert [(r["graph"], r["mechanism"]) for r in rows][:2] == [
        ("3 types, 10 relations", "across-relation"), ("3 types, 10 relations", "within-relation"),
    ]  # fmt: skip
    assert len(rows) == 2 * (len(hetero.GRAPHS) + 1)
    for r in rows:
        assert r["featgraph_ms"] > 0 and r["pyg_over_featgraph"] == pytest.approx(r["pyg_ms"] / r["featgraph_ms"])
    assert "| mag-like-0.0005, 8 relations (" in capsys.readouterr().out


def test_bench_hetero_hgt_times_featgraphs_layer_against_pygs(tmp_path, capsys):
    out = tmp_path / "hgt.json"
    main([
        "bench", "hetero", "--layer", "hgt", "--scale", "0.002", "--mag-scale", "0.0005", "--repeat", "1",
        "--channels", "8", "--heads", "2", "--device", "cpu", "--json", str(out),
    ])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["device"] == "cpu"
    rows = written["rows"]
    assert [(r["graph"], r["mechanism"]) for r in rows] == [
        (name, "across-relation") for name in [*hetero.GRAPHS, "mag-like-0.0005, 8 relations"]
    ]
    for r in rows:
        assert r["featgraph_ms"] > 0 and r["pyg_over_featgraph"] == pytest.approx(r["pyg_ms"] / r["featgraph_ms"])
    assert "| mag-like-0.0005, 8 relations (" in capsys.readouterr().out


def test_bench_hetero_heteroconv_times_accelerated_heteroconv_against_pygs(tmp_path, capsys):
    out = tmp_path / "heteroconv.json"
    main([
        "bench", "hetero", "--layer", "heteroconv", "--scale", "0.002", "--mag-scale", "0.0005", "--repeat", "1",
        "--channels", "8", "--device", "cpu", "--json", str(out),
    ])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["device"] == "cpu"
    rows = written["rows"]
    assert [(r["graph"], r["mechanism"]) for r in rows] == [
        (name, "SAGEConv per relation, sum") for name in [*hetero.GRAPHS, "mag-like-0.0005, 8 relations"]
    ]
    for r in rows:
        assert r["featgraph_ms"] > 0 and r["pyg_over_featgraph"] == pytest.approx(r["pyg_ms"] / r["featgraph_ms"])
    assert "heads" not in capsys.readouterr().out


@pytest.mark.parametrize("layer", ["rgcn", "rgat", "hgt", "heteroconv"])
def test_bench_hetero_runs_every_layer_on_a_gpu(layer, cuda, tmp_path):
    out = tmp_path / f"{layer}.json"
    main([
        "bench", "hetero", "--layer", layer, "--scale", "0.002", "--mag-scale", "0.0005", "--repeat", "1",
        "--channels", "8", "--device", str(cuda), "--json", str(out),
    ])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["device"] == torch.cuda.get_device_name(cuda)
    for r in written["rows"]:
        assert r["featgraph_ms"] > 0 and r["note"] == "" and r.get("dgl_ms") is None


def test_a_step_that_runs_out_of_gpu_memory_is_left_out_of_its_row():
    def out_of_memory() -> None:
        raise torch.OutOfMemoryError("CUDA out of memory")

    times, failed = hetero.best_times({"featgraph": lambda: None, "PyG": out_of_memory}, 1)
    assert list(times) == ["featgraph"] and failed == {"PyG": "out of GPU memory"}
    assert hetero.failure_note(failed) == "PyG: out of GPU memory"


def test_accelerated_heteroconv_case_gives_pygs_outputs():
    """The two steps the heteroconv rows time compute the same layer from the same weights."""
    import argparse

    hg = hetero.typed_graph((40, 30, 20), 12, 300)
    ((_, steps, _),) = hetero.heteroconv_cases(hg, argparse.Namespace(channels=8))
    ours = steps["featgraph"].forward()
    for other in ("PyG", "DGL"):  # DGL's HeteroGraphConv where DGL imports
        if other in steps:
            torch.testing.assert_close(ours, steps[other].forward(), rtol=1e-4, atol=1e-5)


def test_mag_graph_has_every_edge_type_reversed():
    hg = hetero.mag_graph(0.0005)
    assert hg.num_relations == 8 and ("paper", "rev_writes", "author") in hg.edge_types
    writes = torch.stack(hg.relation(("author", "writes", "paper")).coo())
    assert torch.equal(torch.stack(hg.relation(("paper", "rev_writes", "author")).coo()), writes.flip(0))


def test_typed_graph_is_seeded_and_skewed():
    hg = hetero.typed_graph((30, 20, 10), 6, 600)
    again = hetero.typed_graph((30, 20, 10), 6, 600)
    assert torch.equal(hg.graph.edge_index, again.graph.edge_index) and hg.edge_types == again.edge_types
    sizes = (hg.edge_offsets[1:] - hg.edge_offsets[:-1]).tolist()
    assert sum(sizes) == 600 and sizes[0] > sizes[-1] and hg.num_nodes == 60
