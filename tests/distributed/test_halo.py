import pytest
import torch

from featgraph import Graph
from featgraph.distributed import load_part, partition, save_parts
from featgraph.distributed.halo import HaloPlan, exchange
from tests.conftest import random_edges
from tests.distributed.conftest import run_ranks

N, WIDTH = 40, 3


def whole_graph() -> tuple[Graph, torch.Tensor]:
    src, dst = random_edges(N, 200, 0)
    x = torch.randn(N, WIDTH, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    return Graph(src, dst, N), x


def exchange_on_rank(rank: int, world_size: int, directory: str) -> dict:
    """The halo rows of x, and the gradient of sum(halo * weight) for each own row, on this rank."""
    part = load_part(directory, rank, world_size)
    x = part.features.clone().requires_grad_()
    halo = exchange(x, HaloPlan.of(part))
    weight = torch.arange(1, part.num_halo * WIDTH + 1, dtype=x.dtype).view(-1, WIDTH)  # global-id independent
    (halo * weight * part.halo[:, None]).sum().backward()
    return {"halo_ids": part.halo, "halo": halo.detach(), "own": part.own, "grad": x.grad}


@pytest.mark.parametrize("world_size", [2, 4])
def test_exchange_equals_gather_from_the_whole_graph(tmp_path, world_size):
    """Forward against indexing the whole graph's rows; the exchange is linear, so its exact gradient is the
    gather's adjoint: every rank's halo gradients added into their owners' rows (float64, compared exactly)."""
    g, x = whole_graph()
    save_parts(tmp_path / "parts", g, partition(g, world_size, "random"), x)
    results = run_ranks(exchange_on_rank, world_size, tmp_path, str(tmp_path / "parts"))
    expected_grad = torch.zeros_like(x)
    for r in results:
        assert torch.equal(r["halo"], x[r["halo_ids"]])  # forward: a gather from the whole graph's rows
        weight = torch.arange(1, r["halo_ids"].numel() * WIDTH + 1, dtype=x.dtype).view(-1, WIDTH)
        expected_grad.index_add_(0, r["halo_ids"], weight * r["halo_ids"][:, None])
    for r in results:  # backward: each owner gets the sum of its rows' gradients over every rank's halo
        assert torch.equal(r["grad"], expected_grad[r["own"]])
    assert sum(r["halo"].shape[0] for r in results) > 0


def test_rows_must_match_the_plan():
    plan = HaloPlan([torch.tensor([0])], [0], num_own=2)
    with pytest.raises(ValueError, match="one row per own vertex"):
        exchange(torch.zeros(3, 1), plan)
