import hashlib
import json

import pytest
import torch

from featgraph import Graph
from featgraph.distributed import load_part, partition, read_meta, save_parts
from tests.conftest import random_edges


def labelled_graph(n: int = 50, e: int = 300, seed: int = 0):
    src, dst = random_edges(n, e, seed)
    src = torch.cat([src, torch.tensor([3, 3])])  # a self loop and a duplicate edge
    dst = torch.cat([dst, torch.tensor([3, 3])])
    g = Graph(src, dst, n)
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(seed))
    y = torch.arange(n) % 3
    masks = {"train": torch.arange(n) % 2 == 0, "val": torch.arange(n) % 4 == 1}
    return g, x, y, masks


@pytest.mark.parametrize("method", ["metis", "random", "contiguous"])
@pytest.mark.parametrize("num_parts", [2, 4])
def test_round_trip(tmp_path, method, num_parts):
    g, x, y, masks = labelled_graph()
    assignment = partition(g, num_parts, method)
    meta = save_parts(tmp_path, g, assignment, x, y, masks, method)
    assert meta["num_parts"] == num_parts and meta["method"] == method and meta["fingerprint"] == g.fingerprint
    src, dst = g.coo()
    seen = []
    loaded = [load_part(tmp_path, k, num_parts, g.fingerprint) for k in range(num_parts)]
    for k, part in enumerate(loaded):
        assert torch.equal(part.own, torch.nonzero(assignment == k).flatten())
        assert bool((assignment[part.halo] != k).all())
        local_to_global = torch.cat([part.own, part.halo])
        pg = part.graph()
        assert pg.num_dst_nodes == part.num_own and pg.num_src_nodes == part.num_own + part.num_halo
        lsrc, ldst = pg.coo()
        # each local edge is the global edge it names, in global ids
        assert torch.equal(local_to_global[lsrc], src[part.edge_ids])
        assert torch.equal(part.own[ldst], dst[part.edge_ids])
        # the halo is exactly the foreign sources of the part's in-edges
        into = dst[assignment[dst] == k]
        foreign = src[assignment[dst] == k]
        assert set(part.halo.tolist()) == set(foreign[assignment[foreign] != k].tolist()) and into.numel() >= 0
        assert torch.equal(part.degree, torch.bincount(dst[src != dst], minlength=g.num_nodes)[local_to_global])
        assert torch.equal(part.features, x[part.own]) and torch.equal(part.labels, y[part.own])
        assert torch.equal(part.masks["train"], masks["train"][part.own])
        seen.append(part.edge_ids)
        # what k sends to q is what q's halo expects from k, in q's order
        for q, other in enumerate(loaded):
            from_k = other.halo[assignment[other.halo] == k]
            assert torch.equal(part.own[part.send_index[q]], from_k)
            assert other.recv_counts[k] == from_k.numel()
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.arange(g.num_edges))  # each edge in one part
    assert read_meta(tmp_path)["edge_cut"] == int((assignment[src] != assignment[dst]).sum())


def test_wrong_graph_part_count_or_world_size(tmp_path):
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path, g, partition(g, 2, "random"), x, y, masks)
    other = labelled_graph(seed=1)[0]
    with pytest.raises(ValueError, match="another graph"):
        load_part(tmp_path, 0, 2, other.fingerprint)
    with pytest.raises(ValueError, match="world size 4 does not match the 2 parts"):
        load_part(tmp_path, 0, 4, g.fingerprint)
    with pytest.raises(ValueError, match="rank"):
        load_part(tmp_path, 2, 2)
    with pytest.raises(FileNotFoundError, match="no partition"):
        load_part(tmp_path / "missing", 0, 2)


def test_bad_rows(tmp_path):
    g, x, y, masks = labelled_graph()
    parts = partition(g, 2, "random")
    with pytest.raises(ValueError, match="features"):
        save_parts(tmp_path, g, parts, x[:-1])
    with pytest.raises(TypeError, match="bool"):
        save_parts(tmp_path, g, parts, x, y, {"train": torch.ones(g.num_nodes)})
    with pytest.raises(ValueError, match="parts"):
        save_parts(tmp_path, g, parts[:-1], x)


def test_swapped_part_files_are_refused_by_name(tmp_path):
    """part-0.pt and part-1.pt exchanged: each is intact, and named as the other rank's part, not as damaged."""
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path, g, partition(g, 2, "random"), x, y, masks)
    zero, one = tmp_path / "part-0.pt", tmp_path / "part-1.pt"
    data = zero.read_bytes()
    zero.write_bytes(one.read_bytes())
    one.write_bytes(data)
    for rank in (0, 1):
        with pytest.raises(ValueError) as caught:
            load_part(tmp_path, rank, 2)
        message = str(caught.value)
        assert f"part-{rank}.pt' is the part of rank {1 - rank}, not the part of rank {rank}" in message
        assert "(part files swapped between ranks); delete " in message and "damaged" not in message


def test_a_part_file_of_another_graph_is_named_as_such(tmp_path):
    """A part file copied in from a partition of another graph: intact, so named as that, not as damaged."""
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path / "a", g, partition(g, 2, "random"), x, y, masks)
    h, xh, yh, masks_h = labelled_graph(seed=3)
    save_parts(tmp_path / "b", h, partition(h, 2, "random"), xh, yh, masks_h)
    (tmp_path / "a" / "part-1.pt").write_bytes((tmp_path / "b" / "part-0.pt").read_bytes())
    with pytest.raises(ValueError) as caught:
        load_part(tmp_path / "a", 1, 2)
    message = str(caught.value)
    assert (
        f"part-1.pt' is a part of another graph (its part 0, of graph {h.fingerprint}; this partition's graph is "
        f"{g.fingerprint}), not the part of rank 1 (copied in from a partition of another graph)" in message
    )
    assert "damaged" not in message
    assert load_part(tmp_path / "a", 0, 2).rank == 0


def test_a_part_file_of_another_partition_of_the_graph_is_named_as_such(tmp_path):
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path / "two", g, partition(g, 2, "random"), x, y, masks)
    save_parts(tmp_path / "four", g, partition(g, 4, "random"), x, y, masks)
    (tmp_path / "two" / "part-1.pt").write_bytes((tmp_path / "four" / "part-1.pt").read_bytes())
    with pytest.raises(
        ValueError, match=r"part-1.pt' is a part of another partition of this graph \(its part 1 of 4\), not the"
    ):
        load_part(tmp_path / "two", 1, 2)


def test_a_damaged_byte_that_still_loads_is_damaged_not_another_graphs_part(tmp_path):
    """One character of the stored fingerprint changed: the file still loads, but is this graph's part, damaged."""
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path, g, partition(g, 2, "random"), x, y, masks)
    path = tmp_path / "part-1.pt"
    data = path.read_bytes()
    at = data.index(g.fingerprint.encode()) + 5
    path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    assert torch.load(path, weights_only=True)["fingerprint"] != g.fingerprint
    with pytest.raises(ValueError, match=r"part-1.pt' is damaged: its contents differ"):
        load_part(tmp_path, 1, 2)


def test_a_part_file_from_another_partition_is_refused(tmp_path):
    """A part file copied in from a partition of another graph, with meta.json's digest made to match."""
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path / "a", g, partition(g, 2, "random"), x, y, masks)
    h, xh, yh, masks_h = labelled_graph(seed=3)
    other = save_parts(tmp_path / "b", h, partition(h, 2, "random"), xh, yh, masks_h)
    (tmp_path / "a" / "part-1.pt").write_bytes((tmp_path / "b" / "part-1.pt").read_bytes())
    meta_path = tmp_path / "a" / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["parts"][1]["sha256"] = other["parts"][1]["sha256"]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(
        ValueError, match=rf"is a part of another graph \(its part 1, of graph {h.fingerprint}; this partition's graph "
        rf"is {g.fingerprint}\), not the part of rank 1"
    ):  # fmt: skip
        load_part(tmp_path / "a", 1, 2)
    assert load_part(tmp_path / "a", 0, 2).rank == 0


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # truncated
        lambda data: b"",  # emptied
        lambda data: bytes(range(256)) * 8,  # random bytes
        lambda data: data[:100] + bytes([data[100] ^ 1]) + data[101:],  # one bit flipped
    ],
)
def test_damaged_part_files_name_the_file_and_how_to_rebuild(tmp_path, damage):
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path, g, partition(g, 2, "random"), x, y, masks)
    path = tmp_path / "part-1.pt"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(ValueError, match=r"part-1.pt' is damaged.*delete .* and partition again") as caught:
        load_part(tmp_path, 1, 2)
    assert "weights_only" not in str(caught.value)
    assert load_part(tmp_path, 0, 2).num_own > 0  # the other part still loads


@pytest.mark.parametrize("text", ['{"format": 2, "num_pa', "", "[1, 2]", '{"format": 1}'])
def test_a_damaged_or_old_meta_file_is_named(tmp_path, text):
    g, x, y, masks = labelled_graph()
    save_parts(tmp_path, g, partition(g, 2, "random"), x, y, masks)
    (tmp_path / "meta.json").write_text(text)
    with pytest.raises(ValueError, match=r"meta.json' is damaged|partition format .*expected 2") as caught:
        read_meta(tmp_path)
    assert "partition again" in str(caught.value)


def test_saving_leaves_no_partial_files_and_records_digests(tmp_path):
    g, x, y, masks = labelled_graph()
    meta = save_parts(tmp_path, g, partition(g, 2, "random"), x, y, masks)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json", "part-0.pt", "part-1.pt"]
    for k in range(2):
        assert meta["parts"][k]["sha256"] == hashlib.sha256((tmp_path / f"part-{k}.pt").read_bytes()).hexdigest()
