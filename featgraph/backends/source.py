"""A kernel spec lowered to a backend's source text, the same text for the same UDF however often it is
traced, and remembered so that a UDF traced again (for every mini-batch's graph) is lowered once."""

from __future__ import annotations

from types import ModuleType

from ..kernel_spec import KernelSpec, spec_key
from ..recent import Recent
from .expression import number_reduce_variables

_sources: Recent[str] = Recent(512)  # generated sources remembered by ``template_source`` (a few kB each)


def lower(spec: KernelSpec, templates: ModuleType) -> str:
    """``spec`` lowered by a backend's ``templates`` module (its ``spmm_source``, ``gas_source``,
    ``sddmm_source``, ``edge_sum_source`` and ``winner_source``), identical for identical UDFs
    (``expression.number_reduce_variables``), so the disk caches are hit by a UDF traced again."""
    if spec.kind in ("sddmm", "edge_sum", "winner"):
        text = getattr(templates, f"{spec.kind}_source")(spec)
    else:
        text = templates.gas_source(spec) if spec.params.strategy == "gas" else templates.spmm_source(spec)
    return number_reduce_variables(text, spec.op)


def template_source(spec: KernelSpec, templates: ModuleType) -> str:
    """``lower(spec, templates)``, remembered for the 512 most recent specs by
    ``kernel_spec.spec_key`` and what the backend's source reads of the placeholders' row counts (its
    templates' ``size_key``): lowering a GAT layer's kernels again would cost each fresh mini-batch step about
    4 ms (format share: ``featgraph bench minibatch``)."""
    key = (templates.__name__, spec_key(spec), templates.size_key(spec))
    return _sources.get(key, lambda: lower(spec, templates))
