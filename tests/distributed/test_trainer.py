import pytest
import torch
import torch.nn.functional as F

from featgraph import Graph
from featgraph.distributed import load_part, partition, save_parts
from featgraph.distributed.trainer import PartClassifier, Trainer
from featgraph.training.models import NodeClassifier, preset
from tests.conftest import random_edges
from tests.distributed.conftest import run_ranks

N, FEATURES, CLASSES, EPOCHS = 48, 6, 3, 4


def config(model: str):
    return preset(model, hidden=8, heads=2, dropout=0.0, epochs=EPOCHS)  # dropout 0: masks are drawn per rank


def task() -> tuple[Graph, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    src, dst = random_edges(N, 240, 0)
    src, dst = torch.cat([src, torch.tensor([5, 5])]), torch.cat([dst, torch.tensor([5, 5])])  # loops, duplicate
    x = torch.randn(N, FEATURES, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, CLASSES, (N,), generator=torch.Generator().manual_seed(2))
    ids = torch.arange(N)
    return Graph(src, dst, N), x, y, {"train": ids % 3 == 0, "val": ids % 3 == 1, "test": ids % 3 == 2}


def one_process(model: str) -> tuple[list[float], list[dict]]:
    """Losses and parameters epoch by epoch of the whole graph in one process (``training.loop.fit``'s step)."""
    g, x, y, masks = task()
    torch.manual_seed(0)
    net = NodeClassifier(model, FEATURES, CLASSES, config(model), "featgraph").double()
    optimizer = torch.optim.Adam(net.parameters(), lr=config(model).lr, weight_decay=config(model).weight_decay)
    losses, states = [], []
    for _ in range(EPOCHS):
        optimizer.zero_grad()
        loss = F.cross_entropy(net(x, g)[masks["train"]], y[masks["train"]])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        states.append({k: v.clone() for k, v in net.state_dict().items()})
    return losses, states


def distributed_on_rank(rank: int, world_size: int, directory: str, model: str) -> dict:
    part = load_part(directory, rank, world_size)
    torch.manual_seed(0)
    net = PartClassifier(model, part, CLASSES, config(model)).double()
    trainer = Trainer(net, part, config(model))
    states: list[dict] = []
    history = trainer.fit(EPOCHS, lambda _: states.append({k: v.clone() for k, v in net.state_dict().items()}))
    return {"losses": [r.loss for r in history], "states": states}


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("model", ["gcn", "sage", "gat"])
def test_same_losses_and_parameters_as_one_process(tmp_path, model, world_size):
    g, x, y, masks = task()
    meta = save_parts(tmp_path / "parts", g, partition(g, world_size, "metis"), x, y, masks)
    assert meta["edge_cut"] > 0  # layers must cross parts
    losses, states = one_process(model)
    for result in run_ranks(distributed_on_rank, world_size, tmp_path, str(tmp_path / "parts"), model):
        assert result["losses"] == pytest.approx(losses, rel=1e-10)
        for epoch, (got, want) in enumerate(zip(result["states"], states, strict=True)):
            for name in want:
                torch.testing.assert_close(got[name], want[name], rtol=1e-9, atol=1e-12, msg=f"{name} epoch {epoch}")
    assert losses[-1] < losses[0]


def test_model_must_run_on_a_bipartite_part(tmp_path):
    g, x, y, masks = task()
    save_parts(tmp_path, g, partition(g, 1, "random"), x, y, masks)
    with pytest.raises(ValueError, match="model must be one of"):
        PartClassifier("gin", load_part(tmp_path, 0, 1), CLASSES, config("gin"))


def test_a_part_without_vertices(tmp_path):
    """Part 1 owns nothing (it sends, receives and computes empty rows); the results are still one process's."""
    g, x, y, masks = task()
    save_parts(tmp_path / "parts", g, torch.where(torch.arange(N) % 2 == 0, 0, 2), x, y, masks)
    losses, _ = one_process("gat")
    for result in run_ranks(distributed_on_rank, 3, tmp_path, str(tmp_path / "parts"), "gat"):
        assert result["losses"] == pytest.approx(losses, rel=1e-10)
