"""The precision each op runs in under ``torch.autocast``: one rule table for every op and operator.

Aggregations (SpMM, SDDMM, the fused GCN and GAT aggregations, the attention kernels) run in the autocast
dtype, as torch runs matmul: their floating inputs are cast down (float64 ones are left alone, as torch's
autocast leaves them) and the kernels accumulate in float32 inside. ``edge_softmax`` runs in float32, as
torch's softmax under CUDA autocast: its inputs are cast up, so the exponentials and their per-destination
sums never round to 8 bits. Ops absent from the table (dropout) run in their input's dtype. Outside autocast
nothing is cast.

The op functions cast at their entry (``autocast_inputs``), before eager kernels or, in code being compiled,
the ``featgraph::`` operators; the operators called directly follow the same table (``caster``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..operator import AUTOCAST_DEVICE_TYPES

AUTOCAST = "autocast"  # the autocast dtype (bfloat16 or float16)
FLOAT32 = "float32"

RULES: dict[str, str] = {
    "gspmm": AUTOCAST,
    "gsddmm": AUTOCAST,
    "gcn_aggregate": AUTOCAST,
    "gat_attention": AUTOCAST,
    "gatv2_scores": AUTOCAST,
    "dot_scores": AUTOCAST,
    "weighted_edge_sum": AUTOCAST,
    "relu_edge_sum": AUTOCAST,
    "projected_relu_edge_sum": AUTOCAST,
    "edge_conv_messages": AUTOCAST,
    "linear_sum": AUTOCAST,
    "linear": AUTOCAST,
    "edge_softmax": FLOAT32,
}


def autocast_dtype(op: str, device_type: str) -> torch.dtype | None:
    """The dtype ``op`` runs in under ``device_type``'s autocast (None for an op without a rule)."""
    rule = RULES.get(op)
    if rule is None:
        return None
    return torch.get_autocast_dtype(device_type) if rule == AUTOCAST else torch.float32


def _cast(x: Any, dtype: torch.dtype) -> Any:
    """A floating tensor other than float64 in ``dtype``; anything else as it is."""
    if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float64 and x.dtype != dtype:
        return x.to(dtype)
    return x


def _device_type(args: Sequence[Any]) -> str | None:
    return next((x.device.type for x in args if isinstance(x, torch.Tensor)), None)


def autocast_inputs(op: str, *args: Any) -> tuple[Any, ...]:
    """``args`` with their floating tensors in the dtype ``op`` runs in under the current autocast (the
    device of the first tensor decides which autocast applies); unchanged outside autocast."""
    device_type = _device_type(args)
    if device_type not in AUTOCAST_DEVICE_TYPES:  # the device types whose autocast the operators follow
        # e.g. meta tensors, which have no autocast: the op's own checks name the device. A membership test
        # rather than torch.amp.is_autocast_available, which torch.compile cannot trace in torch 2.11
        return args
    if not torch.is_autocast_enabled(device_type):
        return args
    return cast_inputs(op, device_type, args)


def cast_inputs(op: str, device_type: str, args: Sequence[Any]) -> tuple[Any, ...]:
    """``args`` with their floating tensors in the dtype ``op`` runs in under ``device_type``'s autocast."""
    dtype = autocast_dtype(op, device_type)
    return tuple(args) if dtype is None else tuple(_cast(x, dtype) for x in args)


def autocast_input(op: str, x: torch.Tensor) -> torch.Tensor:
    """``autocast_inputs`` of one tensor."""
    return autocast_inputs(op, x)[0]


def with_bias(out: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """``out + bias`` for a layer that adds its bias after the aggregation: in ``out``'s dtype, as ``Linear``
    adds its bias, so under autocast every layer's output keeps the autocast dtype. (PyG's GCNConv, GATConv
    and GATv2Conv add a float32 bias to a 16-bit aggregation and return float32: a full-width copy of each
    hidden layer, cast down again by the next layer's matmul, forward and backward.)"""
    return out if bias is None else out + bias.to(out.dtype)


def caster(op: str) -> Callable[[str, Sequence[Any]], tuple[Any, ...]] | None:
    """The cast the operator ``featgraph::<op>`` applies under autocast (``featgraph.operator``): the table's rule
    for ``op``, or None where it has none."""
    if op not in RULES:
        return None
    return lambda device_type, args: cast_inputs(op, device_type, args)
