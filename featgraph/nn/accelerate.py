"""``accelerate(model)``: run an existing PyG model's layers and dropout on featgraph's kernels, in place."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
import torch_geometric.nn
from torch_geometric.nn.conv import MessagePassing

from .dropout import Dropout
from .hetero_conv import HeteroConv
from .pyg_layer import FusedLayer, pyg_base
from .to_hetero import fuse_relation_sums

TORCH_DROPOUTS = (F.dropout, torch.dropout)  # the functional calls accelerate cannot swap
OWN_PACKAGES = ("torch", "featgraph")  # whose forward code is not the user's to edit


@dataclass
class Acceleration:
    """What ``accelerate`` did: ``swapped`` (module path, class name) now run featgraph's forward; ``left``
    (module path, class name, why) are message-passing layers still running PyG's own code and functional
    dropout calls in a module's ``forward`` that only an edit of that code can switch."""

    swapped: list[tuple[str, str]] = field(default_factory=list)
    left: list[tuple[str, str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"featgraph: {len(self.swapped)} module(s) accelerated, {len(self.left)} left as they are"]
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


def functional_dropouts(cls: type[torch.nn.Module]) -> Iterator[int]:
    """Line numbers of the calls to torch's functional dropout in ``cls.forward``'s source (none where the
    source cannot be read): names are resolved in the forward's own globals, so ``F.dropout``,
    ``torch.nn.functional.dropout`` and an imported ``dropout`` are found whatever they are called. A forward
    ``cls`` inherits from torch's or featgraph's code (a ``torch.nn.Dropout`` subclass's) is not the user's:
    none."""
    forward = cls.forward
    if str(getattr(forward, "__module__", "")).split(".")[0] in OWN_PACKAGES:
        return
    try:
        lines, first = inspect.getsourcelines(forward)
    except (OSError, TypeError):
        return
    scope = getattr(forward, "__globals__", {})
    for node in ast.walk(ast.parse(textwrap.dedent("".join(lines)))):
        if isinstance(node, ast.Call) and _resolve(node.func, scope) in TORCH_DROPOUTS:
            yield first + node.lineno - 1


def _resolve(node: ast.expr, scope: dict) -> object:
    """The object a dotted name (``a.b.c``) refers to in ``scope``; None where it is not a plain dotted name."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_resolve(node.value, scope), node.attr, None)
    return None


def accelerate(model: torch.nn.Module, verbose: bool = False, dropout: bool = True) -> Acceleration:
    """Switch every PyG layer of ``model`` (``model`` itself included) that featgraph implements to
    featgraph's class of the same name, in place: the module object, its parameters, buffers, hooks and
    settings stay as they are (the state dict is unchanged), only its class changes, so its ``forward``
    runs featgraph's fused kernels where they apply and PyG's own code elsewhere, with the same results.
    With ``dropout``, ``torch.nn.Dropout`` modules become ``featgraph.nn.Dropout`` (torch's statistics, a
    different random stream; ``dropout=False`` keeps torch's masks). Subclasses of PyG's layers are left
    alone (their own methods would be bypassed), as are layers featgraph does not implement; calls of torch's
    functional dropout in the model's own ``forward`` code are listed as left (``featgraph.nn.functional.dropout``
    replaces them). A ``HeteroConv`` becomes featgraph's, and in a ``to_hetero`` model each sum over relations of
    featgraph's ``SAGEConv``/``GraphConv`` calls becomes one ``sum_of_relation_parts`` call (one dense product for
    the relations into a node type). Returns what was swapped and what was left; ``verbose`` prints it."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    layers = featgraph_layers()
    summary = Acceleration()
    inspected: set[type] = set()
    for path, module in model.named_modules():
        cls = type(module)
        if dropout and cls is torch.nn.Dropout:
            module.__class__ = Dropout
            summary.swapped.append((path, cls.__name__))
        if cls is torch_geometric.nn.HeteroConv:
            module.__class__ = HeteroConv
            summary.swapped.append((path, cls.__name__))
        if isinstance(module, FusedLayer) or not isinstance(module, MessagePassing):
            if dropout and cls not in inspected and not cls.__module__.startswith(("torch.", "featgraph.")):
                inspected.add(cls)
                for line in functional_dropouts(cls):
                    why = f"torch's functional dropout at line {line}: call featgraph.nn.functional.dropout there"
                    summary.left.append((path, f"{cls.__name__}.forward", why))
            continue
        if cls in layers:
            module.__class__ = layers[cls]
            summary.swapped.append((path, cls.__name__))
        elif any(issubclass(cls, pyg) for pyg in layers):
            summary.left.append((path, cls.__name__, "a subclass of a PyG layer: its own methods are kept"))
        else:
            summary.left.append((path, cls.__name__, "featgraph has no layer for it"))
    if isinstance(model, torch.fx.GraphModule):  # a to_hetero model: its sums over relations
        summary.swapped += [("", f"sum over relations of {layers}") for layers in fuse_relation_sums(model)]
    if verbose:
        print(summary)
    return summary
