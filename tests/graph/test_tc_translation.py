import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from featgraph import Graph
from featgraph.graph.tc_translation import WINDOW_ROWS, vector_fill
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


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    edges=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=150),
    block_width=st.sampled_from([8, 16]),
)
def test_fill_and_bytes_count_the_dense_cells_holding_an_edge(n, edges, block_width):
    src = torch.tensor([u % n for u, _ in edges], dtype=torch.int64)
    dst = torch.tensor([v % n for _, v in edges], dtype=torch.int64)
    tc = Graph(src, dst, n).tc_translation(block_width)
    distinct = {(int(v), int(u)) for u, v in zip(src, dst, strict=True)}  # duplicates share a cell
    cells = tc.num_blocks * WINDOW_ROWS * block_width
    assert tc.fill() == (len(distinct) / cells if cells else 1.0)
    assert tc.fill() == pytest.approx(int((tc.dense_blocks() != 0).sum()) / cells if cells else 1.0)
    if edges:
        want = (cells * 2 + tc.num_blocks * block_width * 4 + (tc.num_windows + 1) * 4) / len(edges)
        assert tc.bytes_per_edge(2) == pytest.approx(want)
    # FlashSparse's 8 x 1 vectors: one per (window of 8 rows, distinct column); brute force over the cells
    vectors = {(v // 8, u) for v, u in distinct}
    assert vector_fill(src, dst, n) == (len(distinct) / (8 * len(vectors)) if vectors else 1.0)
