"""Code-generating backends (cpu: C++/OpenMP; gpu: Triton) and the toolchain facts they need."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..templates.spec import KernelSpec


def template_source(spec: KernelSpec, templates: ModuleType) -> str:
    """``spec`` lowered by a backend's ``templates`` module (its ``spmm_source``, ``gas_source``,
    ``sddmm_source``, ``edge_sum_source`` and ``winner_source``), identical for identical UDFs
    (``expression.number_reduce_variables``), so the disk caches are hit by a UDF traced again."""
    from .expression import number_reduce_variables

    if spec.kind in ("sddmm", "edge_sum", "winner"):
        text = getattr(templates, f"{spec.kind}_source")(spec)
    else:
        text = templates.gas_source(spec) if spec.params.strategy == "gas" else templates.spmm_source(spec)
    return number_reduce_variables(text, spec.op)
