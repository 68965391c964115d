import json

import pytest
import torch

from featgraph.bench import gpu
from featgraph.cli import main
from featgraph.templates.kernel import default_target


def test_gpu_benchmark_rows_cover_every_op_and_baseline(interpreted_gpu, tmp_path, capsys):
    out = tmp_path / "gpu.json"
    ops = [op for op in gpu.OPS if op not in gpu.HALF_OPS]  # the 16-bit rows have their own test below
    main(["bench", "gpu", "--graphs", "rand100k", "--scale", "0.001", "--dims", "8", "--repeat", "1",
          "--ops", *ops, "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    assert {r["op"] for r in rows} == set(ops)
    for op in ops:
        mine = [r for r in rows if r["op"] == op]
        assert mine[0]["impl"] == "featgraph" and mine[0]["ratio"] == 1.0
        assert all(r["ms"] is None or (r["ms"] > 0 and r["ratio"] > 0) for r in mine)
    assert any(r["impl"].startswith("torch.sparse.mm") and r["ms"] for r in rows)
    assert "| gcn | rand100k | 8 | featgraph |" in capsys.readouterr().out


@pytest.mark.parametrize(("op", "reference"), [("gcn", "torch.sparse.mm"), ("attention", "gather + sum")])
def test_the_benchmark_ops_compute_the_same_thing(interpreted_gpu, op, reference):
    g = gpu.on_device(gpu.GRAPHS["rand100k"](0.002), torch.device("cpu"))
    with default_target("gpu"):
        impls = gpu.BENCHES[op](g, 16)
        results = {name: fn() for name, fn in impls.items() if not isinstance(fn, str)}
    want = next(got for name, got in results.items() if name.startswith(reference))
    assert any(name.startswith("featgraph tensor cores") for name in results)
    for name, got in results.items():
        if name.startswith("torch.sparse.sampled_addmm"):
            got = got.values()[torch.argsort(g.csr()[2])].unsqueeze(1)  # CSR order back to edge order
        tolerance = 1e-2 if "tensor cores" in name else 1e-4
        torch.testing.assert_close(got.reshape(want.shape), want, rtol=tolerance, atol=tolerance, msg=name)


def test_compile_only_reports_every_featgraph_launch_for_hopper(interpreted_gpu, tmp_path, capsys):
    out = tmp_path / "compiled.json"
    main(
        [
            "bench",
            "gpu",
            "--compile-only",
            "90",
            "--graphs",
            "uniform",
            "--scale",
            "0.0005",
            "--dims",
            "16",
            "--ops",
            "gcn",
            "--json",
            str(out),
        ]
    )  # fmt: skip  (the other kernel kinds: tests/backends/gpu/test_aot.py)
    report = json.loads(out.read_text())
    rows = report["rows"]
    assert report["arch"] == 90 and {r["op"] for r in rows} == {"gcn"}
    assert {r["kernel"] for r in rows} >= {"spmm_kernel", "_block_spmm"}
    tensor_cores = {"featgraph tensor cores (TF32)", "featgraph tensor cores 8x1 (TF32)"}
    assert {r["impl"] for r in rows} >= {"featgraph", *tensor_cores}
    assert all(0 < r["registers"] <= 255 and r["spills"] >= 0 for r in rows)
    assert "| gcn | uniform | 16 | featgraph | spmm_kernel |" in capsys.readouterr().out


def test_tune_adds_the_tuners_row_and_refuses_ops_it_cannot_tune(interpreted_gpu, tmp_path, capsys):
    out = tmp_path / "gpu.json"
    main(["bench", "gpu", "--ops", "attention", "--graphs", "uniform", "--scale", "0.001", "--dims", "8",
          "--repeat", "1", "--tune", "1", "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    tuned = [r for r in rows if r["impl"].startswith("featgraph tuned (")]
    assert len(tuned) == 1 and tuned[0]["ms"] > 0 and tuned[0]["ratio"] > 0
    with pytest.raises(SystemExit, match="--tune: the tuner configures gcn, mlp, attention, not gat-train"):
        main(["bench", "gpu", "--ops", "attention", "gat-train", "--tune", "1"])


@pytest.mark.parametrize("op", ["gcn-bf16", "attention-fp16"])
def test_the_16_bit_rows_compute_the_float32_rows_values(interpreted_gpu, op):
    g = gpu.on_device(gpu.GRAPHS["rand100k"](0.002), torch.device("cpu"))
    with default_target("gpu"):
        impls = gpu.BENCHES[op](g, 16)
        results = {name: fn() for name, fn in impls.items() if not isinstance(fn, str)}
    want = results.pop("featgraph float32")
    assert results["featgraph"].dtype == getattr(torch, gpu.HALF_OPS[op][1])
    for name, got in results.items():  # the same 16-bit values: one rounding apart
        torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2, msg=name)


def test_half_ops_time_16_bits_against_float32_and_note_what_torch_sparse_refuses(interpreted_gpu, tmp_path):
    out = tmp_path / "half.json"
    main(["bench", "gpu", "--device", "cpu", "--ops", "gcn-bf16", "attention-bf16", "--scale", "0.001", "--dims",
          "8", "--repeat", "1", "--graphs", "uniform", "--json", str(out)])  # fmt: skip
    rows = json.loads(out.read_text())["rows"]
    g = gpu.GRAPHS["uniform"](0.001)
    outputs = {"gcn-bf16": g.num_nodes * 8, "attention-bf16": g.num_edges}
    for op, reads in (("gcn-bf16", 8), ("attention-bf16", 16)):
        mine = {r["impl"]: r for r in rows if r["op"] == op}
        ours, full = mine["featgraph"], mine["featgraph float32"]
        assert next(iter(mine)) == "featgraph" and ours["ratio"] == 1.0
        assert full["ratio"] == pytest.approx(full["ms"] / ours["ms"])  # float32 time over 16-bit time
        least_bytes = g.num_edges * (reads * 2 + 8) + outputs[op] * 2  # 2-byte features and outputs
        assert ours["gbps"] == pytest.approx(least_bytes / ours["ms"] / 1e6)
        (torch_sparse,) = [r for name, r in mine.items() if name.startswith("torch.sparse")]
        assert torch_sparse["ms"] is None and torch_sparse["note"].startswith("unsupported: ")  # MKL: no bfloat16
