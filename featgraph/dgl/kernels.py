"""featgraph's versions of DGL's kernel entry points, each with DGL's signature and DGL's original as fallback.

Each replacement converts DGL's graph index to a featgraph ``Graph`` (``graphs.graph_of``, once per index) and
calls the featgraph op of the same name; gradients come from that op. A call featgraph does not serve (a
dtype, an op, an ``eids`` subset, mismatched shapes DGL would reject, ...) is refused before any kernel runs
and goes to DGL's original, so the answer or the error is DGL's own. Every call is counted by who served it
(``calls``), so a test or a user can see that featgraph's kernels really ran.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

import torch

from .. import ops
from ..graph import Graph
from ..ops.gsddmm import SDDMM_OPS, TARGETS
from ..ops.gspmm import SPMM_OPS
from ..ops.udfs import TORCH_TO_TE
from . import graphs

FEATGRAPH = "featgraph"
_COUNTS: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
_COUNTS_LOCK = threading.Lock()


class Refused(Exception):
    """featgraph does not serve this call; ``reason`` says why (DGL's original runs instead)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Invalid(Exception):
    """The call is wrong whoever serves it (where DGL's own kernel would read out of bounds and answer with
    garbage): the caller gets DGL's ``DGLError`` with this message."""


def _record(entry: str, served_by: str) -> None:
    with _COUNTS_LOCK:
        _COUNTS[entry][served_by] += 1


def calls() -> dict[str, dict[str, int]]:
    """Calls per entry point since the last ``reset_calls``: ``"featgraph"`` counts the calls featgraph
    served, every other key is the reason a call went to DGL's original."""
    with _COUNTS_LOCK:
        return {entry: dict(counter) for entry, counter in _COUNTS.items()}


def reset_calls() -> None:
    """Zero the counts ``calls`` reports."""
    with _COUNTS_LOCK:
        _COUNTS.clear()


def routing(entry: str, serve: Callable[..., Any], original: Callable[..., Any]) -> Callable[..., Any]:
    """DGL's ``original`` entry point served by ``serve`` where it can, else by ``original`` itself. A
    featgraph error counts as a refusal too: DGL then gives its own answer or its own error."""

    def routed(*args: Any, **kwargs: Any) -> Any:
        try:
            out = serve(*args, **kwargs)
        except Refused as refusal:
            _record(entry, refusal.reason)
            return original(*args, **kwargs)
        except Invalid as invalid:
            from dgl import DGLError

            _record(entry, "invalid")
            raise DGLError(str(invalid)) from None
        except Exception as error:  # noqa: BLE001 - never a featgraph crash where DGL can answer
            _record(entry, f"featgraph raised {type(error).__name__}: {error}")
            return original(*args, **kwargs)
        _record(entry, FEATGRAPH)
        return out

    routed.__name__ = routed.__qualname__ = getattr(original, "__name__", entry)
    routed.__doc__ = f"DGL's ``{entry}`` served by featgraph (``featgraph.dgl``); DGL's own where refused."
    routed.__wrapped__ = original  # type: ignore[attr-defined]
    routed.featgraph_entry = entry  # type: ignore[attr-defined]
    return routed


# ---- argument checks: each refuses with the reason ------------------------------------------------------
def floating(name: str, x: Any) -> torch.Tensor:
    """``x``, refused unless it is a non-scalar tensor of a dtype featgraph's kernels take."""
    if not isinstance(x, torch.Tensor):
        raise Refused(f"{name} is not a tensor")
    if x.dtype not in TORCH_TO_TE:
        raise Refused(f"{name} dtype {x.dtype} (featgraph serves {', '.join(map(str, TORCH_TO_TE))})")
    if x.dim() == 0:
        raise Refused(f"{name} is a scalar")
    return x


def _operands(lhs: torch.Tensor | None, rhs: torch.Tensor | None, device: torch.device) -> None:
    given = [(name, x) for name, x in (("lhs", lhs), ("rhs", rhs)) if x is not None]
    if not given:
        raise Refused("no operand")
    for name, x in given:
        floating(name, x)
        if x.device != device:
            raise Refused(f"{name} on {x.device}, graph on {device}")
    if len(given) == 2 and lhs.dtype != rhs.dtype:  # type: ignore[union-attr]
        raise Refused(f"mixed dtypes {lhs.dtype} and {rhs.dtype}")  # type: ignore[union-attr]


def _rows(name: str, x: torch.Tensor | None, rows: int) -> None:
    if x is not None and x.shape[0] != rows:
        raise Refused(f"{name} has {x.shape[0]} rows, expected {rows}")


def _broadcast(op: str, lhs: torch.Tensor | None, rhs: torch.Tensor | None) -> None:
    """DGL's ``infer_broadcast_shape``: NumPy broadcasting of the feature shapes, equal last sizes for dot."""
    if lhs is None or rhs is None:
        return
    left, right = tuple(lhs.shape[1:]) or (1,), tuple(rhs.shape[1:]) or (1,)
    if op == "dot" and left[-1] != right[-1]:
        raise Refused(f"dot of feature shapes {left} and {right}")
    try:
        torch.broadcast_shapes(left, right)
    except RuntimeError:
        raise Refused(f"feature shapes {left} and {right} do not broadcast") from None


def check_spmm(op: str, reduce_op: str) -> None:
    """Refuse a gspmm op or reducer featgraph does not serve (mean reaches DGL's kernels as a sum)."""
    if op not in SPMM_OPS:
        raise Refused(f"op {op!r}")
    if reduce_op not in ("sum", "max", "min"):
        raise Refused(f"reduce {reduce_op!r}")


def check_sddmm(op: str, lhs_target: str, rhs_target: str) -> None:
    """Refuse a gsddmm op or target featgraph does not serve."""
    if op not in SDDMM_OPS:
        raise Refused(f"op {op!r}")
    if lhs_target not in TARGETS or rhs_target not in TARGETS:
        raise Refused(f"targets {lhs_target!r}, {rhs_target!r}")


def _graph(gidx: Any) -> Any:
    """The index's featgraph graph; an index of several edge types is the hetero entry points' (``hetero``)."""
    if gidx.number_of_etypes() != 1:
        raise Refused(f"{gidx.number_of_etypes()} edge types")
    return graphs.graph_of(gidx)


def target_rows(g: Any, target: str) -> int:
    """The rows an operand on ``target`` (u, v or e) has."""
    return {"u": g.num_src_nodes, "v": g.num_dst_nodes, "e": g.num_edges}[target]


def _empty_rows(values: torch.Tensor, empty: torch.Tensor, reduce: str) -> torch.Tensor:
    """DGL's max/min value for rows that reduce nothing where anything is reduced at all (-inf for max, inf
    for min; DGL's callers replace them with 0 where they want 0); with nothing to reduce DGL gives 0."""
    if reduce not in ("max", "min") or bool(empty.all()) or not bool(empty.any()):
        return values
    return identity_rows(values, empty, reduce)


def identity_rows(values: torch.Tensor, empty: torch.Tensor, reduce: str) -> torch.Tensor:
    """``values`` with max's or min's identity (-inf, inf) in the ``empty`` rows."""
    mask = empty.view(-1, *([1] * (values.dim() - 1)))
    return values.masked_fill(mask, float("-inf") if reduce == "max" else float("inf"))


def served_operands(
    op: str, lhs_data: Any, rhs_data: Any, g: Graph, lhs_rows: int, rhs_rows: int
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The operands ``op`` reads (None for the one a copy ignores), with ``lhs_rows`` and ``rhs_rows`` rows,
    refused where featgraph does not serve them."""
    lhs = None if op == "copy_rhs" else lhs_data
    rhs = None if op == "copy_lhs" else rhs_data
    if (op != "copy_rhs" and lhs is None) or (op != "copy_lhs" and rhs is None):
        raise Refused(f"op {op!r} without its operands")
    _operands(lhs, rhs, g.device)
    _rows("lhs", lhs, lhs_rows)
    _rows("rhs", rhs, rhs_rows)
    _broadcast(op, lhs, rhs)
    return lhs, rhs


# ---- the entry points ------------------------------------------------------------------------------------
def gspmm(gidx: Any, op: str, reduce_op: str, lhs_data: Any, rhs_data: Any) -> torch.Tensor:
    """``dgl.backend.gspmm``: featgraph's ``gspmm`` on the index's graph."""
    check_spmm(op, reduce_op)
    g = _graph(gidx)
    lhs, rhs = served_operands(op, lhs_data, rhs_data, g, g.num_src_nodes, g.num_edges)
    out = ops.gspmm(g, op, reduce_op, lhs, rhs)
    return out if reduce_op == "sum" else _empty_rows(out, g.in_degrees() == 0, reduce_op)


def gsddmm(
    gidx: Any, op: str, lhs_data: Any, rhs_data: Any, lhs_target: str = "u", rhs_target: str = "v"
) -> torch.Tensor:
    """``dgl.backend.gsddmm``: featgraph's ``gsddmm`` on the index's graph."""
    check_sddmm(op, lhs_target, rhs_target)
    g = _graph(gidx)
    lhs, rhs = served_operands(op, lhs_data, rhs_data, g, target_rows(g, lhs_target), target_rows(g, rhs_target))
    return ops.gsddmm(g, op, lhs, rhs, lhs_target, rhs_target)


def edge_softmax(gidx: Any, logits: Any, eids: Any = "__ALL__", norm_by: str = "dst") -> torch.Tensor:
    """``dgl.backend.edge_softmax``: featgraph's ``edge_softmax``, over the reversed graph for ``norm_by="src"``."""
    from dgl.base import is_all

    if not is_all(eids):
        raise Refused("an eids subset")
    if norm_by not in ("dst", "src"):
        raise Refused(f"norm_by {norm_by!r}")
    g = _graph(gidx)
    scores = floating("logits", logits)
    if scores.device != g.device:
        raise Refused(f"logits on {scores.device}, graph on {g.device}")
    _rows("logits", scores, g.num_edges)
    return ops.edge_softmax(g.reverse() if norm_by == "src" else g, scores)


def segment_reduce(op: str, x: Any, offsets: Any) -> torch.Tensor:
    """``dgl.backend.segment_reduce``: featgraph's ``segment_reduce`` of the segments between ``offsets``."""
    if op not in ("sum", "max", "min"):
        raise Refused(f"reducer {op!r}")
    value = floating("x", x)
    if not isinstance(offsets, torch.Tensor) or offsets.dim() != 1 or offsets.is_floating_point():
        raise Refused("offsets are not a 1-D integer tensor")
    if offsets.numel() == 0 or int(offsets[0]) != 0 or int(offsets[-1]) != value.shape[0]:
        raise Refused("offsets do not run from 0 to x's rows")
    seglen = (offsets[1:] - offsets[:-1]).to(value.device)
    if bool((seglen < 0).any()):
        raise Refused("decreasing offsets")
    return _empty_rows(ops.segment_reduce(seglen, value, op), seglen == 0, op)


def gather_mm(a: Any, b: Any, idx_a: Any = None, idx_b: Any = None) -> torch.Tensor:
    """``dgl.backend.gather_mm``: featgraph's ``gather_mm`` of the rows ``a[idx_a]`` (all rows without it)."""
    if idx_b is None:
        raise Refused("no idx_b (a product with one weight per row)")
    floating("A", a)
    rows = a if idx_a is None else a.index_select(0, torch.as_tensor(idx_a, device=a.device).long())
    return ops.gather_mm(rows, b, idx_b)


def segment_mm(a: Any, b: Any, seglen_a: Any) -> torch.Tensor:
    """``dgl.backend.segment_mm``: featgraph's ``segment_mm``."""
    floating("A", a)
    return ops.segment_mm(a, b, seglen_a)


# ---- degree queries ---------------------------------------------------------------------------------------
# the format DGL's C++ core builds (where the graph allows it) to answer an in- or out-degree query
DEGREE_FORMATS = {"in": "csc", "out": "csr"}


def _degrees(direction: str, gidx: Any, etype: Any, v: Any) -> torch.Tensor:
    """Degrees of the vertices ``v`` counted once from DGL's COO (``graphs.degrees``), where DGL would build a
    whole int64 CSC or CSR to count them; refused where that format is built already or there is no COO. Ids
    out of range are an error (DGL's COO path reads past its arrays and answers with garbage)."""
    created = gidx.formats()["created"]
    needed = DEGREE_FORMATS[direction]
    if needed in created:
        raise Refused(f"DGL's {needed.upper()} is built already")
    if "coo" not in created:
        raise Refused("no COO built")
    if not isinstance(v, torch.Tensor) or v.dim() != 1 or v.is_floating_point() or v.dtype == torch.bool:
        raise Refused("node ids are not a 1-D integer tensor")
    counts = graphs.degrees(gidx, int(etype), direction)
    if v.device != counts.device:
        raise Refused(f"node ids on {v.device}, graph on {counts.device}")
    if v.numel():
        low, high = map(int, torch.aminmax(v))
        if low < 0 or high >= counts.numel():
            role = "destination" if direction == "in" else "source"
            raise Invalid(
                f"{direction}_degrees: v holds node ids {low}..{high}, outside the {counts.numel()} {role} nodes"
            )
    return counts.index_select(0, v)


def in_degrees(gidx: Any, etype: Any, v: Any) -> torch.Tensor:
    """``HeteroGraphIndex.in_degrees``: in-degrees of ``v`` from featgraph's count over DGL's COO."""
    return _degrees("in", gidx, etype, v)


def out_degrees(gidx: Any, etype: Any, v: Any) -> torch.Tensor:
    """``HeteroGraphIndex.out_degrees``: out-degrees of ``v`` from featgraph's count over DGL's COO."""
    return _degrees("out", gidx, etype, v)


SERVERS: dict[str, Callable[..., Any]] = {
    "gspmm": gspmm,
    "gsddmm": gsddmm,
    "edge_softmax": edge_softmax,
    "segment_reduce": segment_reduce,
    "gather_mm": gather_mm,
    "segment_mm": segment_mm,
    "in_degrees": in_degrees,
    "out_degrees": out_degrees,
}
