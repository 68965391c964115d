"""``Dataset``: a Graph with node features and, where the source has them, labels and a split."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..graph import Graph


@dataclass
class Dataset:
    """A graph with its features and, where the source has them, labels and a train/validation/test split."""

    name: str
    graph: Graph
    features: torch.Tensor  # (num_nodes, num_features) float32
    labels: torch.Tensor | None = None  # (num_nodes,) int64
    num_classes: int = 0
    train_idx: torch.Tensor | None = None
    val_idx: torch.Tensor | None = None
    test_idx: torch.Tensor | None = None

    @property
    def edge_index(self) -> torch.Tensor:
        """PyG-style (2, E) view of the edges."""
        return torch.stack(self.graph.coo())

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, nodes={self.graph.num_nodes}, edges={self.graph.num_edges}, "
            f"features={self.features.shape[1]}, classes={self.num_classes})"
        )
