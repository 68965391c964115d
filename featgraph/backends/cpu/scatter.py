"""The max/min gradient as one CPU kernel: each output element's gradient is added to the row its winning
edge names (``rows[arg]``: the edge's source vertex, or the edge itself). Threads own column ranges, so the
scatter needs no atomics and its result does not depend on the thread count."""

from __future__ import annotations

CTYPES = {"float32": "float", "float64": "double"}


def winner_scatter_source(dtype: str) -> str:
    """``out[rows[arg[v, i]], i] += grad[v, i]`` wherever ``arg[v, i] >= 0`` (``rows`` null: the identity).

    ptr: grad (n x F), arg (n x F, int64 edge ids), rows (int64, or null), out (m x F, zeroed);
    arg: n, F, threads."""
    return f"""#include <cstdint>
#include <omp.h>
typedef {CTYPES[dtype]} T;
extern "C" void run(void** ptr, const int64_t* arg) {{
  const T* __restrict__ grad = (const T*)ptr[0];
  const int64_t* __restrict__ win = (const int64_t*)ptr[1];
  const int64_t* __restrict__ rows = (const int64_t*)ptr[2];
  T* __restrict__ out = (T*)ptr[3];
  const int64_t n = arg[0], F = arg[1];
  #pragma omp parallel num_threads((int)arg[2])
  {{
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = F * t / nt, hi = F * (t + 1) / nt;
    for (int64_t v = 0; v < n; ++v) {{
      const int64_t* __restrict__ w = win + v * F;
      const T* __restrict__ g = grad + v * F;
      for (int64_t i = lo; i < hi; ++i) {{
        const int64_t e = w[i];
        if (e >= 0) out[(rows ? rows[e] : e) * F + i] += g[i];
      }}
    }}
  }}
}}
"""
