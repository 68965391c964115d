"""One mechanism for the builtin ops: a UDF over operands, placed by where its result lives.

A result per edge (``e``) is an SDDMM; a result per destination (``v``) is an SpMM over in-edges. Kernels
are built once per graph and signature and kept on the graph; their gradients are their own
(``templates.gradients``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..graph import Graph
from ..templates.kernel import Kernel, cached_kernel, shared_op
from ..tuning import sddmm, spmm
from .checks import vertex_rows
from .udfs import Combine, Operand, elementwise_udf, operand, udf_shapes


def run(
    g: Graph,
    target: str,
    inputs: Sequence[tuple[str, str, torch.Tensor]],
    combine: Combine,
    key: str,
    reducer: str = "sum",
    return_arg: bool = False,
    **options,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Evaluate ``combine`` of the ``inputs`` for every element of ``target``: ``bind``'s kernel run, with
    ``return_arg`` also max/min's winners. No autograd: the ops run it inside their operators, whose gradients
    are their own."""
    kernel, tensors = bind(g, target, inputs, combine, key, reducer, **options)
    out, arg = kernel.evaluate(tensors, want_arg=return_arg)
    return (out, arg) if return_arg else out


def bind(
    g: Graph,
    target: str,
    inputs: Sequence[tuple[str, str, torch.Tensor]],
    combine: Combine,
    key: str,
    reducer: str = "sum",
    reduce_last: bool = False,
    strategy: str = "gar",
    tune: bool = False,
) -> tuple[Kernel, dict[str, torch.Tensor]]:
    """The kernel evaluating ``combine`` of the ``inputs`` ((name, target, tensor) triples; 1-D tensors are
    read as one feature) for every element of ``target`` (``v``/``e``), reducing over edges with
    ``reducer`` (built once per graph and signature; ``tune`` tunes it on first use, the strategy staying as
    given), and the tensors it is called with, by name; ``reduce_last`` as ``udfs.elementwise_udf``'s."""
    if target not in ("v", "e"):
        raise ValueError(f"target must be 'v' or 'e', got {target!r}")
    operands = [operand(name, t, _as_2d(x)) for name, t, x in inputs]
    _check(g, operands)
    if target != "e":
        _, shape = udf_shapes(operands, reduce_last)
        strategy = choose_strategy(g, reducer, math.prod(shape), strategy)
    signature = (key, target, reducer, tuple(operands), reduce_last, strategy, tune)

    def build():  # the UDF is traced once per signature, whatever the graph (``shared_op``)
        row_free = ("elementwise", key, target, tuple(o.row_free for o in operands), reduce_last)
        udf = shared_op(row_free, lambda *variables: elementwise_udf(operands, combine, reduce_last)[0](*variables))
        if target == "e":
            return sddmm(g, udf, tune=tune)
        return spmm(g, udf, reducer, tune=tune, strategy=strategy)

    kernel = cached_kernel(g, ("op-kernel", signature), build)
    return kernel, {name: _as_2d(x) for name, _, x in inputs}


GAS_MAX_WIDTH = 2


def choose_strategy(g: Graph, reducer: str, width: int, strategy: str = "auto") -> str:
    """GAR (CSR, vertex-centric) or GAS (COO, atomics) for an aggregation.

    GAS's atomic adds cost far more than the one-off CSR build at every width but the narrowest
    (``featgraph bench kernels --ablation``), so ``auto`` takes GAS only for messages of width <= 2 (e.g.
    degree or softmax sums) on a graph whose CSR is not built yet, and GAR otherwise; max/min/logsumexp
    always take GAR.
    """
    if strategy not in ("auto", "gar", "gas"):
        raise ValueError(f"strategy must be 'auto', 'gar' or 'gas', got {strategy!r}")
    if strategy != "auto":
        return strategy
    if reducer not in ("sum", "mean") or g.has_csr() or width > GAS_MAX_WIDTH:
        return "gar"
    return "gas"


def _as_2d(x: torch.Tensor) -> torch.Tensor:
    return x.unsqueeze(1) if x.dim() == 1 else x


def _check(g: Graph, operands: Sequence[Operand]) -> None:
    if len({o.dtype for o in operands}) > 1:
        dtypes = ", ".join(f"{o.name} {o.dtype}" for o in operands)
        raise TypeError(f"{' and '.join(o.name for o in operands)} must share one dtype, got {dtypes}")
    for o in operands:
        rows, what = (g.num_edges, "the graph's edges") if o.target == "e" else vertex_rows(g, o.target)
        if o.rows != rows:
            raise ValueError(f"{o.name} is {o.target}-data and needs {rows} rows ({what}), got {o.rows}")
