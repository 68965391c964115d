// Each edge's distance along the Hilbert curve of the 2^order x 2^order grid at (src, dst), the classic xy2d
// one edge at a time, edges split over threads (featgraph/graph/hilbert.py: hilbert_edge_order; its
// hilbert_index is the same walk over whole arrays, a dozen passes per level).
#include <algorithm>
#include <cstdint>
#include <omp.h>

static const int64_t GRAIN = 16384;  // edges per thread, at least

// ptr: src (E, int64), dst (E, int64), keys (E, int64, written); arg: E, order, threads
extern "C" void run(void** ptr, const int64_t* arg) {
  const int64_t* src = (const int64_t*)ptr[0];
  const int64_t* dst = (const int64_t*)ptr[1];
  int64_t* keys = (int64_t*)ptr[2];
  const int64_t num_edges = arg[0], order = arg[1];
  const int threads = (int)std::max<int64_t>(1, std::min(arg[2], num_edges / GRAIN));
  const int64_t top = order > 0 ? int64_t(1) << (order - 1) : 0;
  #pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t e = 0; e < num_edges; ++e) {
    int64_t x = src[e], y = dst[e], d = 0;
    for (int64_t s = top; s > 0; s >>= 1) {
      const int64_t rx = (x & s) > 0, ry = (y & s) > 0, low = s - 1;
      d += s * s * ((3 * rx) ^ ry);
      // rotate the quadrant so the sub-curve has the canonical orientation, without branches (random ids
      // mispredict them): where ry is 0, flip both (s - 1 - x is ~x in the low bits) if rx is 1, then swap
      const int64_t flip = -(rx & (ry ^ 1)) & low, swap = ((x ^ y) & -(ry ^ 1));
      x = (x ^ flip ^ swap) & low;
      y = (y ^ flip ^ swap) & low;
    }
    keys[e] = d;
  }
}
