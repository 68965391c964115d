import pytest
import torch

from featgraph.distributed.feature_store import FeatureStore, ReplicatedFeatures
from tests.distributed.conftest import run_ranks

N, WIDTH = 40, 3


def features() -> torch.Tensor:
    return torch.randn(N, WIDTH, 2, generator=torch.Generator().manual_seed(0))


def owner(world_size: int) -> torch.Tensor:
    return torch.randperm(N, generator=torch.Generator().manual_seed(1)) % world_size


def fetch_on_rank(rank: int, world_size: int) -> dict:
    x, parts = features(), owner(world_size)
    own = torch.nonzero(parts == rank).flatten()
    store = FeatureStore(x[own].clone(), own, parts)
    requests = [
        torch.randint(0, N, (25,), generator=torch.Generator().manual_seed(10 + rank)),  # repeats, any order
        own[:2],  # only this rank's rows
        torch.empty(0, dtype=torch.int64),  # nothing, while the other ranks fetch
        torch.arange(N).flip(0),
    ]
    return {"requests": requests, "rows": [store.fetch(ids) for ids in requests], "bytes": store.bytes_received}


@pytest.mark.parametrize("world_size", [2, 3])
def test_fetch_returns_the_rows_of_the_global_matrix(tmp_path, world_size):
    x, parts = features(), owner(world_size)
    for rank, result in enumerate(run_ranks(fetch_on_rank, world_size, tmp_path)):
        for ids, rows in zip(result["requests"], result["rows"], strict=True):
            assert torch.equal(rows, x[ids])
        remote = sum(int((parts[ids] != rank).sum()) for ids in result["requests"])
        assert result["bytes"] == remote * WIDTH * 2 * 4


def bad_store_on_rank(rank: int, world_size: int) -> list[str]:
    x, parts = features(), owner(world_size)
    own = torch.nonzero(parts == rank).flatten()
    errors = []
    for call in (
        lambda: FeatureStore(x[own], own.flip(0), parts),
        lambda: FeatureStore(x[own][1:], own, parts),
        lambda: FeatureStore(x[own], own, parts.int()),
        lambda: FeatureStore(x[own], own, parts).fetch(torch.tensor([N])),
        lambda: FeatureStore(x[own], own, parts).fetch(torch.tensor([0.0])),
    ):
        with pytest.raises(ValueError) as info:
            call()
        errors.append(str(info.value))
    return errors


def test_bad_input_is_refused(tmp_path):
    errors = run_ranks(bad_store_on_rank, 2, tmp_path)[0]
    for error, name in zip(errors, ["own", "features", "owner", "out of range", "ids"], strict=True):
        assert name in error


def test_replicated_features_gather_locally():
    x = features()
    ids = torch.tensor([3, 0, 3])
    store = ReplicatedFeatures(x)
    assert torch.equal(store.fetch(ids), x[ids]) and store.bytes_received == 0
