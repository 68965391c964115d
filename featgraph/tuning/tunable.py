"""``spmm`` and ``sddmm`` with the ``tune`` option, as ``featgraph.spmm``/``featgraph.sddmm`` and the ops call them.

The templates know nothing of the tuner: they take a ``tuner`` and build their kernels through it, gradient
kernels included. Here, above both, ``tune=True`` hands them ``search.tune``.
"""

from __future__ import annotations

from typing import Any

from ..graph import Graph
from ..templates import sddmm as sddmm_template
from ..templates import spmm as spmm_template
from ..templates.kernel import Fds, Tuner, UdfOrOp
from ..templates.sddmm import SDDMMKernel
from ..templates.spmm import SpMMKernel
from .search import tune as search


def _tuner(tune: bool) -> Tuner | None:
    return search if tune else None


def spmm(
    graph: Graph,
    msgfunc: UdfOrOp,
    reducer: str,
    target: str | None = None,
    fds: Fds = None,
    tune: bool = False,
    **template_params: Any,
) -> SpMMKernel:
    """Compile a generalized SpMM: ``out[v] = reducer over edges (u -> v) of msgfunc(u, v, e)``
    (``featgraph.templates.spmm``, which describes the reducers and ``template_params``).

    ``tune=True`` searches the parameters not given here and the FDS split factor for this graph and shape
    (``featgraph.tuning.tune``; cached on disk), for the kernel and for its gradient kernels when they are
    built.
    """
    return spmm_template(graph, msgfunc, reducer, target, fds, _tuner(tune), **template_params)


def sddmm(
    graph: Graph,
    edgefunc: UdfOrOp,
    target: str | None = None,
    fds: Fds = None,
    tune: bool = False,
    **template_params: Any,
) -> SDDMMKernel:
    """Compile a generalized SDDMM: ``out[e] = edgefunc(src[e], dst[e], e)`` for every edge
    (``featgraph.templates.sddmm``, which describes ``template_params``).

    ``tune=True`` searches the parameters not given here and the FDS split factor, for the kernel and for its
    gradient kernels when they are built.
    """
    return sddmm_template(graph, edgefunc, target, fds, _tuner(tune), **template_params)
