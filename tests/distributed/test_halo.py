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


def exchange_on_rank(rank: int, world_size: int, directory: str, with_own: bool) -> dict:
    """The rows ``exchange`` gives for x, and the gradient of sum(rows * weight) for each own row, on this
    rank; a row's weight is a function of its global id (the same wherever the row is)."""
    part = load_part(directory, rank, world_size)
    x = part.features.clone().requires_grad_()
    rows = exchange(x, HaloPlan.of(part), with_own)
    ids = torch.cat([part.own, part.halo]) if with_own else part.halo
    (rows * row_weight(ids)).sum().backward()
    return {"ids": ids, "rows": rows.detach(), "own": part.own, "grad": x.grad}


def row_weight(ids: torch.Tensor) -> torch.Tensor:
    return (ids[:, None] + 1) * torch.arange(1, WIDTH + 1, dtype=torch.float64)


@pytest.mark.parametrize("with_own", [False, True], ids=["halo", "with-own"])
@pytest.mark.parametrize("world_size", [2, 4])
def test_exchange_equals_gather_from_the_whole_graph(tmp_path, world_size, with_own):
    """Forward against indexing the whole graph's rows (the halo's, or the own rows' then the halo's); the
    exchange is linear, so its exact gradient is the gather's adjoint: every rank's gradients of a row added
    into its owner's row (float64, compared exactly)."""
    g, x = whole_graph()
    save_parts(tmp_path / "parts", g, partition(g, world_size, "random"), x)
    results = run_ranks(exchange_on_rank, world_size, tmp_path, str(tmp_path / "parts"), with_own)
    expected_grad = torch.zeros_like(x)
    for r in results:
        assert torch.equal(r["rows"], x[r["ids"]])  # forward: a gather from the whole graph's rows
        expected_grad.index_add_(0, r["ids"], row_weight(r["ids"]))
    for r in results:  # backward: each owner gets the sum of its rows' gradients over every rank's rows
        assert torch.equal(r["grad"], expected_grad[r["own"]])
    assert sum(r["rows"].shape[0] - (r["own"].numel() if with_own else 0) for r in results) > 0


def test_rows_must_match_the_plan():
    plan = HaloPlan([torch.tensor([0])], [0], num_own=2)
    with pytest.raises(ValueError, match="one row per own vertex"):
        exchange(torch.zeros(3, 1), plan)
