// The looped graph's compressed format from a graph's, in one pass without a sort
// (featgraph/graph/formats.py: with_loops).
#include <cstdint>
#include <vector>

// ptr: indptr (G + 1), indices (E), edge_ids (E), keep (E bytes by edge id, or null), then the outputs indptr
// (G + 1), indices and edge_ids (kept + loops), all of type Index; arg: sizeof(Index), G, E, loops.
template <typename Index>
static void with_loops(void** ptr, const int64_t* arg) {
  const Index* indptr = (const Index*)ptr[0];
  const Index* indices = (const Index*)ptr[1];
  const Index* ids = (const Index*)ptr[2];
  const bool* keep = (const bool*)ptr[3];
  Index* out_indptr = (Index*)ptr[4];
  Index* out_indices = (Index*)ptr[5];
  Index* out_ids = (Index*)ptr[6];
  const int64_t groups = arg[1], num_edges = arg[2], num_loops = arg[3];
  std::vector<int64_t> renumbered(keep ? num_edges : 0);  // a kept edge's new id, in id order
  int64_t kept = num_edges;
  if (keep) {
    kept = 0;
    for (int64_t e = 0; e < num_edges; ++e) renumbered[e] = keep[e] ? kept++ : -1;
  }
  int64_t at = 0;
  out_indptr[0] = 0;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t j = indptr[g]; j < indptr[g + 1]; ++j) {
      const int64_t id = keep ? renumbered[ids[j]] : (int64_t)ids[j];
      if (id < 0) continue;
      out_indices[at] = indices[j];
      out_ids[at++] = (Index)id;
    }
    if (g < num_loops) {
      out_indices[at] = (Index)g;
      out_ids[at++] = (Index)(kept + g);
    }
    out_indptr[g + 1] = (Index)at;
  }
}

extern "C" void run(void** ptr, const int64_t* arg) {
  arg[0] == 4 ? with_loops<int32_t>(ptr, arg) : with_loops<int64_t>(ptr, arg);
}
