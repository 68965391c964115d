"""loader_source and the shared argument checks: what becomes per-vertex, per-edge and graph-level data, and
bad input named."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from featgraph import Graph, datasets
from featgraph.loader import NeighborLoader
from featgraph.loader.base import gathered
from featgraph.loader.source import checked_count, checked_input_nodes, checked_seed, loader_source
from featgraph.sampling.neighbor import checked_fanouts


def test_pyg_data_splits_into_vertex_edge_and_graph_level_values():
    data_module = pytest.importorskip("torch_geometric.data")
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 0]])
    data = data_module.Data(
        x=torch.ones(4, 2),
        y=torch.arange(4),
        edge_index=edge_index,
        edge_attr=torch.ones(3, 5),
        names=["a", "b", "c", "d"],
        scale=2.0,
        num_nodes=4,
    )
    source = loader_source(data)
    assert source.graph.num_nodes == 4 and source.graph.num_edges == 3
    assert sorted(source.node_attrs) == ["names", "x", "y"] and sorted(source.edge_attrs) == ["edge_attr"]
    assert source.graph_attrs == {"scale": 2.0}
    with pytest.raises(ValueError, match="x must have one row per vertex"):
        loader_source(data_module.Data(x=torch.ones(3, 2), edge_index=edge_index, num_nodes=4))
    vertices_alone = loader_source(data_module.Data(x=torch.ones(3, 2)))  # no edge_index: vertices, no edges
    assert (vertices_alone.graph.num_nodes, vertices_alone.graph.num_edges) == (3, 0)
    with pytest.raises(ValueError, match="data has neither edge_index nor num_nodes"):
        loader_source(data_module.Data())


def test_a_dataset_brings_features_labels_and_edge_weights_a_graph_takes_them_here():
    cora = datasets.load("cora")
    source = loader_source(cora)
    assert source.graph is cora.graph and source.node_attrs["x"] is cora.features and source.edge_attrs == {}
    weighted = Graph(torch.tensor([0, 1]), torch.tensor([1, 0]), 2, edge_weight=torch.tensor([0.5, 2.0]))
    source = loader_source(weighted, x=[[1.0], [2.0]])
    assert torch.equal(source.node_attrs["x"], torch.tensor([[1.0], [2.0]])) and "y" not in source.node_attrs
    assert torch.equal(source.edge_attrs["edge_weight"], torch.tensor([0.5, 2.0]))


def test_other_inputs_are_refused_by_name():
    with pytest.raises(TypeError, match=r"data must be a PyG Data, a \(FeatureStore, GraphStore\) pair, .* got dict"):
        loader_source({"edge_index": None})
    with pytest.raises(ValueError, match=r"the graph is bipartite \(3 sources, 2 destinations\)"):
        loader_source(Graph(torch.tensor([2]), torch.tensor([1]), (3, 2)))
    with pytest.raises(ValueError, match=r"y must have one row per vertex \(2\), got shape \(\)"):
        loader_source(Graph(torch.tensor([0]), torch.tensor([1]), 2), y=3)


def test_input_nodes_as_ids_a_mask_or_every_vertex():
    assert torch.equal(checked_input_nodes(None, 3), torch.arange(3))
    assert torch.equal(checked_input_nodes([2, 0], 3), torch.tensor([2, 0]))
    assert torch.equal(checked_input_nodes(torch.tensor([False, True, True]), 3), torch.tensor([1, 2]))
    ids = torch.tensor([1, 0], dtype=torch.int32)
    checked = checked_input_nodes(ids, 3)
    assert checked.dtype == torch.int64 and checked.data_ptr() != ids.data_ptr()
    with pytest.raises(ValueError, match="the graph has no vertices"):
        checked_input_nodes(None, 0)


@pytest.mark.parametrize(
    "input_nodes, error, message",
    [
        ([0, 3], ValueError, "input_nodes holds vertex id 3, out of range for a graph of 3 vertices"),
        ([-1], ValueError, "input_nodes holds vertex id -1"),
        ([], ValueError, "input_nodes is empty"),
        (torch.zeros(3, dtype=torch.bool), ValueError, "input_nodes is a boolean mask that selects no vertex"),
        (torch.ones(4, dtype=torch.bool), ValueError, "boolean mask of 4 entries, but the graph has 3 vertices"),
        ([0.0, 1.0], TypeError, "input_nodes must hold integer vertex ids or be a boolean mask"),
        ([[0, 1]], ValueError, "input_nodes must be 1-D"),
        ([1, 2, 1], ValueError, "input_nodes holds a vertex more than once"),
    ],
)
def test_bad_input_nodes_are_named(input_nodes, error, message):
    with pytest.raises(error, match=message):
        checked_input_nodes(input_nodes, 3)


def test_argument_checks_name_the_argument():
    assert checked_fanouts((5, -1), "fanouts") == (5, -1)
    with pytest.raises(ValueError, match=r"num_neighbors must hold ints from 0 to 2\*\*31 - 1 or -1"):
        checked_fanouts([True], "num_neighbors")
    assert checked_fanouts([], "fanouts") == ()  # no hops: the seeds alone
    with pytest.raises(ValueError, match="fanouts must be a list of per-hop neighbour counts"):
        checked_fanouts("10", "fanouts")
    assert checked_count(0, "prefetch", 0) == 0
    with pytest.raises(ValueError, match="prefetch must be an int >= 0, got -1"):
        checked_count(-1, "prefetch", 0)
    assert checked_seed(None) is None and checked_seed(2**63 - 1) == 2**63 - 1
    with pytest.raises(ValueError, match="seed must be an int from 0 to 2"):
        checked_seed(2**63)


def _mapped(path, dtype: str, shape: tuple[int, ...]) -> np.memmap:
    """A memory-mapped ``.npy`` file of ``dtype`` holding 0, 1, 2, ... and opened read-only, as ``np.load`` maps it."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=np.dtype(dtype), shape=shape)
    array[:] = np.arange(int(np.prod(shape))).reshape(shape)
    array.flush()
    return np.load(path, mmap_mode="r")


RING = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0]])


@pytest.mark.parametrize(
    "key, make",
    [
        ("x", lambda tmp: _mapped(tmp / "x.npy", "<f4", (4, 2))),
        ("x", lambda tmp: _mapped(tmp / "x.npy", ">f4", (5, 2))),
        ("y", lambda tmp: _mapped(tmp / "y.npy", "<i8", (3,))),
        ("x", lambda tmp: np.zeros((2, 3), dtype=np.float32)),
        ("x", lambda tmp: torch.zeros(4, 2)),
    ],
)
def test_x_or_y_with_too_few_rows_is_refused_by_name_whatever_holds_it(tmp_path, key, make):
    """A memmap (or any array) ``x``/``y`` of fewer rows than vertices: PyG's ``Data`` takes it for a graph-level
    value (every batch would carry it whole); the loader refuses it as it does such a tensor."""
    data_module = pytest.importorskip("torch_geometric.data")
    value = make(tmp_path)
    data = data_module.Data(edge_index=RING, num_nodes=6, **{key: value})
    if isinstance(value, np.ndarray):
        assert not data.is_node_attr(key)  # PyG's reading, which featgraph does not follow
    shape = re.escape(str(tuple(value.shape)))
    with pytest.raises(ValueError, match=rf"{key} must have one row per vertex \(6\), got shape {shape}"):
        NeighborLoader(data, [2], batch_size=2)
    with pytest.raises(ValueError, match=rf"{key} must have one row per vertex \(6\)"):
        loader_source(Graph.from_edge_index(RING, num_nodes=6), **{key: value})


@pytest.mark.parametrize("order", [">", "<"])
def test_a_memmap_in_either_byte_order_gives_native_rows_per_batch(tmp_path, order):
    """A big-endian memmap (torch reads native byte order only) is read per batch, only the batch's rows, in
    native order: the values and dtypes of the native memmap's batches; the array is never copied whole."""
    data_module = pytest.importorskip("torch_geometric.data")
    x = _mapped(tmp_path / "x.npy", f"{order}f4", (6, 3))
    y = _mapped(tmp_path / "y.npy", f"{order}i8", (6,))
    edge_attr = _mapped(tmp_path / "e.npy", f"{order}f8", (6, 2))
    data = data_module.Data(x=x, y=y, edge_attr=edge_attr, edge_index=RING, num_nodes=6)
    loader = NeighborLoader(data, [2, 2], batch_size=2, shuffle=True, seed=3)
    assert loader.source.node_attrs["x"].shape == (6, 3)
    for batch in loader:
        n_id, e_id = batch.n_id.numpy(), batch.e_id.numpy()
        for got, array, ids, dtype in (
            (batch.x, x, n_id, torch.float32),
            (batch.y, y, n_id, torch.int64),
            (batch.edge_attr, edge_attr, e_id, torch.float64),
        ):
            assert got.dtype == dtype
            assert torch.equal(got, torch.from_numpy(np.asarray(array[ids], dtype=array.dtype.newbyteorder("="))))
    column = loader.source.node_attrs["x"]
    held = column.store if order == ">" else column
    assert held is x  # the caller's memmap itself, not a copy
    graph_source = loader_source(Graph.from_edge_index(RING, num_nodes=6), x=x)
    rows = torch.tensor([5, 0])
    assert torch.equal(gathered(graph_source.node_attrs["x"], rows), torch.tensor([[15.0, 16, 17], [0, 1, 2]]))
