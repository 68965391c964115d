"""Sparse graph translation of TC-GNN: the adjacency as dense blocks for tensor cores.

Destination rows are cut into windows of ``window_rows``: 16 as in TC-GNN, or 8, FlashSparse's 8 x 1 vectors
(one per distinct source of a window, ``block_width`` of them to a block). Within a window, the distinct
source columns that any of its rows touches are sorted and condensed to the left, then cut into blocks of
``block_width`` (8 or 16) columns, so each block is a dense ``window_rows`` x ``block_width`` tile that a
tensor-core MMA can consume. Only columns that carry an edge are kept; empty windows have no blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

WINDOW_ROWS = (16, 8)  # TC-GNN's windows; FlashSparse's, whose tiles are 8 x 1 vectors side by side
BLOCK_WIDTHS = (8, 16)


@dataclass(frozen=True)
class TCTranslation:
    """Blocks of window ``w`` are ``window_block_ptr[w] : window_block_ptr[w+1]``.

    ``block_columns[b, j]`` is the source id of column ``j`` of block ``b`` (-1 where the last block of
    a window is not full). Each edge ``e`` (user order) sits at row ``edge_row[e]`` (0..window_rows - 1) and
    column ``edge_col[e]`` of block ``edge_block[e]``; duplicate edges share a cell.
    """

    num_rows: int  # destinations, window_rows to a window
    window_rows: int
    block_width: int
    window_block_ptr: torch.Tensor
    block_columns: torch.Tensor
    edge_block: torch.Tensor
    edge_row: torch.Tensor
    edge_col: torch.Tensor

    @property
    def num_windows(self) -> int:
        return self.window_block_ptr.numel() - 1

    @property
    def num_blocks(self) -> int:
        return self.block_columns.shape[0]

    @property
    def num_cells(self) -> int:
        """Tile cells the dense blocks hold: ``window_rows`` x ``block_width`` per block."""
        return self.num_blocks * self.window_rows * self.block_width

    def fill(self) -> float:
        """The share of tile cells that hold an edge (duplicate edges share one): the part of a tensor-core
        MMA's multiplications that are not by zero (1.0 for an empty graph, which has no tiles)."""
        if self.num_blocks == 0:
            return 1.0
        return torch.unique(self._edge_cells()).numel() / self.num_cells

    def _edge_cells(self) -> torch.Tensor:
        """Each edge's cell in the flattened tiles."""
        return (self.edge_block * self.window_rows + self.edge_row) * self.block_width + self.edge_col

    def gathered_rows(self) -> int:
        """Source rows an SpMM over the blocks gathers: one per distinct (window, source) pair."""
        return int((self.block_columns >= 0).sum())

    def bytes_per_edge(self, value_bytes: int = 4) -> float:
        """Bytes the tiles (``value_bytes`` a cell) and their column ids (4 bytes each) take per edge, against
        a CSR's 4 (an int32 column) plus ``value_bytes`` for a weight."""
        num_edges = self.edge_block.numel()
        total = self.num_cells * value_bytes + self.num_blocks * self.block_width * 4 + (self.num_windows + 1) * 4
        return total / max(num_edges, 1)

    def dense_blocks(self, edge_values: torch.Tensor | None = None) -> torch.Tensor:
        """(num_blocks, window_rows, block_width) tiles holding the sum of the values of the edges in each cell
        (1 per edge when ``edge_values`` is None, so duplicate edges count twice)."""
        num_edges = self.edge_block.numel()
        if edge_values is None:
            edge_values = torch.ones(num_edges, dtype=torch.float32, device=self.edge_block.device)
        tiles = torch.zeros(self.num_cells, dtype=edge_values.dtype, device=edge_values.device)
        tiles.index_add_(0, self._edge_cells(), edge_values)
        return tiles.view(self.num_blocks, self.window_rows, self.block_width)


def translate(
    src: torch.Tensor, dst: torch.Tensor, num_src: int, num_dst: int, block_width: int = 8, window_rows: int = 16
) -> TCTranslation:
    """Build the translation with vectorised sorting (no per-window Python loop): windows of ``window_rows``
    destinations, columns condensed from the ``num_src`` sources."""
    if type(block_width) is not int or block_width not in BLOCK_WIDTHS:
        raise ValueError(f"block_width must be 8 or 16, got {block_width!r}")
    if type(window_rows) is not int or window_rows not in WINDOW_ROWS:
        raise ValueError(f"window_rows must be 16 (TC-GNN's tiles) or 8 (8 x 1 vectors), got {window_rows!r}")
    device = src.device
    num_windows = (num_dst + window_rows - 1) // window_rows
    window = torch.div(dst, window_rows, rounding_mode="floor")
    # distinct (window, column) pairs in sorted order; inverse maps every edge to its pair
    keys = window * max(num_src, 1) + src
    pairs, pair_of_edge = torch.unique(keys, sorted=True, return_inverse=True)
    pair_window = torch.div(pairs, max(num_src, 1), rounding_mode="floor")
    pair_column = pairs - pair_window * max(num_src, 1)
    columns_per_window = torch.bincount(pair_window, minlength=num_windows)
    first_pair = torch.zeros(num_windows + 1, dtype=torch.int64, device=device)
    torch.cumsum(columns_per_window, 0, out=first_pair[1:])
    condensed = torch.arange(pairs.numel(), device=device) - first_pair[pair_window]  # column rank in window

    blocks_per_window = torch.div(columns_per_window + block_width - 1, block_width, rounding_mode="floor")
    window_block_ptr = torch.zeros(num_windows + 1, dtype=torch.int64, device=device)
    torch.cumsum(blocks_per_window, 0, out=window_block_ptr[1:])
    pair_block = window_block_ptr[pair_window] + torch.div(condensed, block_width, rounding_mode="floor")
    pair_slot = condensed % block_width

    num_blocks = int(window_block_ptr[-1])
    block_columns = torch.full((num_blocks, block_width), -1, dtype=torch.int64, device=device)
    block_columns[pair_block, pair_slot] = pair_column
    return TCTranslation(
        num_rows=num_dst,
        window_rows=window_rows,
        block_width=block_width,
        window_block_ptr=window_block_ptr,
        block_columns=block_columns,
        edge_block=pair_block[pair_of_edge],
        edge_row=dst - window * window_rows,
        edge_col=pair_slot[pair_of_edge],
    )
