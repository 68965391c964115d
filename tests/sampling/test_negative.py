"""Negative sampling against plain counting: draws in range, uniform or in proportion to the weights, the
amounts PyG draws, reproducible from a generator, and every way PyG takes the configuration, bad ones named."""

from __future__ import annotations

from enum import Enum
from types import SimpleNamespace

import pytest
import torch

from featgraph.sampling import NegativeSampling
from featgraph.sampling.negative import checked_negative_sampling


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_uniform_draws_cover_every_vertex_evenly_and_repeat_with_the_generator():
    config = NegativeSampling("binary")
    drawn = config.draw(50_000, "dst", 10, generator(1))
    assert drawn.dtype == torch.int64 and drawn.shape == (50_000,)
    counts = torch.bincount(drawn, minlength=10)
    assert counts.numel() == 10 and int(counts.min()) > 4_500 and int(counts.max()) < 5_500
    assert torch.equal(drawn, config.draw(50_000, "dst", 10, generator(1)))
    assert not torch.equal(drawn, config.draw(50_000, "dst", 10, generator(2)))


def test_weighted_draws_follow_each_endpoint_s_weights():
    src_weight = torch.tensor([0.0, 1.0, 3.0, 0.0])
    dst_weight = torch.tensor([2.0, 0.0, 0.0, 2.0])
    config = checked_negative_sampling({"mode": "binary", "src_weight": src_weight, "dst_weight": dst_weight}, None, 4)
    src = torch.bincount(config.draw(40_000, "src", 4, generator()), minlength=4)
    dst = torch.bincount(config.draw(40_000, "dst", 4, generator()), minlength=4)
    assert src[0] == src[3] == 0 and 9_000 < int(src[1]) < 11_000  # a quarter of the weight
    assert dst[1] == dst[2] == 0 and 19_000 < int(dst[0]) < 21_000


@pytest.mark.parametrize("positives, amount, count", [(20, 1, 20), (20, 0.5, 10), (7, 0.5, 4), (3, 2.5, 8)])
def test_binary_draws_the_ceiling_of_amount_per_positive(positives, amount, count):
    assert NegativeSampling("binary", amount).count(positives) == count


def test_every_form_pyg_takes_gives_the_same_configuration():
    class Mode(Enum):  # PyG's NegativeSamplingMode
        triplet = "triplet"

    expected = NegativeSampling("triplet", 3)
    for value in ("triplet", {"mode": "triplet"}, SimpleNamespace(mode=Mode.triplet, amount=1)):
        assert checked_negative_sampling(value, None, 5) == NegativeSampling("triplet")
    assert checked_negative_sampling(SimpleNamespace(mode="triplet", amount=3.0), None, 5) == expected
    assert checked_negative_sampling(None, 2, 5) == NegativeSampling("binary", 2)
    assert checked_negative_sampling(None, 0.0, 5) is None and checked_negative_sampling(None, None, 5) is None
    assert type(checked_negative_sampling(expected, None, 5).amount) is int


def test_pyg_s_own_configuration_is_read_by_its_attributes():
    sampler = pytest.importorskip("torch_geometric.sampler")
    weight = torch.rand(6)
    pyg = sampler.NegativeSampling("binary", 0.5, dst_weight=weight)
    config = checked_negative_sampling(pyg, None, 6)
    assert config.mode == "binary" and config.amount == 0.5 and config.src_weight is None
    assert torch.equal(config.dst_weight, weight.double())


@pytest.mark.parametrize(
    "value, ratio, error, message",
    [
        ("unary", None, ValueError, "neg_sampling mode must be 'binary' or 'triplet', got 'unary'"),
        ({"mode": "binary", "amount": 0}, None, ValueError, "neg_sampling amount must be a positive number, got 0"),
        ({"mode": "binary", "amount": -1.5}, None, ValueError, "amount must be a positive number"),
        ({"mode": "binary", "amount": float("inf")}, None, ValueError, "amount must be a positive number"),
        ({"mode": "binary", "amount": True}, None, ValueError, "amount must be a positive number"),
        ({"mode": "triplet", "amount": 1.5}, None, ValueError, "amount must be an int in 'triplet' mode"),
        ({"mode": "binary", "ratio": 2}, None, ValueError, r"takes mode, amount, .* got keys \['mode', 'ratio'\]"),
        ({"amount": 2}, None, ValueError, "as a dict takes mode"),
        (3, None, TypeError, "neg_sampling must be None, 'binary', 'triplet', a dict or a NegativeSampling"),
        ("binary", 1.0, ValueError, "pass neg_sampling or neg_sampling_ratio"),
        (None, -1, ValueError, "amount must be a positive number, got -1"),
        ({"mode": "binary", "src_weight": torch.ones(4)}, None, ValueError, r"src_weight must have one entry per"),
        ({"mode": "binary", "dst_weight": -torch.ones(5)}, None, ValueError, "dst_weight must be finite and non-neg"),
        ({"mode": "binary", "dst_weight": torch.zeros(5)}, None, ValueError, "with a positive entry"),
        ({"mode": "binary", "dst_weight": torch.ones(5).bool()}, None, TypeError, "dst_weight must hold real"),
    ],
)
def test_bad_configurations_are_named(value, ratio, error, message):
    with pytest.raises(error, match=message):
        checked_negative_sampling(value, ratio, 5)


def test_draw_before_keeps_each_negative_no_later_than_its_limit_else_the_earliest_vertex():
    node_time = torch.arange(100.0)
    sampling = NegativeSampling("binary")
    limit = torch.tensor([50.0] * 500 + [-1.0] * 3)  # the last three: no vertex is early enough
    drawn = sampling.draw_before(limit, node_time, "dst", torch.Generator().manual_seed(0))
    assert bool((node_time[drawn[:500]] <= 50).all()) and drawn[:500].unique().numel() > 40
    assert drawn[500:].tolist() == [0, 0, 0]
