"""Independent references for the layer tests: per-vertex loops over in-edges, and PyG comparisons."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest
import torch

from tests.conftest import random_edges

N, E = 20, 90


def edges(seed: int = 0) -> torch.Tensor:
    """A small (2, E) edge_index with duplicates, a self loop and isolated vertices."""
    return torch.stack(random_edges(N, E, seed))


def with_self_loops(edge_index: torch.Tensor, num_nodes: int = N) -> torch.Tensor:
    """Remove self loops, then add one per vertex (what PyG's GAT and AGNN do)."""
    keep = edge_index[0] != edge_index[1]
    loops = torch.arange(num_nodes).repeat(2, 1)
    return torch.cat([edge_index[:, keep], loops], dim=1)


def per_vertex(
    edge_index: torch.Tensor, num_nodes: int, width: int, reduce: Callable[[int, torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """``out[v] = reduce(v, ids of v's in-edges)``, 0 for vertices without in-edges."""
    rows = []
    for v in range(num_nodes):
        into = (edge_index[1] == v).nonzero().flatten()
        rows.append(reduce(v, into) if into.numel() else torch.zeros(width, dtype=torch.float64))
    return torch.stack(rows)


REDUCE = {
    "sum": lambda m: m.sum(0),
    "mean": lambda m: m.mean(0),
    "max": lambda m: m.max(0).values,
    "min": lambda m: m.min(0).values,
}


def assert_matches_pyg(ours: torch.nn.Module, theirs: torch.nn.Module, x: torch.Tensor, *args, **kwargs) -> None:
    """Same weights (PyG's state dict loaded strictly into ours), same output and same gradients for the
    input and every parameter, in float64."""
    ours.load_state_dict(theirs.state_dict(), strict=True)
    ours.double(), theirs.double()
    results = []
    for module in (ours, theirs):
        inp = x.detach().double().requires_grad_()
        out = module(inp, *args, **kwargs)
        grad = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(0)).to(out.device)
        out.backward(grad)
        results.append((out.detach(), inp.grad, {k: p.grad for k, p in module.named_parameters()}))
    (out, gx, gp), (ref, rgx, rgp) = results
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(gx, rgx)
    assert gp.keys() == rgp.keys()
    for name in gp:
        torch.testing.assert_close(gp[name], rgp[name], msg=f"gradient of {name}")


def pyg_conv(name: str) -> type:
    """PyG's layer class of that name, or skip the test where PyG is not installed."""
    return getattr(pytest.importorskip("torch_geometric.nn"), name)


NUM_SRC, NUM_DST = 17, 6


def bipartite_edges(seed: int = 0) -> torch.Tensor:
    """A (2, E) edge_index from NUM_SRC sources to NUM_DST destinations (the last one isolated), duplicates
    included."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, NUM_SRC, (50,), generator=gen)
    dst = torch.randint(0, NUM_DST - 1, (50,), generator=gen)
    return torch.cat([torch.stack([src, dst]), torch.stack([src[:3], dst[:3]])], dim=1)


def assert_same_as_pyg(ours: torch.nn.Module, theirs: torch.nn.Module, inputs: tuple, *args, **kwargs) -> None:
    """With PyG's weights loaded, ``ours(*args, **kwargs)`` equals ``theirs(...)`` in float64, and so do the
    gradients of ``inputs`` and of every parameter (a gradient PyG leaves None must be None or zero here)."""
    ours.load_state_dict(theirs.state_dict())
    ours.double()
    theirs.double()
    got, want = ours(*args, **kwargs), theirs(*args, **kwargs)
    torch.testing.assert_close(got, want)
    upstream = torch.randn_like(want)
    ours_grads = torch.autograd.grad(got, [*inputs, *ours.parameters()], upstream, allow_unused=True)
    theirs_grads = torch.autograd.grad(want, [*inputs, *theirs.parameters()], upstream, allow_unused=True)
    for mine, pyg in zip(ours_grads, theirs_grads, strict=True):
        if pyg is None:
            assert mine is None or not bool(mine.any())
        else:
            torch.testing.assert_close(mine, pyg)


@contextlib.contextmanager
def expect_fallback(reason: str) -> Iterator[None]:
    """The block runs PyG's path with a ``FallbackWarning`` matching ``reason`` (the once-per-reason record is
    cleared first, so the order tests run in does not matter)."""
    from featgraph.nn import pyg_layer

    pyg_layer._warned.clear()
    with pytest.warns(pyg_layer.FallbackWarning, match=reason):
        yield


def dense_weights(layer: torch.nn.Module) -> torch.Tensor:
    """(types, in, out): each type's whole weight, block-diagonal ones assembled with ``torch.block_diag``."""
    if layer.regularizer != "bdd":
        return layer.get_weight()
    blocks = layer.W.view(layer.num_types, layer.num_bases, layer.submat_in, layer.submat_out)
    return torch.stack([torch.block_diag(*blocks[t]) for t in range(layer.num_types)])
