// Counter-based dropout, one elementwise pass over n elements (featgraph/backends/cpu/dropout.py). The source
// typedefs T (the compute type) and the prelude before this text, and defines O (the data's element type),
// fg_load (O -> T), fg_store (T -> O) and FG_FORM, one of:
#define FG_DROPOUT 0    // out[i] = in[i] * (fg_keep(seed, i) ? scale : 0): a dropped NaN or infinity is NaN
#define FG_RELU 1       // the same of relu(in[i]) (NaN kept, as torch keeps it): dropout after ReLU in one pass
#define FG_RELU_GRAD 2  // its gradient: out[i] = fg_keep(seed, i) && gate[i] > 0 ? in[i] * scale : 0 (NaN
                        // counted as positive), gate the forward's output
// ptr: in, out (and gate for FG_RELU_GRAD); arg: n, seed, threshold (drop when the 24 hash bits are below it),
// threads, and the scale 1 / (1 - p) as the bit pattern of a double (what torch multiplies by).
#include <omp.h>
extern "C" void run(void** ptr, const int64_t* arg) {
  const O* __restrict__ in = (const O*)ptr[0];
  O* __restrict__ out = (O*)ptr[1];
  [[maybe_unused]] const O* __restrict__ gate = (const O*)ptr[2];
  const int64_t n = arg[0];
  const uint64_t seed = (uint64_t)arg[1], threshold = (uint64_t)arg[2];
  double scale_bits;
  std::memcpy(&scale_bits, &arg[4], sizeof(double));
  const T scale = (T)scale_bits;
  #pragma omp parallel for simd schedule(static) num_threads((int)arg[3])
  for (int64_t i = 0; i < n; ++i) {
    const bool kept = fg_keep(seed, i, threshold);
#if FG_FORM == FG_RELU_GRAD
    // kept and positive (or NaN) output: a dropped non-finite input left NaN in the output, yet no gradient
    out[i] = fg_store(kept & !(fg_load(gate[i]) <= (T)0) ? fg_load(in[i]) * scale : (T)0);
#else
    const T x = fg_load(in[i]);
#if FG_FORM == FG_RELU
    const T value = x <= (T)0 ? (T)0 : x;  // NaN passes, as in torch's relu
#else
    const T value = x;
#endif
    out[i] = fg_store(value * (kept ? scale : (T)0));  // times 0 where dropped, as torch's mask multiplies
#endif
  }
}
