"""One mechanism for featgraph's operators: an op's implementation, its shape rule, its gradients and its autocast
cast, given together to ``operator``, become the ``torch.library`` operator ``featgraph::<name>`` (with
``featgraph::<name>_backward`` for the gradients), which eager calls and the graphs ``torch.compile`` and
``torch.export`` trace both run.

The implementation is a Python function whose annotations give the operator's schema: tensors, optional tensors,
lists of tensors, floats, ints, bools and strings, and as its first parameter optionally a ``Graph``. A graph
crosses the operator boundary as its own (2, E) ``edge_index``, its source and destination counts and whether
the operator is to add one self loop per vertex (``GraphRef``); the operator finds the ``Graph`` again when it
runs (``graph.conversion.resolve``) and works on its cached formats and kernels, so traced code never builds a
format or compiles a kernel. The shape rule (the fake implementation) takes the same arguments with a
``GraphRef`` for the graph.

Autograd is the operator's own kernel: where an input requires grad, an ``autograd.Function`` runs the operator
below autograd and keeps what the gradients read: the inputs ``saves`` names (all by default) and the outputs at
``saves_outputs``; an input not kept stands in as an expanded scalar of its shape and dtype (no memory), which
is all a gradient may read of it. Its backward calls the gradient operator, whose shape rule gives each wanted
gradient its input's shape. This is the route ``torch.library.custom_op`` takes too, without its per-call
handling of argument trees, which eager calls would pay on every op.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .graph import Graph
from .graph.conversion import resolve
from .graph.graph import GraphRef

NAMESPACE = "featgraph"
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # the registrations live as long as this object
_TYPES = {
    "torch.Tensor": "Tensor",
    "torch.Tensor | None": "Tensor?",
    "list[torch.Tensor]": "Tensor[]",
    "float": "float",
    "int": "SymInt",
    "bool": "bool",
    "str": "str",
}
_RETURNS = {"torch.Tensor": "Tensor", "tuple[torch.Tensor, torch.Tensor]": "(Tensor, Tensor)"}
_GRAPH_SCHEMA = "Tensor edge_index, SymInt num_src, SymInt num_dst, bool self_loops"
_GRAPH_TYPES = ("Tensor", "SymInt", "SymInt", "bool")
AUTOCAST_DEVICE_TYPES = ("cpu", "cuda")

Cast = Callable[[str, Sequence[Any]], Sequence[Any]]  # (device type, arguments) -> the arguments cast
# (the implementation's arguments after the graph, which tensor arguments need a gradient) -> which to keep
Saves = Callable[[Sequence[Any], list[bool]], list[bool]]


def _spelled(annotation: Any) -> str:
    """An annotation as written (a string already under ``from __future__ import annotations``)."""
    return annotation if isinstance(annotation, str) else inspect.formatannotation(annotation)


def graph_args(g: Graph | GraphRef) -> tuple[torch.Tensor, int, int, bool]:
    """(edge_index, num_src, num_dst, self_loops): how an operator takes a graph."""
    ref = g if isinstance(g, GraphRef) else g.ref()
    return ref.edge_index, ref.num_src_nodes, ref.num_dst_nodes, ref.self_loops


def fake_edges(ref: GraphRef) -> int | torch.SymInt:
    """A shape rule's edge count: the edge tensor's, or for a graph whose self loops the operator adds (the
    count depends on how many loops the edges hold) a size known when it runs."""
    return torch.library.get_ctx().new_dynamic_size() if ref.self_loops else ref.edge_index.shape[1]


class Operator:
    """A registered op: call it as its implementation is called (a ``Graph`` or ``GraphRef`` first where it takes
    one); ``.default`` is the ``torch.ops`` overload."""

    def __init__(
        self,
        name: str,
        forward: Callable,
        fake: Callable,
        gradient: Callable | None,
        saves: Sequence[str] | Saves | None,
        saves_outputs: Sequence[int] | Callable[[Sequence[Any]], Sequence[int]],
        autocast: Cast | None,
        holds: Callable[[Sequence[Any]], Any] | None = None,
    ) -> None:
        signature = inspect.signature(forward)
        params = list(signature.parameters.values())
        self.takes_graph = bool(params) and params[0].annotation in ("Graph", Graph)
        params = params[1:] if self.takes_graph else params
        self.name, self.forward, self.fake, self.gradient = name, forward, fake, gradient
        self.names = [p.name for p in params]
        self.types = [*(_GRAPH_TYPES if self.takes_graph else ()), *(_TYPES[_spelled(p.annotation)] for p in params)]
        self.offset = len(_GRAPH_TYPES) if self.takes_graph else 0
        self.listed = "Tensor[]" in self.types
        # where the tensors after the graph sit among the arguments (with no list among them: fixed)
        self.tensor_index = [i for i, t in enumerate(self.types) if i >= self.offset and t.startswith("Tensor")]
        self.saves = saves
        self.saves_outputs = saves_outputs
        self.holds = holds
        self.__doc__ = forward.__doc__
        typed = [f"{kind} {p.name}" for kind, p in zip(self.types[self.offset :], params, strict=True)]
        arguments = ", ".join([_GRAPH_SCHEMA] * self.takes_graph + typed)
        _LIBRARY.define(f"{name}({arguments}) -> {_RETURNS[_spelled(signature.return_annotation)]}")
        _LIBRARY.impl(name, self._run, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{name}", self._fake, lib=_LIBRARY)
        self.default = getattr(torch.ops.featgraph, name).default
        if gradient is not None:
            schema = ", ".join([arguments] * bool(arguments) + ["Tensor?[] outputs", "Tensor[] grads", "bool[] wants"])
            _LIBRARY.define(f"{name}_backward({schema}) -> Tensor[]")
            _LIBRARY.impl(f"{name}_backward", self._run_backward, "CompositeExplicitAutograd")
            torch.library.register_fake(f"{NAMESPACE}::{name}_backward", self._fake_backward, lib=_LIBRARY)
            self.backward = getattr(torch.ops.featgraph, f"{name}_backward").default
        _LIBRARY.impl(name, self._autograd, "Autograd")
        if autocast is not None:
            for device_type in AUTOCAST_DEVICE_TYPES:
                key = "Autocast" + torch._C._dispatch_key_for_device(device_type)
                _LIBRARY.impl(name, self._autocast_kernel(autocast, device_type, key), key)

    def __call__(self, *args: Any) -> Any:
        if self.takes_graph:
            return self.default(*graph_args(args[0]), *args[1:])
        return self.default(*args)

    # ---- the kernels the dispatcher calls ------------------------------------------------------------------
    def _arguments(self, flat: Sequence[Any]) -> list[Any]:
        """The implementation's arguments from the operator's: the graph resolved, the rest as they are."""
        if not self.takes_graph:
            return list(flat)
        return [resolve(*flat[: self.offset]), *flat[self.offset :]]

    def _run(self, *flat: Any) -> Any:
        return self.forward(*self._arguments(flat))

    def _fake(self, *flat: Any) -> Any:
        if not self.takes_graph:
            return self.fake(*flat)
        return self.fake(GraphRef(flat[0], flat[1], flat[2], None, flat[3]), *flat[self.offset :])

    def _run_backward(self, *flat: Any) -> list[torch.Tensor]:
        *args, outputs, grads, wants = flat
        wanted = list(wants)
        computed = self.gradient(*self._arguments(args), outputs=list(outputs), grads=list(grads), wants=wanted)
        return [grads[0].new_empty(0) if d is None or not w else d for d, w in zip(computed, wanted, strict=True)]

    def _fake_backward(self, *flat: Any) -> list[torch.Tensor]:
        *args, _, grads, wants = flat
        slots = self._slots(args[self.offset :])
        return [x.new_empty(x.shape) if w and x is not None else grads[0].new_empty(0)
                for x, w in zip(slots, wants, strict=True)]  # fmt: skip

    def kept(self, params: Sequence[Any], wants: list[bool]) -> list[bool]:
        """Which tensor slots the gradients read, by ``saves``."""
        if callable(self.saves):
            return self.saves(params, wants)
        named = self.names if self.saves is None else self.saves
        return [name in named for name, kind, arg in zip(self.names, self.types[self.offset :], params, strict=True)
                for _ in (arg if kind == "Tensor[]" else (arg,) if kind.startswith("Tensor") else ())]  # fmt: skip

    def _autograd(self, *flat: Any) -> Any:
        slots = self._slots(flat[self.offset :]) if self.listed else [flat[i] for i in self.tensor_index]
        needed = any(x is not None and x.requires_grad for x in slots)
        if needed and self.gradient is not None and torch.is_grad_enabled():
            if not self.listed:
                return _Differentiable.apply(self, None, *flat)
            lengths = [len(a) if t == "Tensor[]" else None for a, t in zip(flat, self.types, strict=True)]
            spread = [x for a, n in zip(flat, lengths, strict=True) for x in (a if n is not None else (a,))]
            return _Differentiable.apply(self, lengths, *spread)
        with torch._C._AutoDispatchBelowAutograd():
            return self.default(*flat)

    def _autocast_kernel(self, cast: Cast, device_type: str, key: str) -> Callable:
        """The operator under ``device_type``'s autocast: its arguments cast, then the operator with autocast
        off (it reads the autocast dtype when called, where ``torch.library.register_autocast`` fixes one)."""
        excluded = torch._C.DispatchKeySet(getattr(torch._C.DispatchKey, key))

        def kernel(*flat: Any) -> Any:
            with torch._C._ExcludeDispatchKeyGuard(excluded):
                return self.default(*cast(device_type, flat))

        return kernel

    def _slots(self, params: Sequence[Any]) -> list[torch.Tensor | None]:
        """The tensor arguments after the graph, a list's elements each their own slot: what gradients are for."""
        slots: list[torch.Tensor | None] = []
        for arg, kind in zip(params, self.types[self.offset :], strict=True):
            if kind == "Tensor[]":
                slots.extend(arg)
            elif kind.startswith("Tensor"):
                slots.append(arg)
        return slots

    def _slot_positions(self, lengths: Sequence[int | None] | None) -> list[int]:
        """Where the slots sit among the arguments with their lists spread out (``lengths`` None: no lists)."""
        if lengths is None:
            return self.tensor_index
        positions, at = [], 0
        for i, (kind, n) in enumerate(zip(self.types, lengths, strict=True)):
            count = 1 if n is None else n
            if i >= self.offset and kind.startswith("Tensor"):
                positions.extend(range(at, at + count))
            at += count
        return positions


class _Differentiable(torch.autograd.Function):
    """An operator's autograd: the operator below autograd forward, its gradient operator backward. Lists of
    tensors arrive spread out (``lengths``), so autograd sees each tensor."""

    @staticmethod
    def forward(ctx, operator: Operator, lengths: list[int | None] | None, *spread: Any):  # noqa: D102
        flat = list(spread) if lengths is None else _gathered(spread, lengths)
        with torch._C._AutoDispatchBelowAutograd():
            out = operator.default(*flat)
        outputs = out if isinstance(out, tuple) else (out,)
        positions = operator._slot_positions(lengths)
        wants = [bool(ctx.needs_input_grad[2 + p]) for p in positions]
        kept = operator.kept(flat[operator.offset :], wants)
        slots = [spread[p] for p in positions]
        slots = [x if keep or x is None else _stand_in(x) for x, keep in zip(slots, kept, strict=True)]
        ctx.operator, ctx.lengths, ctx.positions, ctx.wants = operator, lengths, positions, wants
        ctx.floating = [o.is_floating_point() for o in outputs]
        ctx.mark_non_differentiable(*[o for o, f in zip(outputs, ctx.floating, strict=True) if not f])
        ctx.spread = [None if i in positions else x for i, x in enumerate(spread)]
        ctx.spread[0] = None if operator.takes_graph else ctx.spread[0]  # the edge_index: saved below
        graph = [flat[0]] if operator.takes_graph else []
        keeps = operator.saves_outputs
        ctx.outputs_kept = tuple(keeps(flat[operator.offset :]) if callable(keeps) else keeps)
        ctx.save_for_backward(*graph, *slots, *[outputs[i] for i in ctx.outputs_kept])
        ctx.num_outputs = len(outputs)
        ctx.held = None if operator.holds is None else operator.holds(flat[operator.offset :])  # alive till backward
        return out

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):  # noqa: D102
        operator: Operator = ctx.operator
        saved, spread = iter(ctx.saved_tensors), list(ctx.spread)
        if operator.takes_graph:
            spread[0] = next(saved)
        for position in ctx.positions:
            spread[position] = next(saved)
        outputs: list[torch.Tensor | None] = [None] * ctx.num_outputs
        for i in ctx.outputs_kept:
            outputs[i] = next(saved)
        flat = spread if ctx.lengths is None else _gathered(spread, ctx.lengths)
        floating = [g.contiguous() for g, f in zip(grads, ctx.floating, strict=True) if f]
        results = operator.backward(*flat, outputs, floating, ctx.wants)
        spread_grads: list[torch.Tensor | None] = [None] * len(spread)
        for position, result, want in zip(ctx.positions, results, ctx.wants, strict=True):
            spread_grads[position] = result if want else None
        return None, None, *spread_grads


def _gathered(spread: Sequence[Any], lengths: Sequence[int | None]) -> list[Any]:
    """The arguments with their lists gathered again from ``spread``."""
    flat, it = [], iter(spread)
    for n in lengths:
        flat.append(next(it) if n is None else [next(it) for _ in range(n)])
    return flat


def _stand_in(x: torch.Tensor) -> torch.Tensor:
    """``x``'s shape and dtype without its memory: an expanded scalar."""
    return torch.empty((), dtype=x.dtype, device=x.device).expand(x.shape)


def operator(
    name: str,
    fake: Callable,
    gradient: Callable | None = None,
    saves: Sequence[str] | Saves | None = None,
    saves_outputs: Sequence[int] | Callable[[Sequence[Any]], Sequence[int]] = (),
    autocast: Cast | None = None,
    holds: Callable[[Sequence[Any]], Any] | None = None,
) -> Callable[[Callable], Operator]:
    """Register the decorated implementation as ``featgraph::<name>``.

    ``fake(*args)``: the outputs' shapes from the inputs' (a ``GraphRef`` for the graph). ``gradient(*args,
    outputs, grads, wants)``: one gradient (or None) per tensor argument after the graph (a list's elements one
    each), where ``wants`` says so; the tensors in ``args`` not named in ``saves`` (all are, by default; a
    function ``saves(args, wants)`` may say per tensor) carry only their shape and dtype, and ``outputs`` holds
    the outputs at ``saves_outputs`` (or ``saves_outputs(args)``; None elsewhere). ``autocast(device_type,
    args)``: the arguments cast for that device's autocast region. ``holds(args)``: a Python object the gradient
    needs that the arguments only name (a kernel by its key), kept alive until backward."""
    return lambda forward: Operator(name, forward, fake, gradient, saves, saves_outputs, autocast, holds)


@operator("in_degrees", lambda ref: ref.edge_index.new_empty(ref.num_dst_nodes, dtype=torch.int64))
def in_degrees(g: Graph) -> torch.Tensor:
    """Each destination's in-degree (a copy of the graph's cached one): ``GraphRef.in_degrees`` in traced code."""
    return g.in_degrees().clone()
