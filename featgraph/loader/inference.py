"""Layer-wise full-graph inference: a trained model evaluated on every vertex one layer at a time.

Each layer runs over chunks of destination vertices, each chunk's block holding all its in-neighbours (one
hop, fan-out -1), and writes its rows of the layer's output before the next layer starts. Nothing is
sampled away, so the result is the full-graph forward's, while memory holds two layers' vertex rows and one
chunk's block instead of a mini-batch's whole multi-hop neighbourhood (which on a big graph is most of the
graph per seed chunk). The next chunk's block is built in a background thread while a layer runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from ..graph import Graph
from ..progress import Progress
from ..sampling import Block, NeighborSampler
from .base import gathered
from .prefetch import prefetched
from .source import checked_count

LayerStep = Callable[[torch.Tensor, Block], torch.Tensor]


@torch.no_grad()
def layerwise_inference(
    layers: Sequence[LayerStep],
    graph: Graph,
    x: torch.Tensor,
    batch_size: int = 1024,
    progress: bool = True,
    num_threads: int | None = None,
    prefetch: int = 2,
    storage_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Every vertex's output of the model whose layer ``l`` is ``layers[l](h_src, block)``.

    ``h_src`` holds the previous layer's output (``x`` for the first) at ``block.n_id``, the block's
    sources, destinations first; the step returns the destinations' rows (the first
    ``block.graph.num_dst_nodes``; a longer result is cut, as PyG layers given only ``h_src`` return a row
    per source). A step includes what follows the layer, such as its activation:
    ``lambda h, b: conv((h, h[:b.graph.num_dst_nodes]), torch.stack(b.graph.coo())).relu()``.
    ``batch_size``: destination vertices per chunk. Runs without autograd; the result is ``x``'s device's.
    ``storage_dtype`` (a floating dtype) holds every layer's output but the last between layers, each layer
    still computing in ``x``'s dtype: ``torch.bfloat16`` halves the largest part of a big graph's evaluation,
    two vertices x width matrices (ogbn-products' size at width 256: 5 GB in float32), for hidden features
    rounded to bfloat16's 8 significant bits. None keeps each layer's own dtype.
    """
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence) or len(layers) == 0:
        raise ValueError(f"layers must be a non-empty sequence of per-layer steps, got {type(layers).__name__}")
    for depth, layer in enumerate(layers):
        if not callable(layer):
            raise TypeError(f"layers[{depth}] must be callable as step(h_src, block), got {type(layer).__name__}")
    sampler = NeighborSampler(graph, [-1], num_threads=num_threads)  # checks the graph
    num_nodes = graph.num_nodes
    if num_nodes == 0:
        raise ValueError("graph has no vertices: there is nothing to evaluate")
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] != num_nodes:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"x must be a tensor with one row per vertex ({num_nodes}), got {shape}")
    if storage_dtype is not None and (
        not isinstance(storage_dtype, torch.dtype) or not storage_dtype.is_floating_point
    ):
        raise ValueError(f"storage_dtype must be a floating torch.dtype or None, got {storage_dtype!r}")
    batch_size = checked_count(batch_size, "batch_size", 1)
    prefetch = checked_count(prefetch, "prefetch", 0)
    chunks = torch.arange(num_nodes).split(batch_size)

    def block_of(chunk: torch.Tensor) -> tuple[int, Block]:
        return int(chunk[0]), sampler.sample(chunk, seed=0).blocks[0]  # fan-out -1 draws nothing at random

    h = x
    with Progress(len(layers) * len(chunks), "inference", enabled=progress) as bar:
        for depth, layer in enumerate(layers):
            out = None
            for start, block in prefetched(chunks, block_of, prefetch):
                num_dst = block.graph.num_dst_nodes
                h_src = gathered(h, block.n_id)
                rows = layer(h_src if storage_dtype is None else h_src.to(x.dtype), block)
                if not isinstance(rows, torch.Tensor) or rows.dim() == 0 or rows.shape[0] < num_dst:
                    got = tuple(rows.shape) if isinstance(rows, torch.Tensor) else type(rows).__name__
                    raise ValueError(
                        f"layers[{depth}] returned {got} for a block of {num_dst} destinations; a step returns "
                        "at least one row per destination"
                    )
                if out is None:
                    last = depth == len(layers) - 1
                    dtype = rows.dtype if last or storage_dtype is None else storage_dtype
                    out = rows.new_empty((num_nodes, *rows.shape[1:]), dtype=dtype)
                out[start : start + num_dst] = rows[:num_dst]
                bar.update(status=f"layer {depth + 1}/{len(layers)}")
            h = out
    return h
