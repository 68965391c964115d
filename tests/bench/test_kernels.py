import json

import pytest
import torch

from featgraph.bench import kernels
from featgraph.datasets import uniform
from featgraph.templates.params import EDGE_ORDERS


@pytest.mark.parametrize("op", [op for op in kernels.OPS if op not in kernels.TRAINING_OPS])
def test_every_implementation_computes_the_same_result(op):
    g = uniform(60, 5, seed=1)
    impls = kernels.BENCHES[op](g, 6, threads=1)
    results = {name: fn() for name, fn in impls.items() if not isinstance(fn, str)}
    ours = results.pop("featgraph")
    ours = ours[0] if isinstance(ours, tuple) else ours
    for name, value in results.items():
        value = value[0] if isinstance(value, tuple) else value
        value = torch.as_tensor(value)
        if value.is_sparse_csr:  # sampled_addmm: values in CSR order
            value = g.permute_edge_values(value.values(), "csr", "user").unsqueeze(1)
        tolerance = 1e-2 if op in kernels.HALF_OPS else 1e-4  # 16-bit results against float32: one rounding
        # a row that sums in 16 bits (DGL's) rounds at the partial sums' scale, not the result's
        scale = float(ours.float().abs().max()) if op in kernels.HALF_OPS else 1.0
        torch.testing.assert_close(value.float(), ours.float(), rtol=tolerance, atol=tolerance * scale, msg=name)


@pytest.mark.parametrize("op", kernels.TRAINING_OPS)
def test_training_rows_give_the_same_gradients(op):
    g = uniform(40, 4, seed=3)
    impls = kernels.BENCHES[op](g, 8, threads=1)
    grads = {}
    for name, step in impls.items():
        if isinstance(step, str):
            continue
        step()
        grads[name] = [leaf.grad.clone() for leaf in step.leaves]
    ours = grads.pop("featgraph")
    assert grads, "no baseline ran"
    for name, theirs in grads.items():
        for a, b in zip(ours, theirs, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, msg=name)


def test_max_baseline_argmax_matches_featgraph():
    g = uniform(50, 6, seed=2)
    impls = kernels.bench_max(g, 5, threads=1)
    (out, arg), (ref_out, ref_arg) = impls["featgraph"](), impls["scatter_reduce + argmax (torch)"]()
    torch.testing.assert_close(out, ref_out)
    src, dst = g.coo()
    # ties aside, both name an edge into the row whose message is the maximum
    assert torch.equal(arg >= 0, ref_arg >= 0)


def test_run_writes_rows_and_ratios(tmp_path, capsys):
    path = tmp_path / "rows.json"
    args = kernels.argparse.Namespace(
        graphs=["uniform"], dims=[4], ops=list(kernels.OPS), threads=1, repeat=1, scale=0.002,
        ablation=True, ablation_dims=[3, 8], json=str(path),
    )  # fmt: skip
    rows = kernels.run(args)
    data = json.loads(path.read_text())
    assert len(data["rows"]) == len(rows) > 0
    ours = [r for r in rows if r.impl == "featgraph"]
    assert all(r.ratio == pytest.approx(1.0) for r in ours)
    assert {r.op for r in rows} == {
        *kernels.OPS,
        "gcn-ablation",
        "attention-order",
        "heads-order",
        "attention-writes",
        "heads-writes",
        "edge-add-order",
        "gcn-strategy",
        "csr-build",
    }
    assert {r.d for r in rows if r.op == "attention-order"} == {3, 8}
    # the test graph's rows fit one segment: no second CSR row
    walks = {"csr": "csr, 1 segment"}
    expected = [f"edge order {walks.get(o, o)}" for o in EDGE_ORDERS]
    assert [r.impl for r in rows if r.op == "heads-order" and r.d == 8] == expected
    assert "| op | graph | d |" in capsys.readouterr().out


def test_edge_orders_compared_include_the_csr_walk_in_its_segments_and_in_one(monkeypatch):
    """Where the source rows exceed a segment, the ablation times the CSR walk in the default segments and in
    one, labelled by their count, and each computes the same scores as the user's order."""
    from featgraph.templates import params

    monkeypatch.setattr(params, "segment_bytes", lambda: 2048)  # 60 rows of 24 float32 gathered: 3 segments
    g = uniform(60, 5, seed=1)
    found = kernels.order_kernels("heads", g, 24, 1)
    labels = [kernels.order_label(k) for k in found]
    assert labels == [*(f"edge order {o}" for o in EDGE_ORDERS[:2]), "edge order csr, 3 segments",
                      "edge order csr, 1 segment"]  # fmt: skip
    x = torch.randn(60, kernels.ATTENTION_HEADS, 24 // kernels.ATTENTION_HEADS)
    for kernel in found[1:]:
        torch.testing.assert_close(kernel(XV=x), found[0](XV=x))
