"""Counter-based dropout on CPU: the keep decision for element ``i`` is a hash of (seed, i), so the mask
is never stored (the backward pass recomputes it) and every thread draws independently. torch's CPU
``bernoulli_`` draws from one sequential generator and dominates small-graph training epochs."""

from __future__ import annotations

CTYPES = {"float32": "float", "float64": "double"}
KEEP_BITS = 24  # the keep test compares 24 uniform bits against round(p * 2^24)


def dropout_source(dtype: str) -> str:
    """``out[i] = keep(seed, i) ? in[i] * scale : 0`` over ``n`` elements, OpenMP parallel and vectorised.

    ptr: in, out; arg: n, seed, threshold (drop when the 24 hash bits are below it), threads, and the scale
    1 / (1 - p) as the bit pattern of a double (what torch multiplies by)."""
    return f"""#include <cstdint>
#include <cstring>
#include <omp.h>
typedef {CTYPES[dtype]} T;
static inline uint64_t mix(uint64_t z) {{  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}}
extern "C" void run(void** ptr, const int64_t* arg) {{
  const T* __restrict__ in = (const T*)ptr[0];
  T* __restrict__ out = (T*)ptr[1];
  const int64_t n = arg[0];
  const uint64_t seed = (uint64_t)arg[1], threshold = (uint64_t)arg[2];
  double scale_bits;
  std::memcpy(&scale_bits, &arg[4], sizeof(double));
  const T scale = (T)scale_bits;
  #pragma omp parallel for simd schedule(static) num_threads((int)arg[3])
  for (int64_t i = 0; i < n; ++i) {{
    const uint64_t bits = mix(seed + (uint64_t)i * 0x9e3779b97f4a7c15ULL) >> {64 - KEEP_BITS};
    out[i] = bits >= threshold ? in[i] * scale : (T)0;
  }}
}}
"""
