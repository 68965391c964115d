import itertools
from dataclasses import replace

import pytest
import torch

from featgraph.datasets import load
from featgraph.graph import Graph
from featgraph.training import linkpred


def _pairs(edges: torch.Tensor) -> set[tuple[int, int]]:
    return set(map(tuple, edges.t().tolist()))


@pytest.fixture(scope="module")
def cora_task():
    return linkpred.link_task("cora", seed=0)


def test_split_holds_out_both_directions_and_partitions_the_edges(cora_task):
    cora = load("cora").graph
    message = _pairs(cora_task.graph.edge_index)
    train, val, test = (_pairs(e) for e in (cora_task.train, cora_task.val, cora_task.test))
    for held in (val, test):
        assert not held & message and not {(d, s) for s, d in held} & message
    assert not (train & val or train & test or val & test)
    undirected = {(s, d) for s, d in _pairs(cora.edge_index) if s < d}
    assert train | val | test == undirected
    assert len(val) == int(0.05 * len(undirected)) and len(test) == int(0.1 * len(undirected))
    assert message == train | {(d, s) for s, d in train}  # Cora has no self loops
    again = linkpred.split_edges("cora", cora_task.x, cora, seed=0)
    assert torch.equal(again.test, cora_task.test)
    assert not torch.equal(linkpred.split_edges("cora", cora_task.x, cora, seed=1).test, cora_task.test)


def test_directed_split_keeps_self_loops_in_the_message_graph():
    graph = Graph(torch.tensor([0, 1, 2, 3, 3, 2]), torch.tensor([1, 2, 3, 0, 3, 0]), 4)
    task = linkpred.split_edges("g", torch.ones(4, 1), graph, val=0.2, test=0.2, undirected=False)
    assert (task.val.shape[1], task.test.shape[1], task.train.shape[1]) == (1, 1, 3)
    assert _pairs(task.graph.edge_index) == _pairs(task.train) | {(3, 3)}


@pytest.mark.parametrize(("val", "test", "message"), [(-0.1, 0.1, "val share"), (0.6, 0.5, "val \\+ test")])
def test_split_refuses_shares_by_name(cora_task, val, test, message):
    with pytest.raises(ValueError, match=message):
        linkpred.split_edges("cora", cora_task.x, cora_task.graph, val=val, test=test)


def test_auc_matches_the_pairwise_count_with_ties():
    generator = torch.Generator().manual_seed(0)
    positive = torch.randint(0, 6, (40,), generator=generator).float()  # few values: many ties
    negative = torch.randint(0, 5, (55,), generator=generator).float()
    wins = sum(float(p > n) + 0.5 * float(p == n) for p, n in itertools.product(positive, negative))
    assert linkpred.auc(positive, negative) == pytest.approx(wins / (40 * 55))
    assert linkpred.auc(torch.ones(3), torch.ones(4)) == 0.5
    assert linkpred.auc(torch.tensor([2.0, 3.0]), torch.tensor([0.0, 1.0])) == 1.0
    with pytest.raises(ValueError, match="at least one positive"):
        linkpred.auc(torch.ones(0), torch.ones(2))


def test_hits_and_mrr_match_a_brute_force_ranking():
    generator = torch.Generator().manual_seed(1)
    positive = torch.randint(0, 8, (30,), generator=generator).float()
    negatives = torch.randint(0, 8, (30, 20), generator=generator).float()
    ranks = []
    for p, row in zip(positive.tolist(), negatives.tolist(), strict=True):
        optimistic = 1 + sum(n > p for n in row)
        pessimistic = 1 + sum(n >= p for n in row)
        ranks.append((optimistic + pessimistic) / 2)
    rank = linkpred.ranks(positive, negatives)
    assert rank.tolist() == ranks
    for k in (1, 3, 10):
        assert linkpred.hits_at(rank, k) == pytest.approx(sum(r <= k for r in ranks) / 30)
    assert linkpred.mrr(rank) == pytest.approx(sum(1 / r for r in ranks) / 30)


def test_sddmm_decoder_equals_the_gathered_product_forward_and_backward():
    generator = torch.Generator().manual_seed(2)
    h = torch.randn(12, 5, dtype=torch.float64, generator=generator, requires_grad=True)
    pairs = torch.randint(12, (2, 40), generator=generator)  # repeated pairs and self pairs included
    pairs[:, 0] = 3
    fused = linkpred.pair_features(h, pairs, "dot", "featgraph").squeeze(-1)
    gathered = (h[pairs[0]] * h[pairs[1]]).sum(-1)
    assert torch.allclose(fused, gathered)
    (grad_fused,) = torch.autograd.grad(fused.sin().sum(), h)
    (grad_gathered,) = torch.autograd.grad(gathered.sin().sum(), h)
    assert torch.allclose(grad_fused, grad_gathered)
    assert torch.autograd.gradcheck(lambda t: linkpred.pair_features(t, pairs, "dot", "featgraph"), (h,))
    assert torch.autograd.gradcheck(lambda t: linkpred.pair_features(t, pairs, "mul", "featgraph"), (h,))


@pytest.mark.parametrize("decoder", linkpred.DECODERS)
def test_featgraph_and_pyg_predictors_score_alike_from_one_state_dict(cora_task, decoder):
    pytest.importorskip("torch_geometric")
    torch.manual_seed(0)
    ours = linkpred.LinkPredictor(cora_task.x.shape[1], 16, 2, "featgraph", decoder)
    theirs = linkpred.LinkPredictor(cora_task.x.shape[1], 16, 2, "pyg", decoder)
    theirs.load_state_dict(ours.state_dict())
    pairs = torch.cat([cora_task.test, torch.randint(2708, (2, 500))], dim=1)
    scores = ours(cora_task.x, cora_task.graph, pairs)
    assert scores.shape == (pairs.shape[1],)
    assert torch.allclose(scores, theirs(cora_task.x, cora_task.graph, pairs), atol=1e-5)
    batch_edges = cora_task.graph.edge_index[:, :3000]  # a flat (2, E) edge_index, as a loader's batch gives
    assert torch.allclose(ours.encode(cora_task.x, batch_edges), theirs.encode(cora_task.x, batch_edges), atol=1e-5)


def test_eval_pairs_are_seeded_and_rank_sources_against_random_destinations(cora_task):
    pairs = linkpred.EvalPairs.draw(cora_task.test, 2708, seed=3, negatives=7)
    assert torch.equal(
        pairs.destinations, linkpred.EvalPairs.draw(cora_task.test, 2708, seed=3, negatives=7).destinations
    )
    assert pairs.negative.shape == cora_task.test.shape and pairs.destinations.shape == (pairs.ranked.numel(), 7)
    ranking = pairs.ranking_pairs().view(2, -1, 7)
    assert torch.equal(ranking[0], cora_task.test[0, pairs.ranked][:, None].expand(-1, 7))
    assert torch.equal(ranking[1], pairs.destinations)


def test_minibatch_training_on_cora_learns(cora_task):
    config = replace(linkpred.PRESETS["minibatch"], lr=0.01, epochs=6)
    torch.manual_seed(0)
    net = linkpred.LinkPredictor(cora_task.x.shape[1], 256, 2, "featgraph")
    m = linkpred.fit(net, cora_task, config, seed=0, progress=False, fanouts=[10, 5], batch_size=256)
    assert m.test_auc > 0.8 and m.val_auc > 0.8
    assert 0 < m.test_mrr <= 1 and 0 <= m.test_hits <= 1 and m.hits_k == 50
    assert m.batches_per_epoch == -(-cora_task.train.shape[1] // 256) and m.epoch_seconds > 0


def test_full_graph_training_improves_and_keeps_the_best_epoch(cora_task):
    config = replace(linkpred.PRESETS["full"], hidden=32, epochs=4)
    torch.manual_seed(0)
    net = linkpred.LinkPredictor(cora_task.x.shape[1], 32, 2, "featgraph", "mlp")
    m = linkpred.fit(net, cora_task, config, seed=0, progress=False)
    assert m.batches_per_epoch == 1 and 0 <= m.best_epoch < 4 and m.val_auc > 0.5
    val = linkpred.EvalPairs.draw(cora_task.val, 2708, seed=1)
    assert linkpred.evaluate(net, cora_task, val, ranking=False)["auc"] == pytest.approx(m.val_auc)


def test_bad_arguments_are_refused_by_name(cora_task):
    with pytest.raises(ValueError, match="decoder must be one of"):
        linkpred.LinkPredictor(4, 8, 2, "featgraph", "bilinear")
    with pytest.raises(ValueError, match="num_layers must be an int"):
        linkpred.LinkPredictor(4, 8, 0, "featgraph")
    with pytest.raises(ValueError, match="backend must be one of"):
        linkpred.LinkPredictor(4, 8, 2, "dgl")
    with pytest.raises(ValueError, match="--task link trains on cora, citeseer, products-like-small"):
        linkpred.link_task("karate")


@pytest.mark.parametrize("backend", ["featgraph", "pyg"])
def test_hop_trimmed_encoding_equals_the_whole_subgraph_on_the_seeds(cora_task, backend):
    if backend == "pyg":
        pytest.importorskip("torch_geometric")
    loader = linkpred.link_loader(cora_task.graph, cora_task.x, cora_task.train, [4, 3, 2], 64, seed=0, prefetch=0)
    batch = next(iter(loader))
    torch.manual_seed(0)
    net = linkpred.LinkPredictor(cora_task.x.shape[1], 16, 3, backend)
    sampled = linkpred.sampled_graph(batch)
    seeds = sampled.num_sampled_nodes[0]
    trimmed = net.encode(batch.x, sampled)
    assert trimmed.shape == (seeds, 16) and int(batch.edge_label_index.max()) < seeds
    assert torch.allclose(trimmed, net.encode(batch.x, batch.edge_index)[:seeds], atol=1e-5)
    with pytest.raises(ValueError, match="one sampled hop per layer"):
        linkpred.LinkPredictor(cora_task.x.shape[1], 16, 2, backend).encode(batch.x, sampled)


def test_triplet_batches_pair_each_source_with_its_positive_and_its_negative(cora_task):
    loader = linkpred.link_loader(
        cora_task.graph, cora_task.x, cora_task.train, [3], 32, seed=0, prefetch=0, negatives="triplet"
    )
    batch = next(iter(loader))
    x, sampled, pairs, labels = linkpred.batch_step(batch)
    n_id = batch.n_id
    positives = cora_task.train[:, batch.input_id]
    assert torch.equal(n_id[pairs[:, :32]], positives)
    assert torch.equal(n_id[pairs[0, 32:]], positives[0])
    assert labels.tolist() == [1.0] * 32 + [0.0] * 32 and x.shape[0] == n_id.numel()
    assert int(pairs.max()) < sampled.num_sampled_nodes[0]  # every pair's vertices are seeds


@pytest.mark.parametrize("backend", ["featgraph", "pyg"])
def test_block_encoding_equals_the_whole_graph_on_the_seeds_when_every_neighbour_is_kept(cora_task, backend):
    """On ``LinkBlockLoader``'s blocks with every in-edge kept, the seeds' embeddings are the full-graph
    encoder's rows of those vertices, with featgraph's layers and with PyG's."""
    if backend == "pyg":
        pytest.importorskip("torch_geometric")
    from featgraph.loader import LinkBlockLoader

    loader = LinkBlockLoader(cora_task.graph, [-1, -1], 16, negatives=1, seed=0, prefetch=0, x=cora_task.x)
    batch = next(iter(loader))
    torch.manual_seed(0)
    net = linkpred.LinkPredictor(cora_task.x.shape[1], 16, 2, backend)
    ours = net.encode(batch.x, batch.blocks)
    assert ours.shape == (batch.seeds.numel(), 16)
    assert torch.allclose(ours, net.encode(cora_task.x, cora_task.graph)[batch.seeds], atol=1e-5)
    with pytest.raises(ValueError, match="one block per layer"):
        linkpred.LinkPredictor(cora_task.x.shape[1], 16, 3, backend).encode(batch.x, batch.blocks)
