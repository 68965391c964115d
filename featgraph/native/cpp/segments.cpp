// Segment pointers of a CSR whose rows list their columns in ascending order (featgraph/graph/partition.py):
// with the column ids cut at boundaries[0] = 0 < ... < boundaries[K] into K segments, segment k's edges in
// row v are pointers[v * K + k] : pointers[v * K + k + 1], found by binary search in the row: O(rows K log
// degree), no per-edge work, so one sorted CSR serves every segment count.
#include <algorithm>
#include <cstdint>
#include <omp.h>

// ptr: indptr (rows + 1), indices (E), boundaries (K + 1, int64), pointers (rows * K + 1), the index arrays of
// type Index; arg: sizeof(Index), rows, K, threads
template <typename Index>
static void segments(void** ptr, const int64_t* arg) {
  const Index* indptr = (const Index*)ptr[0];
  const Index* indices = (const Index*)ptr[1];
  const int64_t* boundaries = (const int64_t*)ptr[2];
  Index* pointers = (Index*)ptr[3];
  const int64_t rows = arg[1], parts = arg[2];
  #pragma omp parallel for schedule(static) num_threads((int)std::max<int64_t>(1, arg[3]))
  for (int64_t v = 0; v < rows; ++v) {
    const Index* first = indices + indptr[v];
    const Index* last = indices + indptr[v + 1];
    pointers[v * parts] = indptr[v];
    for (int64_t k = 1; k < parts; ++k) {
      pointers[v * parts + k] = (Index)(std::lower_bound(first, last, (Index)boundaries[k]) - indices);
    }
  }
  pointers[rows * parts] = indptr[rows];
}

extern "C" void run(void** ptr, const int64_t* arg) {
  arg[0] == 4 ? segments<int32_t>(ptr, arg) : segments<int64_t>(ptr, arg);
}
