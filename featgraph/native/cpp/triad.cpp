// A STREAM-like triad, a = b + 3 c, for the roofline's bandwidth (featgraph/bench/roofline.py).
#include <cstdint>
extern "C" void run(void** ptr, const int64_t* arg) {
  float* __restrict__ a = (float*)ptr[0];
  const float* __restrict__ b = (const float*)ptr[1];
  const float* __restrict__ c = (const float*)ptr[2];
  const int64_t n = arg[0];
  #pragma omp parallel for simd schedule(static) num_threads((int)arg[1])
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
}
