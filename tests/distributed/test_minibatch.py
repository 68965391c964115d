import pytest
import torch

from featgraph import Graph
from featgraph.distributed import partition
from featgraph.distributed.feature_store import FeatureStore, ReplicatedFeatures
from featgraph.distributed.minibatch import MiniBatchTrainer
from featgraph.sampling import NeighborSampler
from featgraph.training.minibatch import SampledClassifier, minibatch_preset
from tests.conftest import random_edges
from tests.distributed.conftest import run_ranks

N, FEATURES, CLASSES, FANOUTS, BATCH = 60, 5, 3, [4, 3], 8


def task() -> tuple[Graph, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    src, dst = random_edges(N, 300, 0)
    x = torch.randn(N, FEATURES, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, CLASSES, (N,), generator=torch.Generator().manual_seed(2))
    ids = torch.arange(N)
    return Graph(src, dst, N), x, y, {"train": ids[ids % 2 == 0], "val": ids[ids % 4 == 1], "test": ids[ids % 4 == 3]}


def trainer_on_rank(rank: int, world_size: int, replicated: bool, model: str = "sage") -> MiniBatchTrainer:
    graph, x, y, splits = task()
    owner = partition(graph, world_size, "metis")
    own = torch.nonzero(owner == rank).flatten()
    features = ReplicatedFeatures(x) if replicated else FeatureStore(x[own].clone(), own, owner)
    config = minibatch_preset(model, hidden=8, heads=2, epochs=2)
    torch.manual_seed(0)
    net = SampledClassifier(model, FEATURES, CLASSES, len(FANOUTS), config, "featgraph")
    mine = {name: ids[owner[ids] == rank] for name, ids in splits.items()}
    return MiniBatchTrainer(net, graph, mine, y, features, FANOUTS, BATCH, config, seed=3)


def epochs_on_rank(rank: int, world_size: int, replicated: bool, model: str) -> dict:
    trainer = trainer_on_rank(rank, world_size, replicated, model)
    seeds = [s for s, _ in trainer.batches("train", trainer.train_batches, 0)]
    trainer.fit(2)
    return {
        "history": trainer.history,
        "state": {k: v.clone() for k, v in trainer.net.state_dict().items()},
        "seeds": seeds,
        "own_train": trainer.splits["train"],
    }


@pytest.mark.parametrize("model", ["sage", "gat"])
def test_epochs_run_with_synchronised_parameters(tmp_path, model):
    """Parameters equal on every rank after each epoch's steps; fetched and replicated features train alike;
    each training vertex is a seed once per epoch, on its owner."""
    _, _, _, splits = task()
    results = {}
    for replicated in (True, False):
        (tmp_path / str(replicated)).mkdir()
        results[replicated] = run_ranks(epochs_on_rank, 2, tmp_path / str(replicated), replicated, model)
    for name, want in results[True][0]["state"].items():
        for result in results[True] + results[False]:
            torch.testing.assert_close(result["state"][name], want, rtol=1e-5, atol=1e-6, msg=name)
    for a, b in zip(results[True], results[False], strict=True):
        assert [r.loss for r in a["history"]] == pytest.approx([r.loss for r in b["history"]], rel=1e-5)
        assert all(r.feature_bytes == 0 for r in a["history"])
    assert all(r.feature_bytes > 0 for r in results[False][0]["history"])
    seeds = torch.cat([torch.cat(result["seeds"]) for result in results[True]])
    assert torch.equal(torch.sort(seeds).values, splits["train"])
    for result in results[True]:
        assert all(torch.isin(s, result["own_train"]).all() and s.numel() > 0 for s in result["seeds"])
        assert result["history"][0].loss > 0 and 0 <= result["history"][-1].val_acc <= 1


def blocks_on_rank(rank: int, world_size: int) -> list:
    trainer = trainer_on_rank(rank, world_size, replicated=False)
    seeds, seed = trainer.batches("train", trainer.train_batches, 0)[0]
    batch, x = trainer.sample(seeds, seed)
    return [seeds, seed, batch, x]


def test_same_seeds_give_the_single_process_samplers_blocks(tmp_path):
    graph, x, _, _ = task()
    sampler = NeighborSampler(graph, FANOUTS)
    for seeds, seed, batch, rows in run_ranks(blocks_on_rank, 2, tmp_path):
        want = sampler.sample(seeds, seed)
        assert torch.equal(rows, x[want.input_nodes])
        for got, expected in zip(batch.blocks, want.blocks, strict=True):
            assert torch.equal(got.n_id, expected.n_id) and torch.equal(got.e_id, expected.e_id)
            for a, b in zip(got.graph.csr()[:2], expected.graph.csr()[:2], strict=True):
                assert torch.equal(a, b)


def no_training_vertex_on_rank(rank: int, world_size: int) -> str:
    graph, x, y, splits = task()
    config = minibatch_preset("sage", hidden=8)
    net = SampledClassifier("sage", FEATURES, CLASSES, len(FANOUTS), config, "featgraph")
    mine = dict(splits, train=splits["train"][: 0 if rank else None])
    with pytest.raises(ValueError, match="owns no training vertex") as info:
        MiniBatchTrainer(net, graph, mine, y, ReplicatedFeatures(x), FANOUTS, BATCH, config)
    return str(info.value)


def test_a_rank_without_training_vertices_fails_on_every_rank(tmp_path):
    assert len(run_ranks(no_training_vertex_on_rank, 2, tmp_path)) == 2
