"""``accelerate(model)``: run an existing PyG model's layers on featgraph's fused kernels, in place."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch_geometric.nn.conv import MessagePassing

from .pyg_layer import FusedLayer, pyg_base


@dataclass
class Acceleration:
    """What ``accelerate`` did: ``swapped`` (module path, class name) now run featgraph's forward; ``left``
    (module path, class name, why) are message-passing layers still running PyG's own code."""

    swapped: list[tuple[str, str]] = field(default_factory=list)
    left: list[tuple[str, str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"featgraph: {len(self.swapped)} layer(s) accelerated, {len(self.left)} left as PyG's"]
        lines += [f"  swapped  {path or '<model>'}: {name}" for path, name in self.swapped]
        lines += [f"  left     {path or '<model>'}: {name} ({why})" for path, name, why in self.left]
        return "\n".join(lines)


def featgraph_layers() -> dict[type[MessagePassing], type[FusedLayer]]:
    """Every featgraph layer built on a PyG class, by that PyG class."""
    layers: dict[type[MessagePassing], type[FusedLayer]] = {}
    pending = list(FusedLayer.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("featgraph.") and pyg_base(cls).__name__ == cls.__name__:
            layers[pyg_base(cls)] = cls
    return layers


def accelerate(model: torch.nn.Module, verbose: bool = False) -> Acceleration:
    """Switch every PyG layer of ``model`` (``model`` itself included) that featgraph implements to
    featgraph's class of the same name, in place: the module object, its parameters, buffers, hooks and
    settings stay as they are (the state dict is unchanged), only its class changes, so its ``forward``
    runs featgraph's fused kernels where they apply and PyG's own code elsewhere, with the same results.
    Subclasses of PyG's layers are left alone (their own methods would be bypassed), as are layers
    featgraph does not implement. Returns what was swapped and what was left; ``verbose`` prints it."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    layers = featgraph_layers()
    summary = Acceleration()
    for path, module in model.named_modules():
        cls = type(module)
        if isinstance(module, FusedLayer) or not isinstance(module, MessagePassing):
            continue
        if cls in layers:
            module.__class__ = layers[cls]
            summary.swapped.append((path, cls.__name__))
        elif any(issubclass(cls, pyg) for pyg in layers):
            summary.left.append((path, cls.__name__, "a subclass of a PyG layer: its own methods are kept"))
        else:
            summary.left.append((path, cls.__name__, "featgraph has no layer for it"))
    if verbose:
        print(summary)
    return summary
