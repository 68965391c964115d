import numpy as np
import pytest
import torch

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
                for r in range(WINDOW_ROWS):
                    row = w * WINDOW_ROWS + r
                    if row < num_nodes:
                        dense[row, col] += float(tiles[b, r, j])
    return dense


@pytest.mark.parametrize("block_width", [8, 16])
@pytest.mark.parametrize(("n", "e"), [(5, 12), (33, 300), (100, 900)])
def test_blocks_reconstruct_the_adjacency_exactly(block_width, n, e):
    src, dst = random_edges(n, e, seed=n)
    g = Graph(src, dst, n)
    tc = g.tc_translation(block_width)
    values = torch.rand(e, dtype=torch.float64)
    ref = adjacency(src, dst, n, values.numpy()).toarray()
    assert np.allclose(rebuild_dense(tc, n, tc.dense_blocks(values)), ref)
    counts = adjacency(src, dst, n).toarray()  # duplicates counted twice in the unweighted tiles
    assert np.array_equal(rebuild_dense(tc, n, tc.dense_blocks()), counts)


@pytest.mark.parametrize("block_width", [8, 16])
def test_windows_hold_sorted_distinct_columns_in_as_few_blocks_as_possible(block_width):
    n = 70
    src, dst = random_edges(n, 600, seed=9)
    tc = Graph(src, dst, n).tc_translation(block_width)
    assert tc.num_windows == (n + WINDOW_ROWS - 1) // WINDOW_ROWS
    for w in range(tc.num_windows):
        in_window = (dst // WINDOW_ROWS) == w
        distinct = sorted(set(src[in_window].tolist()))
        blocks = tc.block_columns[int(tc.window_block_ptr[w]) : int(tc.window_block_ptr[w + 1])].flatten()
        assert blocks[blocks >= 0].tolist() == distinct
        assert blocks.numel() // block_width == -(-len(distinct) // block_width)
    # every edge's cell names its own source
    assert torch.equal(tc.block_columns[tc.edge_block, tc.edge_col], src)
    assert torch.equal(dst % WINDOW_ROWS, tc.edge_row)


def test_block_width_is_checked():
    with pytest.raises(ValueError, match="block_width must be 8 or 16"):
        Graph.from_edge_index(torch.tensor([[0], [1]])).tc_translation(block_width=12)
