"""Operators that are one UDF kernel: ``kernel_operator`` registers a function that plans the kernel and its
inputs as a ``featgraph::`` operator whose gradients are the kernel's own, derived from its UDF."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

from ..graph import Graph
from ..operator import Operator, operator
from ..templates.gradients import placeholder_gradients
from . import precision

Plan = Callable[..., tuple]  # (graph, *args) -> (kernel, its inputs by placeholder name)


def kernel_operator(name: str, fake: Callable) -> Callable[[Plan], Operator]:
    """Register ``plan(g, *args) -> (kernel, placeholders)`` as the operator ``featgraph::<name>``: the
    kernel's output, its gradients the kernel's gradient kernels. ``placeholders`` holds the tensor arguments
    in their order (absent ones left out); ``fake`` is the operator's shape rule."""

    def register(plan: Plan) -> Operator:
        params = list(inspect.signature(plan).parameters.values())[1:]
        tensor_positions = [i for i, p in enumerate(params) if str(p.annotation).startswith("torch.Tensor")]

        def forward(g: Graph, *args) -> torch.Tensor:
            kernel, inputs = plan(g, *args)
            return kernel.evaluate(inputs, want_arg=False)[0]

        def gradient(g: Graph, *args, outputs, grads, wants) -> list[torch.Tensor | None]:
            kernel, inputs = plan(g, *args)
            names = iter(inputs)
            named = [None if args[i] is None else next(names) for i in tensor_positions]  # each tensor's placeholder
            wanted = [n for n, w in zip(named, wants, strict=True) if w and n is not None]
            grads_by_name = placeholder_gradients(kernel, inputs, grads[0], None, None, wanted)
            return [grads_by_name.get(n) if n else None for n in named]

        forward.__signature__ = inspect.signature(plan).replace(return_annotation="torch.Tensor")
        forward.__doc__ = plan.__doc__
        return operator(name, fake, gradient, autocast=precision.caster(name))(forward)

    return register
