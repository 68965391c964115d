import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.graph.tc_translation import WINDOW_ROWS
from tests.conftest import adjacency, random_edges


def rebuild_dense(tc, num_nodes: int, tiles: torch.Tensor) -> np.ndarray:
    """Scatter every dense tile back to its rows and original columns."""
    dense = np.zeros((num_nodes, num_nodes))
    for w in range(tc.num_windows):
        for b in range(int(tc.window_block_ptr[w]), int(tc.window_block_ptr[w + 1])):
            for j, col in enumerate(tc.block_columns[b].tolist()):
                if col < 0:
                    assert tiles[b, :, j].abs().sum() == 0  # padding columns hold nothing
                    continue
                for r in range(tc.window_rows):
                    row = w * tc.window_rows + r
                    if row < num_nodes:
                        dense[row, col] += float(tiles[b, r, j])
    return dense


@pytest.mark.parametrize("window_rows", WINDOW_ROWS)
@pytest.mark.parametrize("block_width", [8, 16])
@pytest.mark.parametrize(("n", "e"), [(5, 12), (33, 300), (100, 900)])
def test_blocks_reconstruct_the_adjacency_exactly(block_width, window_rows, n, e):
    src, dst = random_edges(n, e, seed=n)
    g = Graph(src, dst, n)
    tc = g.tc_translation(block_width, window_rows)
    values = torch.rand(e, dtype=torch.float64)
    ref = adjacency(src, dst, n, values.numpy()).toarray()
    assert np.allclose(rebuild_dense(tc, n, tc.dense_blocks(values)), ref)
    counts = adjacency(src, dst, n).toarray()  # duplicates counted twice in the unweighted tiles
    assert np.array_equal(rebuild_dense(tc, n, tc.dense_blocks()), counts)


@pytest.mark.parametrize("window_rows", WINDOW_ROWS)
@pytest.mark.parametrize("block_width", [8, 16])
def test_windows_hold_sorted_distinct_columns_in_as_few_blocks_as_possible(block_width, window_rows):
    n = 70
    src, dst = random_edges(n, 600, seed=9)
    tc = Graph(src, dst, n).tc_translation(block_width, window_rows)
    assert tc.num_windows == (n + window_rows - 1) // window_rows
    for w in range(tc.num_windows):
        in_window = (dst // window_rows) == w
        distinct = sorted(set(src[in_window].tolist()))
        blocks = tc.block_columns[int(tc.window_block_ptr[w]) : int(tc.window_block_ptr[w + 1])].flatten()
        assert blocks[blocks >= 0].tolist() == distinct
        assert blocks.numel() // block_width == -(-len(distinct) // block_width)
    # every edge's cell names its own source
    assert torch.equal(tc.block_columns[tc.edge_block, tc.edge_col], src)
    assert torch.equal(dst % window_rows, tc.edge_row)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [({"block_width": 12}, "block_width must be 8 or 16"), ({"block_width": 8.0}, "block_width must be 8 or 16"),
     ({"window_rows": 4}, "window_rows must be 16"), ({"window_rows": 32}, "window_rows must be 16"),
     ({"window_rows": 16.0}, "window_rows must be 16"), ({"window_rows": True}, "window_rows must be 16")],
)  # fmt: skip
def test_the_tile_shape_is_checked(arguments, message):
    with pytest.raises(ValueError, match=message):
        Graph.from_edge_index(torch.tensor([[0], [1]])).tc_translation(**arguments)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    edges=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=150),
    block_width=st.sampled_from([8, 16]),
    window_rows=st.sampled_from(WINDOW_ROWS),
)
def test_fill_bytes_and_gathered_rows_count_the_cells_and_windows_holding_an_edge(n, edges, block_width, window_rows):
    src = torch.tensor([u % n for u, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v % n for _, v in edges], dtype=torch.int64)
    tc = Graph(src, dst, n).tc_translation(block_width, window_rows)
    distinct = {(int(v), int(u)) for u, v in zip(src, dst, strict=True)}  # duplicates share a cell
    cells = tc.num_blocks * window_rows * block_width
    assert tc.fill() == (len(distinct) / cells if cells else 1.0)
    assert tc.fill() == pytest.approx(int((tc.dense_blocks() != 0).sum()) / cells if cells else 1.0)
    if edges:
        want = (cells * 2 + tc.num_blocks * block_width * 4 + (tc.num_windows + 1) * 4) / len(edges)
        assert tc.bytes_per_edge(2) == pytest.approx(want)
    # the SpMM over the tiles gathers one source row per distinct (window, source): brute force over the cells
    assert tc.gathered_rows() == len({(v // window_rows, u) for v, u in distinct})
