"""Differentiable graph ops with DGL's names, all lowered through featgraph's templates.

``gspmm``/``gsddmm`` with broadcasting, ``edge_softmax``, ``segment_reduce``, ``dropout``, the grouped products
``gather_mm``/``segment_mm`` and R-GCN's ``relational_aggregate``, ``linear`` (which skips a mostly-zero
input's zeros), and the named shortcuts
(``copy_u_sum``, ``u_mul_e_max``, ``u_add_v``, ``u_dot_v``, ``e_div_v``, ...) generated from one table.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..graph import Graph
from .dropout import dropout
from .edge_softmax import edge_softmax
from .grouped_mm import gather_mm, segment_matmul, segment_mm
from .gsddmm import gsddmm
from .gspmm import REDUCERS, gspmm
from .linear import linear
from .segment import segment_reduce
from .tensor_core import tc_sddmm, tc_spmm

_SPMM_SHORTCUT_OPS = {
    "copy_u": "copy_lhs",
    "copy_e": "copy_rhs",
    **{f"u_{o}_e": o for o in ("add", "sub", "mul", "div")},
}
_SDDMM_SHORTCUT_OPS = ("add", "sub", "mul", "div", "dot")


def _data(name: str, data: tuple, count: int) -> tuple:
    if len(data) != count:
        raise TypeError(f"{name} takes the graph and {count} tensor{'s' * (count > 1)}, got {len(data)}")
    return data


def _spmm_shortcut(name: str, op: str, reduce: str) -> Callable[..., torch.Tensor]:
    def shortcut(g: Graph, *data: torch.Tensor, **options) -> torch.Tensor:
        if op in ("copy_lhs", "copy_rhs"):
            (x,) = _data(name, data, 1)
            lhs, rhs = (x, None) if op == "copy_lhs" else (None, x)
        else:
            lhs, rhs = _data(name, data, 2)
        return gspmm(g, op, reduce, lhs, rhs, **options)

    return shortcut


def _sddmm_shortcut(name: str, op: str, lhs_target: str, rhs_target: str | None) -> Callable[..., torch.Tensor]:
    def shortcut(g: Graph, *data: torch.Tensor, **options) -> torch.Tensor:
        if rhs_target is None:  # copy_u / copy_v: node data onto the edges
            return gsddmm(g, "copy_lhs", *_data(name, data, 1), None, lhs_target, lhs_target, **options)
        return gsddmm(g, op, *_data(name, data, 2), lhs_target, rhs_target, **options)

    return shortcut


def _shortcuts() -> dict[str, Callable[..., torch.Tensor]]:
    table: dict[str, Callable[..., torch.Tensor]] = {}
    for prefix, op in _SPMM_SHORTCUT_OPS.items():
        for reduce in REDUCERS:
            table[f"{prefix}_{reduce}"] = _spmm_shortcut(f"{prefix}_{reduce}", op, reduce)
    for lhs in "uve":
        for rhs in "uve":
            if lhs != rhs:
                for op in _SDDMM_SHORTCUT_OPS:
                    table[f"{lhs}_{op}_{rhs}"] = _sddmm_shortcut(f"{lhs}_{op}_{rhs}", op, lhs, rhs)
    table["copy_u"] = _sddmm_shortcut("copy_u", "copy_lhs", "u", None)
    table["copy_v"] = _sddmm_shortcut("copy_v", "copy_lhs", "v", None)
    for name, fn in table.items():
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = f"DGL's ``{name}``: see ``gspmm``/``gsddmm`` (keyword options such as ``tune`` pass on)."
    return table


SHORTCUTS = _shortcuts()
globals().update(SHORTCUTS)

from .fused import gat_attention, gcn_aggregate  # noqa: E402 - built on the shortcuts above
from .relational import relational_aggregate  # noqa: E402 - built on gspmm

__all__ = [
    "SHORTCUTS",
    "dropout",
    "edge_softmax",
    "gat_attention",
    "gather_mm",
    "gcn_aggregate",
    "gsddmm",
    "gspmm",
    "linear",
    "relational_aggregate",
    "segment_matmul",
    "segment_mm",
    "segment_reduce",
    "tc_sddmm",
    "tc_spmm",
    *SHORTCUTS,
]
