import json

import pytest

from featgraph.bench import dgl_bench
from featgraph.cli import main
from featgraph.graph.interop import import_dgl

needs_dgl = pytest.mark.skipif(import_dgl() is None, reason="DGL is not installed or does not import")


@needs_dgl
def test_every_workload_trains_on_dgls_kernels_and_on_featgraphs_from_the_same_start(tmp_path, capsys):
    out = tmp_path / "dgl.json"
    workloads = ("gat", "minibatch")  # gcn and sage take gat's full-graph path; rgcn in this process below
    main(["bench", "dgl", "--workloads", *workloads, "--graphs", "rand100k-2.9M", "--scale", "0.002", "--repeat", "1",
          "--batches", "2", "--threads", "1", "--runs", "2", "--json", str(out)])  # fmt: skip
    written = json.loads(out.read_text())
    assert written["threads"] == 1 and written["scale"] == 0.002 and written["runs"] == 2
    rows = written["rows"]
    assert [(r["workload"], r["side"]) for r in rows] == [(w, s) for w in workloads for s in dgl_bench.SIDES]
    printed = capsys.readouterr().out
    assert dgl_bench.TABLE.header in printed
    for dgl, ours in zip(rows[::2], rows[1::2], strict=True):
        workload = dgl["workload"]
        assert dgl["ms"] > 0 and ours["ms"] > 0, (workload, dgl["note"], ours["note"])
        assert dgl["peak_mb"] is not None and ours["peak_mb"] is not None
        for row in (dgl, ours):  # two runs a side, the median of their peaks; the workers count allocations
            assert len(row["peak_runs"]) == 2 and row["peak_mb"] == pytest.approx(sum(row["peak_runs"]) / 2)
            assert row["allocated_mb"] > 0
        assert dgl["speedup"] == 1.0 and ours["speedup"] == pytest.approx(dgl["ms"] / ours["ms"])
        assert dgl["served"] is None and ours["served"] > 0, workload
        assert isinstance(ours["fallbacks"], dict) and ours["note"] == "", (workload, ours["note"])
        assert len(dgl["losses"]) == len(ours["losses"]) == 2
        # the same weights, inputs, dropout masks (and batches): the same losses up to float32 rounding, after
        # the first step too (the gradients and Adam's step agree)
        assert ours["losses"] == pytest.approx(dgl["losses"], rel=1e-5), workload
        assert dgl["nodes"] == ours["nodes"] > 0 and dgl["edges"] == ours["edges"] > 0
        assert 0 < dgl["kernel_ms"] < dgl["profiled_ms"] and 0 < ours["kernel_ms"] < ours["profiled_ms"], workload
        assert dgl["bound"] == pytest.approx(dgl["profiled_ms"] / (dgl["profiled_ms"] - dgl["kernel_ms"]))
        assert ours["kernel_speedup"] == pytest.approx(dgl["kernel_ms"] / ours["kernel_ms"]) and ours["bound"] is None
        assert f"| {workload} | {ours['graph']} (" in printed
    by_workload = {r["workload"]: r for r in rows[1::2]}
    assert by_workload["minibatch"]["seeds_s"] > 0 and by_workload["gat"]["seeds_s"] is None
    assert by_workload["gat"]["first_ms"] > 0
    assert by_workload["minibatch"]["graph"] == "products-like-0.002"


@needs_dgl
def test_the_rgcn_workload_trains_alike_on_both_sides():
    """``RelGraphConv`` on the AM shape, each side's row made in this process (the command runs each in its own):
    the same losses from the same start, every kernel call featgraph's under ``use()``."""
    dgl_row, ours = (dgl_bench.run_one("rgcn", "", 0.002, side, 1, 2, 1, "") for side in dgl_bench.SIDES)
    assert dgl_row.graph == ours.graph == "am-like-0.002" and dgl_row.note == ours.note == ""
    assert ours.losses == pytest.approx(dgl_row.losses, rel=1e-5) and len(ours.losses) == 2
    assert dgl_row.served is None and ours.served > 0 and ours.fallbacks == {}
    assert 0 < ours.kernel_ms < ours.profiled_ms


def test_a_row_featgraph_served_nothing_in_is_flagged_and_its_fallbacks_listed():
    row = dgl_bench.Row("gcn", "g", "featgraph")
    dgl_bench._count_calls(row, {"gspmm": {"lhs dtype torch.int64 (featgraph serves ...)": 4}})
    assert row.served == 0 and row.fallbacks == {"gspmm": {"lhs dtype torch.int64 (featgraph serves ...)": 4}}
    assert "featgraph served no kernel call" in row.note
    assert dgl_bench.fallbacks_cell(row) == "gspmm: lhs dtype torch.int64 (featgraph serves ...) x4"

    row = dgl_bench.Row("gat", "g", "featgraph")
    dgl_bench._count_calls(row, {"gspmm": {"featgraph": 6}, "edge_softmax": {"featgraph": 2, "an eids subset": 1}})
    assert row.served == 8 and row.fallbacks == {"edge_softmax": {"an eids subset": 1}} and row.note == ""
    assert dgl_bench.fallbacks_cell(row) == "edge_softmax: an eids subset x1"
    dgl_bench._count_calls(row, {"gspmm": {"featgraph": 6}})
    assert dgl_bench.fallbacks_cell(row) == "none"
    assert dgl_bench.fallbacks_cell(dgl_bench.Row("gat", "g", "dgl")) == "-"


def test_pairing_gives_dgls_time_over_each_rows_and_notes_losses_that_differ():
    dgl = dgl_bench.Row("gcn", "g", "dgl", ms=30.0, losses=[2.5, 2.4])
    same = dgl_bench.Row("gcn", "g", "featgraph", ms=10.0, losses=[2.5, 2.4 * (1 + 1e-6)])
    dgl_bench.pair_rows([dgl, same])
    assert dgl.speedup == 1.0 and same.speedup == 3.0 and same.note == ""
    other = dgl_bench.Row("gcn", "g", "featgraph", ms=60.0, losses=[2.5, 2.6])
    dgl_bench.pair_rows([dgl, other])
    assert other.speedup == 0.5 and other.note.startswith("losses differ from DGL's by 8.3e-02 (relative)")
    failed = dgl_bench.Row("gcn", "g", "featgraph", note="worker failed: x")
    dgl_bench.pair_rows([dgl_bench.Row("gcn", "g", "dgl", note="worker failed: y"), failed])
    assert failed.speedup is None and failed.note == "worker failed: x"


def test_runs_of_a_side_merge_into_medians_with_every_peak_listed():
    runs = [
        dgl_bench.Row("gat", "g", "featgraph", ms=ms, peak_mb=peak, kernel_ms=k, losses=[float(n)], served=n)
        for n, (ms, peak, k) in enumerate([(30.0, 800.0, 9.0), (10.0, 860.0, None), (20.0, 830.0, 7.0)])
    ]
    row = dgl_bench.merged(runs)
    assert (row.ms, row.peak_mb, row.kernel_ms) == (20.0, 830.0, 8.0)
    assert row.peak_runs == [800.0, 860.0, 830.0] and row.seeds_s is None
    assert row.losses == [0.0] and row.served == 0  # the first run's
    assert runs[0].peak_runs == [] and runs[0].ms == 30.0  # the runs are left as they were
    assert "| 800, 860, 830 |" in dgl_bench.TABLE.rows([row])
    failed = dgl_bench.Row("gat", "g", "featgraph", note="worker failed: boom")
    row = dgl_bench.merged([runs[0], failed])
    assert row.ms is None and row.note == "worker failed: boom" and row.peak_runs == []


@pytest.mark.parametrize("runs", ["0", "-2"])
def test_runs_below_one_are_refused(runs):
    with pytest.raises(ValueError, match=f"--runs must be >= 1, got {runs}"):
        main(["bench", "dgl", "--workloads", "gcn", "--runs", runs])


def test_pairing_gives_dgls_row_the_bound_of_free_kernels_and_featgraphs_the_kernel_speedup():
    dgl = dgl_bench.Row("gat", "g", "dgl", ms=90.0, kernel_ms=60.0, profiled_ms=100.0)
    ours = dgl_bench.Row("gat", "g", "featgraph", ms=60.0, kernel_ms=20.0, profiled_ms=55.0)
    dgl_bench.pair_rows([dgl, ours])
    assert dgl.bound == pytest.approx(2.5) and dgl.kernel_speedup is None
    assert ours.kernel_speedup == pytest.approx(3.0) and ours.bound is None


def test_kernel_time_is_the_outermost_entry_points_and_the_gradients_of_what_they_ran():
    import torch

    x = torch.randn(10, 4, requires_grad=True)
    before = (x * 2).sum()  # made before the call: not the call's
    with torch.profiler.profile() as profiler:
        outer, inner = (torch.profiler.record_function(dgl_bench.ENTRY_POINT + "gspmm") for _ in range(2))
        with outer, inner:  # nested entry points: counted once
            y = x[2:5].mm(torch.ones(4, 3))
        nodes = dgl_bench.created_nodes(y, (x,))
        # ops inside the call record the number of the next node, here the mul's made after it
        ((x * 3).sum() + y.sum() + before).backward()
    events = profiler.events()

    def time_of(prefix: str) -> float:
        return sum(e.cpu_time_total for e in events if e.name.startswith(prefix) and e.cpu_parent is None)

    inside = time_of(dgl_bench.ENTRY_POINT)
    gradients = time_of(dgl_bench.BACKWARD + "MmBackward0") + time_of(dgl_bench.BACKWARD + "SliceBackward0")
    assert gradients > 0 and time_of(dgl_bench.BACKWARD + "MulBackward0") > 0
    assert len(nodes) == 2  # the slice's and the product's
    assert dgl_bench.kernel_time_us(events, nodes) == pytest.approx(inside + gradients)


def test_created_nodes_stop_at_the_inputs_nodes():
    import torch

    x = torch.randn(5, 3, requires_grad=True)
    h = x.relu()  # the input's own node, made before the call
    out = (h * 2).sum(0)
    made = dgl_bench.created_nodes(out, (h, "not a tensor"))
    assert made == {out.grad_fn._sequence_nr(), out.grad_fn.next_functions[0][0]._sequence_nr()}
    assert h.grad_fn._sequence_nr() not in made
    assert dgl_bench.created_nodes(x.detach() * 2, (x,)) == set()  # nothing differentiable made


@needs_dgl
def test_profiled_kernel_time_counts_dgls_entry_points_however_served():
    import torch

    dgl = import_dgl()
    g = dgl.graph((torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])))
    x = torch.randn(3, 4)

    def step() -> None:
        dgl.ops.gather_mm(x, torch.randn(2, 4, 5), idx_b=torch.tensor([0, 1, 1]))  # DGL's torch code on the CPU
        dgl.ops.copy_u_sum(g, x)

    row = dgl_bench.Row("rgcn", "g", "dgl")
    dgl_bench.profile_kernels(row, step)
    assert 0 < row.kernel_ms < row.profiled_ms
    assert dgl.backend.gather_mm.__name__ == "gather_mm"  # the entry points are DGL's own again
