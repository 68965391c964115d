// Edges grouped by one endpoint, stably, by a parallel counting sort: O(E + groups), where a sort is
// O(E log E) (featgraph/graph/formats.py: compress). Each thread counts and places a contiguous run of edge
// ids, and a group takes thread 0's edges first, then thread 1's, so every group keeps its edges in id order.
// Asked to, each group's edges are then sorted by their other endpoint (ties keep id order): O(E log degree).
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>
#include <omp.h>

static const int64_t GRAIN = 16384;  // edges per thread, at least

// Each group's (other endpoint, edge id) pairs in ascending order, groups shared among the threads.
template <typename Index>
static void sort_groups(const Index* indptr, Index* indices, Index* edge_ids, int64_t num_groups, int threads) {
  #pragma omp parallel num_threads(threads)
  {
    std::vector<std::pair<Index, Index>> pairs;
    #pragma omp for schedule(dynamic, 256)
    for (int64_t g = 0; g < num_groups; ++g) {
      const int64_t lo = indptr[g], hi = indptr[g + 1];
      if (std::is_sorted(indices + lo, indices + hi)) continue;  // ties keep id order already
      pairs.clear();
      for (int64_t j = lo; j < hi; ++j) pairs.emplace_back(indices[j], edge_ids[j]);
      std::sort(pairs.begin(), pairs.end());
      for (int64_t j = lo; j < hi; ++j) {
        indices[j] = pairs[j - lo].first;
        edge_ids[j] = pairs[j - lo].second;
      }
    }
  }
}

// ptr: group (E, int64), other (E, int64), then the outputs indptr (G + 1), indices (E) and edge_ids (E), of
// type Index; arg: sizeof(Index), E, G, threads, whether to sort each group by the other endpoint
template <typename Index>
static void compress(void** ptr, const int64_t* arg) {
  const int64_t* group = (const int64_t*)ptr[0];
  const int64_t* other = (const int64_t*)ptr[1];
  Index* indptr = (Index*)ptr[2];
  Index* indices = (Index*)ptr[3];
  Index* edge_ids = (Index*)ptr[4];
  const int64_t num_edges = arg[1], num_groups = arg[2];
  // each thread keeps a count per group: threads x groups stays within about the edges' own number
  const int64_t most = std::min({arg[3], num_edges / GRAIN, num_edges / std::max<int64_t>(1, num_groups)});
  const int threads = (int)std::max<int64_t>(1, most);
  std::vector<int64_t> cursors((size_t)threads * num_groups, 0);  // thread t's counts, then its write positions
  std::vector<int64_t> sums(threads + 1, 0);
  indptr[0] = 0;
  #pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t first = num_edges * t / nt, last = num_edges * (t + 1) / nt;
    int64_t* mine = cursors.data() + (size_t)t * num_groups;
    for (int64_t e = first; e < last; ++e) ++mine[group[e]];
    #pragma omp barrier
    const int64_t lo = num_groups * t / nt, hi = num_groups * (t + 1) / nt;
    int64_t running = 0;
    for (int64_t g = lo; g < hi; ++g) {  // each group's size, and each thread's offset within it
      int64_t size = 0;
      for (int u = 0; u < nt; ++u) {
        int64_t& count = cursors[(size_t)u * num_groups + g];
        const int64_t before = size;
        size += count;
        count = before;
      }
      running += size;
      indptr[g + 1] = (Index)running;
    }
    sums[t + 1] = running;
    #pragma omp barrier
    #pragma omp single
    for (int u = 0; u < nt; ++u) sums[u + 1] += sums[u];
    for (int64_t g = lo; g < hi; ++g) indptr[g + 1] += (Index)sums[t];
    #pragma omp barrier
    for (int64_t g = 0; g < num_groups; ++g) mine[g] += indptr[g];
    for (int64_t e = first; e < last; ++e) {
      const int64_t at = mine[group[e]]++;
      indices[at] = (Index)other[e];
      edge_ids[at] = (Index)e;
    }
  }
  if (arg[4]) sort_groups(indptr, indices, edge_ids, num_groups, (int)std::max<int64_t>(1, arg[3]));
}

extern "C" void run(void** ptr, const int64_t* arg) {
  arg[0] == 4 ? compress<int32_t>(ptr, arg) : compress<int64_t>(ptr, arg);
}
