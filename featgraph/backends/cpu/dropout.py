"""Counter-based dropout on CPU: the keep decision for element ``i`` is ``fg_keep(seed, i)`` (the hash in
the code generator's prelude, shared with UDFs that use ``te.keep``), so the mask is never stored (the
backward pass recomputes it) and every thread draws independently. torch's CPU ``bernoulli_`` draws from one
sequential generator and dominates small-graph training epochs."""

from __future__ import annotations

from .codegen import KEEP_BITS, PRELUDE, read_element, storage_type, write_element

# the compute type per dtype: float16/bfloat16 elements are read as their 16 bits and scaled in float32
CTYPES = {"float32": "float", "float64": "double", "float16": "float", "bfloat16": "float"}
__all__ = ["CTYPES", "FORMS", "KEEP_BITS", "dropout_source"]


FORMS = ("dropout", "relu", "relu_grad")


def dropout_source(dtype: str, form: str = "dropout") -> str:
    """One elementwise pass over ``n`` elements, OpenMP parallel and vectorised, per ``form``:

    - ``"dropout"``: ``out[i] = fg_keep(seed, i) ? in[i] * scale : 0``;
    - ``"relu"``: the same of ``relu(in[i])`` (NaN kept, as torch keeps it), dropout after ReLU in one pass;
    - ``"relu_grad"``: its gradient, ``out[i] = gate[i] > 0 ? in[i] * scale : 0`` (NaN counted as positive)
      with ``gate`` the forward's output (positive exactly where the input was positive and kept), so no mask
      is drawn again.

    ptr: in, out (and gate for "relu_grad"); arg: n, seed, threshold (drop when the 24 hash bits are below it),
    threads, and the scale 1 / (1 - p) as the bit pattern of a double (what torch multiplies by).
    float16/bfloat16 data is scaled in float32 and rounded once to its dtype."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    value = read_element(dtype, "in[i]")
    kept = {
        "dropout": "fg_keep(seed, i, threshold)",
        # one select (std::max did not vectorise); NaN passes, as torch's relu keeps it
        "relu": f"(fg_keep(seed, i, threshold) & !({value} <= (T)0))",
        "relu_grad": f"!({read_element(dtype, 'gate[i]')} <= (T)0)",  # a NaN output passes, as in torch's relu
    }[form]
    element = write_element(dtype, f"{kept} ? {value} * scale : (T)0")
    return f"""typedef {CTYPES[dtype]} T;
{PRELUDE}
typedef {storage_type(dtype)} S;
#include <omp.h>
extern "C" void run(void** ptr, const int64_t* arg) {{
  const S* __restrict__ in = (const S*)ptr[0];
  S* __restrict__ out = (S*)ptr[1];
  const S* __restrict__ gate = (const S*)ptr[2];
  const int64_t n = arg[0];
  const uint64_t seed = (uint64_t)arg[1], threshold = (uint64_t)arg[2];
  double scale_bits;
  std::memcpy(&scale_bits, &arg[4], sizeof(double));
  const T scale = (T)scale_bits;
  #pragma omp parallel for simd schedule(static) num_threads((int)arg[3])
  for (int64_t i = 0; i < n; ++i) out[i] = {element};
}}
"""
