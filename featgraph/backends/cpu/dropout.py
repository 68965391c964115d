"""Counter-based dropout on CPU: the keep decision for element ``i`` is ``fg_keep(seed, i)`` (the hash in
the code generator's prelude, shared with UDFs that use ``te.keep``), so the mask is never stored (the
backward pass recomputes it) and every thread draws independently. torch's CPU ``bernoulli_`` draws from one
sequential generator and dominates small-graph training epochs."""

from __future__ import annotations

from ...native.sources import cpp_source
from .codegen import KEEP_BITS, PRELUDE, stored_type

# the compute type per dtype: float16/bfloat16 elements are read as their 16 bits and scaled in float32
CTYPES = {"float32": "float", "float64": "double", "float16": "float", "bfloat16": "float"}
__all__ = ["CTYPES", "FORMS", "KEEP_BITS", "dropout_source"]

# each form and the FG_FORM value that selects it in native/cpp/dropout.cpp
FORMS = {"dropout": "FG_DROPOUT", "relu": "FG_RELU", "relu_grad": "FG_RELU_GRAD"}


def dropout_source(dtype: str, form: str = "dropout") -> str:
    """One elementwise pass over ``n`` elements, OpenMP parallel and vectorised (``native/cpp/dropout.cpp``),
    per ``form``:

    - ``"dropout"``: ``out[i] = in[i] * (fg_keep(seed, i) ? scale : 0)``, so a dropped NaN or infinity is NaN
      as in torch, whose mask multiplies;
    - ``"relu"``: the same of ``relu(in[i])`` (NaN kept, as torch keeps it), dropout after ReLU in one pass;
    - ``"relu_grad"``: its gradient, ``out[i] = fg_keep(seed, i) && gate[i] > 0 ? in[i] * scale : 0`` (NaN
      counted as positive) with ``gate`` the forward's output, so no ReLU mask is stored.

    float16/bfloat16 data is scaled in float32 and rounded once to its dtype."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {tuple(FORMS)}, got {form!r}")
    definitions = [f"typedef {CTYPES[dtype]} T;", PRELUDE, *stored_type(dtype), f"#define FG_FORM {FORMS[form]}"]
    return "\n".join([*definitions, cpp_source("dropout.cpp")])
