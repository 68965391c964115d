// The roofline's gather: every thread sums uniformly random rows of WIDTH elements in float chunks of CHUNK,
// prefetching PF rows ahead (featgraph/bench/roofline.py). The source typedefs T (float) and the prelude
// before this text, and defines O (the rows' element type), fg_load (O -> T), WIDTH and CHUNK.
#include <omp.h>
constexpr int64_t PF = 8;
extern "C" void run(void** ptr, const int64_t* arg) {
  const O* __restrict__ a = (const O*)ptr[0];
  const int32_t* __restrict__ rows = (const int32_t*)ptr[1];
  float* __restrict__ sums = (float*)ptr[2];
  const int64_t count = arg[0];
  #pragma omp parallel num_threads((int)arg[1])
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = count * t / nt, hi = count * (t + 1) / nt;
    float acc[CHUNK] = {};
    for (int64_t j = lo; j < hi; ++j) {
      if (j + PF < hi) __builtin_prefetch(a + (int64_t)rows[j + PF] * WIDTH);
      const O* __restrict__ r = a + (int64_t)rows[j] * WIDTH;
      for (int64_t c = 0; c < WIDTH; c += CHUNK) {
        #pragma omp simd
        for (int64_t k = 0; k < CHUNK; ++k) acc[k] += fg_load(r[c + k]);
      }
    }
    float total = 0;
    for (int64_t k = 0; k < CHUNK; ++k) total += acc[k];
    sums[t] = total;
  }
}
