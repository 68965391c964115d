from dataclasses import replace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph, sddmm, spmm, te
from featgraph.templates.params import SDDMMParams
from featgraph.tuning.space import (
    Config,
    Coordinate,
    apply,
    coordinates,
    current_config,
    moved,
    vector_axis,
    with_split,
)
from tests.conftest import random_edges


def _graph(n=30, e=200):
    return Graph(*random_edges(n, e, seed=1), n)


def _copy_u(g, d):
    XV = te.placeholder((g.num_nodes, d), name="XV")
    return lambda s, t, e: te.compute((d,), lambda i: XV[s, i])


def _dot(g, d):
    XV = te.placeholder((g.num_nodes, d), name="XV")

    def edgefunc(s, t, e):
        k = te.reduce_axis((0, d), name="k")
        return te.compute((1,), lambda i: te.sum(XV[s, k] * XV[t, k], axis=k))

    return edgefunc


def _names(kernel):
    return {c.names for c in coordinates(kernel)}


def test_spmm_space_has_partitions_by_tiles_row_order_strategy_and_split():
    kernel = spmm(_graph(), _copy_u(_graph(), 12), "sum")
    space = {c.names: c.values for c in coordinates(kernel)}
    assert set(space) == {("num_partitions", "num_feature_tiles"), ("row_order",), ("strategy",), ("split",)}
    assert (8, 4) in space[("num_partitions", "num_feature_tiles")]
    assert space[("split",)] == ((None,), (8,))  # factors below the axis extent only


def test_gpu_space_packs_rows_instead_of_partitioning_sources(gpu):
    g = _graph()
    on_gpu = Graph(*[t.to(gpu) for t in random_edges(30, 200, seed=1)], 30)
    space = {c.names: c.values for c in coordinates(spmm(on_gpu, _copy_u(g, 12), "sum", target="gpu"))}
    assert space[("rows_per_program",)] == ((1,), (4,), (16,))
    assert ("hub_threshold",) not in space  # uniform degrees: no hubs worth staging
    src, dst = random_edges(300, 2000, seed=3)
    src[:1200] = torch.arange(1200) % 3  # three sources send most edges
    skewed = Graph(src.to(gpu), dst.to(gpu), 300)
    space = {c.names: c.values for c in coordinates(spmm(skewed, _copy_u(skewed, 12), "sum", target="gpu"))}
    (off,), (threshold,) = space[("hub_threshold",)]
    assert off == 0 and threshold >= 4 * 2000 / 300 and int((skewed.out_degrees() >= threshold).sum()) >= 3
    assert {p for p, _ in space[("num_partitions", "num_feature_tiles")]} == {1}
    cpu = {c.names for c in coordinates(spmm(g, _copy_u(g, 12), "sum"))}
    assert ("rows_per_program",) not in cpu


def test_max_has_no_edge_centric_strategy_and_narrow_outputs_no_tiles():
    g = _graph()
    kernel = spmm(g, _copy_u(g, 2), "max")
    space = {c.names: c.values for c in coordinates(kernel)}
    assert ("strategy",) not in space and ("split",) not in space
    assert {t for _, t in space[("num_partitions", "num_feature_tiles")]} == {1, 2}


def test_fixed_parameters_are_not_searched():
    g = _graph()
    kernel = spmm(g, _copy_u(g, 12), "sum", num_partitions=3, row_order="degree")
    space = {c.names: c.values for c in coordinates(kernel)}
    assert {p for p, _ in space[("num_partitions", "num_feature_tiles")]} == {3}
    assert ("row_order",) not in space and ("strategy",) not in space


def test_sddmm_space_searches_edge_order_and_the_reduce_split():
    g = _graph()
    kernel = sddmm(g, _dot(g, 40))
    assert vector_axis(kernel.spec.schedule).kind == "reduce"
    space = {c.names: c.values for c in coordinates(kernel)}
    assert set(space) == {("edge_order",), ("split",)}  # output width 1: nothing to tile
    assert space[("split",)] == ((None,), (8,), (32,))


def test_sddmm_space_may_turn_staged_writes_off():
    g = _graph()
    kernel = sddmm(g, _dot(g, 40), write_buckets=4, edge_order="hilbert")
    assert {c.names for c in coordinates(kernel)} == {("split",)}  # both fixed by the caller
    kernel = sddmm(g, _dot(g, 40), edge_order="hilbert")
    staged = kernel.reconfigured(replace(kernel.spec.params, write_buckets=4), kernel.spec.schedule)
    space = {c.names: c.values for c in coordinates(staged)}
    assert space[("write_buckets",)] == ((4,), (0,))


def test_moving_to_gas_drops_what_gas_ignores_and_apply_rebuilds():
    g = _graph()
    kernel = spmm(g, _copy_u(g, 12), "sum", num_partitions=2)
    start = current_config(kernel)
    strategy = next(c for c in coordinates(spmm(g, _copy_u(g, 12), "sum")) if c.names == ("strategy",))
    gas = moved(start, strategy, ("gas",))
    assert gas.params.strategy == "gas" and gas.params.num_partitions == 1
    assert apply(kernel, start) is kernel
    split = apply(kernel, Config(start.params, 8))
    assert current_config(split).split == 8 and split.spec.op is kernel.spec.op


@settings(max_examples=60, deadline=None)
@given(
    start_order=st.sampled_from(["hilbert", "user", "csr"]),
    start_parts=st.integers(1, 4),
    start_buckets=st.sampled_from([0, 4]),
    move=st.sampled_from([
        ("edge_order", "hilbert"), ("edge_order", "user"), ("edge_order", "csr"), ("num_partitions", 1),
        ("num_partitions", 2), ("num_partitions", 8), ("write_buckets", 0), ("write_buckets", 4),
    ]),
)  # fmt: skip
def test_property_sddmm_moves_keep_segments_to_the_csr_walk_in_one_staging(start_order, start_parts, start_buckets,
                                                                          move):  # fmt: skip
    """From any valid SDDMM configuration, any single move gives a valid one (``SDDMMParams`` refuses the rest):
    segments only with the CSR walk, staging only in one segment; a move to segments or to staging is kept,
    dropping what conflicts with it; the moved field itself holds unless the order rules it out."""
    parts = start_parts if start_order == "csr" and not start_buckets else 1
    start = Config(SDDMMParams(edge_order=start_order, num_partitions=parts, write_buckets=start_buckets), None)
    name, value = move
    params = moved(start, Coordinate((name,), ((value,),)), (value,)).params
    assert params.num_partitions == 1 or (params.edge_order == "csr" and params.write_buckets == 0)
    if name != "num_partitions" or params.edge_order == "csr":
        assert getattr(params, name) == value


def test_with_split_copies_the_schedule():
    g = _graph()
    kernel = spmm(g, _copy_u(g, 12), "sum")
    schedule = kernel.spec.schedule
    copy = with_split(schedule, 4)
    assert copy.plans[vector_axis(copy).name].factor == 4
    assert schedule.plans[vector_axis(schedule).name].factor is None


@pytest.mark.parametrize("kind", ["spmm", "sddmm"])
def test_config_json_round_trip(kind):
    g = _graph()
    kernel = spmm(g, _copy_u(g, 12), "sum", num_partitions=2) if kind == "spmm" else sddmm(g, _dot(g, 12))
    config = Config(current_config(kernel).params, 8)
    assert Config.from_json(kind, config.to_json()) == config
    assert "split=8" in config.describe()
