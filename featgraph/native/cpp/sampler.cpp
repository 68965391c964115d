// The neighbour sampler: PREPARE, COUNT, SAMPLE and LOCATE behind one run() entry point
// (featgraph/sampling/kernel.py describes them and calls them).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>
#include <omp.h>

static const uint64_t FG_GOLDEN = 0x9e3779b97f4a7c15ULL;
static const int64_t ROW_GROUP = 64;  // frontier vertices per unit of work
// splitmix64's finaliser (the one fg_keep hashes with): a bijection of 64-bit words
static inline uint64_t fg_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// one vertex's random stream at one hop: splitmix64 from a start hashed out of (seed, hop, vertex)
struct Stream {
  uint64_t state;
  Stream(uint64_t seed, int64_t hop, int64_t vertex)
      : state(fg_mix(fg_mix(fg_mix(seed) + (uint64_t)hop) + (uint64_t)vertex)) {}
  uint64_t next() { state += FG_GOLDEN; return fg_mix(state); }
  // uniform in [0, n): the high word of a 64 x 64-bit product (Lemire), biased by at most n / 2^64
  int64_t below(int64_t n) { return (int64_t)(((unsigned __int128)next() * (uint64_t)n) >> 64); }
  double unit() { return (double)(next() >> 11) * 0x1.0p-53; }             // [0, 1)
  double open_unit() { return (double)((next() >> 11) + 1) * 0x1.0p-53; }  // (0, 1]
};

// k distinct offsets of [0, d), ascending, uniformly among the k-subsets. Floyd's algorithm (k draws, each
// kept sorted by a binary search and a shift) while k is small against d; otherwise selection sampling
// (Knuth's algorithm S: one pass over d, each offset kept with probability needed / remaining).
static void uniform_distinct(Stream& rng, int64_t d, int64_t k, int64_t* out) {
  if (k * (k / 32 + 4) < d) {
    int64_t n = 0;
    for (int64_t j = d - k; j < d; ++j) {
      const int64_t t = rng.below(j + 1);
      int64_t* at = std::lower_bound(out, out + n, t);
      if (at != out + n && *at == t) {
        out[n] = j;  // every offset taken so far is below j: j goes last
      } else {
        std::copy_backward(at, out + n, out + n + 1);
        *at = t;
      }
      ++n;
    }
  } else {  // branch-free: whether an offset is kept is a coin flip, which a branch would mispredict half the time
    int64_t n = 0;
    for (int64_t i = 0; i < d && n < k; ++i) {
      out[n] = i;
      n += rng.below(d - i) < k - n;
    }
  }
}

// A row's candidates: its CSR positions [b, b + n), or where some are excluded the n others, listed ascending.
struct Candidates {
  int64_t b, n;
  const int64_t* listed;  // null: the whole row
  int64_t operator[](int64_t q) const { return listed ? listed[q] : b + q; }
};

// The excluded CSR positions (sorted) within [b, e): [lo, hi) of the list; none without a list.
static inline std::pair<const int64_t*, const int64_t*> excluded_within(const int64_t* excluded, int64_t size,
                                                                        int64_t b, int64_t e) {
  if (!excluded) return {nullptr, nullptr};
  const int64_t* lo = std::lower_bound(excluded, excluded + size, b);
  return {lo, std::lower_bound(lo, excluded + size, e)};
}

// How many of a row's edges may be drawn: its positive-weight edges (weighted) or all of them, less the
// excluded ones among them.
static inline int64_t available(const int64_t* indptr, const int64_t* positive, const double* weight, int64_t v,
                                std::pair<const int64_t*, const int64_t*> out) {
  int64_t count = positive ? positive[v] : indptr[v + 1] - indptr[v];
  for (const int64_t* p = out.first; p != out.second; ++p) count -= weight ? weight[*p] > 0 : 1;
  return count;
}

// k distinct candidates with probability proportional to their positive weights, ascending: the k smallest
// exponential keys -log(u) / w (Efraimidis and Spirakis' A-Res), kept in a max-heap of size k
static void weighted_distinct(Stream& rng, const double* weight, const Candidates& row, int64_t k, int64_t* out,
                              std::vector<std::pair<double, int64_t>>& heap) {
  heap.clear();
  for (int64_t q = 0; q < row.n; ++q) {
    const int64_t p = row[q];
    if (!(weight[p] > 0)) continue;
    const double key = -std::log(rng.open_unit()) / weight[p];
    if ((int64_t)heap.size() < k) {
      heap.emplace_back(key, p);
      std::push_heap(heap.begin(), heap.end());
    } else if (key < heap.front().first) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = {key, p};
      std::push_heap(heap.begin(), heap.end());
    }
  }
  for (int64_t i = 0; i < k; ++i) out[i] = heap[i].second;
  std::sort(out, out + k);
}

// thread t's share [lo, hi) of n items, in thread order
static inline void share(int64_t n, int t, int nt, int64_t& lo, int64_t& hi) {
  lo = n * t / nt;
  hi = n * (t + 1) / nt;
}

// turn per-thread totals sums[1..nt] into each thread's starting offset sums[t] (sums[0] = 0)
static inline void offsets(std::vector<int64_t>& sums, int nt) {
  for (int t = 0; t < nt; ++t) sums[t + 1] += sums[t];
}

// the first appearance wins: entry -2 - j for edge j, the largest such code (smallest j) kept; frontier
// vertices hold their local id (>= 0) and are left alone
static inline void claim(int64_t* local, int64_t u, int64_t j) {
  const int64_t code = -2 - j;
  int64_t seen = __atomic_load_n(&local[u], __ATOMIC_RELAXED);
  while ((seen == -1 || seen < code) &&
         !__atomic_compare_exchange_n(&local[u], &seen, code, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

// ptr: indptr, weight, positive_degree (out), cumulative (out or null); arg: op, num_nodes, threads
static void prepare(void** ptr, const int64_t* arg) {
  const int64_t* indptr = (const int64_t*)ptr[0];
  const double* weight = (const double*)ptr[1];
  int64_t* positive = (int64_t*)ptr[2];
  double* cumulative = (double*)ptr[3];
  const int64_t n = arg[1];
  #pragma omp parallel for schedule(dynamic, 256) num_threads((int)arg[2])
  for (int64_t v = 0; v < n; ++v) {
    int64_t count = 0;
    double sum = 0;
    for (int64_t p = indptr[v]; p < indptr[v + 1]; ++p) {
      count += weight[p] > 0;
      sum += weight[p];
      if (cumulative) cumulative[p] = sum;
    }
    positive[v] = count;
  }
}

// ptr: indptr, frontier, positive_degree (null: unweighted), block_indptr (out, F + 1), weight (null:
// unweighted), excluded (sorted CSR positions no draw may take, or null); arg: op, F, fanout, replace, threads,
// the number excluded
static void count(void** ptr, const int64_t* arg) {
  const int64_t* indptr = (const int64_t*)ptr[0];
  const int64_t* frontier = (const int64_t*)ptr[1];
  const int64_t* positive = (const int64_t*)ptr[2];
  int64_t* block_indptr = (int64_t*)ptr[3];
  const double* weight = (const double*)ptr[4];
  const int64_t* excluded = (const int64_t*)ptr[5];
  const int64_t num_frontier = arg[1], fanout = arg[2], replace = arg[3], num_excluded = arg[5];
  const int threads = (int)arg[4];
  std::vector<int64_t> sums(threads + 1, 0);
  block_indptr[0] = 0;
  #pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t lo, hi, running = 0;
    share(num_frontier, t, nt, lo, hi);
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t v = frontier[i];
      const int64_t n = available(
          indptr, positive, weight, v, excluded_within(excluded, num_excluded, indptr[v], indptr[v + 1]));
      const int64_t kept = fanout < 0 ? n : replace ? (n > 0 ? fanout : 0) : std::min(fanout, n);
      running += kept;
      block_indptr[i + 1] = running;
    }
    sums[t + 1] = running;
    #pragma omp barrier
    #pragma omp single
    offsets(sums, nt);
    for (int64_t i = lo; i < hi; ++i) block_indptr[i + 1] += sums[t];
  }
}

// ptr: indptr, indices, edge_ids, weight (null: uniform), positive_degree, cumulative (with replacement),
// frontier, block_indptr, local (N, all -1 on entry and exit), block_sources (out), block_edge_ids (out),
// node_ids (out, F + block edges), num_block_nodes (out, 1), destinations (out, block edges: each edge's
// frontier position, plus arg[9] where typed), then the same CSR in int32 for the kernels, or three nulls: its
// indptr (out, F + 1), sources (out, block edges) and edge ids (out, block edges: 0, 1, ...), then excluded
// (sorted CSR positions no draw may take, or null: a row's draws are among its other edges);
// arg: op, F, fanout, replace, threads, seed, hop, typed, base, first destination, the number excluded.
// Typed (one relation of a typed batch; arg[7] = 1, arg[8] = base, arg[9] = the frontier's first batch id):
// the frontier is of another vertex set, so it is neither claimed nor listed; ``local`` is the source type's
// map for the whole batch (ids >= 0 for its vertices already in the batch, kept); sources it lacks get ids
// base, base + 1, ... in order of first appearance and stay claimed; node_ids lists those new vertices and
// num_block_nodes counts them; destinations[j] is edge j's destination's batch id (arg[9] + its position).
static void sample(void** ptr, const int64_t* arg) {
  const int64_t* indptr = (const int64_t*)ptr[0];
  const int64_t* indices = (const int64_t*)ptr[1];
  const int64_t* edge_ids = (const int64_t*)ptr[2];
  const double* weight = (const double*)ptr[3];
  const int64_t* positive = (const int64_t*)ptr[4];
  const double* cumulative = (const double*)ptr[5];
  const int64_t* frontier = (const int64_t*)ptr[6];
  const int64_t* block_indptr = (const int64_t*)ptr[7];
  int64_t* local = (int64_t*)ptr[8];
  int64_t* sources = (int64_t*)ptr[9];
  int64_t* picked = (int64_t*)ptr[10];  // CSR positions first, user edge ids once the row is drawn
  int64_t* node_ids = (int64_t*)ptr[11];
  int64_t* num_block_nodes = (int64_t*)ptr[12];
  const int64_t num_frontier = arg[1], fanout = arg[2], replace = arg[3];
  const int threads = (int)arg[4];
  const uint64_t seed = (uint64_t)arg[5];
  const int64_t hop = arg[6], num_edges = block_indptr[num_frontier];
  const bool typed = arg[7] != 0;
  const int64_t base = typed ? arg[8] : num_frontier;  // the first new vertex's id
  int64_t* destinations = (int64_t*)ptr[13];
  int32_t* narrow_indptr = (int32_t*)ptr[14];
  int32_t* narrow_sources = (int32_t*)ptr[15];
  int32_t* narrow_ids = (int32_t*)ptr[16];
  const int64_t* excluded = (const int64_t*)ptr[17];
  const int64_t first_destination = typed ? arg[9] : 0, num_excluded = arg[10];
  std::vector<int64_t> firsts(threads + 1, 0);
  #pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    std::vector<std::pair<double, int64_t>> heap;
    std::vector<int64_t> others;  // a row's candidates where some of its edges are excluded
    std::vector<double> sums;     // their running weights, for weighted draws with replacement
    if (!typed) {
      #pragma omp for schedule(static)
      for (int64_t i = 0; i < num_frontier; ++i) {
        local[frontier[i]] = i;
        node_ids[i] = frontier[i];
      }
    }
    if (narrow_indptr) {
      #pragma omp for schedule(static) nowait
      for (int64_t i = 0; i <= num_frontier; ++i) narrow_indptr[i] = (int32_t)block_indptr[i];
    }
    // rows in groups: a group's draws first, then its edges' gathers (independent loads that overlap, each
    // prefetching the map entry it will claim), then the claims (a locked compare-exchange waits for every
    // load before it, so claiming in the gather loop left one cache miss in flight at a time)
    #pragma omp for schedule(dynamic, 1)
    for (int64_t group = 0; group < num_frontier; group += ROW_GROUP) {
      const int64_t group_end = std::min(group + ROW_GROUP, num_frontier);
      for (int64_t i = group; i < group_end; ++i) __builtin_prefetch(&indptr[frontier[i]]);
      for (int64_t i = group; i < group_end; ++i) {
        const int64_t k = block_indptr[i + 1] - block_indptr[i];
        if (k == 0) continue;
        const int64_t v = frontier[i], b = indptr[v], e = indptr[v + 1];
        int64_t* out = picked + block_indptr[i];
        Stream rng(seed, hop, v);
        Candidates row{b, e - b, nullptr};
        const auto out_of_row = excluded_within(excluded, num_excluded, b, e);
        if (out_of_row.first != out_of_row.second) {  // the row draws among its other edges
          others.clear();
          const int64_t* next = out_of_row.first;
          for (int64_t p = b; p < e; ++p) {
            if (next != out_of_row.second && *next == p) {
              ++next;
            } else {
              others.push_back(p);
            }
          }
          row = {b, (int64_t)others.size(), others.data()};
        }
        if (replace && fanout >= 0) {
          if (weight) {
            const double* running = cumulative + b;
            if (row.listed) {
              sums.clear();
              double sum = 0;
              for (int64_t q = 0; q < row.n; ++q) sums.push_back(sum += weight[row[q]]);
              running = sums.data();
            }
            const double total = running[row.n - 1], below_total = std::nextafter(total, 0.0);
            for (int64_t q = 0; q < k; ++q) {
              const double r = std::min(rng.unit() * total, below_total);
              out[q] = row[std::upper_bound(running, running + row.n, r) - running];
            }
          } else {
            for (int64_t q = 0; q < k; ++q) out[q] = row[rng.below(row.n)];
          }
        } else if (weight && k < available(indptr, positive, weight, v, out_of_row)) {
          weighted_distinct(rng, weight, row, k, out, heap);
        } else if (weight) {
          for (int64_t q = 0; q < row.n; ++q)
            if (weight[row[q]] > 0) *out++ = row[q];
        } else if (k < row.n) {
          uniform_distinct(rng, row.n, k, out);
          for (int64_t q = 0; q < k; ++q) out[q] = row[out[q]];
        } else {
          for (int64_t q = 0; q < k; ++q) out[q] = row[q];
        }
      }
      const int64_t lo = block_indptr[group], hi = block_indptr[group_end];
      for (int64_t i = group; i < group_end; ++i)
        for (int64_t j = block_indptr[i]; j < block_indptr[i + 1]; ++j) destinations[j] = first_destination + i;
      for (int64_t j = lo; j < hi; ++j) {
        const int64_t p = picked[j], u = indices[p];
        sources[j] = u;
        picked[j] = edge_ids[p];
        __builtin_prefetch(&local[u], 1);
      }
      for (int64_t j = lo; j < hi; ++j) claim(local, sources[j], j);
    }
    int64_t lo, hi;
    share(num_edges, t, nt, lo, hi);
    int64_t mine = 0;
    for (int64_t j = lo; j < hi; ++j) mine += __atomic_load_n(&local[sources[j]], __ATOMIC_RELAXED) == -2 - j;
    firsts[t + 1] = mine;
    #pragma omp barrier
    #pragma omp single
    offsets(firsts, nt);
    int64_t next = base + firsts[t];
    const int64_t listed = typed ? base : 0;  // node_ids lists the frontier too, unless typed
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t u = sources[j];
      if (__atomic_load_n(&local[u], __ATOMIC_RELAXED) == -2 - j) {
        __atomic_store_n(&local[u], next, __ATOMIC_RELAXED);
        node_ids[next++ - listed] = u;
      }
    }
    #pragma omp barrier
    if (narrow_sources) {
      #pragma omp for schedule(static)
      for (int64_t j = 0; j < num_edges; ++j) {
        const int64_t u = local[sources[j]];
        sources[j] = u;
        narrow_sources[j] = (int32_t)u;
        narrow_ids[j] = (int32_t)j;
      }
    } else {
      #pragma omp for schedule(static)
      for (int64_t j = 0; j < num_edges; ++j) sources[j] = local[sources[j]];
    }
    const int64_t num_nodes = base + firsts[nt] - listed;
    if (!typed) {
      #pragma omp for schedule(static)
      for (int64_t i = 0; i < num_nodes; ++i) local[node_ids[i]] = -1;
    }
    #pragma omp single nowait
    *num_block_nodes = num_nodes;
  }
}

// ptr: indptr, edge_ids (each CSR position's user edge id), ids (user edge ids), rows (each id's destination),
// positions (out: each id's CSR position); arg: op, the number of ids, threads. Each id is looked for along
// its destination's row, which holds it.
static void locate(void** ptr, const int64_t* arg) {
  const int64_t* indptr = (const int64_t*)ptr[0];
  const int64_t* edge_ids = (const int64_t*)ptr[1];
  const int64_t* ids = (const int64_t*)ptr[2];
  const int64_t* rows = (const int64_t*)ptr[3];
  int64_t* positions = (int64_t*)ptr[4];
  const int64_t n = arg[1];
  #pragma omp parallel for schedule(dynamic, 256) num_threads((int)arg[2])
  for (int64_t i = 0; i < n; ++i) {
    int64_t p = indptr[rows[i]];
    while (edge_ids[p] != ids[i]) ++p;
    positions[i] = p;
  }
}

extern "C" void run(void** ptr, const int64_t* arg) {
  switch (arg[0]) {
    case 0: prepare(ptr, arg); break;
    case 1: count(ptr, arg); break;
    case 2: sample(ptr, arg); break;
    default: locate(ptr, arg); break;
  }
}
