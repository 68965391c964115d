import json

import numpy as np
import pytest
import torch

from featgraph import Graph, ops, sddmm, spmm, te, tune
from featgraph.tuning import search, store
from featgraph.tuning.space import Config, current_config
from tests.conftest import adjacency, random_edges
from tests.templates.reference import reduce_messages

N, E, D = 60, 700, 12


@pytest.fixture
def case():
    src, dst = random_edges(N, E, seed=5)
    return Graph(src, dst, N), src, dst


def _copy_u(d, reducer, g, **params):
    XV = te.placeholder((g.num_nodes, d), name="XV")
    return spmm(g, lambda s, t, e: te.compute((d,), lambda i: XV[s, i]), reducer, **params)


def test_tuned_spmm_is_correct_and_records_the_search(case):
    g, src, dst = case
    kernel = tune(_copy_u(D, "sum", g), progress=False)
    result = kernel.tuning
    assert not result.from_cache and result.tried > 1
    assert result.ms <= result.default_ms and result.speedup >= 1
    x = torch.randn(N, D)
    expected = adjacency(src, dst, N) @ x.numpy()
    np.testing.assert_allclose(kernel(XV=x).numpy(), expected, rtol=1e-5, atol=1e-5)


def test_tuned_max_keeps_its_argmax(case):
    g, src, dst = case
    kernel = _copy_u(D, "max", g, tune=True)
    x = torch.randn(N, D)
    out, arg = kernel.run(return_arg=True, XV=x)
    torch.testing.assert_close(out, reduce_messages(x[src], dst, N, "max"))
    has = arg >= 0
    torch.testing.assert_close(out[has], x[src[arg[has]], torch.nonzero(has)[:, 1]])


def test_tuned_sddmm_is_correct(case):
    g, src, dst = case
    XV = te.placeholder((N, 40), name="XV")

    def dot(s, t, e):
        k = te.reduce_axis((0, 40), name="k")
        return te.compute((1,), lambda i: te.sum(XV[s, k] * XV[t, k], axis=k))

    kernel = sddmm(g, dot, tune=True)
    assert kernel.tuning is not None
    x = torch.randn(N, 40)
    torch.testing.assert_close(kernel(XV=x), (x[src] * x[dst]).sum(1, keepdim=True), rtol=1e-5, atol=1e-5)


def test_second_tuning_reads_the_store_without_measuring(case, monkeypatch, tune_dir):
    g, _, _ = case
    first = tune(_copy_u(D, "sum", g), progress=False)
    assert len(list(tune_dir.glob("*.json"))) == 1

    def no_measuring(*args, **kwargs):
        raise AssertionError("a stored result must not be measured again")

    monkeypatch.setattr(search, "best_ms", no_measuring)
    again = _copy_u(D, "sum", g, tune=True)
    assert again.tuning.from_cache and again.tuning.config == first.tuning.config
    assert current_config(again) == first.tuning.config


def test_store_key_ignores_the_starting_point_but_not_the_graph_or_shape(case):
    g, src, dst = case
    kernel = _copy_u(D, "sum", g)
    moved = kernel.reconfigured(kernel.spec.params, kernel.spec.schedule)
    assert store.key(kernel, 2) == store.key(moved, 2)
    assert store.key(kernel, 2) != store.key(kernel, 1)
    assert store.key(kernel, 2) != store.key(_copy_u(D + 1, "sum", g), 2)
    assert store.key(kernel, 2) != store.key(_copy_u(D, "sum", Graph(dst, src, N)), 2)
    assert store.key(kernel, 2) != store.key(_copy_u(D, "max", g), 2)


def test_fixed_parameters_survive_tuning(case):
    g, _, _ = case
    kernel = _copy_u(D, "sum", g, num_partitions=3, tune=True)
    assert kernel.spec.params.num_partitions == 3


def test_zero_budget_measures_only_the_start(case):
    g, _, _ = case
    kernel = tune(_copy_u(D, "sum", g), budget_s=0, progress=False, use_cache=False)
    assert kernel.tuning.tried == 1 and kernel.tuning.config == current_config(kernel)


def test_given_inputs_are_used_and_left_alone(case):
    g, _, _ = case
    x = torch.randn(N, D)
    before = x.clone()
    kernel = tune(_copy_u(D, "sum", g), {"XV": x}, progress=False, use_cache=False)
    assert torch.equal(x, before) and kernel.tuning.tried > 1


STALE_RECORDS = {
    "not JSON": "{not json",
    "not an object": "[1, 2]",
    "config without params": json.dumps({"config": {"split": None}, "ms": 1.0, "default_ms": 1.0, "tried": 1}),
    "unknown parameter": json.dumps(
        {"config": {"params": {"tiles": 2}, "split": None}, "ms": 1.0, "default_ms": 1.0, "tried": 1}
    ),
    "invalid value": json.dumps(
        {"config": {"params": {"num_partitions": 0}, "split": None}, "ms": 1.0, "default_ms": 1.0, "tried": 1}
    ),
    "no timing": json.dumps({"config": {"params": {}, "split": None}}),
}


@pytest.mark.parametrize("text", STALE_RECORDS.values(), ids=STALE_RECORDS.keys())
def test_an_unusable_record_is_reported_searched_afresh_and_replaced(case, tune_dir, text):
    g, src, dst = case
    kernel = _copy_u(D, "sum", g)
    tune_dir.mkdir(parents=True, exist_ok=True)
    path = tune_dir / f"{store.key(kernel, kernel._threads())}.json"
    path.write_text(text)
    with pytest.warns(UserWarning, match=f"ignores the tuning record {path}"):
        tuned = tune(kernel, budget_s=0, progress=False)
    assert not tuned.tuning.from_cache
    assert Config.from_json("spmm", json.loads(path.read_text())["config"]) == tuned.tuning.config
    x = torch.randn(N, D)
    np.testing.assert_allclose(tuned(XV=x).numpy(), adjacency(src, dst, N) @ x.numpy(), rtol=1e-5, atol=1e-5)
    assert tune(kernel, budget_s=0, progress=False).tuning.from_cache


def test_a_store_that_cannot_be_written_is_reported_and_the_kernel_still_tuned(case, tmp_path, monkeypatch):
    g, _, _ = case
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("FEATGRAPH_TUNE_DIR", str(not_a_dir))
    with pytest.warns(UserWarning, match=f"cannot store the tuning result in {not_a_dir} .*FEATGRAPH_TUNE_DIR"):
        tuned = tune(_copy_u(D, "sum", g), budget_s=0, progress=False)
    assert tuned.tuning is not None and not tuned.tuning.from_cache


def test_synthetic_inputs_match_the_placeholders(case):
    g, _, _ = case
    kernel = _copy_u(D, "sum", g)
    inputs = search.synthetic_inputs(kernel)
    assert inputs["XV"].shape == (N, D) and inputs["XV"].dtype == torch.float32


@pytest.mark.parametrize("reduce", ["sum", "max"])
def test_ops_tune_flag_gives_the_same_values_and_gradients(case, reduce):
    g, _, _ = case
    x = torch.randn(N, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(E, 5, dtype=torch.float64, requires_grad=True)
    plain = ops.gspmm(g, "mul", reduce, x, w)
    tuned = ops.u_mul_e_sum(g, x, w, tune=True) if reduce == "sum" else ops.u_mul_e_max(g, x, w, tune=True)
    torch.testing.assert_close(tuned, plain)
    grads = torch.autograd.grad(plain.sum(), (x, w))
    torch.testing.assert_close(torch.autograd.grad(tuned.sum(), (x, w)), grads)
    assert torch.autograd.gradcheck(lambda a, b: ops.gsddmm(g, "dot", a, b, "u", "e", tune=True), (x, w))


def test_tuned_gcn_aggregate_matches_the_default(case):
    g, _, _ = case
    x = torch.randn(N, D, requires_grad=True)
    torch.testing.assert_close(ops.gcn_aggregate(g, x, tune=True), ops.gcn_aggregate(g, x))


def test_config_of_the_stored_record_is_valid(case, tune_dir):
    g, _, _ = case
    tune(_copy_u(D, "sum", g), progress=False)
    record = store.load(next(tune_dir.glob("*.json")).stem)
    assert Config.from_json("spmm", record["config"]).params.num_feature_tiles in (1, 2, 4)


def test_bad_settings_and_inputs_are_named(case):
    g, _, _ = case
    kernel = _copy_u(D, "sum", g)
    with pytest.raises(ValueError, match="repeat >= 1"):
        tune(kernel, repeat=0, progress=False)
    with pytest.raises(ValueError, match="budget_s >= 0"):
        tune(kernel, budget_s=-1, progress=False)
    with pytest.raises(TypeError, match="missing"):
        tune(kernel, {"X": torch.randn(N, D)}, progress=False, use_cache=False)
    with pytest.raises(ValueError, match="XV: expected shape"):
        tune(kernel, {"XV": torch.randn(N, D + 1)}, progress=False, use_cache=False)


def test_tuning_a_gpu_kernel_skips_cpu_only_candidates(gpu):
    """On the graph's device: the tuner's synthetic inputs go where the kernel's graph is (CUDA on a GPU)."""
    src, dst = random_edges(40, 300, seed=2)
    g = Graph(src.to(gpu), dst.to(gpu), 40)
    default = _copy_u(8, "sum", g, target="gpu")
    assert search.synthetic_inputs(default)["XV"].device == g.device
    kernel = tune(default, progress=False, repeat=1, use_cache=False)
    assert kernel.target == "gpu" and kernel.spec.params.num_partitions == 1 and kernel.tuning.tried > 1
    # the packed rows the tuner kept: the default's, or one of the values it tried (timing decides which)
    assert kernel.spec.params.rows_per_program in (default.spec.params.rows_per_program, 1, 4, 16)
    x = torch.randn(40, 8)
    torch.testing.assert_close(kernel(XV=x.to(gpu)).cpu(), reduce_messages(x[src], dst, 40, "sum"))
